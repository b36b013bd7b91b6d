"""BootstrapFewShotWithRandomSearch: several bootstrapped demo sets, each scored on the validation
set; the best one wins."""

from __future__ import annotations

import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings, val_cap
from .metric_adapters import scalar_metric
from .bootstrap_fewshot import BootstrapFewShotSettings
from .estimate import Stage


class RandomSearchSettings(BootstrapFewShotSettings):
    """Settings of BootstrapFewShotWithRandomSearch (bootstrap settings plus the search)."""

    max_val_examples: int = val_cap(24)

    num_candidate_programs: int = Field(2, ge=0, description="Shuffled bootstrap candidates, on top of the "
                                                             "labeled-only and unshuffled ones.")
    include_zero_shot: bool = Field(False, description="Also score the program without demos. Off by default: "
                                                       "the embedded base model cannot answer zero-shot, so that "
                                                       "candidate costs two calls per example for a score of 0.")
    stop_at_score: float = Field(1.0, ge=0.0, le=1.0, description="Stop early once a candidate's mean objective "
                                                                  "on the validation set reaches this.")


class RandomSearchRecipe(Recipe):
    """Random search over bootstrapped demo sets, selected on the validation set."""

    name = "bootstrap_random_search"
    dspy_name = "BootstrapFewShotWithRandomSearch"
    summary = "several bootstrapped demo sets, best on the validation set"
    Settings = RandomSearchSettings
    uses_candidates = True

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: RandomSearchSettings = ctx.settings  # type: ignore[assignment]
        optimizer = dspy.BootstrapFewShotWithRandomSearch(
            metric=scalar_metric(ctx.metric, s.metric_threshold), metric_threshold=s.metric_threshold,
            max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos,
            max_rounds=s.max_rounds, num_candidate_programs=s.num_candidate_programs,
            num_threads=s.num_threads, max_errors=s.max_errors,
            # DSPy's Evaluate reports percent.
            stop_at_score=s.stop_at_score * 100.0,
        )
        # DSPy's candidates: -3 zero-shot, -2 labeled only, -1 unshuffled bootstrap, 0.. shuffled.
        first = -3 if s.include_zero_shot else -2
        # Its shuffles are seeded by the candidate number alone; rotating the training set by the
        # compile seed makes the compile seed matter too.
        compiled = optimizer.compile(program, trainset=_rotate(trainset, ctx.seed), valset=valset or None,
                                     restrict=range(first, s.num_candidate_programs))
        # The candidate list holds whole programs; the tracker already has their states and scores.
        compiled.__dict__.pop("candidate_programs", None)
        return compiled

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos cap the demo sets; candidates is the number of shuffled sets."""
        return {"max_bootstrapped_demos": demos, "max_labeled_demos": demos, "num_candidate_programs": candidates}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        s: RandomSearchSettings = self.settings  # type: ignore[assignment]
        n_val = n_val or n_train
        bootstrapped = s.num_candidate_programs + 1  # the unshuffled set plus the shuffled ones
        stages = [
            Stage("bootstrap traces", bootstrapped * n_train * s.max_rounds * n_predictors, demos=s.max_labeled_demos,
                  note=f"at most; {bootstrapped} demo sets"),
            Stage("score candidates", (bootstrapped + 1) * n_val * n_predictors, demos=s.max_labeled_demos,
                  note=f"{bootstrapped + 1} candidates x {n_val} validation examples"),
        ]
        if s.include_zero_shot:
            stages.append(Stage("score zero-shot", 2 * n_val * n_predictors, demos=0,
                                note="ChatAdapter then JSON fallback"))
        return stages


def _rotate(examples: list[dspy.Example], seed: int) -> list[dspy.Example]:
    """The examples rotated by the seed: a different seed gives DSPy's seeded shuffles another start."""
    if not examples:
        return examples
    shift = seed % len(examples)
    return examples[shift:] + examples[:shift]
