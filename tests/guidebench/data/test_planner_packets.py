"""The planner packets rebuilt from a real loop-runner log equal the packets the real runner built.

`tests/fixtures/loop_runner/` holds a log in the runner's exact shape and, for every line, the packet
the runner's own functions computed before it (see the README there). The import must rebuild each
packet field by field: best cycles (log and best/* tags), the plateau (null when the best is a tag's),
the family constraints with policy and reason, the raw log tail, the experiment summary with its
keys, and the goal and threshold recovered from the log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.data import load_records
from guidebench.data import import_logs

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "loop_runner"
FIELDS = ("goal", "threshold_target", "best_cycles", "aspiration_cycles", "plateau_valid_iters_since_best",
          "strategy_family_constraints", "experiment_log_tail", "experiment_summary")


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("packets") / "data"
    report = import_logs(FIXTURE / "log.jsonl", "experiments", out, seed=0)
    records = {record.source.line: record for record in load_records(out, "all")}
    return report, records, json.loads((out / "import_report.json").read_text())


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
