"""Planner metrics: schema validity, pivot compliance, simulated cycles improvement, calibration, objective."""

from __future__ import annotations

import math

import dspy
import pytest

import programs
from evals import metrics_planner as mp
from evals import sim_kernel
from evals.paired import paired_mean_difference
from optimizer_support import episode_records
from runtime import AdvisorPacket, PlannerRecord, family_constraints

SCHEDULE, REDUCE, BREAK = "family:schedule", "family:reduce_loads", "family:break_deps"


def directive(family=SCHEDULE, effect=-10, **changes):
    base = {
        "objective": "Beat the best", "primary_hypothesis": "fewer stalls", "strategy_family": family,
        "strategy_modifiers": [], "risk": "Medium", "expected_effect_cycles": effect,
        "change_summary": ["repack slots"], "step_plan": ["edit", "test", "measure"],
        "validation": {"commands": ["python tests/submission_tests.py"], "pass_criteria": ["tests pass"]},
        "next_packet_requests": [], "did_web_search": False,
    }
    base.update(changes)
    return base


def entry(i, family, cycles, valid=True):
    return {"iteration_id": i, "timestamp_utc": "2025-01-01T00:00:00Z", "valid": valid, "cycles": cycles,
            "strategy_tags": [family]}


def packet(tail, profile=None, **fields):
    constraints = family_constraints(tail)
    valid = [e["cycles"] for e in tail if e["valid"] and e["cycles"] is not None]
    return AdvisorPacket(best_cycles=min(valid) if valid else None, strategy_family_constraints=constraints,
                         experiment_log_tail=tail, performance_profile=profile, **fields)


def record(pk, record_id="r1"):
    return PlannerRecord(record_id=record_id, episode_id="e", iteration_id=len(pk.experiment_log_tail) + 1, packet=pk)


def scores(pk, d, record_id="r1", **pred_fields):
    pred = dspy.Prediction(directive=d, directive_errors=[], parse_errors=[], **pred_fields)
    return mp.score_outcome(mp.outcome_of(record(pk, record_id), pred))


ROOMY = sim_kernel.performance_profile(sim_kernel.KernelState(
    task_counts={"alu": 9600, "valu": 7000, "load": 2900, "store": 576, "flow": 420}, cp_lb_cycles=1400, cycles=1700))


def test_valid_directive_is_schema_valid_and_an_invalid_one_scores_zero():
    pk = packet([entry(1, SCHEDULE, 1700)], ROOMY)
    good = scores(pk, directive(REDUCE))
    assert good["schema_validity"] == 1.0 and good["objective"] > 0
    bad = scores(pk, {k: v for k, v in directive(REDUCE).items() if k != "risk"})
    assert bad["schema_validity"] == 0.0 and bad["objective"] == 0.0
    # The loop runner rejects it: no change this iteration, no credit for compliance.
    assert bad["cycles_improvement"] == 0.0 and bad["pivot_compliance"] == 0.0 and math.isnan(bad["effect_calibration"])
    failed = mp.score_outcome(mp.outcome_of(record(pk), dspy.Prediction(directive=directive(REDUCE), parse_errors=[
        "output is not JSON"])))
    assert failed["parse_failure_rate"] == 1.0 and failed["objective"] == 0.0


def test_a_blocked_family_is_not_compliant():
    pk = packet([entry(1, SCHEDULE, 1700), entry(2, SCHEDULE, 1695)], ROOMY)
    assert pk.strategy_family_constraints.blocked_families == [SCHEDULE]
    assert scores(pk, directive(SCHEDULE))["pivot_compliance"] == 0.0
    assert scores(pk, directive(BREAK))["pivot_compliance"] == 1.0


def test_no_pivot_needed_any_allowed_family_complies():
    pk = packet([entry(1, SCHEDULE, 1700)], ROOMY)
    need = mp.pivot_requirement(pk)
    assert not need.required
    assert all(scores(pk, directive(f))["pivot_compliance"] == 1.0 for f in (SCHEDULE, REDUCE, BREAK))


