"""`planner.learned`: the family of highest estimated improvement among its choice set (the runner's allowed
families by default, the pivot protocol's compliant ones when set), the rest as planner.rules."""

from __future__ import annotations

import pytest

import programs
from evals import metrics_planner as mp
from evals.cycles import LearnedCycles
from planner_logs_support import records_of
from programs.learned import NotFittedError
from program_support import entry
from programs.planner_learned import PlannerLearned
from programs.rules_planner import protocol_view
from runtime import AdvisorPacket, PlannerRecord
from runtime.advisor import FAMILIES, PerformanceProfile
from runtime.outcome import OUTCOME_MODEL_KEY, OutcomeModel
from runtime.outcome_features import FEATURES_VERSION, ROW_NAMES
from runtime.pivot import family_constraints


@pytest.fixture(scope="module")
def learned(outcome_fit):
    program = PlannerLearned()
    getattr(program, OUTCOME_MODEL_KEY).set_model(outcome_fit.outcome)
    return program


def test_it_picks_the_allowed_family_the_model_expects_most_of(learned, outcome_fit, profile_free_dataset):
    assert learned.choose_among == "allowed"  # the default: the families the loop runner allows
    for record in records_of(profile_free_dataset, "test")[:40]:
        prediction = learned(**programs.planner_inputs(record.packet))
        allowed = protocol_view(record.packet).allowed
        estimates = outcome_fit.outcome.estimates(record.packet, allowed)
        best = max(allowed, key=lambda f: estimates[f].cycles)
        assert prediction.directive.strategy_family == best and prediction.decided_by == "model"
        assert prediction.directive.expected_effect_cycles == -round(estimates[best].cycles)
        outcome = mp.outcome_of(record, prediction, cycles=LearnedCycles(outcome_fit.outcome))
        scores = mp.score_outcome(outcome)
        assert scores["improvement_ratio"] == pytest.approx(1.0)  # the best allowed family by the same model
        assert scores["pivot_compliance"] == float(best in protocol_view(record.packet).compliant)


def _schedule_model() -> OutcomeModel:
    """An outcome model that expects rescheduling to take 5% of the best off and every other family 0.1%."""
    where = ROW_NAMES.index("is:family:schedule")
    tree = {"feature": [where, 0, 0], "threshold": [0.5, 0.0, 0.0], "left": [1, -1, -1], "right": [2, -1, -1],
            "value": [0.0, 0.001, 0.05]}
    valid = {"feature": [0], "threshold": [0.0], "left": [-1], "right": [-1], "value": [0.0]}
    return OutcomeModel({"kind": "planner_outcome", "features_version": FEATURES_VERSION, "row_names": list(ROW_NAMES),
                         "families": list(FAMILIES), "family_scale": {f: 1.0 for f in FAMILIES},
                         "valid": {"type": "trees", "link": "logistic", "bias": 2.0, "trees": [valid]},
                         "gain": {"type": "trees", "link": "identity", "bias": 0.0, "trees": [tree]}})


def _near_bound_packet() -> AdvisorPacket:
    """Near the bound (slack 1.4% of the tight bound, 3 valid attempts without a new best), nothing blocked: the
    runner allows every family, the pivot protocol only the bound-lowering ones."""
    log = [entry(1, "family:schedule", True, 1500, 1600), entry(2, "family:reduce_loads", True, 1502, 1500),
           entry(3, "family:break_deps", True, 1501, 1500), entry(4, "family:schedule", True, 1503, 1500)]
    return AdvisorPacket(goal="best", best_cycles=1500, plateau_valid_iters_since_best=3,
                         strategy_family_constraints=family_constraints(log), experiment_log_tail=log,
                         performance_profile=PerformanceProfile(tight_lb_cycles=1420, schedule_cycles_estimate=1440))


@pytest.mark.parametrize("choose_among, family, compliance", [
    ("allowed", "family:schedule", 0.0), ("compliant", "family:reduce_loads", 1.0)])
