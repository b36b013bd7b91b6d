"""`planner.learned`: the allowed family of highest estimated improvement, the rest as planner.rules."""

from __future__ import annotations

import pytest

import programs
from evals import metrics_planner as mp
from evals.cycles import LearnedCycles
from planner_logs_support import records_of
from programs.learned import NotFittedError
from programs.planner_learned import PlannerLearned
from programs.rules_planner import protocol_view
from runtime.outcome import OUTCOME_MODEL_KEY


@pytest.fixture(scope="module")
def learned(outcome_fit):
    program = PlannerLearned()
    getattr(program, OUTCOME_MODEL_KEY).set_model(outcome_fit.outcome)
    return program


def test_it_picks_the_allowed_family_the_model_expects_most_of(learned, outcome_fit, profile_free_dataset):
    for record in records_of(profile_free_dataset, "test")[:40]:
        prediction = learned(**programs.planner_inputs(record.packet))
        allowed = protocol_view(record.packet).compliant
        estimates = outcome_fit.outcome.estimates(record.packet, allowed)
        best = max(allowed, key=lambda f: estimates[f].cycles)
        assert prediction.directive.strategy_family == best and prediction.decided_by == "model"
        assert prediction.directive.expected_effect_cycles == -round(estimates[best].cycles)
        outcome = mp.outcome_of(record, prediction, cycles=LearnedCycles(outcome_fit.outcome))
        scores = mp.score_outcome(outcome)
        assert scores["pivot_compliance"] == 1.0 and scores["improvement_ratio"] == pytest.approx(1.0)


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