def test_a_packet_asked_again_gets_its_own_requirement_and_an_equal_copy_is_worked_out_anew():
    plateau = packet([entry(1, REDUCE, 1600)] + [entry(i, f, 1610 + i) for i, f in
                                                zip(range(2, 8), [SCHEDULE, BREAK, SCHEDULE, BREAK, SCHEDULE, BREAK])],
                     ROOMY)
    calm = packet([entry(1, SCHEDULE, 1700)], ROOMY)
    first = mp.pivot_requirement(plateau)
    assert mp.pivot_requirement(plateau) is first  # the record's six questions parse its tail once
    assert mp.pivot_requirement(calm) == mp._pivot_requirement(calm) and not mp.pivot_requirement(calm).required
    copy = plateau.model_copy(deep=True)
    assert mp.pivot_requirement(copy) is not first and mp.pivot_requirement(copy) == first
    for _ in range(mp._RECENT_PACKETS):  # older packets fall out of the memo, and are worked out again, the same
        mp.pivot_requirement(calm.model_copy(deep=True))
    again = mp.pivot_requirement(plateau)
    assert again is not first and again == first and again.required


def test_hard_plateau_requires_leaving_the_current_family():
    tail = [entry(1, REDUCE, 1600)] + [entry(i, f, 1610 + i) for i, f in
                                       zip(range(2, 8), [SCHEDULE, BREAK, SCHEDULE, BREAK, SCHEDULE, BREAK])]
    pk = packet(tail, ROOMY)
    need = mp.pivot_requirement(pk)
    assert need.required and any(r.startswith("hard_plateau") for r in need.reasons)
    assert need.current_family == BREAK
    assert scores(pk, directive(BREAK))["pivot_compliance"] == 0.0
    assert scores(pk, directive(SCHEDULE))["pivot_compliance"] == 1.0


def test_packet_plateau_counts_when_the_tail_lost_the_best():
    # Only the tail is in the packet; the packet's own plateau count still triggers the rule.
    pk = packet([entry(40, SCHEDULE, 1650)], ROOMY, plateau_valid_iters_since_best=9)
    assert mp.pivot_requirement(pk).required
    assert scores(pk, directive(SCHEDULE))["pivot_compliance"] == 0.0


def test_near_bound_requires_a_bound_lowering_family():
    tight = sim_kernel.performance_profile(sim_kernel.KernelState(
        task_counts={"alu": 9600, "valu": 7000, "load": 2900, "store": 576, "flow": 420}, cp_lb_cycles=1400,
        cycles=1460))
    tail = [entry(1, REDUCE, 1460), entry(2, SCHEDULE, 1462), entry(3, BREAK, 1465), entry(4, REDUCE, 1461)]
    pk = packet(tail, tight)
    need = mp.pivot_requirement(pk)
    assert need.near_bound
    assert scores(pk, directive(SCHEDULE))["pivot_compliance"] == 0.0
    assert scores(pk, directive(BREAK))["pivot_compliance"] == 1.0
    # Near the bound alone, staying in a bound-lowering family is allowed.
    assert scores(pk, directive(REDUCE))["pivot_compliance"] == 1.0


def test_cycles_improvement_is_seeded_and_compared_with_the_best_plain_family():
    pk = packet([entry(1, SCHEDULE, 1700)], ROOMY)
    first = scores(pk, directive(SCHEDULE))
    assert first == scores(pk, directive(SCHEDULE))  # same record, same rollouts
    state = sim_kernel.state_from_profile(ROOMY)
    seed = sim_kernel.derive_seed("cycles_improvement", "r1")
    expected = sim_kernel.expected_improvement(state, {"strategy_family": SCHEDULE, "strategy_modifiers": [],
                                                       "risk": "Medium"}, seed=seed, rollouts=mp.ROLLOUTS)
    assert first["cycles_improvement"] == pytest.approx(expected)
    ratios = [scores(pk, directive(f))["improvement_ratio"] for f in (SCHEDULE, REDUCE, BREAK)]
    assert all(0.0 <= r <= 1.0 for r in ratios) and max(ratios) == 1.0


