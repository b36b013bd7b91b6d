"""The simulated VLIW kernel environment: bounds, state round trip, directive effects, determinism."""

from __future__ import annotations

import math
import random

import pytest

from evals import sim_kernel
from evals.sim_kernel import (
    BREAK_DEPS,
    REDUCE_LOADS,
    SCHEDULE,
    KernelState,
    apply_directive,
    expected_improvement,
    initial_state,
    performance_profile,
    state_from_profile,
)
from runtime import pivot
from runtime.advisor import SLOT_LIMITS, OptimizationDirective


def plain(family: str, risk: str = "Medium", modifiers: tuple[str, ...] = ()) -> dict:
    return {"strategy_family": family, "strategy_modifiers": list(modifiers), "risk": risk}


def state(load: int, cp: int, cycles: int, valu: int = 7000) -> KernelState:
    counts = {"alu": 9600, "valu": valu, "load": load, "store": 576, "flow": 420}
    return KernelState(task_counts=counts, cp_lb_cycles=cp, cycles=cycles)


def test_profile_bounds_follow_slot_limits():
    s = state(load=2861, cp=1400, cycles=1500, valu=7301)
    p = performance_profile(s)
    assert p.task_counts_by_engine == s.task_counts
    assert p.min_cycles_by_engine == {e: math.ceil(c / SLOT_LIMITS[e]) for e, c in s.task_counts.items()}
    assert p.min_cycles_by_engine["load"] == 1431 and p.min_cycles_by_engine["valu"] == 1217
    assert p.resource_lb_cycles == 1431
    assert p.cp_lb_cycles == 1400
    assert p.tight_lb_cycles == 1431
    assert p.schedule_cycles_estimate == 1500
    assert p.schedule_slack_pct == pytest.approx(69 / 1431, abs=1e-6)
    assert pivot.slack_fraction(p) == pytest.approx(69 / 1431, abs=1e-6)
    assert s.binding_bound == "load"
    assert state(load=2600, cp=1440, cycles=1500).binding_bound == "cp"


def test_state_round_trips_through_its_profile():
    rng = random.Random(5)
    for _ in range(50):
        s = initial_state(rng)
        assert state_from_profile(performance_profile(s)) == s
        assert state_from_profile(performance_profile(s).model_dump(mode="json")) == s


def test_profile_without_counts_cannot_rebuild_a_state():
    with pytest.raises(ValueError, match="task_counts_by_engine"):
        state_from_profile({"cp_lb_cycles": 1300, "schedule_cycles_estimate": 1400})


def test_initial_states_are_in_the_published_range():
    rng = random.Random(11)
    starts = [initial_state(rng) for _ in range(400)]
    assert all(1450 <= s.cycles <= 1900 for s in starts)
    assert all(s.slack_cycles > 0 for s in starts)
    assert {s.binding_bound for s in starts} >= {"load", "cp"}


def test_same_seed_same_outcome_and_seeds_differ():
    s = initial_state(random.Random(3))
    d = plain(SCHEDULE)
    first = apply_directive(s, d, random.Random(42))
    assert apply_directive(s, d, random.Random(42)) == first
    outcomes = {apply_directive(s, d, random.Random(k)).cycles for k in range(30)}
    assert len(outcomes) > 5


def test_outcomes_are_consistent_log_facts():
    rng = random.Random(9)
    s = initial_state(rng)
    seen_failures = set()
    for k in range(600):
        family = (SCHEDULE, REDUCE_LOADS, BREAK_DEPS)[k % 3]
        out = apply_directive(s, plain(family, risk=("Low", "Medium", "High")[k % 3]), rng)
        assert out.valid == (out.correctness_pass and out.tests_diff_empty and out.scope_ok)
        assert out.best_before == s.cycles
        assert out.best_after <= out.best_before
        assert out.improvement >= 0
        if out.new_best:
            assert out.valid and out.cycles < out.best_before and out.state_after.cycles == out.cycles
        else:
            assert out.state_after == s
        if out.correctness_pass:
            assert out.cycles is not None
        assert out.scope_ok == (not out.scope_disallowed_files and not out.scope_forbidden_files)
        assert set(out.scope_disallowed_files + out.scope_forbidden_files) <= set(out.files_changed)
        seen_failures.add(out.failure)
        s = out.state_after
    assert seen_failures == {"", "correctness", "tests_changed", "scope"}


