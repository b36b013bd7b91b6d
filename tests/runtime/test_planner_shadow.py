"""runtime.planner_shadow: the deployed decision is returned unchanged and at once; the sidecar line states its
probabilities; a candidate that raises, hangs or gives only its default is recorded as such."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from planner_sidecar_support import exploring_rules, logs_with_sidecars
from runtime.exploration import ExplorationSettings, check_probabilities
from runtime.planner_log import PLANNER_FILE, PlannerDecisionLine
from runtime.planner_shadow import PlannerShadow


@pytest.fixture(scope="module")
def packets(tmp_path_factory) -> list:
    _, records = logs_with_sidecars(tmp_path_factory.mktemp("planner-shadow"), episodes=1, iterations=12)
    return [r.packet for r in records]


class _Wrapped:
    """A real loaded module whose `decide` misbehaves."""

    def __init__(self, module, decide):
        self.manifest, self.path, self._decide = module.manifest, module.path, decide

    def decide(self, packet):
        return self._decide(packet)


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


def test_a_candidate_that_raises_hangs_or_defaults_is_recorded_as_such(packets, tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    release = threading.Event()

    def hang(packet):
        release.wait(30)
        raise RuntimeError("late")

    def default(packet):
        return deployed.decide(packet)._replace(used_default=True, errors=["unusable answer"])

    cases = {"error": lambda p: (_ for _ in ()).throw(ValueError("boom")), "timeout": hang, "invalid": default}
    for status, behaviour in cases.items():
        folder = tmp_path / status
        shadow = PlannerShadow(deployed, folder, candidate=_Wrapped(deployed, behaviour), deadline_s=0.2,
                               max_overdue=1)
        decisions = [shadow.decide(p, i) for i, p in enumerate(packets[:3], start=1)]
        if status == "timeout":
            assert not release.is_set()  # every decision came back while the candidate still hung
        shadow.close()
        assert [d.directive for d in decisions] == [deployed.decide(p).directive for p in packets[:3]]
        found = _lines(folder)
        assert {l.candidate.status for l in found} == {status} and all(l.candidate.error for l in found)
    release.set()
    assert "ValueError: boom" in _lines(tmp_path / "error")[0].candidate.error
    assert any("not run" in l.candidate.error for l in _lines(tmp_path / "timeout"))
