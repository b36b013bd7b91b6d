"""The planner packets rebuilt from a real loop-runner log equal the packets the real runner built.

`tests/fixtures/loop_runner/` holds a log in the runner's exact shape and, for every line, the packet
the runner's own functions computed before it (see the README there). The import must rebuild each
packet field by field: best cycles (log and best/* tags), the plateau (null when the best is a tag's),
the family constraints with policy and reason, the raw log tail, the experiment summary with its
keys, and the goal and threshold recovered from the log. `tests/fixtures/loop_runner_sessions/` holds a
log the real runner wrote over four sessions with different goals, and the packet it built before each
iteration: the goal of every iteration must be recovered from the log's evidence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.data import load_records
from guidebench.data import import_logs

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "loop_runner"
SESSIONS = FIXTURE.with_name("loop_runner_sessions")
FIELDS = ("goal", "threshold_target", "best_cycles", "aspiration_cycles", "plateau_valid_iters_since_best",
          "strategy_family_constraints", "experiment_log_tail", "experiment_summary")


def _imported(folder: Path, out: Path):
    report = import_logs(folder / "log.jsonl", "experiments", out, seed=0)
    records = {record.source.line: record for record in load_records(out, "all")}
    return report, records, json.loads((out / "import_report.json").read_text())


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    return _imported(FIXTURE, tmp_path_factory.mktemp("packets") / "data")


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    return _imported(SESSIONS, tmp_path_factory.mktemp("sessions") / "data")


def test_every_packet_equals_the_runners(rebuilt):
    _, records, _ = rebuilt
    expected = json.loads((FIXTURE / "packets.json").read_text())
    compared = 0
    for packet in expected:
        ours = records[packet["line"]].packet.model_dump(mode="json")
        for field in FIELDS:
            assert ours[field] == packet[field], f"line {packet['line']}: {field}"
        compared += 1
    assert compared == len(expected) == 11


def test_a_refused_line_still_counts_for_the_packets_after_it(tmp_path):
    lines = (FIXTURE / "log.jsonl").read_text().splitlines()
    broken = json.loads(lines[6])
    broken["iteration_id"] = "seven"  # the workbench's contract refuses it; the runner reads any object
    lines[6] = json.dumps(broken, sort_keys=True)
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines[:8]) + "\n\n")
    report = import_logs(log, "experiments", tmp_path / "data", seed=0)
    assert report.quarantined == 1
    after = {r.source.line: r for r in load_records(tmp_path / "data", "all")}[8].packet
    assert after.strategy_family_constraints.current_family == "family:break_deps"
    assert after.strategy_family_constraints.current_family_streak_len == 1
    assert after.experiment_log_tail[-1] == lines[6]


def test_goal_and_threshold_come_from_the_log(rebuilt):
    _, records, saved = rebuilt
    assert {(r.packet.goal, r.packet.threshold_target) for r in records.values()} == {("threshold", 1363)}
    assert saved["distributions"]["goals"] == {"threshold": len(records)}
    # lines 5, 6, 11 are invalid (no evidence of their own); line 10 met the threshold without stating it
    assert saved["distributions"]["goal_sources"] == {"proven": 7, "nearest_line": 3, "target_inferred": 1}


# Iteration 11 ran with --threshold 1400 and met it (1355): the log never states 1400, so the target is
# inferred from the nearest stated one (1363, line 9), which 1355 meets. Every other packet is proven.
INFERRED_TARGETS = {11: 1363}


def test_every_iteration_of_the_real_runners_sessions_gets_its_packet(sessions):
    _, records, _ = sessions
    expected = json.loads((SESSIONS / "packets.json").read_text())
    for packet in expected:
        ours = records[packet["line"]].packet.model_dump(mode="json")
        assert records[packet["line"]].iteration_id == packet["iteration_id"]
        for field in FIELDS:
            if field == "threshold_target" and packet["line"] in INFERRED_TARGETS:
                assert ours[field] == INFERRED_TARGETS[packet["line"]] != packet[field]
            else:
                assert ours[field] == packet[field], f"line {packet['line']}: {field}"
    assert [p["line"] for p in expected] == list(range(5, 15))


def test_a_valid_attempt_without_a_target_proves_the_goal_was_best(sessions):
    # iteration 6: "PASS correctness; cycles=1473", threshold_met false, no "(above target N)": a threshold
    # goal would have written one, so the runner ran for the best; later lines state target 1363
    _, records, _ = sessions
    before_6 = records[6].packet
    assert (before_6.goal, before_6.threshold_target, before_6.aspiration_cycles) == ("best", None, 1428)
    assert records[9].packet.goal == "threshold" and records[9].packet.threshold_target == 1363


def test_where_the_log_cannot_prove_the_goal_the_card_says_so(sessions):
    report, records, saved = sessions
    # proven: 5, 6, 9, 12, 14; the threshold met without its value: 10, 11; no evidence of their own: the
    # runner's example lines 1-4 (older lines, no threshold_met), the invalid attempts 7, 8, 13
    assert saved["distributions"]["goal_sources"] == {"proven": 5, "target_inferred": 2, "nearest_line": 7}
    assert sum(saved["distributions"]["goal_sources"].values()) == len(records) == report.imported
    assert any("threshold target inferred" in note and "10, 11" in note for note in saved["notes"])
    card = (Path(report.out) / "README.md").read_text()
    assert "## Goal and threshold source" in card and "| target_inferred | 2 |" in card


def test_directives_are_scored_by_both_checks():
    from runtime import validate_directive, validate_directive_original

    loose = {"objective": "o", "primary_hypothesis": "h", "strategy_family": " family:schedule ",
             "strategy_modifiers": [], "risk": "Low", "expected_effect_cycles": True, "change_summary": [" "],
             "step_plan": ["a", "b", ""], "validation": {"commands": [], "pass_criteria": ["p"], "extra": 1},
             "next_packet_requests": [], "did_web_search": False}
    assert validate_directive_original(loose) == []  # the runner accepts it
    assert len(validate_directive(loose)) >= 5  # the strict check of formats.md §2.2 does not
    assert validate_directive_original(dict(loose, strategy_family="family:schedule"),
                                       ["family:schedule"]) != []


def test_replay_scores_the_original_and_the_strict_check_apart(rebuilt):
    from evals import metrics_planner

    _, records, _ = rebuilt
    record = records[3]
    loose = {"objective": "o", "primary_hypothesis": "h", "strategy_family": "family:reduce_loads ",
             "strategy_modifiers": [], "risk": "Low", "expected_effect_cycles": -5, "change_summary": ["c"],
             "step_plan": ["a", "b", "c"], "validation": {"commands": [], "pass_criteria": ["p"]},
             "next_packet_requests": [], "did_web_search": False}
    scores = metrics_planner.score_outcome(metrics_planner.outcome_of(record, {"directive": loose}))
    assert (scores["directive_valid_original"], scores["directive_valid_strict"]) == (1.0, 0.0)
    assert scores["schema_validity"] == scores["directive_valid_strict"]


def test_packets_and_runtime_pivot_agree_when_the_best_is_a_tags():
    # from line 5 on, the next entry's best_before (1440, a best/* tag of another machine) is below every
    # valid cycles of the log (lowest 1468): the packet and runtime.pivot must give the same best and plateau
    from evals import metrics_planner
    from guidebench.data.planner_packets import PacketBuilder
    from runtime import pivot

    lines = [text for text in (FIXTURE / "log.jsonl").read_text().splitlines() if text.strip()]
    entries = [json.loads(text) for text in lines]
    builder = PacketBuilder()
    tagged = 0
    for k, entry in enumerate(entries):
        prefix, tags = entries[:k], pivot.tag_best(entry)
        packet = builder.packet(entry)
        assert packet.best_cycles == pivot.best_cycles(prefix, tags), k
        assert packet.plateau_valid_iters_since_best == pivot.plateau_valid_iters_since_best(prefix, tags), k
        assert metrics_planner.pivot_requirement(packet).reasons == tuple(
            pivot.pivot_required(prefix, tag_best=tags)[1]), k
        tagged += tags is not None and packet.plateau_valid_iters_since_best is None and bool(prefix)
        builder.add(entry, lines[k])
    assert tagged >= 3


def _runner_line(cycles, *, valid=True, met=False, target=None, **extra):
    """What the runner's `record` writes for one attempt (a PASS, or a FAIL when not valid)."""
    summary = (f"PASS correctness; cycles={cycles}" if valid else f"FAIL correctness; cycles={cycles}") + (
        f" (above target {target})" if target is not None else "")
    return {"valid": valid, "cycles": cycles, "threshold_met": met, "result_summary": summary, **extra}


