"""GEPA: reflective prompt evolution. A reflection LM reads the feedback sentences of the metric on
a few traced examples and rewrites the instructions; candidates are kept on a Pareto front of
validation scores. Demos stay as given (labeled demos are added first so the small model answers)."""

from __future__ import annotations

import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings, train_cap, val_cap
from .demos import with_labeled_demos
from .estimate import Stage


class GEPASettings(RecipeSettings):
    """Settings of GEPA."""

    max_train_examples: int = train_cap(40)
    max_val_examples: int = val_cap(16)

    max_metric_calls: int = Field(60, ge=1, description="Budget in program runs scored by the metric (each "
                                                        "run is one task-LM call per predictor).")
    reflection_minibatch_size: int = Field(3, ge=1, description="Traced examples the reflection LM reads per proposal.")
    candidate_selection_strategy: str = Field("pareto", description="'pareto' (sample the Pareto front) or "
                                                                    "'current_best'.")
    use_merge: bool = Field(False, description="Also merge two candidates' instructions (off: one predictor "
                                               "leaves nothing to merge).")
    skip_perfect_score: bool = Field(True, description="Do not reflect on minibatches that already score perfectly.")
    base_demos: int = Field(3, ge=0, description="Labeled demos put in each predictor before the instruction "
                                                 "search (seeded).")
    reflection_lm: str = Field("", description="LM spec of the reflection model (it reads the metric's feedback "
                                               "sentences); empty means the task LM.")


class GEPARecipe(Recipe):
    """Reflective instruction evolution fed by the metric's feedback sentences."""

    name = "gepa"
    dspy_name = "GEPA"
    summary = "reflection LM rewrites instructions from the metric's feedback; Pareto selection"
    Settings = GEPASettings
    uses_candidates = True
    lm_roles = {"reflection_lm": "reflection"}
    needs_feedback = True

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: GEPASettings = ctx.settings  # type: ignore[assignment]
        if s.candidate_selection_strategy not in {"pareto", "current_best"}:
            raise ValueError(f"candidate_selection_strategy must be 'pareto' or 'current_best', "
                             f"not {s.candidate_selection_strategy!r}")
        reflection = ctx.lm_for("reflection") or dspy.settings.lm
        if reflection is None:
            raise ValueError("GEPA needs a reflection LM: configure a task LM or set reflection_lm")
        student = with_labeled_demos(program, trainset, s.base_demos, ctx.seed)
        log_dir = str(ctx.checkpoint.gepa_dir) if ctx.checkpoint is not None else None
        optimizer = dspy.GEPA(
            metric=ctx.feedback_metric, max_metric_calls=s.max_metric_calls,
            reflection_minibatch_size=s.reflection_minibatch_size,
            candidate_selection_strategy=s.candidate_selection_strategy, reflection_lm=reflection,
            skip_perfect_score=s.skip_perfect_score, use_merge=s.use_merge, num_threads=s.num_threads,
            failure_score=0.0, perfect_score=1.0, log_dir=log_dir, track_stats=False, seed=ctx.seed,
        )
        return optimizer.compile(student, trainset=trainset, valset=valset or None)

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos are the fixed labeled demos; candidates scale the metric-call budget."""
        return {"base_demos": demos, "max_metric_calls": 20 * max(1, candidates)}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        s: GEPASettings = self.settings  # type: ignore[assignment]
        # Each iteration: a traced minibatch, one reflection, the new candidate on the same minibatch.
        per_iteration = 2 * s.reflection_minibatch_size
        iterations = max(0, (s.max_metric_calls - (n_val or n_train)) // per_iteration)
        return [
            Stage("program runs", s.max_metric_calls * n_predictors, demos=s.base_demos,
                  note=f"max_metric_calls={s.max_metric_calls} (first a full validation run)"),
            Stage("reflections", iterations, demos=0, prompt_scale=2.0 + s.reflection_minibatch_size,
                  output_scale=2.0, note="one per iteration; reflection prompt holds the traced examples"),
        ]
