"""runtime.advisor: record shapes of formats.md §2.1-2.3: both experiment log entry shapes, strict fields, and
the packet the original loop runner builds."""

from __future__ import annotations

import json

import pytest

from runtime import AdvisorPacket, ExperimentLogEntry
from shape_support import error_fields

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


# --------------------------------------------------------------------------- experiment log entries

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


@pytest.mark.parametrize("packet, best", [
    ({"best_cycles": 1436, "experiment_summary": {"best_cycles": 1500}}, 1436),  # the runner's best first
    ({"experiment_summary": {"best_cycles": 1500}}, 1500),
    ({"best_cycles": 0, "experiment_summary": {"best_cycles": 1500}}, None),  # a best of 0 cycles is not a best
    ({}, None),
])
def test_the_best_so_far_is_the_packets_else_its_summarys(packet, best):
    assert AdvisorPacket.model_validate(packet).best_so_far == best