def _evidence(entries):
    from guidebench.data.planner_packets import GoalEvidence

    evidence = GoalEvidence()
    for index, entry in enumerate(entries, start=1):
        evidence.see(index, entry)
    return evidence


@pytest.mark.parametrize("entry, evidence", [
    (_runner_line(1440, target=1363), ("STATED", 1363)),
    (_runner_line(1473), ("BEST", None)),  # a threshold goal would have stated the target or met it
    (_runner_line(1360, met=True), ("MET", 1360)),
    (_runner_line(1400, valid=False), None),  # the runner writes threshold_met false on every invalid line
    ({"valid": False, "cycles": None, "threshold_met": False, "result_summary": "SKIP benchmark; tests changed"},
     None),
    ({"valid": True, "cycles": None, "threshold_met": False, "result_summary": "UNKNOWN correctness; cycles "
      "unavailable"}, None),
    # older lines carry no threshold_met: only a stated target counts
    ({"valid": True, "cycles": 1443, "result_summary": "PASS correctness; cycles=1443 (fails <1363)"}, None),
    ({"valid": True, "cycles": 1500, "result_summary": "PASS correctness; cycles=1500 (above target 1363)"},
     ("STATED", 1363)),
])
def test_each_line_carries_its_own_evidence(entry, evidence):
    from guidebench.data.planner_packets import line_evidence

    found = line_evidence(entry)
    assert (found if found is None else (found[0].name, found[1])) == evidence