def test_effect_calibration_rewards_an_honest_estimate():
    pk = packet([entry(1, SCHEDULE, 1700)], ROOMY)
    gain = scores(pk, directive(SCHEDULE))["cycles_improvement"]
    honest = scores(pk, directive(SCHEDULE, effect=-round(gain)))
    boast = scores(pk, directive(SCHEDULE, effect=-5000))
    assert honest["effect_calibration"] > 0.9
    assert boast["effect_calibration"] == 0.0 and boast["effect_abs_error"] > 4000
    assert honest["objective"] > boast["objective"]


def test_without_profile_or_best_compliance_alone_is_not_passed_off_as_the_objective():
    pk = AdvisorPacket()
    outcome = mp.outcome_of(record(pk), dspy.Prediction(directive=directive(SCHEDULE), directive_errors=[],
                                                        parse_errors=[]))
    s = mp.score_outcome(outcome)
    assert math.isnan(s["cycles_improvement"]) and s["pivot_compliance"] == 1.0
    assert math.isnan(s["objective"])  # no estimate: no objective (it was 1.0, compliance alone)
    assert mp.left_out_reason(outcome, s) == "model_does_not_apply"
    # a rejected directive on such a packet has none either: every program is judged on the same records
    bad = mp.outcome_of(record(pk), dspy.Prediction(directive={"strategy_family": "family:magic"}, parse_errors=[]))
    assert math.isnan(mp.score_outcome(bad)["objective"])
    # the DSPy metric alone steers an optimizer with compliance there; no reported number uses it
    assert mp.training_signal(s) == 1.0


def test_a_family_the_model_never_saw_is_left_out_and_counted():
    pk = packet([entry(1, SCHEDULE, 50_000)])
    learned = _learned()
    rows = []
    for index, family in enumerate((SCHEDULE, BREAK, BREAK, REDUCE)):
        outcome = mp.outcome_of(record(pk, f"r{index}"), dspy.Prediction(directive=directive(family),
                                                                         directive_errors=[], parse_errors=[]),
                                cycles=learned)
        s = mp.score_outcome(outcome)
        rows.append({"scores": s, "left_out": mp.left_out_reason(outcome, s), "strategy_family": family})
    assert [math.isnan(row["scores"]["objective"]) for row in rows] == [False, True, True, False]
    assert [row["left_out"] for row in rows] == [None, "no_estimate_for_family", "no_estimate_for_family", None]
    notes = mp.left_out_notes(rows, "learned")
    assert len(notes) == 1 and notes[0].startswith("2 of 4 records left out of objective") and BREAK in notes[0]
    assert mp.aggregate(rows)["objective"].n == 2


def test_feedback_explains_the_block_and_the_better_family():
    pk = packet([entry(1, SCHEDULE, 1700), entry(2, SCHEDULE, 1695)], ROOMY)
    outcome = mp.outcome_of(record(pk), dspy.Prediction(directive=directive(SCHEDULE), parse_errors=[]))
    text = mp.feedback(outcome)
    assert "family:schedule is blocked" in text and "rejects this directive" in text
    free = packet([entry(1, SCHEDULE, 1700)], ROOMY)
    gains = {f: scores(free, directive(f))["cycles_improvement"] for f in (SCHEDULE, REDUCE, BREAK)}
    worst = min(gains, key=gains.get)
    text = mp.feedback(mp.outcome_of(record(free), dspy.Prediction(directive=directive(worst), parse_errors=[])))
    assert f"{worst} is expected to cut the best by {gains[worst]:.1f} cycles, while {max(gains, key=gains.get)}" in text
    bad = mp.outcome_of(record(pk), dspy.Prediction(directive={"strategy_family": "family:magic"}, parse_errors=[]))
    assert "breaks the schema" in mp.feedback(bad)


def test_dspy_metrics_on_planner_examples_match_replay_scores():
    record_ = episode_records(3, 0)[5]
    example = programs.planner_example(record_)
    pred = dspy.Prediction(directive=directive(REDUCE), directive_errors=[], parse_errors=[])
    expected = mp.score_outcome(mp.outcome_of(record_, pred))["objective"]
    assert mp.metric(example, pred) == pytest.approx(expected)
    result = mp.gepa_metric(example, pred, None, "plan", None)
    assert result.score == pytest.approx(expected) and isinstance(result.feedback, str) and result.feedback


def stubborn(record: PlannerRecord) -> dict:
    """Always reschedule, whatever the protocol says."""
    return directive(SCHEDULE)


