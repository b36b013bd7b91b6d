"""runtime.records: decision records round-trip as JSON, their ids derive from their content, outcome labels name
their source, and a planner record's inputs have an identity of their own."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from runtime import (
    DecisionLogLine,
    DecisionRecord,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    LoggedDecision,
    OutcomeLabel,
    SourceRef,
)
from shape_support import AUDIT, LINE, SUMMARY, roundtrip


def record():
    summary = FullAutoTurnSummary.model_validate(SUMMARY)
    return DecisionRecord.build(
        summary, GuardrailConfig(max_tokens=100000), run_id=LINE["run_id"], workspace_id="ws_1", sequence_id=3,
        timestamp=LINE["timestamp"], config_source="run_file",
        logged=LoggedDecision(action="pause", confidence=0.4, model_action="continue", model_confidence=0.4,
                              reason="Low confidence", state="paused"),
        guardrail=GuardrailAudit.model_validate(AUDIT), model=LINE["model"],
        raw_prediction={"action": "continue", "confidence": "0.4"},
        label=OutcomeLabel(action="continue", source="rule:resumed_at_once", reason="user resumed", confidence=0.8,
                           next_input="go on"),
        source=SourceRef(file="fullauto-decisions.jsonl", line=4),
    )


def test_decision_record_round_trip():
    rec = record()
    text = rec.model_dump_json()
    back = DecisionRecord.model_validate_json(text)
    assert back == rec
    assert back.model_dump_json() == text
    assert DecisionRecord.model_validate(json.loads(text)) == rec


def test_decision_record_from_a_logged_line_round_trips():
    line = roundtrip(DecisionLogLine, LINE)
    rec = DecisionRecord.build(line.summary, GuardrailConfig(), run_id=line.run_id, guardrail=line.guardrail)
    assert DecisionRecord.model_validate_json(rec.model_dump_json()) == rec
    assert rec.summary.model_dump() == SUMMARY


def test_decision_record_ids_are_content_derived():
    a, b = record(), record()
    assert a.record_id == b.record_id and a.inputs_hash == b.inputs_hash
    assert len(a.inputs_hash) == 64


@pytest.mark.parametrize("source,ok", [("human", True), ("simulator", True), ("rule:resumed_at_once", True),
                                       ("rule:", False), ("model", False), ("", False)])
def test_outcome_label_sources(source, ok):
    if ok:
        assert OutcomeLabel(action="stop", source=source).source == source
    else:
        with pytest.raises(ValidationError, match="source"):
            OutcomeLabel(action="stop", source=source)


def test_a_planner_record_is_known_by_the_packet_the_planner_sees():
    from optimizer_support import episode_records
    from runtime.records import packet_hash

    records = episode_records(5, 0)[:4]
    assert len({r.inputs_hash for r in records}) == 4 and records[0].inputs_hash == packet_hash(records[0].packet)
    # the same packet read back under another record id (a re-import) is the same record
    again = [r.model_validate_json(r.model_dump_json()).model_copy(update={"record_id": "x"}) for r in records]
    assert [r.inputs_hash for r in again] == [r.inputs_hash for r in records]
