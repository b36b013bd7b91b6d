"""programs.rules_planner: the no-LM reference planner follows the pivot policy and the packet's constraints."""

from __future__ import annotations

import json

import dspy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import programs
from program_support import entry
from programs.rules_planner import rule_directive
from programs.seeds import _planner_seed_packets
from runtime import AdvisorPacket
from runtime.advisor import FAMILIES, FamilyConstraints, PerformanceProfile
from runtime.pivot import PIVOT_RULES, family_constraints, pivot_required, validate_directive

# Schedule estimate 1.4% above the tight bound: near it once three valid attempts bring no new best.
NEAR_BOUND_PROFILE = PerformanceProfile(tight_lb_cycles=1420, schedule_cycles_estimate=1440)


def planner_inputs_with(entries: list, **packet) -> dict:
    return programs.planner_inputs(AdvisorPacket(experiment_log_tail=entries, **packet))


def test_planner_rules_pivots_away_from_a_blocked_family():
    entries = [entry(1, "family:schedule", True, 1600, 1700), entry(2, "family:schedule", True, 1601, 1600)]
    inputs = planner_inputs_with(entries, best_cycles=1600)
    out = programs.get("planner.rules")(**inputs)
    assert out.directive.strategy_family in ("family:reduce_loads", "family:break_deps")
    assert "family_blocked" in out.rule_reasons
    assert validate_directive(out.directive.model_dump(), ["family:schedule"]) == []


def test_planner_rules_pivots_to_the_least_tried_family():
    entries = [entry(1, "family:break_deps", True, 1700, 1800), entry(2, "family:schedule", True, 1690, 1700),
               entry(3, "family:schedule", False, None, 1690)]
    out = programs.get("planner.rules")(**planner_inputs_with(entries, best_cycles=1690))
    assert out.directive.strategy_family == "family:reduce_loads"


def test_planner_rules_lowers_the_bound_when_near_it():
    packet, _ = _planner_seed_packets()[1]
    out = programs.get("planner.rules")(**programs.planner_inputs(packet))
    assert "near_bound" in out.rule_reasons and out.directive.strategy_family == "family:reduce_loads"


@pytest.mark.parametrize("best", [1_400, 20_000, 114_000])
def test_planner_rules_expected_effect_follows_the_kernels_scale_without_a_profile(best):
    entries = [entry(1, "family:schedule", True, best, best + 500)]
    out = programs.get("planner.rules")(**planner_inputs_with(entries, best_cycles=best))
    share = 0.01 if out.directive.strategy_family != "family:schedule" else 0.005
    assert out.directive.expected_effect_cycles == -max(1, round(best * share))


def test_planner_rules_keeps_an_improving_family_and_recovers_from_invalid_streaks():
    improving = [entry(1, "family:break_deps", True, 1700, 1800)]
    out = programs.get("planner.rules")(**planner_inputs_with(improving, best_cycles=1700))
    assert out.directive.strategy_family == "family:break_deps"
    invalid = [entry(i, family, False, None, 1700) for i, family in
               enumerate(["family:schedule", "family:break_deps", "family:reduce_loads"], start=2)]
    out = programs.get("planner.rules")(**planner_inputs_with(improving + invalid, best_cycles=1700))
    assert "invalid_streak" in out.rule_reasons and out.directive.risk == "Low"
    assert out.directive.strategy_modifiers[0] == "recovery"


def test_planner_rules_without_a_packet_is_a_safe_default():
    out = programs.get("planner.rules")(goal="best")
    assert out.parse_errors and out.directive.strategy_modifiers == ["safe_default"]


def test_planner_rules_respects_the_packet_constraints():
    constraints = FamilyConstraints(blocked_families=["family:reduce_loads"], current_family="family:reduce_loads",
                                    current_family_streak_len=2)
    profile = PerformanceProfile(tight_lb_cycles=1400, schedule_cycles_estimate=1420)
    packet = AdvisorPacket(goal="threshold", threshold_target=1390, best_cycles=1420,
                           strategy_family_constraints=constraints, performance_profile=profile)
    out = programs.get("planner.rules")(**programs.planner_inputs(packet))
    assert out.directive.strategy_family == "family:break_deps"  # lowers the bound, avoiding the blocked one
    assert out.directive.objective == "Reach 1390 cycles"