def compliant(record: PlannerRecord) -> dict:
    """Reschedule too, but leave the family when it is blocked or a pivot is due (the protocol)."""
    need = mp.pivot_requirement(record.packet)
    if SCHEDULE in need.allowed and not (need.required and (need.current_family == SCHEDULE or need.near_bound)):
        return directive(SCHEDULE)
    return next(directive(f) for f in (REDUCE, BREAK) if f in need.allowed and f != need.current_family)


def test_following_the_pivot_protocol_raises_the_objective():
    records = [r for index in range(6) for r in episode_records(11, index)]
    score = lambda policy: [mp.score_outcome(mp.outcome_of(r, dspy.Prediction(directive=policy(r), parse_errors=[])))
                            for r in records]  # noqa: E731
    mean = lambda rows, name: sum(s[name] for s in rows) / len(rows)  # noqa: E731
    never, always = score(stubborn), score(compliant)
    assert mean(always, "pivot_compliance") == 1.0 > mean(never, "pivot_compliance")
    assert any(s["objective"] == 0.0 and s["pivot_compliance"] == 0.0 for s in never)  # blocked: rejected
    assert mean(always, "objective") > mean(never, "objective")
    paired = paired_mean_difference([s["objective"] for s in always], [s["objective"] for s in never])
    assert paired.ci_low > 0


def test_rules_planner_always_complies_and_aggregates_with_intervals():
    records = [r for index in range(3) for r in episode_records(11, index)]
    rules = programs.get("planner.rules")
    rows = [mp.score_outcome(mp.outcome_of(r, rules(**programs.planner_inputs(r.packet)))) for r in records]
    assert all(s["schema_validity"] == 1.0 and s["pivot_compliance"] == 1.0 for s in rows)
    aggregate = mp.aggregate([{"scores": s} for s in rows])
    assert set(aggregate) == set(mp.METRIC_NAMES)
    assert all(v.ci_low is not None and v.ci_low <= v.value <= v.ci_high for v in aggregate.values())


# ----- where the improvement estimate comes from (evals.cycles) ---------------------------------------------

def _learned():
    from evals.cycles import LearnedCycles
    from runtime.outcome import MODEL_KIND, OutcomeModel
    from runtime.outcome_features import FEATURES_VERSION, ROW_NAMES

    is_loads = ROW_NAMES.index(f"is:{REDUCE}")
    tree = {"feature": [is_loads, 0, 0], "threshold": [0.5, 0, 0], "left": [1, -1, -1], "right": [2, -1, -1],
            "value": [0.0, 0.004, 0.01]}  # loads takes 1% of the best, the others 0.4%
    return LearnedCycles(OutcomeModel({
        "kind": MODEL_KIND, "features_version": FEATURES_VERSION, "row_names": list(ROW_NAMES),
        "families": [SCHEDULE, REDUCE], "valid": {"type": "trees", "link": "logistic", "bias": 2.0, "trees": [
            {"feature": [0], "threshold": [0.0], "left": [-1], "right": [-1], "value": [0.0]}]},
        "gain": {"type": "trees", "link": "identity", "bias": 0.0, "trees": [tree]},
        "family_scale": {SCHEDULE: 1.0, REDUCE: 1.0}, "fit": {}}))


def test_without_a_profile_the_simulator_makes_up_no_state():
    pk = packet([entry(1, SCHEDULE, 50_000)])  # a kernel the simulator's constants were never fitted on
    s = scores(pk, directive(REDUCE))
    assert math.isnan(s["cycles_improvement"]) and math.isnan(s["improvement_ratio"])
    assert math.isnan(s["objective"]) and s["pivot_compliance"] == 1.0  # compliance alone is not the objective
    note = mp.feedback_by_metric(mp.outcome_of(record(pk), dspy.Prediction(directive=directive(REDUCE))))
    assert "does not apply" in note["cycles_improvement"]


