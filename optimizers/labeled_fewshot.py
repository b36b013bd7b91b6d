"""LabeledFewShot: put k labeled training examples into each predictor's prompt (no LM call)."""

from __future__ import annotations

import random
from typing import Sequence

import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings
from .estimate import Stage


class LabeledFewShotSettings(RecipeSettings):
    """Settings of LabeledFewShot."""

    k: int = Field(3, ge=0, description="Demos per predictor. With the embedded base model, 3 full-output "
                                        "demos make it follow the answer format reliably.")
    sample: bool = Field(True, description="Draw the k demos at random (seeded) instead of taking the first k.")


class LabeledFewShotRecipe(Recipe):
    """Labeled demos, no search: the cheapest way to give a small model the answer format."""

    name = "labeled_fewshot"
    dspy_name = "LabeledFewShot"
    summary = "k labeled training examples as demos (no LM call)"
    Settings = LabeledFewShotSettings
    selects_on_dev = False

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        # DSPy's LabeledFewShot always samples with Random(0); shuffle with the compile seed first
        # so that the seed decides which demos are drawn.
        pool = list(trainset)
        random.Random(ctx.seed).shuffle(pool)
        settings: LabeledFewShotSettings = ctx.settings  # type: ignore[assignment]
        return dspy.LabeledFewShot(k=settings.k).compile(program, trainset=pool, sample=settings.sample)

    def _reached(self, compiled: dspy.Module, trainset: Sequence[dspy.Example],
                 valset: Sequence[dspy.Example]) -> list[dspy.Example]:
        """Only the examples drawn as demos: the rest of the training set never reached the program."""
        drawn = {demo.get("record_id") for predictor in compiled.predictors() for demo in predictor.demos}
        return [ex for ex in trainset if ex.get("record_id") in drawn]

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos map to k."""
        return {"k": demos}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        return [Stage("select demos", 0, note="no LM call")]