def test_near_the_bound_the_choice_set_decides_between_cycles_and_the_protocols_advice(choose_among, family,
                                                                                    compliance):
    packet = _near_bound_packet()
    view = protocol_view(packet)
    assert view.allowed == list(FAMILIES) and "family:schedule" not in view.compliant
    program = PlannerLearned()
    getattr(program, OUTCOME_MODEL_KEY).set_model(_schedule_model())
    getattr(program, OUTCOME_MODEL_KEY).set_choice(choose_among)
    prediction = program(**programs.planner_inputs(packet))
    assert prediction.directive.strategy_family == family and prediction.decided_by == "model"
    assert prediction.compliant == (list(FAMILIES) if choose_among == "allowed" else view.compliant)
    assert prediction.protocol_compliant == view.compliant
    outside = [r for r in prediction.rule_reasons if r.startswith("outside the pivot protocol's advice")]
    assert bool(outside) == (compliance == 0.0)
    record = PlannerRecord(record_id="r", episode_id="e", iteration_id=5, packet=packet)
    scores = mp.score_outcome(mp.outcome_of(record, prediction, cycles=LearnedCycles(_schedule_model())))
    assert scores["pivot_compliance"] == compliance and scores["schema_validity"] == 1.0
    assert scores["cycles_improvement"] == pytest.approx(0.05 * 1500 if compliance == 0.0 else 0.001 * 1500)


def test_a_blocked_family_is_never_chosen_whatever_the_model_expects():
    log = [entry(1, "family:schedule", True, 1600, 1700), entry(2, "family:schedule", True, 1601, 1600)]
    packet = AdvisorPacket(goal="best", best_cycles=1600, strategy_family_constraints=family_constraints(log),
                           experiment_log_tail=log)
    program = PlannerLearned()
    getattr(program, OUTCOME_MODEL_KEY).set_model(_schedule_model())
    prediction = program(**programs.planner_inputs(packet))
    assert packet.strategy_family_constraints.blocked_families == ["family:schedule"]
    assert prediction.directive.strategy_family != "family:schedule"


def test_the_choice_set_round_trips_and_an_unknown_one_is_refused(learned, tmp_path):
    import json

    from runtime.outcome import OutcomeModelError

    program = PlannerLearned()
    getattr(program, OUTCOME_MODEL_KEY).set_model(_schedule_model())
    getattr(program, OUTCOME_MODEL_KEY).set_choice("compliant")
    program.save(str(tmp_path / "program.json"))
    again = PlannerLearned()
    again.load(str(tmp_path / "program.json"))
    assert again.choose_among == "compliant"
    state = json.loads((tmp_path / "program.json").read_text())
    del state[OUTCOME_MODEL_KEY]["choose_among"]  # a state saved before the setting existed: the default
    (tmp_path / "old.json").write_text(json.dumps(state))
    old = PlannerLearned()
    old.load(str(tmp_path / "old.json"))
    assert old.choose_among == "allowed"
    state[OUTCOME_MODEL_KEY]["choose_among"] = "anything"
    (tmp_path / "bad.json").write_text(json.dumps(state))
    with pytest.raises(OutcomeModelError, match="choose_among is 'anything'"):
        PlannerLearned().load(str(tmp_path / "bad.json"))


def test_its_state_round_trips_as_json(learned, tmp_path):
    learned.save(str(tmp_path / "program.json"))
    again = PlannerLearned()
    again.load(str(tmp_path / "program.json"))
    assert getattr(again, OUTCOME_MODEL_KEY).model.to_state() == getattr(learned, OUTCOME_MODEL_KEY).model.to_state()


def test_unfitted_it_refuses_with_the_line_to_run(profile_free_dataset):
    record = records_of(profile_free_dataset, "test")[0]
    with pytest.raises(NotFittedError, match="--optimizer fit"):
        PlannerLearned()(**programs.planner_inputs(record.packet))
    assert programs.spec("planner.learned").trained and not programs.spec("planner.learned").uses_lm


def test_a_saved_state_whose_model_could_hang_or_lie_does_not_load(learned, tmp_path):
    import json

    from runtime.outcome import OutcomeModelError

    learned.save(str(tmp_path / "program.json"))
    state = json.loads((tmp_path / "program.json").read_text())
    model = state[OUTCOME_MODEL_KEY]["model"]
    model["gain"]["trees"][0] = {"feature": [0] * 99, "threshold": [0.5] * 99, "value": [0.0] * 99,
                                 "left": [i + 1 if i % 2 == 0 and i < 96 else -1 for i in range(99)],
                                 "right": [i + 2 if i % 2 == 0 and i < 96 else -1 for i in range(99)]}  # 49 levels
    (tmp_path / "chain.json").write_text(json.dumps(state))
    with pytest.raises(OutcomeModelError, match="gain: a tree is deeper than 32 levels"):
        PlannerLearned().load(str(tmp_path / "chain.json"))
