"""runtime.fullauto: record shapes of formats.md §1.1-1.4 (strict decision log lines, raw lines, run files,
events), the turn summary's helpers, token usage as the original reads it, the guardrail context and config."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from runtime import (
    DecisionLogLine,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    next_progress_count,
    tokens_from_usage,
)
from shape_support import AUDIT, LINE, SUMMARY, changed, error_fields, roundtrip

RAW_LINE = {"timestamp": "2026-01-01T00:00:00Z", "sequence_id": 3, "run_id": LINE["run_id"],
            "workspace_id": "ws_1", "thread_id": "thr_1", "turn_id": "turn_7",
            "raw_prediction": {"action": "continue", "confidence": "0.4"},
            "parse_diagnostics": {"parse_errors": []}}
RUN = {"run_id": LINE["run_id"], "workspace_id": "ws_1", "thread_id": "thr_1",
       "started_at": "2026-01-01T00:00:00.5+00:00", "decision_model": "codex:gpt-5.1-codex-mini",
       "min_confidence": 0.55, "max_turns": 200, "no_progress_limit": 3, "max_tokens": None}
EVENT = {"timestamp": "2026-01-01T00:00:01Z", "sequence_id": 1, "event_type": "decision", "data": {"a": 1}}


# --------------------------------------------------------------------------- decision log lines

def test_decision_log_line_valid():
    line = roundtrip(DecisionLogLine, LINE)
    assert line.guardrail.rule == "low_confidence"
    assert line.model_action() == "continue" and line.action == "pause"
    assert line.summary.tokens_used() == 51234
    assert isinstance(line.summary, FullAutoTurnSummary)


def test_decision_log_line_built_in_code():
    obj = dict(LINE, summary=FullAutoTurnSummary(thread_id="t", turn_id="u"), guardrail=GuardrailAudit(**AUDIT))
    line = DecisionLogLine(**obj)
    assert line.summary.last_turn_status == "completed"
    assert DecisionLogLine.model_validate_json(line.model_dump_json()) == line


def test_decision_log_line_guardrail_null_or_absent():
    assert roundtrip(DecisionLogLine, changed(LINE, "guardrail", None)).model_action() == "pause"
    assert roundtrip(DecisionLogLine, changed(LINE, "guardrail", delete=True)).guardrail is None


def test_decision_log_line_extra_keys_ignored():
    assert roundtrip(DecisionLogLine, changed(LINE, "latency_ms", 12)).sequence_id == 3


REQUIRED_LINE_KEYS = [k for k in LINE if k != "guardrail"]


@pytest.mark.parametrize("key", REQUIRED_LINE_KEYS)
def test_incomplete_decision_line_names_the_field(key):
    fields, message = error_fields(DecisionLogLine, changed(LINE, key, delete=True))
    assert fields == {key}
    assert key in message


LATER_SUMMARY_FIELDS = ("last_agent_message", "last_guidance_directive")


@pytest.mark.parametrize("key", [key for key in SUMMARY if key not in LATER_SUMMARY_FIELDS])
def test_incomplete_summary_names_the_field(key):
    fields, _ = error_fields(DecisionLogLine, changed(LINE, f"summary.{key}", delete=True))
    assert fields == {f"summary.{key}"}


def test_the_writers_summary_without_the_later_fields_is_valid():
    # the build that writes the decision logs never has them (formats.md §1.1): read as ""
    line = dict(LINE, summary={k: v for k, v in LINE["summary"].items() if k not in LATER_SUMMARY_FIELDS})
    parsed = DecisionLogLine.model_validate(line)
    assert (parsed.summary.last_agent_message, parsed.summary.last_guidance_directive) == ("", "")


def test_the_writers_null_confidence_unknown_status_and_widened_floats():
    line = dict(LINE, confidence=None, summary=dict(LINE["summary"], last_turn_status="cancelled"),
                guardrail=dict(AUDIT, original_confidence=0.800000011920929, enforced_confidence=0.550000011920929))
    parsed = DecisionLogLine.model_validate(line)
    assert parsed.confidence is None and parsed.summary.last_turn_status == "cancelled"
    assert (parsed.guardrail.original_confidence, parsed.guardrail.enforced_confidence) == (0.8, 0.55)


@pytest.mark.parametrize("path,value", [
    ("timestamp", 1767225600), ("timestamp", "2026-01-01"), ("timestamp", "2026-01-01T00:00:00"),
    ("timestamp", "yesterday"), ("timestamp", "2026-13-01T00:00:00Z"),
    ("sequence_id", "3"), ("sequence_id", 3.0), ("sequence_id", -1), ("sequence_id", True),
    ("run_id", 5), ("workspace_id", None), ("thread_id", 1), ("turn_id", ["t"]),
    ("action", "proceed"), ("action", "Continue"), ("action", None),
    ("confidence", "0.4"), ("confidence", True),
    ("reason", None), ("next_input_preview", None), ("state", "stopped"), ("model", None),
    ("guardrail", "none"), ("guardrail.triggered", "true"), ("guardrail.rule", "made_up"),
    ("guardrail.original_action", "go"), ("guardrail.enforced_confidence", "1.0"),
    ("summary", "{}"), ("summary.turn_count", "7"), ("summary.turn_count", 7.0), ("summary.turn_count", -1),
    ("summary.no_progress_count", None), ("summary.pending_approvals", 0), ("summary.compaction_events", 1),
    ("summary.last_turn_status", 3), ("summary.token_usage", {"totalTokens": 1}),
    ("summary.recent_actions", []),
])
def test_wrong_typed_decision_line_names_the_field(path, value):
    fields, message = error_fields(DecisionLogLine, changed(LINE, path, value))
    assert any(f == path or f.startswith(path + ".") for f in fields), fields
    assert path.split(".")[-1] in message


@pytest.mark.parametrize("path", ["confidence", "guardrail.original_confidence", "guardrail.enforced_confidence"])
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_rejected(path, number):
    text = json.dumps(changed(LINE, path, "__X__")).replace('"__X__"', number)
    obj = json.loads(text)  # Python's json accepts these tokens
    fields, _ = error_fields(DecisionLogLine, obj)
    assert path in fields


@pytest.mark.parametrize("audit", [
    dict(AUDIT, triggered=False),                  # untriggered audits have rule null
    dict(AUDIT, rule=None),                        # triggered audits name their rule
])
def test_audit_rule_iff_triggered(audit):
    with pytest.raises(ValidationError, match="rule"):
        GuardrailAudit.model_validate(audit)


def test_untriggered_audit_valid():
    audit = GuardrailAudit.model_validate({"triggered": False, "rule": None, "original_action": "continue",
                                           "original_confidence": 0.9, "enforced_action": "continue",
                                           "enforced_confidence": 0.9})
    assert not audit.overridden


@pytest.mark.parametrize("timestamp", [
    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123Z", "2026-01-01T00:00:00.123456789Z",
    "2026-01-01T00:00:00+02:00", "2026-01-01T00:00:00.5-05:30", "2026-01-01t00:00:00z",
])
def test_rfc3339_timestamps_accepted(timestamp):
    assert roundtrip(DecisionLogLine, changed(LINE, "timestamp", timestamp)).timestamp == timestamp


# --------------------------------------------------------------------------- raw lines, run files, events

def test_raw_line_and_nulls():
    assert roundtrip(RawDecisionLogLine, RAW_LINE).raw_prediction["confidence"] == "0.4"
    nulls = changed(changed(RAW_LINE, "raw_prediction", None), "parse_diagnostics", None)
    assert roundtrip(RawDecisionLogLine, nulls).raw_prediction is None


@pytest.mark.parametrize("key", list(RAW_LINE))
def test_incomplete_raw_line_names_the_field(key):
    fields, _ = error_fields(RawDecisionLogLine, changed(RAW_LINE, key, delete=True))
    assert fields == {key}


def test_run_file():
    run = roundtrip(RunFile, RUN)
    assert run.guardrail_config() == GuardrailConfig()
    run = roundtrip(RunFile, dict(RUN, thread_id=None, max_tokens=100000, max_turns=0))
    assert run.guardrail_config() == GuardrailConfig(max_tokens=100000, max_turns=0)


@pytest.mark.parametrize("key", ["run_id", "workspace_id", "started_at", "decision_model", "min_confidence",
                                 "max_turns", "no_progress_limit"])
def test_incomplete_run_file_names_the_field(key):
    fields, _ = error_fields(RunFile, changed(RUN, key, delete=True))
    assert fields == {key}


@pytest.mark.parametrize("key,value", [("max_turns", "200"), ("min_confidence", "0.55"),
                                       ("max_tokens", 1.5), ("started_at", "now"), ("thread_id", 3)])
def test_wrong_typed_run_file_names_the_field(key, value):
    fields, _ = error_fields(RunFile, changed(RUN, key, value))
    assert fields == {key}


def test_run_event():
    assert roundtrip(RunEvent, EVENT).event_type == "decision"
    assert roundtrip(RunEvent, dict(EVENT, data=None)).data is None
    fields, _ = error_fields(RunEvent, changed(EVENT, "data", delete=True))
    assert fields == {"data"}
    fields, _ = error_fields(RunEvent, changed(EVENT, "sequence_id", "1"))
    assert fields == {"sequence_id"}


# --------------------------------------------------------------------------- turn summary helpers

def test_summary_defaults_when_built_in_code():
    summary = FullAutoTurnSummary(thread_id="t", turn_id="u")
    assert summary.last_turn_status == "completed"
    assert summary.recent_actions == "[]"
    assert summary.turn_count == 0 and summary.no_progress_count == 0


@pytest.mark.parametrize("plan,diff,signature", [
    ("", "", None), ("  ", "\n", None), ("p", "", "plan:p\ndiff:"), ("", "d", "plan:\ndiff:d"),
    (" p \n", "d", "plan:p\ndiff:d"),
])
def test_progress_signature(plan, diff, signature):
    assert FullAutoTurnSummary(thread_id="t", turn_id="u", turn_plan=plan,
                               diff_summary=diff).progress_signature() == signature


@pytest.mark.parametrize("previous,current,count,expected", [
    ("a", "a", 2, 3), ("a", "b", 2, 0), ("a", None, 2, 2), (None, "a", 0, 0), (None, None, 1, 1),
])
def test_next_progress_count(previous, current, count, expected):
    assert next_progress_count(previous, current, count) == expected


def test_guidance_decision_keywords_and_bounds():
    decision = GuidanceDecision(action="continue", next_input=None, reason="r", confidence=0.7)
    assert decision.next_input == ""
    for bad in ({"action": "go", "confidence": 0.5}, {"action": "stop", "surprise": 1}):
        with pytest.raises(ValidationError):
            GuidanceDecision(**bad)
    # the model's f32 as the original keeps it: not clamped, NaN allowed (formats.md §1.4.1)
    assert GuidanceDecision(action="stop", confidence=1.5).confidence == 1.5
    assert GuidanceDecision(action="stop", confidence=float("nan")).confidence != 0.0


# --------------------------------------------------------------------------- tokens, guardrail context and config

def summary(**fields):
    return FullAutoTurnSummary(thread_id="t", turn_id="u", **fields)


@pytest.mark.parametrize("usage,expected", [
    ('{"totalTokens": 51234, "inputTokens": 50000}', 51234),
    ('{"total_tokens": 777}', 777),
    ('{\n  "totalTokens": 10,\n  "total_tokens": 99\n}', 10),
    ('{"totalTokens": null, "total_tokens": 99}', 99),
    ('{"totalTokens": 12.0}', None),  # the original's as_u64 counts no float, whole or not
    ('{"totalTokens": "51234"}', None),
    ('{"totalTokens": -5}', None),
    ('{"totalTokens": true}', None),
    ('{"tokenUsage": {"total": {"totalTokens": 5}}}', 5),  # the app server nests the total
    ('{"threadId": "t", "tokenUsage": {"total": 7}}', 7),
    ('[1, 2]', None),
    ("not json", None),
    ("", None),
    ({"total_tokens": 3}, 3),
], ids=lambda v: str(v)[:30])
def test_tokens_from_usage(usage, expected):
    assert tokens_from_usage(usage) == expected


def test_defaults_match_the_original():
    assert GuardrailConfig().model_dump() == {
        "min_confidence": 0.55, "max_turns": 200, "no_progress_limit": 3, "max_tokens": None}


def test_context_from_summary_reads_status_and_counters():
    context = GuardrailContext.from_summary(summary(last_turn_status="interrupted", turn_count=7,
                                                    no_progress_count=2))
    assert context.model_dump() == {"last_turn_status": "interrupted", "turn_count": 7,
                                    "no_progress_count": 2, "tokens_used": None}
    context = GuardrailContext.from_summary({"thread_id": "t", "turn_id": "u", "token_usage": '{"total_tokens": 5}'})
    assert context.tokens_used == 5
