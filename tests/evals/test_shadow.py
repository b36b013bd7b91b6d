"""evals.shadow: which turns pair up, in which order, and how both programs are scored."""

from __future__ import annotations

import pytest

from evals.shadow import dispatched_objective, paired_turns, shadow_action
from frozen_support import summary
from runtime.fullauto import GuardrailAudit, GuardrailConfig
from runtime.provenance import Provenance
from runtime.records import DecisionRecord, LoggedDecision, OutcomeLabel, ShadowDecision, SourceRef
from runtime.shadow_log import ShadowAnswer, ShadowModule

MODULE = ShadowModule(name="cand", version="1.0.0", checksum="a" * 64)


def _record(line: int, *, shadow: str = "continue", status: str = "ok", label: str = "continue",
            logged: str = "pause", run_id: str = "fullauto-1", timestamp: str = "2026-01-01T10:00:00Z",
            module: ShadowModule = MODULE, status_of_turn: str = "completed") -> DecisionRecord:
    answer = ShadowAnswer(action=shadow, confidence=0.9)
    audit = GuardrailAudit(triggered=False, rule=None, original_action=shadow, original_confidence=0.9,
                           enforced_action=shadow, enforced_confidence=0.9)
    decided = status == "ok"
    return DecisionRecord.build(
        summary(turn_id=f"turn-{line}", turn_plan=f"step {line}", last_turn_status=status_of_turn), GuardrailConfig(),
        run_id=run_id,
        sequence_id=line, timestamp=timestamp, source=SourceRef(file="fullauto-decisions.jsonl", line=line),
        logged=LoggedDecision(action=logged, confidence=0.8, model_action=logged, model_confidence=0.8),
        label=OutcomeLabel(action=label, source="simulator") if label else None,
        shadow=ShadowDecision(module=module, status=status, decision=answer if decided else None,
                              enforced=answer if decided else None, guardrail=audit if decided else None,
                              error="" if decided else "it broke", latency_s=0.01, deadline_s=5.0))


def test_both_programs_are_scored_by_the_action_production_dispatches():
    assert dispatched_objective("continue", "continue") == 1.0 and dispatched_objective("stop", "continue") == 0.0
    assert dispatched_objective("review", "pause") == 1.0  # production never dispatches review
    (turn,) = paired_turns([_record(1, shadow="continue", logged="pause", label="continue")]).turns
    assert (turn.shadow_score, turn.deployed_score, turn.difference) == (1.0, 0.6, pytest.approx(0.4))


def test_a_failed_shadow_is_the_safe_pause_through_the_guardrails():
    assert shadow_action(_record(1, status="error")) == "pause"
    assert shadow_action(_record(2, status="timeout", status_of_turn="failed")) == "stop"  # a failed turn stops


def test_turns_pair_in_log_order_whatever_the_clock_said():
    records = [_record(3, timestamp="2026-01-01T09:00:00Z"), _record(1, timestamp="2026-01-01T11:00:00Z"),
               _record(2, timestamp="2020-01-01T00:00:00Z")]
    assert [turn.source for turn in paired_turns(records).turns] == [f"fullauto-decisions.jsonl:{n}" for n in (1, 2, 3)]


def test_what_does_not_pair_is_counted():
    other = ShadowModule(name="other", version="1.0.0", checksum="b" * 64)
    records = [_record(1), _record(2, label=""), _record(3, run_id="unknown"), _record(4, module=other),
               DecisionRecord.build(summary(turn_id="t5"), GuardrailConfig(), run_id="r", sequence_id=5),
               _record(6, status="invalid")]
    pairs = paired_turns(records, module=MODULE)
    assert dict(pairs.counts) == {"records": 6, "shadowed": 4, "paired": 2, "awaiting_label": 1, "orphan": 1,
                                  "other_module": 1, "no_shadow": 1}
    assert dict(pairs.statuses) == {"ok": 3, "invalid": 1}
    # no program is judged on records it learned from: a turn with the inputs of one is left out
    learned = Provenance.of("d" * 64, {"train": [records[5]]})
    again = paired_turns(records, module=MODULE, learned=learned)
    assert again.counts["learned_from"] == 1 and [t.source for t in again.turns] == ["fullauto-decisions.jsonl:1"]
    with pytest.raises(ValueError, match="shadow decisions of 2 modules"):
        paired_turns(records)
