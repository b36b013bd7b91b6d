"""COPRO: coordinate ascent over instructions; an LM proposes new instructions from the scores of
the previous ones. Demos stay as given (labeled demos are added first so the small model answers)."""

from __future__ import annotations

import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings, val_cap
from .demos import with_labeled_demos
from .metric_adapters import scalar_metric
from .estimate import Stage


class COPROSettings(RecipeSettings):
    """Settings of COPRO."""

    max_val_examples: int = val_cap(24)

    breadth: int = Field(3, ge=2, description="Instruction candidates per round (the current one included).")
    depth: int = Field(2, ge=1, description="Rounds of proposing new instructions from the scored ones.")
    init_temperature: float = Field(1.4, ge=0.0, description="Temperature of the instruction proposals.")
    base_demos: int = Field(3, ge=0, description="Labeled demos put in each predictor before the instruction "
                                                 "search (seeded); 0 searches zero-shot.")
    prompt_lm: str = Field("", description="LM spec for proposing instructions; empty means the task LM.")


class COPRORecipe(Recipe):
    """Instruction search by coordinate ascent, scored on the validation set."""

    name = "copro"
    dspy_name = "COPRO"
    summary = "LM-proposed instructions, coordinate ascent on validation score"
    Settings = COPROSettings
    uses_candidates = True
    lm_roles = {"prompt_lm": "prompt"}

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: COPROSettings = ctx.settings  # type: ignore[assignment]
        student = with_labeled_demos(program, trainset, s.base_demos, ctx.seed)
        optimizer = dspy.COPRO(prompt_model=ctx.lm_for("prompt"), metric=scalar_metric(ctx.metric),
                               breadth=s.breadth, depth=s.depth, init_temperature=s.init_temperature)
        # COPRO scores candidates on the set it is given: the validation set selects instructions.
        return optimizer.compile(student, trainset=valset or trainset,
                                 eval_kwargs={"num_threads": s.num_threads, "display_progress": True})

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos are the fixed labeled demos; candidates is the breadth."""
        return {"base_demos": demos, "breadth": max(2, candidates)}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        s: COPROSettings = self.settings  # type: ignore[assignment]
        n_eval = n_val or n_train
        return [
            Stage("propose instructions", s.depth * n_predictors * (s.breadth - 1), demos=0, prompt_scale=0.5,
                  output_scale=1.5, note=f"{s.breadth - 1} proposals per round (one call each at most)"),
            Stage("score candidates", s.depth * s.breadth * n_predictors * n_eval, demos=s.base_demos,
                  note=f"{s.depth} rounds x {s.breadth} candidates x {n_eval} examples (upper bound)"),
        ]
