"""The fit recipe: a linear decision model, its settings chosen by cross-validation over train + dev threads
(or on dev), deterministic, no LM call; data it cannot learn from is a one-line error; a cascade compiled by
an LM recipe is fitted first."""

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


def test_the_fit_learns_the_situations_and_selects_by_cross_validation_without_an_lm():
    assert dspy.settings.lm is None  # nothing to call: a call would raise
    result = _fit()
    program = result.program
    assert result.usage["lm_calls"] == 0 and result.kept == "optimizer"
    assert result.learned_from == sorted(ex.record_id for ex in TRAIN + DEV)  # fit and selected on both
    assert [program(**ex.inputs()).action for ex in DEV] == [ex.action for ex in DEV]
    details = result.summary()["details"]
    assert len(details["fit_grid"]) == 8 and len(result.candidates) == 8  # 4 strengths x 2 weightings
    chosen = details["fit"]
    assert chosen["selection_objective"] == max(point["selection_objective"] for point in details["fit_grid"])
    threads = len({ex.thread_id for ex in TRAIN + DEV})
    assert chosen["selected_on"] == f"{min(5, threads)}-fold cross-validation over train+dev threads"
    assert chosen["n_scored"] == len(TRAIN) + len(DEV)  # every labeled turn held out once
    assert chosen["refit"] == "train+dev" and chosen["n_train"] == len(TRAIN) and chosen["n_dev"] == len(DEV)
    prediction = program(**DEV[0].inputs())
    assert prediction.decided_by == "model" and set(prediction.probabilities) == {"continue", "pause", "stop"}


def test_no_fold_holds_a_thread_that_another_part_fits_on():
    from optimizers.fitting import _thread_folds

    pool = TRAIN + DEV
    folds = _thread_folds(pool, 5)
    assert folds is not None and sorted(i for _, held in folds for i in held) == list(range(len(pool)))
    for fit, held in folds:
        assert not {pool[i].thread_id for i in fit} & {pool[i].thread_id for i in held}


def test_with_no_folds_the_fit_selects_on_dev():
    chosen = _fit(folds=0).summary()["details"]["fit"]
    assert chosen["selected_on"] == "dev" and chosen["n_scored"] == len(DEV) and chosen["refit"] == "train+dev"


def test_the_fit_is_deterministic():
    one, two = (json.dumps(_fit().program.dump_state(), sort_keys=True) for _ in range(2))
    assert one == two