def test_the_learned_model_estimates_in_cycles_and_rates_against_the_best_allowed_family():
    pk = packet([entry(1, SCHEDULE, 50_000)])
    learned = _learned()
    pred = dspy.Prediction(directive=directive(SCHEDULE, effect=-200), directive_errors=[], parse_errors=[])
    s = mp.score_outcome(mp.outcome_of(record(pk), pred, cycles=learned))
    assert s["cycles_improvement"] == pytest.approx(200.0)  # 0.4% of 50,000
    assert s["improvement_ratio"] == pytest.approx(0.4)  # against reduce_loads' 500
    assert s["effect_calibration"] == pytest.approx(1.0)
    never = dspy.Prediction(directive=directive(BREAK), directive_errors=[], parse_errors=[])
    unseen = mp.score_outcome(mp.outcome_of(record(pk), never, cycles=learned))
    assert math.isnan(unseen["cycles_improvement"])  # a family never seen in train: no number


def test_a_replayed_log_line_is_estimated_as_carried_out_and_an_unscored_one_not_at_all():
    tail = [entry(1, REDUCE, 50_000), entry(2, REDUCE, 50_100)]
    pk = packet(tail)
    assert REDUCE in pk.strategy_family_constraints.blocked_families
    pred = dspy.Prediction(directive=directive(REDUCE), directive_errors=[], parse_errors=[])
    replayed = mp.score_outcome(mp.outcome_of(record(pk), pred, cycles=_learned(), replays_log=True))
    assert replayed["objective"] == 0.0 and replayed["pivot_compliance"] == 0.0
    assert replayed["cycles_improvement"] == pytest.approx(500.0) and math.isnan(replayed["effect_calibration"])
    unscored = dspy.Prediction(directive=directive(), directive_errors=[], parse_errors=[], unscored="no family")
    assert all(math.isnan(v) for v in mp.score_outcome(mp.outcome_of(record(pk), unscored)).values())


def test_choosing_the_cycles_model():
    from evals.cycles import SimulatorCycles, choose_cycles_model

    profiled, bare = packet([entry(1, SCHEDULE, 1700)], ROOMY), packet([entry(1, SCHEDULE, 1700)])
    learned = _learned()
    model, notes = choose_cycles_model([profiled, profiled], "auto", learned)
    assert isinstance(model, SimulatorCycles) and "2 of 2" in notes[0]
    model, notes = choose_cycles_model([profiled, bare], "auto", learned)
    assert model is learned and "1 of 2" in notes[0]
    model, notes = choose_cycles_model([profiled, bare], "sim", learned)
    assert isinstance(model, SimulatorCycles) and "1 of 2 records carry no performance profile" in notes[0]
    model, notes = choose_cycles_model([profiled, bare], "auto", None)
    assert model.name == "none" and "left out" in notes[-1]
    # one story: the auto note names the model used (none), never the learned one that could not be fit
    assert "no model estimates the improvement" in notes[0] and "learned" not in notes[0]
    # "none" is not the simulator in disguise: even a profiled record gets no estimate
    pred = dspy.Prediction(directive=directive(REDUCE), directive_errors=[], parse_errors=[])
    scores = mp.score_outcome(mp.outcome_of(record(profiled), pred, cycles=model))
    assert math.isnan(scores["cycles_improvement"]) and math.isnan(scores["improvement_ratio"])


def test_auto_leaves_the_simulator_for_archived_profiles_and_every_choice_says_its_context():
    from evals.cycles import SimulatorCycles, choose_cycles_model

    profiled, bare = packet([entry(1, SCHEDULE, 1700)], ROOMY), packet([entry(1, SCHEDULE, 1700)])
    learned = _learned()
    model, notes = choose_cycles_model([profiled, profiled], "auto", learned, archived=2)
    assert model is learned and "2 of them archived by the loop runner" in notes[0]
    assert notes[-1] == ("context: the packet's log summary for all 2 records, its performance profile for 2, "
                         "2 from the loop runner's archive")
    model, notes = choose_cycles_model([profiled, profiled], "auto", learned)
    assert isinstance(model, SimulatorCycles) and notes[-1].startswith("context: the performance profile")
    model, notes = choose_cycles_model([profiled, bare], "learned", learned)
    assert notes[-1].endswith("its performance profile for 1")
    # the estimator's name, which summary.json, metrics.json, MLflow and the board carry, ends with the context once
    assert model.estimator.endswith("; " + notes[-1]) and model.estimator.count("context:") == 1
