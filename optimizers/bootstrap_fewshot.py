"""BootstrapFewShot: run a teacher (the program with labeled demos) on training examples and keep
the traces the metric accepts as demos."""

from __future__ import annotations

import random
from typing import Optional

import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings, train_cap
from .metric_adapters import scalar_metric
from .estimate import Stage


class BootstrapFewShotSettings(RecipeSettings):
    """Settings of BootstrapFewShot."""

    max_train_examples: int = train_cap(40)

    max_bootstrapped_demos: int = Field(3, ge=0, description="Bootstrapped (traced, metric-approved) demos per predictor.")
    max_labeled_demos: int = Field(3, ge=0, description="Demos in total per predictor (labeled ones fill what "
                                                        "bootstrapping did not); also the teacher's labeled demos.")
    max_rounds: int = Field(1, ge=1, description="Attempts per training example; rounds after the first sample "
                                                 "at temperature 1.0.")
    metric_threshold: float = Field(1.0, ge=0.0, le=1.0, description="A trace becomes a demo only if its "
                                                                      "objective reaches this (1.0: exactly right).")
    max_errors: int = Field(10, ge=1, description="Program errors tolerated while bootstrapping before giving up.")


class BootstrapFewShotRecipe(Recipe):
    """Demos from the program's own successful traces."""

    name = "bootstrap_fewshot"
    dspy_name = "BootstrapFewShot"
    summary = "demos from the program's own metric-approved traces"
    Settings = BootstrapFewShotSettings
    selects_on_dev = False

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: BootstrapFewShotSettings = ctx.settings  # type: ignore[assignment]
        pool = list(trainset)
        # DSPy walks the training set in order: the seed decides which examples are tried first.
        random.Random(ctx.seed).shuffle(pool)
        optimizer = dspy.BootstrapFewShot(
            metric=scalar_metric(ctx.metric, s.metric_threshold), metric_threshold=s.metric_threshold,
            max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos,
            max_rounds=s.max_rounds, max_errors=s.max_errors,
        )
        ctx.state["optimizer"] = optimizer
        ctx.state["pool"] = pool
        return optimizer.compile(program, trainset=pool)

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos cap both bootstrapped and total demos."""
        return {"max_bootstrapped_demos": demos, "max_labeled_demos": demos}

    def _salvage(self, program: dspy.Module, ctx: CompileContext) -> Optional[dspy.Module]:
        return salvage_bootstrap(ctx)

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        s: BootstrapFewShotSettings = self.settings  # type: ignore[assignment]
        calls = n_train * s.max_rounds * n_predictors if s.max_bootstrapped_demos else 0
        return [Stage("bootstrap traces", calls, demos=s.max_labeled_demos,
                      note=f"at most; stops after {s.max_bootstrapped_demos} accepted traces")]


def salvage_bootstrap(ctx: CompileContext) -> Optional[dspy.Module]:
    """The student with the traces bootstrapped before the budget stopped (labeled demos fill the rest)."""
    optimizer = ctx.state.get("optimizer")
    traces = getattr(optimizer, "name2traces", None)
    student = getattr(optimizer, "student", None)
    if optimizer is None or traces is None or student is None:
        return None
    # Labeled demos fill the slots bootstrapping did not reach, as after a full bootstrap.
    optimizer.validation = list(ctx.state.get("pool", []))
    return optimizer._train()
