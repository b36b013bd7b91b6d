"""runtime.planner_shadow: the deployed decision is returned unchanged and at once; the sidecar line states its
probabilities; the candidate runs in a process of its own, and one that raises, hangs or gives only its default is
recorded as such (a hung one is killed and replaced); its process is stopped on close and at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner_sidecar_support import exploring_rules, logs_with_sidecars
from runtime.exploration import ExplorationSettings, check_probabilities
from runtime.planner_log import PLANNER_FILE, PlannerDecisionLine
from runtime.planner_shadow import PlannerShadow
from shadow_support import FaultyPlanner, RaisingRules, alive


@pytest.fixture(scope="module")
def packets(tmp_path_factory) -> list:
    _, records = logs_with_sidecars(tmp_path_factory.mktemp("planner-shadow"), episodes=1, iterations=12)
    return [r.packet for r in records]


def _lines(folder: Path) -> list[PlannerDecisionLine]:
    return [PlannerDecisionLine.model_validate(json.loads(t))
            for t in (folder / PLANNER_FILE).read_text().splitlines()]


def test_the_deployed_decision_is_unchanged_and_its_line_states_every_probability(packets, tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    candidate = exploring_rules(tmp_path, ExplorationSettings(), name="greedy")
    with PlannerShadow(deployed, tmp_path / "w", candidate=candidate, repository="r") as shadow:
        decisions = [shadow.decide(p, i) for i, p in enumerate(packets, start=1)]
    assert [d.directive for d in decisions] == [deployed.decide(p).directive for p in packets]
    lines = _lines(tmp_path / "w")
    assert [l.iteration_id for l in lines] == list(range(1, len(packets) + 1))
    for line, decision in zip(lines, decisions):
        assert check_probabilities(line.probabilities) is None and line.family == decision.family
        assert line.packet_hash == decision.packet_hash and line.repository == "r"
        assert line.exploration == deployed.manifest.exploration and line.module.name == "deployed"
        assert line.candidate.status == "ok" and line.candidate.probabilities[line.candidate.family] == 1.0
        assert line.candidate.family == decision.greedy_family  # the greedy rules choose what the explorer would


@pytest.mark.parametrize("fault,status", [("raises", "error"), ("defaults", "invalid")])
def test_a_candidate_that_raises_or_defaults_is_recorded_as_such(packets, tmp_path: Path, fault, status):
    deployed = exploring_rules(tmp_path)
    candidate = FaultyPlanner(deployed.path, fault)
    with PlannerShadow(deployed, tmp_path / "w", candidate=candidate, deadline_s=30) as shadow:
        decisions = [shadow.decide(p, i) for i, p in enumerate(packets[:3], start=1)]
        assert shadow.pid not in (None, os.getpid())
    assert [d.directive for d in decisions] == [deployed.decide(p).directive for p in packets[:3]]
    found = _lines(tmp_path / "w")
    assert [l.candidate.status for l in found] == [status] * 3 and all(l.candidate.error for l in found)
    assert ("ValueError: boom" if fault == "raises" else "unusable answer") in found[0].candidate.error


def test_a_candidate_whose_program_raises_is_recorded_as_an_error(packets, tmp_path: Path):
    """A module folder whose program raises: the loaded module answers its safe default (never a crash), and the
    line says `error` with the exception, as the docs say, not `invalid`."""
    deployed = exploring_rules(tmp_path)
    with PlannerShadow(deployed, tmp_path / "w", candidate=deployed.path, candidate_program=RaisingRules,
                       deadline_s=30) as shadow:
        for i, p in enumerate(packets[:2], start=1):
            shadow.decide(p, i)
    found = _lines(tmp_path / "w")
    assert [l.candidate.status for l in found] == ["error", "error"]
    assert all(l.candidate.error == "ValueError: the program broke" for l in found)
    assert found[0].candidate.family is None and found[0].candidate.probabilities is None


CANDIDATE_PRINTS = """
import json, sys

from programs.rules_planner import PlannerRules
from runtime.planner_shadow import PlannerShadow
from shadow_support import PrintingRules

if __name__ == "__main__":
    packets = json.loads(open(sys.argv[1]).read())
    with PlannerShadow(sys.argv[2], sys.argv[3], program=PlannerRules, candidate=sys.argv[2],
                       candidate_program=PrintingRules, deadline_s=30) as shadow:
        for i, packet in enumerate(packets, start=1):
            shadow.decide(packet, i)
    print("LOOP-STDOUT")