def test_directive_model_and_mapping_are_the_same_attempt():
    s = initial_state(random.Random(1))
    directive = OptimizationDirective(
        objective="o", primary_hypothesis="h", strategy_family=BREAK_DEPS, strategy_modifiers=["reassociate"],
        risk="High", expected_effect_cycles=-10, change_summary=["c"], step_plan=["a", "b", "c"],
        validation={"commands": ["x"], "pass_criteria": ["y"]}, next_packet_requests=[], did_web_search=False)
    as_dict = plain(BREAK_DEPS, risk="High", modifiers=("reassociate",))
    assert apply_directive(s, directive, random.Random(7)) == apply_directive(s, as_dict, random.Random(7))


def test_unknown_family_is_rejected_with_its_name():
    with pytest.raises(ValueError, match="family:vectorize"):
        apply_directive(initial_state(random.Random(1)), plain("family:vectorize"), random.Random(1))


def test_rescheduling_pays_with_slack_and_not_near_the_bound():
    slack_rich = state(load=2800, cp=1380, cycles=1650)  # load-bound 1400, slack ~18%
    near = state(load=2800, cp=1380, cycles=1440)  # slack ~2.9%
    far_schedule = expected_improvement(slack_rich, plain(SCHEDULE), seed=1, rollouts=200)
    near_schedule = expected_improvement(near, plain(SCHEDULE), seed=1, rollouts=200)
    near_loads = expected_improvement(near, plain(REDUCE_LOADS), seed=1, rollouts=200)
    assert far_schedule > 25
    assert near_schedule < 3
    assert near_loads > 3 * near_schedule
    assert far_schedule > expected_improvement(slack_rich, plain(REDUCE_LOADS), seed=1, rollouts=200)


def test_only_the_binding_bound_pays():
    load_bound = state(load=2900, cp=1330, cycles=1490)  # load 1450 binds
    cp_bound = state(load=2650, cp=1450, cycles=1490)  # cp 1450 binds
    gains = {(name, fam): expected_improvement(s, plain(fam), seed=2, rollouts=300)
             for name, s in (("load", load_bound), ("cp", cp_bound)) for fam in (REDUCE_LOADS, BREAK_DEPS)}
    assert gains[("load", REDUCE_LOADS)] > 4 * gains[("load", BREAK_DEPS)]
    assert gains[("cp", BREAK_DEPS)] > 4 * gains[("cp", REDUCE_LOADS)]


def test_returns_diminish_as_the_gap_to_the_floor_closes():
    far = state(load=3000, cp=1330, cycles=1560)
    close = state(load=2640, cp=1300, cycles=1380)
    assert expected_improvement(far, plain(REDUCE_LOADS), seed=3, rollouts=300) > \
        2 * expected_improvement(close, plain(REDUCE_LOADS), seed=3, rollouts=300)


def test_risk_trades_gain_for_failures():
    s = initial_state(random.Random(4))

    def failure_rate(risk: str) -> float:
        outs = [apply_directive(s, plain(BREAK_DEPS, risk=risk), random.Random(k)) for k in range(600)]
        return sum(not o.correctness_pass for o in outs) / len(outs)

    assert failure_rate("High") > 1.8 * failure_rate("Low")


def test_matching_modifiers_help_and_unrelated_ones_hurt():
    s = state(load=2800, cp=1380, cycles=1650)
    own = expected_improvement(s, plain(SCHEDULE, modifiers=("list_scheduling", "unroll")), seed=5, rollouts=400)
    unrelated = expected_improvement(s, plain(SCHEDULE, modifiers=("vload", "reassociate")), seed=5, rollouts=400)
    assert own > unrelated


def test_expected_improvement_is_seeded_and_common_across_directives():
    s = initial_state(random.Random(8))
    a = expected_improvement(s, plain(SCHEDULE), seed=10, rollouts=16)
    assert a == expected_improvement(s, plain(SCHEDULE), seed=10, rollouts=16)
    assert a != expected_improvement(s, plain(SCHEDULE), seed=11, rollouts=16)
    with pytest.raises(ValueError):
        expected_improvement(s, plain(SCHEDULE), seed=10, rollouts=0)


def test_derive_seed_is_stable_and_sensitive_to_every_part():
    assert sim_kernel.derive_seed("a", 1, 2) == sim_kernel.derive_seed("a", 1, 2)
    assert sim_kernel.derive_seed("a", 1, 2) != sim_kernel.derive_seed("a", 12)
    assert 0 <= sim_kernel.derive_seed("x") < 2 ** 64
