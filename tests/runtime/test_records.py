"""Record shapes of formats.md §1.1-1.4 and §2.1-2.3: strict log lines, both entry shapes, round trips."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from runtime import (
    AdvisorPacket,
    DecisionLogLine,
    DecisionRecord,
    ExperimentLogEntry,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    GuidanceDecision,
    LoggedDecision,
    OutcomeLabel,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    SourceRef,
    next_progress_count,
)

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"

SUMMARY = {
    "thread_id": "thr_1", "turn_id": "turn_7", "last_turn_status": "completed", "turn_error": "",
    "last_agent_message": "Tests pass.", "last_guidance_directive": "",
    "turn_plan": "[\n  {\n    \"step\": \"fix\",\n    \"status\": \"completed\"\n  }\n]",
    "diff_summary": "{\n  \"diff\": \"+x\"\n}", "token_usage": "{\n  \"totalTokens\": 51234\n}",
    "pending_approvals": "0", "pending_tool_inputs": "0",
    "recent_actions": "[\n  {\n    \"turn_id\": \"turn_6\",\n    \"action\": \"continue\",\n    \"reason\": \"ok\",\n"
                      "    \"confidence\": 0.8,\n    \"timestamp\": 1767225600\n  }\n]",
    "compaction_events": "0", "turn_count": 7, "no_progress_count": 0,
}
AUDIT = {"triggered": True, "rule": "low_confidence", "original_action": "continue",
         "original_confidence": 0.4000000059604645, "enforced_action": "pause",
         "enforced_confidence": 0.4000000059604645}
LINE = {
    "timestamp": "2026-01-01T00:00:00.123456789Z", "sequence_id": 3,
    "run_id": "fullauto-0b6f1c52-3c1e-4c55-9d7e-5d8f0c7e2a11", "workspace_id": "ws_1",
    "thread_id": "thr_1", "turn_id": "turn_7", "action": "pause", "confidence": 0.4000000059604645,
    "reason": "Low confidence (0.40) decision; pausing Full Auto.", "next_input_preview": "",
    "state": "paused", "model": "codex:gpt-5.1-codex-mini", "guardrail": AUDIT, "summary": SUMMARY,
}
RAW_LINE = {"timestamp": "2026-01-01T00:00:00Z", "sequence_id": 3, "run_id": LINE["run_id"],
            "workspace_id": "ws_1", "thread_id": "thr_1", "turn_id": "turn_7",
            "raw_prediction": {"action": "continue", "confidence": "0.4"},
            "parse_diagnostics": {"parse_errors": []}}
RUN = {"run_id": LINE["run_id"], "workspace_id": "ws_1", "thread_id": "thr_1",
       "started_at": "2026-01-01T00:00:00.5+00:00", "decision_model": "codex:gpt-5.1-codex-mini",
       "min_confidence": 0.55, "max_turns": 200, "no_progress_limit": 3, "max_tokens": None}
EVENT = {"timestamp": "2026-01-01T00:00:01Z", "sequence_id": 1, "event_type": "decision", "data": {"a": 1}}


def changed(base, path, value=..., delete=False):
    obj = copy.deepcopy(base)
    *parents, last = path.split(".")
    target = obj
    for part in parents:
        target = target[part]
    if delete:
        del target[last]
    else:
        target[last] = value
    return obj


def error_fields(model, obj):
    with pytest.raises(ValidationError) as info:
        model.model_validate(obj)
    return {".".join(str(p) for p in err["loc"]) for err in info.value.errors()}, str(info.value)


def roundtrip(model, obj):
    """Validate the object as parsed from a JSONL line (the way an importer reads it)."""
    return model.model_validate(json.loads(json.dumps(obj)))


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


# --------------------------------------------------------------------------- experiment log entries

OLD_LINE = ('{"iteration_id":4,"timestamp_utc":"2026-02-01T23:40:00Z","branch":"perf/optimize-kernel",'
            '"base_branch":"main","base_sha":"5452f74","head_sha":"4ba7986","files_changed":["perf_takehome.py"],'
            '"tests_diff_empty":true,"valid":true,"cycles":1443,"delta_vs_best":0,'
            '"strategy_tags":["scheduler-heuristic","vliw-pack","dep-break","a","b"],'
            '"hypothesis":"Scheduling short critical-path tasks first","change_summary":["cp ascending"],'
            '"result_summary":"PASS correctness; cycles=1443","merged_to_main":true,"notes":"Merged."}')
NEW_ENTRY = {
    "base_branch": "opt/best", "base_sha": "abc1234", "best_before": 1436, "branch": "iter/0012-cache",
    "change_summary": ["Cache levels 0-2"], "correctness_pass": True, "cycles": 1435, "delta_vs_best": -1,
    "files_changed": ["perf_takehome.py"], "head_sha": "def5678", "hypothesis": "fewer loads",
    "iteration_id": 12, "merged_to_main": False, "new_best": True, "result_summary": "PASS correctness; cycles=1435",
    "scope_disallowed_files": [], "scope_forbidden_files": [], "scope_ok": True,
    "strategy_tags": ["family:reduce_loads", "gather"], "tests_diff_empty": True, "threshold_met": False,
    "timestamp_utc": "2026-02-03T10:00:00Z", "valid": True,
}
NEW_INVALID = dict(NEW_ENTRY, correctness_pass=None, valid=False, cycles=None, delta_vs_best=None,
                   new_best=False, scope_ok=False, scope_disallowed_files=["README.md"],
                   result_summary="SKIP benchmark; scope violation")


def test_old_shape_entry():
    entry = ExperimentLogEntry.model_validate_json(OLD_LINE)
    assert entry.cycles == 1443 and entry.valid is True
    assert entry.family is None  # old tags are not family tags
    assert not entry.is_full_shape
    assert entry.scope_ok is None and entry.best_before is None


def test_old_shape_variant_without_merged_to_main():
    obj = json.loads(OLD_LINE)
    obj["merged_to_best"] = obj.pop("merged_to_main")
    del obj["notes"]
    entry = ExperimentLogEntry.model_validate(obj)
    assert entry.merged_to_main is None and entry.model_extra == {"merged_to_best": True}


@pytest.mark.parametrize("obj", [NEW_ENTRY, NEW_INVALID, dict(NEW_ENTRY, best_before=None, notes="first")])
def test_new_shape_entry(obj):
    entry = ExperimentLogEntry.model_validate(json.loads(json.dumps(obj, sort_keys=True)))
    assert entry.is_full_shape


@pytest.mark.parametrize("key", ["iteration_id", "timestamp_utc", "branch", "base_branch", "base_sha", "head_sha",
                                 "files_changed", "tests_diff_empty", "valid", "cycles", "delta_vs_best",
                                 "strategy_tags", "hypothesis", "change_summary", "result_summary"])
def test_incomplete_entry_names_the_field(key):
    obj = json.loads(OLD_LINE)
    del obj[key]
    fields, _ = error_fields(ExperimentLogEntry, obj)
    assert fields == {key}


@pytest.mark.parametrize("key,value", [
    ("iteration_id", "4"), ("iteration_id", 4.0), ("cycles", "1443"), ("cycles", 1443.0), ("cycles", True),
    ("valid", "true"), ("valid", 1), ("valid", None), ("strategy_tags", "family:schedule"),
    ("strategy_tags", [1]), ("files_changed", None), ("tests_diff_empty", "yes"),
    ("timestamp_utc", "2026-02-01 23:40:00"), ("timestamp_utc", "2026-02-01T23:40:00+00:00"),
    ("timestamp_utc", "2026-2-1T23:40:00Z"), ("timestamp_utc", 1767225600),
    ("correctness_pass", "true"), ("best_before", "1436"), ("scope_ok", 1), ("new_best", "x"),
    ("delta_vs_best", 0.5), ("notes", 3),
])
def test_wrong_typed_entry_names_the_field(key, value):
    obj = dict(NEW_ENTRY)
    obj[key] = value
    fields, message = error_fields(ExperimentLogEntry, obj)
    assert any(f == key or f.startswith(key + ".") for f in fields), fields
    assert key in message


def test_entry_nan_cycles_rejected():
    obj = json.loads(json.dumps(dict(NEW_ENTRY, cycles="__X__")).replace('"__X__"', "NaN"))
    fields, _ = error_fields(ExperimentLogEntry, obj)
    assert fields == {"cycles"}


# --------------------------------------------------------------------------- packets

def test_packet_from_the_original_loop_runner():
    packet = AdvisorPacket.model_validate({
        "goal": "best", "threshold_target": None, "best_cycles": 1436, "aspiration_cycles": 1435,
        "plateau_valid_iters_since_best": 3,
        "strategy_family_constraints": {
            "allowed_families": ["family:schedule", "family:reduce_loads", "family:break_deps"],
            "blocked_families": ["family:schedule"], "current_family": "family:schedule",
            "current_family_streak_len": 2, "last_attempt_meaningful_win": False, "max_consecutive": 2,
            "policy": {"max_consecutive_default": 2}, "reason": "Blocked family:schedule",
        },
        "experiment_log_tail": [OLD_LINE],
        "experiment_summary": {"best_cycles": 1436, "recent_strategy_combos": []},
        "performance_profile": {"error": "Failed to import perf_takehome/problem"},
        "code_context": {},
    })
    assert packet.strategy_family_constraints.blocked_families == ["family:schedule"]
    assert packet.experiment_log_tail == [OLD_LINE]


# --------------------------------------------------------------------------- decision records

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


# --------------------------------------------------------------------------- layering

def test_runtime_has_no_heavy_imports_in_source():
    for path in RUNTIME.glob("*.py"):
        text = path.read_text()
        for name in ("mlflow", "optuna", "pandas"):
            assert f"import {name}" not in text and f"from {name}" not in text, (path.name, name)


def test_importing_runtime_loads_no_heavy_modules():
    # The package and the contract/policy modules (runtime.frozen.loader, which loads DSPy, is the
    # export engineer's; the source scan above covers it).
    code = ("import sys, runtime, runtime.fullauto, runtime.advisor, runtime.guardrails, runtime.pivot, "
            "runtime.records\n"
            "print(','.join(m for m in ('mlflow', 'optuna', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=RUNTIME.parent).stdout.strip()
    assert out == ""
