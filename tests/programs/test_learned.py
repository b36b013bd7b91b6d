"""full_auto.learned and full_auto.cascade: an unfitted program refuses to guess, the fitted model is state that
round-trips, the cascade answers with its model when sure and hands the rest to its LM program."""

from __future__ import annotations

import json

import pytest

import programs
from evals import metrics_fullauto
from optimizer_support import decision_examples
from optimizers.fitting import FitSettings, fit_model
from programs.learned import (FullAutoCascade, NotFittedError, TrainedModel, check_lm_program, check_threshold)

TRAIN = decision_examples(16)
DEV = decision_examples(8, offset=100)


@pytest.fixture(scope="module")
def model():
    """A strongly regularized fit: right, but never fully sure."""
    return fit_model(TRAIN, DEV, metrics_fullauto.metric, FitSettings(C=(0.05,), class_weight=("none",))).model


def test_an_unfitted_program_says_how_to_fit_it():
    for name in ("full_auto.learned", "full_auto.cascade"):
        with pytest.raises(NotFittedError, match=f"compile --program {name} --optimizer fit"):
            programs.get(name)(**DEV[0].inputs())


def test_the_model_is_program_state_that_round_trips(model):
    learned = programs.get("full_auto.learned")
    learned.trained_model.set_model(model)
    state = json.loads(json.dumps(learned.dump_state()))
    assert state["trained_model"]["model"]["kind"] == "linear"
    again = programs.get("full_auto.learned")
    again.load_state(state)
    assert [again(**ex.inputs()).action for ex in DEV] == [learned(**ex.inputs()).action for ex in DEV]
    learned.trained_model.reset()  # an optimizer's student keeps the model
    assert learned.trained_model.fitted
    with pytest.raises(ValueError, match="a fitted-model entry is"):
        TrainedModel().load_state({"weights": []})


def test_the_cascade_answers_with_its_model_when_sure_and_asks_the_lm_otherwise(model, fake_lm):
    cascade = FullAutoCascade(threshold=0.0)
    cascade.trained_model.set_model(model)
    sure = cascade(**DEV[0].inputs())
    assert sure.decided_by == "model" and len(fake_lm.history) == 0
    assert sure.confidence < 1.0
    cascade.configure(threshold=1.0)
    unsure = cascade(**DEV[0].inputs())
    assert unsure.decided_by == "lm" and len(fake_lm.history) == 1 and unsure.parse_errors == []
    assert cascade.lm_examples(DEV) == DEV  # every turn is the LM's at threshold 1


@pytest.mark.parametrize("name, threshold", [("full_auto.learned", None), ("full_auto.cascade", 0.0),
                                              ("full_auto.cascade", 1.0)])
def test_the_model_runs_once_per_turn(model, fake_lm, monkeypatch, name, threshold):
    # full_auto.learned read its decision and its probabilities in two runs of the model
    from runtime.trained import TrainedDecisionModel

    calls = []
    probabilities = TrainedDecisionModel.probabilities
    monkeypatch.setattr(TrainedDecisionModel, "probabilities",
                        lambda self, inputs: calls.append(1) or probabilities(self, inputs))
    program = programs.get(name)
    program.trained_model.set_model(model)
    if threshold is not None:
        program.configure(threshold=threshold)
    for example in DEV[:3]:
        calls.clear()
        prediction = program(**example.inputs())
        assert len(calls) == 1 and prediction.decided_by == ("lm" if threshold == 1.0 else "model")
    if name == "full_auto.learned":  # the probabilities it reports are those it decided from
        assert prediction.confidence == pytest.approx(prediction.probabilities[prediction.action], abs=1e-5)


def test_a_saved_cascade_rebuilds_its_lm_program(model):
    cascade = FullAutoCascade(threshold=0.7, lm_program="full_auto.compact")
    cascade.trained_model.set_model(model)
    state = json.loads(json.dumps(cascade.dump_state()))
    assert state["cascade"] == {"threshold": 0.7, "lm_program": "full_auto.compact"}
    loaded = programs.get("full_auto.cascade")  # built with the default LM program
    loaded.load_state(state)
    assert type(loaded.lm_program).__name__ == "FullAutoCompact" and loaded.threshold == 0.7
    assert loaded.trained_model.fitted


@pytest.mark.parametrize("name", ["full_auto.hybrid", "full_auto.cascade", "full_auto.rules", "nope"])
def test_a_cascade_hands_turns_only_to_a_single_predictor_lm_program(name):
    with pytest.raises(ValueError, match="a cascade's LM program is one of"):
        check_lm_program(name)


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.5", True])
def test_a_threshold_is_a_probability(value):
    with pytest.raises(ValueError, match="between 0 and 1"):
        check_threshold(value)


@pytest.mark.slow
def test_the_cascade_hands_an_unsure_turn_to_the_embedded_model(model, real_lm):
    import dspy

    cascade = FullAutoCascade(threshold=1.0, lm_program="full_auto.compact")
    cascade.trained_model.set_model(model)
    example = DEV[3]
    with dspy.context(lm=real_lm):
        prediction = cascade(**example.inputs())
    assert prediction.decided_by == "lm" and prediction.adapter_errors == []
    assert prediction.action in {"continue", "pause", "stop", "review"}
    sent = real_lm.history[-1]["messages"][-1]["content"]
    assert "[[ ## plan ## ]]" in sent and "[[ ## turn_plan ## ]]" not in sent  # the compact rendering, not the original
