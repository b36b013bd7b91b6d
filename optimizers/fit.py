"""Fit: a trained model, its settings chosen by cross-validation over train + dev (no LM call).

Full Auto (`full_auto.learned`, `full_auto.cascade`): a linear decision model (`optimizers.fitting`). Planner
(`planner.learned`): the outcome model of each family's attempt (`optimizers.outcome_fitting`). A recipe's
setting is used or refused, never recorded and ignored (`FitRecipe.used_settings`): for `planner.learned`, `folds`
(the episodes' cross-validation folds; the outcome fit's own 3 when the recipe does not set it, 0 refused: there is
no selection on dev alone), `refit_on_dev` (false: the models see train only, dev stays unseen) and the sample
caps are used, and `choose_among` (the families planner.learned chooses among: `allowed`, the runner's, by
default, or `compliant`, the pivot protocol's; `programs.planner_learned`); the decision model's settings (`C`,
`class_weight`, `ngram_max`, `max_features`, `max_iter`) and `num_threads` (no LM call) are refused with one line
naming the setting unless left at their defaults (and `choose_among` for a decision model), and compile.json
records only the settings used.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import dspy
from pydantic import Field, field_validator

from programs.planner_learned import CHOICE_SETS, DEFAULT_CHOICE, OutcomeModelParameter
from runtime.outcome import OUTCOME_MODEL_KEY
from runtime.trained import TRAINED_MODEL_KEY, TrainedDecisionModel

from .base import CompileContext, Recipe, RecipeError, RecipeSettings
from .candidates import Candidate
from .estimate import Stage
from .fitting import FitError, FitSettings, fit_program
from .outcome_fitting import OutcomeFitError, OutcomeFitSettings, fit_outcome_models_once

# Settings of the Full Auto decision model (and the LM threads) that planner.learned's outcome fit has no use for.
_NOT_FOR_PLANNER = {"C": "the decision model's regularization", "class_weight": "the decision model's class weights",
                    "ngram_max": "the decision model's text features", "max_features": "the decision model's text "
                    "features", "max_iter": "the decision model's solver", "num_threads": "parallel LM calls; the "
                    "fit makes none", "selection_max": "the decision model's selection sample; the outcome fit "
                    "samples its own attempts"}


class FitRecipeSettings(RecipeSettings):
    """Settings of the fit."""

    C: list[float] = Field([0.5, 2.0, 8.0, 32.0], min_length=1, description=(
        "Inverse regularization strengths tried (larger: a looser fit), each above 0 and finite; each is scored "
        "on held-out turns."))
    class_weight: list[Literal["none", "balanced"]] = Field(["none", "balanced"], min_length=1, description=(
        "Class weightings tried: 'none', or 'balanced' (rare actions weigh as much as frequent ones)."))
    ngram_max: int = Field(2, ge=1, le=3, description="Longest word n-gram of the text features (1: words only).")
    max_features: int = Field(20_000, ge=100, description="Text features kept: the most frequent n-grams of train.")
    max_iter: int = Field(3_000, ge=100, description="Solver iterations (lbfgs; deterministic).")
    refit_on_dev: bool = Field(True, description=(
        "Fit the chosen settings on train + dev at last (more data; test stays unseen), else on train "
        "(planner.learned: false fits and selects on train alone, dev unseen)."))
    folds: int = Field(5, ge=0, le=20, description=(
        "Choose the settings by grouped cross-validation over train + dev in this many folds, 2 to 20 (whole "
        "threads held out; every labeled turn scored once); 0: on dev alone. planner.learned: its episodes' "
        "folds, 3 unless set here (0 refused)."))
    selection_max: int = Field(4_000, ge=0, description=(
        "Labeled turns the cross-validation chooses the settings on: above it, whole threads (in the order of the "
        "hash of their ids) up to this many; the chosen settings are still fit on all. 0: every turn."))
    choose_among: Literal[CHOICE_SETS] = Field(DEFAULT_CHOICE, description=(  # type: ignore[valid-type]
        "planner.learned only: the families it chooses among. 'allowed': those the loop runner allows (all but a "
        "blocked one), for the most cycles; 'compliant': those the pivot protocol allows (compliance 1.0)."))

    @field_validator("C")
    @classmethod
    def _strengths(cls, values: list[float]) -> list[float]:
        # scikit-learn refuses 0 and negative strengths with an error of its own, and an infinite one would fit
        # without regularization and write Infinity (not JSON) into compile.json.
        for value in values:
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{value!r} is out of range: each strength is a finite number above 0 "
                                 "(such as [0.5, 2.0, 8.0, 32.0])")
        return values

    @field_validator("folds")
    @classmethod
    def _folds(cls, value: int) -> int:
        # One fold would hold out every thread and fit on none: there is no 1-fold cross-validation.
        if value == 1:
            raise ValueError("1 is no cross-validation (one fold holds out every thread); use 2 to 20 folds, "
                             "or 0 to select on dev alone")
        return value

    def fit_settings(self) -> FitSettings:
        """The settings as the fitting code takes them."""
        return FitSettings(C=tuple(self.C), class_weight=tuple(self.class_weight), ngram_max=self.ngram_max,
                           max_features=self.max_features, max_iter=self.max_iter, refit_on_dev=self.refit_on_dev,
                           folds=self.folds, selection_max=self.selection_max)


class FitRecipe(Recipe):
    """A linear model on features of what a turn shows, calibrated, answering the action of least expected cost."""

    name = "fit"
    dspy_name = "Fit"
    summary = "a trained decision model, its settings cross-validated on train + dev (no LM call)"
    Settings = FitRecipeSettings
    compiles_lm = False

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        settings: FitRecipeSettings = ctx.settings  # type: ignore[assignment]
        def candidate(model: TrainedDecisionModel, score: float) -> None:
            note = f"C={model.fit_info.get('C')} class_weight={model.fit_info.get('class_weight')}"
            ctx.tracker.add(Candidate(index=-1, score=score, n_examples=len(valset), n_demos=0,
                                      instructions_hash="", state={TRAINED_MODEL_KEY: {"model": model.to_state()}},
                                      note=note))

        if outcome_parameters(program):
            return _fit_planner(program, trainset, valset, ctx)
        try:
            outcome = fit_program(program, trainset, valset, ctx.metric, settings.fit_settings(), seed=ctx.seed,
                                  on_candidate=candidate)
        except FitError as exc:
            raise RecipeError(f"fit: {exc}") from None
        if outcome is None:
            raise RecipeError(f"fit: program {type(program).__name__} has no trained model to fit; fit "
                              "full_auto.learned, full_auto.cascade or planner.learned")
        ctx.state["details"] = {"fit": outcome.chosen, "fit_grid": outcome.grid}
        return program

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        return [Stage("fit and cross-validate", 0, note="no LM call")]

    def used_settings(self, program: dspy.Module) -> dict[str, Any]:
        """Every setting for a decision model; for planner.learned those its outcome fit uses (RecipeError naming
        one it would leave unused)."""
        if not outcome_parameters(program):
            if self.settings.choose_among != DEFAULT_CHOICE:  # type: ignore[attr-defined]
                raise RecipeError("fit: setting choose_among applies to planner.learned only: remove it from the "
                                  "recipe")
            return {k: v for k, v in super().used_settings(program).items() if k != "choose_among"}
        return planner_settings(self.settings)  # type: ignore[arg-type]

    def _reached(self, compiled: dspy.Module, trainset: list[dspy.Example],
                 valset: list[dspy.Example]) -> list[dspy.Example]:
        if outcome_parameters(compiled) and not self.settings.refit_on_dev:  # type: ignore[attr-defined]
            return list(trainset)  # the outcome fit never saw dev
        return super()._reached(compiled, trainset, valset)


def planner_settings(settings: FitRecipeSettings) -> dict[str, Any]:
    """The settings planner.learned's outcome fit uses (RecipeError naming a setting it has no use for)."""
    defaults = FitRecipeSettings()
    for name, what in _NOT_FOR_PLANNER.items():
        value = getattr(settings, name)
        if value != getattr(defaults, name):
            raise RecipeError(f"fit: setting {name} = {value!r} does not apply to planner.learned ({what}; its "
                              f"outcome fit uses folds, refit_on_dev, max_train_examples and max_val_examples): "
                              f"remove {name} from the recipe")
    if settings.folds == 0:
        raise RecipeError("fit: setting folds = 0 (selection on dev alone) does not apply to planner.learned: its "
                          "outcome models are chosen by cross-validation over whole episodes; set folds to 2 to 20")
    folds = settings.folds if "folds" in settings.model_fields_set else OutcomeFitSettings().folds
    return {"max_train_examples": settings.max_train_examples, "max_val_examples": settings.max_val_examples,
            "folds": folds, "refit_on_dev": settings.refit_on_dev, "choose_among": settings.choose_among}


