"""The fit recipe: a linear decision model fit on train, its settings chosen on dev, deterministic, no LM call;
data it cannot learn from is a one-line error; a cascade compiled by an LM recipe is fitted first."""

from __future__ import annotations

import json

import dspy
import pytest

import optimizers
import programs
from evals import metrics_fullauto
from optimizer_support import decision_examples
from optimizers.base import RecipeError
from programs.learned import FullAutoCascade

TRAIN = decision_examples(16)
DEV = decision_examples(8, offset=100)


def _fit(program: str = "full_auto.learned", train=TRAIN, dev=DEV, **settings):
    recipe = optimizers.get("fit")().with_overrides(**settings) if settings else optimizers.get("fit")()
    return recipe.compile(programs.get(program), train, dev, metrics_fullauto.metric, seed=1)


def test_the_fit_learns_the_situations_and_selects_on_dev_without_an_lm():
    assert dspy.settings.lm is None  # nothing to call: a call would raise
    result = _fit()
    program = result.program
    assert result.usage["lm_calls"] == 0 and result.kept == "optimizer"
    assert [program(**ex.inputs()).action for ex in DEV] == [ex.action for ex in DEV]
    details = result.summary()["details"]
    assert len(details["fit_grid"]) == 8 and len(result.candidates) == 8  # 4 strengths x 2 weightings, all on dev
    chosen = details["fit"]
    assert chosen["dev_objective"] == max(point["dev_objective"] for point in details["fit_grid"])
    assert chosen["refit"] == "train+dev" and chosen["n_train"] == len(TRAIN) and chosen["n_dev"] == len(DEV)
    prediction = program(**DEV[0].inputs())
    assert prediction.decided_by == "model" and set(prediction.probabilities) == {"continue", "pause", "stop"}


def test_the_fit_is_deterministic():
    one, two = (json.dumps(_fit().program.dump_state(), sort_keys=True) for _ in range(2))
    assert one == two


def test_the_recipe_settings_reach_the_fit():
    result = _fit(C=[1.0], class_weight=["balanced"], ngram_max=1, refit_on_dev=False)
    chosen = result.summary()["details"]["fit"]
    assert (chosen["C"], chosen["class_weight"], chosen["ngram_max"], chosen["refit"]) == (1.0, "balanced", 1, "train")
    assert all(" " not in term for term in result.program.trained_model.model.vectorizer.vocabulary)


@pytest.mark.parametrize("train, dev, message", [
    ([ex for ex in TRAIN if ex.action == "stop"], DEV, "every labeled train example is 'stop'"),
    (TRAIN[:1], [], "too few to fit a model and choose its settings"),
    ([], DEV, "the training set is empty"),
])
def test_data_the_model_cannot_learn_from_is_one_line(train, dev, message):
    with pytest.raises(RecipeError) as caught:
        _fit(train=train, dev=dev)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_label_the_model_never_saw_is_scored_as_a_miss_not_a_crash():
    dev = [ex.copy(action="review") if i == 0 else ex for i, ex in enumerate(DEV)]
    result = _fit(dev=dev, refit_on_dev=False)
    assert "review" not in result.program.trained_model.model.classes
    assert result.program(**dev[0].inputs()).action in {"continue", "pause", "stop"}


def test_a_program_without_a_trained_model_is_refused():
    with pytest.raises(RecipeError, match="has no trained model to fit"):
        _fit("full_auto.rules")


def test_an_lm_recipe_fits_a_cascade_first_and_trains_its_lm_on_the_turns_it_hands_over(fake):
    student = FullAutoCascade(threshold=1.0)  # the model is never sure enough: every turn is the LM's
    result = optimizers.get("labeled_fewshot")().compile(student, TRAIN, DEV, metrics_fullauto.metric, seed=1)
    compiled = result.program
    assert compiled.trained_model.fitted and not student.trained_model.fitted  # fitted on a copy
    assert len(compiled.lm_program.decide.demos) == 3
    compiled.configure(threshold=0.5)
    sure = [ex for ex in DEV if compiled.model_decision(ex.inputs().toDict()) is not None]
    assert sure and compiled.lm_examples(DEV) == [ex for ex in DEV if ex not in sure] or len(sure) == len(DEV)


def test_without_a_dev_split_the_fit_selects_on_held_out_train_threads():
    result = _fit(dev=[])
    chosen = result.summary()["details"]["fit"]
    assert chosen["selected_on"] == "train threads held out" and chosen["refit"] == "train"
    assert chosen["n_train"] + chosen["n_dev"] == len(TRAIN) and chosen["n_dev"] >= 0.2 * len(TRAIN)
    assert [result.program(**ex.inputs()).action for ex in DEV] == [ex.action for ex in DEV]