def test_a_number_no_runner_writes_is_no_evidence(tmp_path):
    huge = _runner_line(10**30, met=True)
    assert _evidence([huge, _runner_line(1473)]).goal_at(1).goal == "best"  # not an OverflowError
    line = json.loads((SESSIONS / "log.jsonl").read_text().splitlines()[8])
    line["result_summary"] = "PASS correctness; cycles=1440 (above target " + "9" * 5000 + ")"
    (tmp_path / "log.jsonl").write_text(json.dumps(line) + "\n")
    # int() takes at most 4300 digits: such a target is no evidence, not a traceback
    report = import_logs(tmp_path / "log.jsonl", "experiments", tmp_path / "data", seed=0)
    assert report.imported == 1 and report.distributions["goal_sources"] == {"runner_default": 1}


def test_evidence_holds_for_its_own_line_and_invalid_attempts_take_the_nearest():
    invalid = _runner_line(1400, valid=False)
    evidence = _evidence([_runner_line(1473), invalid, invalid, invalid, _runner_line(1440, target=1363), invalid])
    facts = [evidence.goal_at(index) for index in range(1, 7)]
    assert [(f.goal, f.threshold_target) for f in facts] == [
        ("best", None), ("best", None), ("best", None),  # line 3 is as near line 1 as line 5: the earlier wins
        ("threshold", 1363), ("threshold", 1363), ("threshold", 1363)]
    assert [f.source for f in facts] == ["proven", "nearest_line", "nearest_line", "nearest_line", "proven",
                                         "nearest_line"]


@pytest.mark.parametrize("lines, target", [
    ([_runner_line(1440, target=1363), _runner_line(1360, met=True)], 1363),  # the nearest stated target
    ([_runner_line(1440, target=1400), _runner_line(1360, met=True), _runner_line(1390, target=1363)], 1400),
    ([_runner_line(1360, target=1340), _runner_line(1350, met=True)], 1363),  # 1340 not met: tightest published
    ([_runner_line(1500, met=True)], 1548),
    ([_runner_line(2500, met=True)], 2500),  # above every published threshold: the least target it meets
    ([{"valid": False, "cycles": None, "threshold_met": True, "result_summary": "?"}], 1363),  # runner's default
])
def test_a_met_threshold_the_log_does_not_state_is_inferred(lines, target):
    met = next(i for i, entry in enumerate(lines, start=1) if entry.get("threshold_met"))
    facts = _evidence(lines).goal_at(met)
    assert (facts.goal, facts.threshold_target, facts.source) == ("threshold", target, "target_inferred")


def test_a_log_without_evidence_gets_the_runners_defaults(tmp_path):
    old = {"base_branch": "main", "base_sha": "5452f74", "branch": "b", "change_summary": ["c"], "cycles": 1443,
           "delta_vs_best": 0, "files_changed": ["perf_takehome.py"], "head_sha": "4ba7986", "hypothesis": "h",
           "iteration_id": 1, "merged_to_main": True, "strategy_tags": ["sched"], "tests_diff_empty": True,
           "result_summary": "PASS correctness; cycles=1443 (fails <1363)", "timestamp_utc": "2026-02-01T23:40:00Z",
           "valid": True}
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(old) + "\n" + json.dumps(dict(old, iteration_id=2)) + "\n")
    report = import_logs(log, "experiments", tmp_path / "data", seed=0)
    packets = [r.packet for r in load_records(tmp_path / "data", "all")]
    # older lines: no threshold_met, no stated target; the runner defaults to --goal threshold --threshold 1363
    assert {(p.goal, p.threshold_target, p.aspiration_cycles) for p in packets} == {("threshold", 1363, None)}
    assert report.distributions["goal_sources"] == {"runner_default": 2}


def test_evidence_is_numbered_as_the_import_numbers_lines(tmp_path):
    # a bare "\r" is JSON whitespace; the import splits lines at "\n" only, so must the evidence pass
    stated = json.loads((SESSIONS / "log.jsonl").read_text().splitlines()[8])  # "(above target 1363)"
    best = json.loads((SESSIONS / "log.jsonl").read_text().splitlines()[5])  # goal best
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(stated).replace(", ", ",\r ", 1) + "\n" + json.dumps(best) + "\n", newline="")
    import_logs(log, "experiments", tmp_path / "data", seed=0)
    packets = {r.source.line: r.packet for r in load_records(tmp_path / "data", "all")}
    assert (packets[1].goal, packets[1].threshold_target) == ("threshold", 1363)
    assert (packets[2].goal, packets[2].threshold_target) == ("best", None)
