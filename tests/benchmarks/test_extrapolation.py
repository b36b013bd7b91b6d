"""The `floor` scenario (break_deps's payoff shrinks as the kernel nears its floor, and the deployed planner rarely
tries it there) and the extrapolation study on it: the rule planner's break_deps estimates near the floor are
flagged `extrapolated`."""

from __future__ import annotations

import random

import numpy as np
import pytest

from benchmarks import extrapolation, planner_scenarios
from benchmarks.planner_scenarios import FLOOR_NEAR, WORLDS, State, floor_near, floor_step
from runtime.advisor import FAMILIES

SCHEDULE, LOADS, DEPS = FAMILIES


def state(slack_share: float) -> State:
    tight = 40_000.0
    values = {"load": tight * 0.9, "cp": tight, "slack": slack_share * tight, "load_floor": 0.3 * tight,
              "cp_floor": 0.3 * tight}
    return State(cycles=round(tight * (1 + slack_share)), start=60_000, values=values)


def test_break_deps_pays_nothing_at_the_floor_and_in_full_far_from_it():
    at_floor, far = state(0.0), state(0.3)
    assert floor_near(at_floor) and not floor_near(far)
    gains = {name: [] for name in ("floor", "far")}
    for k in range(200):
        for name, s in (("floor", at_floor), ("far", far)):
            cycles, _ = floor_step(s, DEPS, random.Random(k))
            gains[name].append(s.cycles - cycles)
    assert max(gains["floor"]) == 0  # the bound does not move and neither does the slack
    assert np.mean(gains["far"]) > 0.02 * far.cycles
    # the other families are bounds' own
    loads, _ = floor_step(at_floor, LOADS, random.Random(1))
    assert loads == planner_scenarios.bounds_step(at_floor, LOADS, random.Random(1))[0]


def test_the_deployed_planner_rarely_tries_break_deps_near_the_floor(monkeypatch):
    monkeypatch.setattr(planner_scenarios, "TRUTH_DRAWS", 5)  # the planner reads the truth; a rough one will do
    near, far = [], []
    for index in range(12):
        plans: list = []
        history, _ = planner_scenarios.episode(WORLDS["floor"], 5, index, plans=plans)
        for line, plan in zip(history, plans):
            slack = plan["profile"]["schedule_slack_pct"]
            (near if slack <= FLOOR_NEAR else far).append(line["strategy_tags"][0] == DEPS)
    assert len(near) >= 50 and len(far) >= 50
    assert np.mean(near) < 0.08 < np.mean(far)


@pytest.mark.slow
def test_with_the_profile_the_rules_break_deps_estimates_near_the_floor_are_flagged(tmp_path, monkeypatch):
    monkeypatch.setattr(planner_scenarios, "TRUTH_DRAWS", 40)
    made = extrapolation.one("floor", 24, 3, True, tmp_path / "with")
    deps = made["per_family"][DEPS]
    assert deps["extrapolated"]["n"] > 0 and made["extrapolation"]["by_family"][DEPS]["extrapolated"] > 0
    assert made["extrapolation"]["shares"][DEPS] > made["extrapolation"]["shares"].get(LOADS, 0.0)
    assert made["estimates"]["dr"]["extrapolated"] == made["extrapolation"]["extrapolated"]
    assert made["family_calibration"]["families"]  # held-out per family, with n