def test_the_grid_fit_on_worker_threads_is_the_grid_fit_here(monkeypatch):
    import threading

    import optimizers.fitting as fitting

    threads: list[str] = []
    real = fitting._classifier
    monkeypatch.setattr(fitting, "_classifier",
                        lambda *args: threads.append(threading.current_thread().name) or real(*args))
    monkeypatch.setattr(fitting, "FIT_WORKERS", 1)
    here = _fit()
    grid = 8 * 5  # every grid point on every fold
    assert threads[:grid] == ["MainThread"] * grid
    threads.clear()
    monkeypatch.setattr(fitting, "FIT_WORKERS", 2)
    monkeypatch.setattr(fitting.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    workers = _fit()
    assert "MainThread" not in threads[:grid]  # the grid ran on the pool's threads
    assert json.dumps(workers.program.dump_state(), sort_keys=True) == json.dumps(here.program.dump_state(),
                                                                                  sort_keys=True)
    assert workers.details["fit_grid"] == here.details["fit_grid"]


def test_the_recipe_settings_reach_the_fit():
    result = _fit(C=[1.0], class_weight=["balanced"], ngram_max=1, refit_on_dev=False)
    chosen = result.summary()["details"]["fit"]
    assert (chosen["C"], chosen["class_weight"], chosen["ngram_max"], chosen["refit"]) == (1.0, "balanced", 1, "train")
    assert all(" " not in term for term in result.program.trained_model.model.vectorizer.vocabulary)


@pytest.mark.parametrize("train, dev, message", [
    ([ex for ex in TRAIN if ex.action == "stop"], DEV, "every labeled train example is 'stop'"),
    (TRAIN[:1], [], "too few to fit a model and choose its settings"),
    # docs/trained.md: with fewer than three labeled train examples and no dev, the fit stops and says so
    (TRAIN[:2], [], "2 labeled train example(s) and no dev split: too few to fit a model and choose its settings (it "
                    "takes three or more: two to fit on, one to choose with)"),
    # three, but the two left to fit on share one action: one line, not scikit-learn's error
    (TRAIN[:3], [], "the 2 left to fit the model on are all 'stop'; a decision model needs two or more label classes"),
    ([], DEV, "the training set is empty"),
])
def test_data_the_model_cannot_learn_from_is_one_line(train, dev, message):
    with pytest.raises(RecipeError) as caught:
        _fit(train=train, dev=dev)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_three_labeled_train_examples_without_dev_are_enough():
    three = TRAIN[1:4]  # three actions: whichever is held out, two remain to fit on
    assert len({ex.action for ex in three}) == 3
    assert _fit(train=three, dev=[]).summary()["details"]["fit"]["selected_on"] == "train threads held out"


@pytest.mark.parametrize("settings, message", [
    ({"C": [0.5, -1.0]}, "field 'C' = [0.5, -1.0]: -1.0 is out of range: each strength is a finite number above 0"),
    ({"C": [0.0]}, "field 'C' = [0.0]: 0.0 is out of range"),
    ({"C": [float("nan")]}, "field 'C' = [nan]: nan is out of range"),
    ({"C": [float("inf")]}, "field 'C' = [inf]: inf is out of range"),  # would write Infinity into compile.json
    ({"folds": 1}, "field 'folds' = 1: 1 is no cross-validation (one fold holds out every thread); use 2 to 20 folds, "
                   "or 0 to select on dev alone"),
])
def test_settings_out_of_range_are_refused_in_one_line_naming_setting_and_value(settings, message):
    with pytest.raises(RecipeError) as caught:
        optimizers.get("fit")(settings)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_label_the_model_never_saw_is_scored_as_a_miss_not_a_crash():
    dev = [ex.copy(action="review") if i == 0 else ex for i, ex in enumerate(DEV)]
    result = _fit(dev=dev, refit_on_dev=False)
    assert "review" not in result.program.trained_model.model.classes
    assert result.program(**dev[0].inputs()).action in {"continue", "pause", "stop"}


def test_a_program_without_a_trained_model_is_refused():
    with pytest.raises(RecipeError, match="has no trained model to fit"):
        _fit("full_auto.rules")


def test_an_lm_recipe_fits_a_cascade_first_and_trains_its_lm_on_the_turns_it_hands_over(fake_lm):
    student = FullAutoCascade(threshold=1.0)  # the model is never sure enough: every turn is the LM's
    result = optimizers.get("labeled_fewshot")().compile(student, TRAIN, DEV, metrics_fullauto.metric, seed=1)
    compiled = result.program
    assert compiled.trained_model.fitted and not student.trained_model.fitted  # fitted on a copy
    assert compiled.trained_model.model.fit_info["refit"] == "train"  # dev judges the cascade: not fit on it
    # ... but its settings were chosen on dev: the labeled few-shot recipe alone would have learned from train only
    assert result.learned_from == sorted(ex.record_id for ex in TRAIN + DEV)
    assert len(compiled.lm_program.decide.demos) == 3
    compiled.configure(threshold=0.5)
    sure = [ex for ex in DEV if compiled.model_decision(ex.inputs().toDict()) is not None]
    assert sure and compiled.lm_examples(DEV) == [ex for ex in DEV if ex not in sure] or len(sure) == len(DEV)


def test_without_a_dev_split_the_fit_selects_on_held_out_train_threads():
    result = _fit(dev=[], folds=0)
    chosen = result.summary()["details"]["fit"]
    assert chosen["selected_on"] == "train threads held out" and chosen["refit"] == "train"
    assert chosen["n_train"] == len(TRAIN) and chosen["n_dev"] == 0 and chosen["n_scored"] >= 0.2 * len(TRAIN)
    assert [result.program(**ex.inputs()).action for ex in DEV] == [ex.action for ex in DEV]
    assert _fit(dev=[]).summary()["details"]["fit"]["selected_on"].endswith("cross-validation over train threads")


# ----- planner.learned: the outcome model ----------------------------------------------------------------------

def test_the_fit_of_planner_learned_is_its_outcome_model_on_train_and_dev(profile_free_dataset, outcome_fit):
    from evals import metrics_planner
    from planner_logs_support import records_of
    from runtime.outcome import OUTCOME_MODEL_KEY

    train = [programs.planner_example(r) for r in records_of(profile_free_dataset, "train")]
    dev = [programs.planner_example(r) for r in records_of(profile_free_dataset, "dev")]
    result = optimizers.get("fit")().compile(programs.get("planner.learned"), train, dev, metrics_planner.metric)
    model = getattr(result.program, OUTCOME_MODEL_KEY).model
    assert model.to_state() == outcome_fit.outcome.to_state()  # examples and records: the same attempts, one fit
    details = result.summary()["details"]
    assert details["fit"]["n_train"] == len(train) and details["fit"]["n_dev"] == len(dev)
    assert {row["target"] for row in details["fit_grid"]} >= {"gain", "valid"}
    assert result.usage["lm_calls"] == 0 and len(result.candidates) == 1


def test_planner_learned_on_too_few_attempts_is_a_recipe_error():
    from planner_logs_support import entry, record

    examples = [programs.planner_example(record("e", i, [], entry(i, "family:schedule", cycles=990)))
                for i in range(1, 6)]
    with pytest.raises(RecipeError, match="at least 30 attempts"):
        optimizers.get("fit")().compile(programs.get("planner.learned"), examples, [], lambda *a: 0.0)


def _planner_examples(profile_free_dataset, split: str) -> list[dspy.Example]:
    from planner_logs_support import records_of

    return [programs.planner_example(r) for r in records_of(profile_free_dataset, split)]


def test_planner_learned_uses_the_recipes_folds_and_refit_on_dev_and_records_only_those(profile_free_dataset):
    from evals import metrics_planner
    from runtime.outcome import OUTCOME_MODEL_KEY

    train, dev = _planner_examples(profile_free_dataset, "train"), _planner_examples(profile_free_dataset, "dev")
    recipe = optimizers.get("fit")({"folds": 2, "refit_on_dev": False})
    result = recipe.compile(programs.get("planner.learned"), train, dev, metrics_planner.metric)
    fit = getattr(result.program, OUTCOME_MODEL_KEY).model.fit_info
    assert fit["settings"]["folds"] == 2 and fit["folds"] == 2  # two folds of episodes, not the fit's own 3
    assert fit["n_train"] == len(train) and fit["n_dev"] == 0  # dev never reached the fit
    assert result.settings == {"max_train_examples": 0, "max_val_examples": 0, "folds": 2, "refit_on_dev": False,
                               "choose_among": "allowed"}
    assert set(result.learned_from) == {ex.record_id for ex in train}
    # a recipe that does not name folds: the outcome fit's own 3, and compile.json says 3
    default = optimizers.get("fit")().compile(programs.get("planner.learned"), train, dev, metrics_planner.metric)
    assert default.settings["folds"] == 3 and default.summary()["details"]["fit"]["settings"]["folds"] == 3
    assert default.summary()["details"]["fit"]["n_dev"] == len(dev)


@pytest.mark.parametrize("settings, named", [
    ({"C": [1.0]}, "C"), ({"class_weight": ["balanced"]}, "class_weight"), ({"ngram_max": 1}, "ngram_max"),
    ({"max_features": 500}, "max_features"), ({"max_iter": 200}, "max_iter"), ({"num_threads": 4}, "num_threads"),
    ({"folds": 0}, "folds"),
])
def test_a_setting_planner_learned_has_no_use_for_is_refused_in_one_line_naming_it(settings, named):
    from programs.planner_learned import PlannerLearned

    recipe = optimizers.get("fit")(settings)
    with pytest.raises(RecipeError, match=f"^fit: setting {named} = ") as caught:
        recipe.compile(PlannerLearned(), [dspy.Example(x=1).with_inputs("x")], [], lambda *a: 0.0)
    assert "planner.learned" in str(caught.value) and "\n" not in str(caught.value)
    assert recipe.used_settings(programs.get("full_auto.learned"))[named] == list(settings.values())[0] \
        or named == "folds", "the same settings are used for the decision model"


def test_the_default_recipe_file_works_for_planner_learned():
    recipe = optimizers.load(path=optimizers.recipe_file("fit"))  # every setting named, at its default
    assert recipe.used_settings(programs.get("planner.learned")) == {
        "max_train_examples": 0, "max_val_examples": 0, "folds": 5, "refit_on_dev": True, "choose_among": "allowed"}


def test_choose_among_reaches_planner_learned_and_a_decision_model_refuses_it(profile_free_dataset):
    from evals import metrics_planner
    from runtime.outcome import OUTCOME_MODEL_KEY

    train, dev = _planner_examples(profile_free_dataset, "train"), _planner_examples(profile_free_dataset, "dev")
    recipe = optimizers.get("fit")({"choose_among": "compliant"})
    result = recipe.compile(programs.get("planner.learned"), train, dev, metrics_planner.metric)
    assert getattr(result.program, OUTCOME_MODEL_KEY).choose_among == "compliant"
    assert result.settings["choose_among"] == "compliant"
    with pytest.raises(RecipeError, match="^fit: setting choose_among applies to planner.learned only"):
        recipe.used_settings(programs.get("full_auto.learned"))
    assert "choose_among" not in optimizers.get("fit")().used_settings(programs.get("full_auto.learned"))


def test_each_parts_vocabulary_and_rows_are_the_runtime_vectorizers_on_that_part():
    import numpy as np

    from optimizers.fitting import FitSettings, _Corpus, _Features, _features_of
    from runtime.frozen.knn import TfidfVectorizer

    features = _features_of(TRAIN + DEV)
    rows = list(range(0, len(features), 2))
    for max_features in (20_000, 40):  # all n-grams, and a cut with ties broken alphabetically
        settings = FitSettings(max_features=max_features)
        space = _Features(_Corpus(features, settings), rows, settings)
        reference = TfidfVectorizer(max_features=max_features, ngram_range=(1, 2)).fit([features[i][0] for i in rows])
        assert space.vectorizer.to_state() == reference.to_state()
        matrix = space.matrix(range(len(features))).toarray()[:, :len(reference.idf)]
        for i, (text, _) in enumerate(features):
            expected = np.zeros(len(reference.idf))
            for j, weight in reference.transform_one(text).items():
                expected[j] = weight
            assert np.allclose(matrix[i], expected, rtol=0, atol=1e-12)


def test_the_grid_objective_is_the_metric_of_each_decision_computed_once_per_answer():
    import numpy as np

    from optimizers.fitting import COST, _Objective, decision_of, decision_prediction

    classes = ["continue", "pause", "review", "stop"]
    rng = np.random.default_rng(0)
    from optimizer_support import decision_records

    # the compile's metric (the example's config), and the one that reads each record's own config
    for metric in (metrics_fullauto.metric, metrics_fullauto.metric_for(decision_records(16))):
        objective = _Objective(TRAIN, metric)
        for concentration in (0.3, 1.0, 3.0):
            probabilities = rng.dirichlet(np.full(4, concentration), size=len(TRAIN))
            one_by_one = sum(float(metric(ex, decision_prediction(decision_of(dict(zip(classes, row.tolist())),
                                                                              ex.inputs().toDict(), COST))))
                             for row, ex in zip(probabilities, TRAIN)) / len(TRAIN)
            assert objective.mean(probabilities, classes) == one_by_one


def test_above_selection_max_the_settings_are_chosen_on_whole_threads_and_fit_on_all():
    from optimizers.fitting import _thread_sample

    pool = TRAIN + DEV
    rows = _thread_sample(pool, 10)
    threads = {pool[i].thread_id for i in rows}
    assert len(rows) >= 10 and rows == sorted(i for i, ex in enumerate(pool) if ex.thread_id in threads)
    assert _thread_sample(pool, 0) == _thread_sample(pool, len(pool)) == list(range(len(pool)))
    chosen = _fit(selection_max=10).summary()["details"]["fit"]
    assert f"(a sample of {chosen['n_scored']} of {len(pool)} turns, whole threads)" in chosen["selected_on"]
    assert chosen["n_scored"] < len(pool) and chosen["refit"] == "train+dev"


def test_a_feature_matrix_made_in_row_blocks_is_the_matrix_stacked_at_once(monkeypatch):
    import numpy as np
    from scipy import sparse

    import optimizers.fitting as fitting

    features = fitting._features_of(TRAIN + DEV)
    settings = fitting.FitSettings()
    space = fitting._Features(fitting._Corpus(features, settings), range(len(features)), settings)
    for rows in (list(range(len(features))), list(range(1, len(features), 3)), []):
        whole = space.matrix(rows)
        monkeypatch.setattr(fitting, "BLOCK_ROWS", 4)
        blocks = space.matrix(rows)
        monkeypatch.undo()
        text = space._block(np.asarray(rows, dtype=np.int64))
        for made in (blocks, text):
            assert made.shape == whole.shape and made.dtype == whole.dtype
            for part in ("indptr", "indices", "data"):
                assert np.array_equal(getattr(made, part), getattr(whole, part))
    # `_beside` is scipy's horizontal stack of the text rows and the (partly zero) numbers, array for array
    rng = np.random.default_rng(0)
    text = sparse.random(7, 9, density=0.3, format="csr", random_state=1)
    numbers = rng.normal(size=(7, 3)) * (rng.random((7, 3)) < 0.5)
    stacked, made = sparse.hstack([text, sparse.csr_matrix(numbers)], format="csr"), fitting._beside(text, numbers)
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(made, part), getattr(stacked, part))
        assert getattr(made, part).dtype == getattr(stacked, part).dtype
