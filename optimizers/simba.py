"""SIMBA: stochastic mini-batch ascent; on hard examples the LM writes itself rules or adds demos
from its better trajectories, and candidates are kept when they score higher."""

from __future__ import annotations


import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings, train_cap
from .demos import with_labeled_demos
from .metric_adapters import scalar_metric
from .candidates import Candidate, count_demos, instructions_hash, program_state
from .estimate import Stage


class SIMBASettings(RecipeSettings):
    """Settings of SIMBA."""

    bsize: int = Field(8, ge=1, description="Mini-batch size (capped at the training set size).")
    num_candidates: int = Field(3, ge=1, description="New candidate programs per step.")
    max_steps: int = Field(2, ge=1, description="Optimization steps.")
    max_demos: int = Field(3, ge=0, description="Most demos a predictor may hold before some are dropped.")
    base_demos: int = Field(3, ge=0, description="Labeled demos put in each predictor first (seeded), so the "
                                                 "small model produces parseable trajectories.")
    temperature_for_sampling: float = Field(0.2, ge=0.0, description="Softmax temperature when picking "
                                                                     "programs for trajectory sampling.")
    temperature_for_candidates: float = Field(0.2, ge=0.0, description="Softmax temperature when picking "
                                                                       "the source program of new candidates.")
    max_train_examples: int = train_cap(32)  # SIMBA scores its finalists on every training example
    prompt_lm: str = Field("", description="LM spec for writing rules; empty means the task LM.")


class SIMBARecipe(Recipe):
    """Self-reflective rules and demos from mini-batches."""

    name = "simba"
    dspy_name = "SIMBA"
    summary = "mini-batch ascent with self-written rules and trajectory demos"
    Settings = SIMBASettings
    selects_on_dev = False
    uses_candidates = True
    lm_roles = {"prompt_lm": "prompt"}

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: SIMBASettings = ctx.settings  # type: ignore[assignment]
        student = with_labeled_demos(program, trainset, s.base_demos, ctx.seed)
        optimizer = dspy.SIMBA(metric=scalar_metric(ctx.metric), bsize=min(s.bsize, len(trainset)),
                               num_candidates=s.num_candidates, max_steps=s.max_steps, max_demos=s.max_demos,
                               prompt_model=ctx.lm_for("prompt"), num_threads=s.num_threads,
                               temperature_for_sampling=s.temperature_for_sampling,
                               temperature_for_candidates=s.temperature_for_candidates)
        compiled = optimizer.compile(student, trainset=trainset, seed=ctx.seed)
        # SIMBA scores its finalists itself (not through dspy.Evaluate): record them as candidates.
        for item in getattr(compiled, "candidate_programs", []) or []:
            candidate = item["program"]
            ctx.tracker.add(Candidate(index=-1, score=float(item["score"]), n_examples=len(trainset),
                                      n_demos=count_demos(candidate), instructions_hash=instructions_hash(candidate),
                                      state=program_state(candidate), note="SIMBA finalist, scored on the training set"))
        compiled.__dict__.pop("candidate_programs", None)
        compiled.__dict__.pop("trial_logs", None)
        return compiled

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos start and cap the demo count; candidates per step."""
        return {"base_demos": demos, "max_demos": demos, "num_candidates": candidates}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        s: SIMBASettings = self.settings  # type: ignore[assignment]
        bsize = min(s.bsize, n_train)
        demos = min(s.max_demos, s.base_demos + s.max_steps)
        return [
            Stage("sample trajectories", s.max_steps * bsize * s.num_candidates * n_predictors, demos=demos,
                  note=f"{s.max_steps} steps x {bsize} examples x {s.num_candidates} samples"),
            Stage("write rules", s.max_steps * s.num_candidates, demos=0, prompt_scale=3.0, output_scale=2.0,
                  note="one reflection per new candidate (or a demo, no call)"),
            Stage("score candidates", s.max_steps * bsize * s.num_candidates * n_predictors, demos=demos),
            Stage("final selection", (s.num_candidates + 1) * n_train * n_predictors, demos=demos,
                  note="finalists on the whole training set"),
        ]
