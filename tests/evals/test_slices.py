"""Slices: each declared slice's value on a record, and what an unreadable or absent field becomes."""

from __future__ import annotations

import json

from evals.slices import (FULL_AUTO_SLICES, INVALID, MISSING, PLANNER_SLICES, SLICES, UNLABELED, band, row_values,
                          slice_values)
from runtime import AdvisorPacket, DecisionRecord, FullAutoTurnSummary, GuardrailAudit, GuardrailConfig, OutcomeLabel
from runtime.records import PlannerRecord


def _record(**summary_fields) -> DecisionRecord:
    fields = dict(thread_id="t-1", turn_id="turn-1", pending_approvals="2", pending_tool_inputs="0", turn_count=3,
                  no_progress_count=1, token_usage=json.dumps({"totalTokens": 10}))
    fields.update(summary_fields)
    audit = GuardrailAudit(triggered=True, rule="low_confidence", original_action="continue", original_confidence=0.3,
                           enforced_action="pause", enforced_confidence=0.3)
    return DecisionRecord.build(FullAutoTurnSummary(**fields), GuardrailConfig(min_confidence=0.6, max_tokens=5000),
                                run_id="run-1", guardrail=audit,
                                label=OutcomeLabel(action="pause", source="rule:resumed_at_once",
                                                   reason="blocked: the build needs a secret"))


def test_full_auto_values_come_from_the_record_fields():
    values = slice_values(_record(), "full_auto")
    assert values == {
        "label": "pause", "label_source": "rule:resumed_at_once", "label_reason": "blocked",
        "last_turn_status": "completed",
        "guardrail_rule": "low_confidence", "pending": "approvals", "turn_band": "turns 3-4", "no_progress": "1",
        "run_config": "min_confidence 0.6, max_turns 200, no_progress_limit 3, max_tokens 5000",
    }
    assert list(values) == [definition.name for definition in FULL_AUTO_SLICES]


def test_a_record_without_label_or_audit_has_its_own_values():
    record = _record().model_copy(update={"label": None, "guardrail": None})
    values = slice_values(record, "full_auto")
    assert (values["label"], values["label_source"], values["label_reason"], values["guardrail_rule"]) == \
        (UNLABELED, UNLABELED, UNLABELED, "no audit")


def test_a_count_written_as_words_is_invalid_not_a_crash():
    values = slice_values(_record(pending_approvals="lots"), "full_auto")
    assert values["pending"] == INVALID
    assert values["turn_band"] == "turns 3-4"  # the other slices are unaffected


def test_bands_put_each_count_in_one_labelled_band():
    edges = ((1, "0-1"), (4, "2-4"), (1 << 62, "5+"))
    assert [band(n, edges) for n in (0, 1, 2, 4, 5, 900)] == ["0-1", "0-1", "2-4", "2-4", "5+", "5+"]


def test_planner_values_come_from_the_packet():
    packet = AdvisorPacket(goal="threshold", threshold_target=1400, best_cycles=1500, plateau_valid_iters_since_best=7)
    record = PlannerRecord(record_id="r1", episode_id="e1", iteration_id=12, packet=packet)
    assert slice_values(record, "planner") == {"goal": "threshold", "current_family": "none", "pivot": "required",
                                               "plateau_band": "6+ (hard plateau)", "phase": "middle (11-25)"}
    unknown = PlannerRecord(record_id="r2", episode_id="e1", iteration_id=30, packet=AdvisorPacket())
    assert slice_values(unknown, "planner")["plateau_band"] == "unknown"
    assert list(SLICES["planner"]) == list(PLANNER_SLICES)


def test_rows_missing_a_slice_or_holding_a_wrong_type_get_documented_values():
    rows = [{"slices": {"label": "pause", "pending": "none"}},
            {"slices": {"label": 3, "pending": "none"}},  # a number where a label belongs
            {"slices": {"pending": None}}]               # the label absent, the pending value null
    values, missing = row_values(rows, "full_auto")
    assert values["label"] == ["pause", INVALID, MISSING]
    assert values["pending"] == ["none", "none", MISSING]
    assert "turn_band" in missing and "label" not in missing


def test_rows_of_an_older_eval_fall_back_on_their_own_columns():
    rows = [{"label_action": "stop", "label_source": "human", "guardrail_rule": None},
            {"label_action": None, "label_source": None, "guardrail_rule": "no_progress"}]
    values, missing = row_values(rows, "full_auto")
    assert values == {"label": ["stop", UNLABELED], "label_source": ["human", UNLABELED]}
    assert missing == ["label_reason", "last_turn_status", "guardrail_rule", "pending", "turn_band", "no_progress",
                       "run_config"]
    planner, gone = row_values([{"current_family": None, "pivot_required": True}], "planner")
    assert planner == {"current_family": ["none"], "pivot": ["required"]}
    assert gone == ["goal", "plateau_band", "phase"]