def outcome_parameters(program: dspy.Module) -> list[OutcomeModelParameter]:
    """The program's planner outcome-model parameters (`planner.learned`)."""
    return [p for _, p in program.named_parameters() if isinstance(p, OutcomeModelParameter)]


def _fit_planner(program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                 ctx: CompileContext) -> dspy.Module:
    """Fit a planner's outcome model on the train + dev attempts (`optimizers.outcome_fitting`; no LM call).

    Selection is grouped cross-validation over the episodes of train + dev (train alone with `refit_on_dev`
    false), so the model is fit on both; what it was fit on is its state's `fit` entry (counts and the SHA-256 of
    the record ids).
    """
    used = planner_settings(ctx.settings)  # type: ignore[arg-type]
    dev = valset if used["refit_on_dev"] else []
    try:
        # The examples themselves: looked up by their record ids first (a compile's evaluations fit the dataset's
        # models on the same records just before), their packets read only when the fit is new.
        fitted = fit_outcome_models_once(list(trainset), list(dev), OutcomeFitSettings(folds=used["folds"]),
                                         seed=ctx.seed)
    except OutcomeFitError as exc:
        raise RecipeError(f"fit: {exc}") from None
    for parameter in outcome_parameters(program):
        parameter.set_model(fitted.outcome)
        parameter.set_choice(used["choose_among"])
    score = -min((row["held_out_loss"] for row in fitted.grid if row["target"] == "gain"
                  and row["held_out_loss"] is not None), default=0.0)
    ctx.tracker.add(Candidate(index=-1, score=score, n_examples=len(trainset) + len(dev), n_demos=0,
                              instructions_hash="", state={OUTCOME_MODEL_KEY: {"model": fitted.outcome.to_state(),
                                                                "choose_among": used["choose_among"]}},
                              note=f"gain {fitted.chosen['gain_model']}, valid {fitted.chosen['valid_model']} "
                                   "(score: minus the held-out squared error of the gain share)"))
    ctx.state["details"] = {"fit": fitted.chosen, "fit_grid": fitted.grid}
    return program