@pytest.mark.parametrize("tags_best", [1440, 1500])
def test_planner_rules_read_the_packets_best_and_plateau_when_the_best_is_a_tags(tags_best):
    # Seven valid attempts that never beat the log's first (1500): counted on the log alone, a hard plateau
    # and, with the profile's 1.4% slack, the bound. With a best/* tag of 1440 (the runner's best_before)
    # the best is not in the log, so the runner's packet has a null plateau and neither rule is in force.
    from evals.metrics_planner import pivot_requirement
    from guidebench.data.planner_packets import PacketBuilder

    families = ["family:reduce_loads", "family:break_deps"] * 3 + ["family:schedule"]
    log = [entry(i, family, True, 1500 + 3 * (i - 1), tags_best) for i, family in enumerate(families, start=1)]
    assert pivot_required(log, NEAR_BOUND_PROFILE)[1] == ["hard_plateau", "near_bound"]
    builder = PacketBuilder()
    for item in log:
        builder.add(item, json.dumps(item, sort_keys=True))
    packet = builder.packet(entry(8, "family:schedule", True, 1510, tags_best), profile=NEAR_BOUND_PROFILE)
    assert packet.best_cycles == tags_best
    assert (packet.plateau_valid_iters_since_best is None) == (tags_best < 1500)
    need = pivot_requirement(packet)
    out = programs.get("planner.rules")(**programs.planner_inputs(packet))
    assert [reason for reason in out.rule_reasons if reason in PIVOT_RULES] == list(need.reasons)
    if tags_best < 1500:  # nothing forces a pivot: the least-tried family, which is also the current one
        assert need.reasons == () and out.directive.strategy_family == "family:schedule"
    else:  # the log holds the best: plateau and bound as counted on it, a bound-lowering family
        assert need.reasons == ("hard_plateau", "near_bound")
        assert out.directive.strategy_family in ("family:reduce_loads", "family:break_deps")


def test_planner_rules_leaves_a_bound_lowering_family_on_a_hard_plateau_near_the_bound():
    # Near the bound, on a hard plateau: the next family must lower the bound AND be a new one. The least-tried
    # bound-lowering family is the current break_deps; before the fix the rules kept it (not compliant).
    from evals.metrics_planner import outcome_of, pivot_requirement, score_outcome
    from runtime import PlannerRecord

    families = ["family:reduce_loads", "family:reduce_loads", "family:schedule", "family:break_deps"]
    log = [entry(i, family, True, 1500 + i, 1500) for i, family in enumerate(families, start=1)]
    log[0]["cycles"] = 1500
    packet = AdvisorPacket(goal="best", best_cycles=1500, plateau_valid_iters_since_best=7,
                           strategy_family_constraints=family_constraints(log), experiment_log_tail=log,
                           performance_profile=NEAR_BOUND_PROFILE)
    assert pivot_requirement(packet).reasons == ("hard_plateau", "near_bound")
    out = programs.get("planner.rules")(**programs.planner_inputs(packet))
    assert out.directive.strategy_family == "family:reduce_loads"
    record = PlannerRecord(record_id="r", episode_id="e", iteration_id=5, packet=packet)
    assert score_outcome(outcome_of(record, out))["pivot_compliance"] == 1.0


_ATTEMPT = st.tuples(st.sampled_from([*FAMILIES, None]), st.booleans(), st.integers(1300, 1700))


@settings(max_examples=300, deadline=None)
@given(attempts=st.lists(_ATTEMPT, max_size=10), tight=st.integers(1300, 1500), slack=st.integers(0, 200),
       plateau=st.one_of(st.none(), st.integers(0, 9)), target=st.one_of(st.none(), st.integers(1250, 1600)),
       tags_below=st.integers(0, 30))
def test_planner_rules_always_complies_with_the_protocol_as_scored(attempts, tight, slack, plateau, target,
                                                                    tags_below):
    """Whatever the log, bound and plateau, the rules' family is the one the pivot compliance metric accepts
    (`planner.hybrid` relies on it: its compliance is 1.0 by construction)."""
    from evals.metrics_planner import outcome_of, score_outcome
    from runtime import PlannerRecord

    log, best = [], None
    for i, (family, valid, cycles) in enumerate(attempts, start=1):
        item = entry(i, family or "family:schedule", valid, cycles if valid else None, best or 1700)
        if family is None:
            item["strategy_tags"] = ["untagged"]
        log.append(item)
        best = min(best or cycles, cycles) if valid else best
    best = None if best is None else best - tags_below  # a best/* tag may hold a lower best than the log
    packet = AdvisorPacket(goal="threshold" if target else "best", threshold_target=target, best_cycles=best,
                           plateau_valid_iters_since_best=plateau, strategy_family_constraints=family_constraints(log),
                           experiment_log_tail=log,
                           performance_profile=PerformanceProfile(tight_lb_cycles=tight,
                                                                  schedule_cycles_estimate=tight + slack))
    directive, _ = rule_directive(packet)
    record = PlannerRecord(record_id="r", episode_id="e", iteration_id=len(log) + 1, packet=packet)
    scores = score_outcome(outcome_of(record, dspy.Prediction(directive=directive, parse_errors=[])))
    assert scores["schema_validity"] == 1.0 and scores["pivot_compliance"] == 1.0