"""


def test_what_a_candidate_prints_never_reaches_the_loops_stdout(packets, tmp_path: Path):
    """The loop's stdout may be its channel (a directive read from it): the candidate's prints, from Python and
    from file descriptor 1, go to stderr."""
    deployed = exploring_rules(tmp_path)
    (tmp_path / "packets.json").write_text(json.dumps([p.model_dump(mode="json") for p in packets[:2]]))
    (tmp_path / "loop.py").write_text(CANDIDATE_PRINTS)
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests),
                                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(tmp_path / "loop.py"), str(tmp_path / "packets.json"),
                           str(deployed.path), str(tmp_path / "w")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "LOOP-STDOUT\n"
    assert done.stderr.count("CANDIDATE-STDOUT print") == 2 and done.stderr.count("CANDIDATE-STDOUT fd") == 2
    assert [l.candidate.status for l in _lines(tmp_path / "w")] == ["ok", "ok"]


def test_the_candidate_runs_in_its_own_process_and_a_hung_one_is_timed_out_and_replaced(packets, tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    candidate = FaultyPlanner(deployed.path, "hangs_once")  # only the first call, whichever process makes it
    shadow = PlannerShadow(deployed, tmp_path / "w", candidate=candidate, deadline_s=0.2)
    first = shadow.pid
    try:
        assert first is not None and first != os.getpid() and alive(first)
        assert os.getpriority(os.PRIO_PROCESS, first) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 19)
        decisions = [shadow.decide(p, i) for i, p in enumerate(packets[:3], start=1)]
        assert candidate.calls.value <= 1  # every decision came back while the candidate still hung
    finally:
        shadow.close()
    second = candidate.pid.value
    assert [d.directive for d in decisions] == [deployed.decide(p).directive for p in packets[:3]]
    found = _lines(tmp_path / "w")
    assert [l.candidate.status for l in found] == ["timeout", "ok", "ok"]
    assert found[0].candidate.error == "no answer within 0.2 s" and found[0].candidate.latency_s == 0.2
    assert shadow.restarts == 1 and second not in (first, os.getpid()), "the later calls ran in a fresh process"
    assert not alive(first) and not alive(second) and shadow.pid is None, "killed, replaced, stopped on close"


def test_a_candidate_process_that_dies_is_recorded_as_an_error_and_replaced(packets, tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    with PlannerShadow(deployed, tmp_path / "w", candidate=FaultyPlanner(deployed.path, "exits_once")) as shadow:
        first = shadow.pid
        for i, p in enumerate(packets[:2], start=1):
            shadow.decide(p, i)
    found = _lines(tmp_path / "w")
    assert [l.candidate.status for l in found] == ["error", "ok"] and shadow.restarts == 1
    assert "exited (code 3)" in found[0].candidate.error and not alive(first)


def test_turns_beyond_max_pending_are_written_as_not_run(packets, tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    candidate = FaultyPlanner(deployed.path, "spins", spin_s=0.3)
    with PlannerShadow(deployed, tmp_path / "w", candidate=candidate, max_pending=1, deadline_s=30) as shadow:
        for i, p in enumerate(packets[:4], start=1):
            shadow.decide(p, i)
    found = _lines(tmp_path / "w")
    assert [l.iteration_id for l in found] == [1, 2, 3, 4] and found[0].candidate.status == "ok"
    skipped = [l.candidate for l in found if l.candidate.status == "timeout"]
    assert skipped and all(c.error == "not run: 1 decisions were already waiting" for c in skipped)


def test_a_planner_shadow_left_open_stops_its_process_at_exit(tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    script = f"""
import sys
sys.path[:0] = {sys.path!r}
import programs
from shadow_support import load_planner
from runtime.planner_shadow import PlannerShadow
shadow = PlannerShadow(load_planner({str(deployed.path)!r}), {str(tmp_path / "w")!r}, candidate={str(deployed.path)!r},
                       candidate_program=programs.get("planner.rules"))
print(shadow.pid, flush=True)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not alive(int(done.stdout.split()[0])), "the candidate's process ends with the interpreter"
