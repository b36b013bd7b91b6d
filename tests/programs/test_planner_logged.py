"""`planner.logged`: the deployed planner's directive as the log recorded it."""

from __future__ import annotations

import pytest

import programs
from planner_logs_support import entry, record
from runtime.advisor import FAMILIES

SCHEDULE, LOADS, DEPS = FAMILIES


def test_the_directive_is_the_logged_attempts_own():
    outcome = entry(3, LOADS, cycles=950, best_before=1000, tags=[LOADS, "vload"])
    rec = record("e", 3, [entry(1, SCHEDULE, cycles=1000, best_before=1010)], outcome)
    prediction = programs.get("planner.logged")(**programs.planner_inputs(rec))
    assert prediction.directive.strategy_family == LOADS and prediction.directive.strategy_modifiers == ["vload"]
    assert prediction.logged_family == LOADS and not getattr(prediction, "unscored", None)


def test_a_blocked_family_the_planner_still_tried_is_kept():
    tail = [entry(1, DEPS, cycles=1000, best_before=1010), entry(2, DEPS, cycles=1001, best_before=1000)]
    rec = record("e", 3, tail, entry(3, DEPS, cycles=990, best_before=1000))
    prediction = programs.get("planner.logged")(**programs.planner_inputs(rec))
    assert prediction.directive.strategy_family == DEPS


def test_a_line_without_a_family_is_not_scored_and_a_packet_alone_is_refused():
    rec = record("e", 1, [], entry(1, None, cycles=990, best_before=1000, tags=["loads", "vload"]))
    prediction = programs.get("planner.logged")(**programs.planner_inputs(rec))
    assert "strategy_tags[0]" in prediction.unscored
    with pytest.raises(ValueError, match="planner records only"):
        programs.get("planner.logged")(**programs.planner_inputs(rec.packet))
