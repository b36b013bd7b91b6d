"""MIPROv2: propose instructions with an LM, bootstrap demo sets, and search their combinations
with Bayesian optimization (Optuna TPE inside DSPy), scoring on validation minibatches."""

from __future__ import annotations

import math

import dspy
from pydantic import Field

from .base import CompileContext, Recipe, RecipeSettings, train_cap, val_cap
from .metric_adapters import scalar_metric
from .estimate import Stage


class MIPROv2Settings(RecipeSettings):
    """Settings of MIPROv2 (small by default: the embedded model takes 1-2 s per call)."""

    max_train_examples: int = train_cap(40)
    max_val_examples: int = val_cap(24)

    auto: str = Field("off", description="DSPy's preset budget: off, light, medium or heavy. 'off' uses "
                                         "num_candidates and num_trials below.")
    num_candidates: int = Field(3, ge=2, description="Instruction candidates and demo-set candidates (auto off).")
    num_trials: int = Field(6, ge=1, description="Combinations tried by the Bayesian search (auto off).")
    max_bootstrapped_demos: int = Field(2, ge=0, description="Bootstrapped demos per demo-set candidate.")
    max_labeled_demos: int = Field(3, ge=0, description="Labeled demos per demo-set candidate.")
    minibatch: bool = Field(True, description="Score trials on validation minibatches, with periodic full evaluations.")
    minibatch_size: int = Field(10, ge=1, description="Validation examples per minibatch (capped at the "
                                                      "validation set size).")
    minibatch_full_eval_steps: int = Field(3, ge=1, description="Full validation run every this many trials.")
    init_temperature: float = Field(1.0, ge=0.0, description="Temperature of the instruction proposals.")
    program_aware_proposer: bool = Field(False, description="Show the proposer the program's source code. Off: "
                                                            "a 270M model gains nothing from Python source.")
    data_aware_proposer: bool = Field(True, description="Summarise the training data for the proposer first.")
    tip_aware_proposer: bool = Field(True, description="Give the proposer a random prompting tip.")
    fewshot_aware_proposer: bool = Field(True, description="Show the proposer the bootstrapped demos.")
    view_data_batch_size: int = Field(10, ge=1, description="Examples per data-summary call.")
    metric_threshold: float = Field(1.0, ge=0.0, le=1.0, description="Objective a bootstrapped trace needs to become a demo.")
    max_errors: int = Field(10, ge=1, description="Program errors tolerated per evaluation.")
    prompt_lm: str = Field("", description="LM spec for the instruction proposer; empty means the task LM.")


class MIPROv2Recipe(Recipe):
    """Instructions and demos searched jointly."""

    name = "miprov2"
    dspy_name = "MIPROv2"
    summary = "LM-proposed instructions x bootstrapped demo sets, Bayesian search on validation minibatches"
    Settings = MIPROv2Settings
    uses_candidates = True
    lm_roles = {"prompt_lm": "prompt"}

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: MIPROv2Settings = ctx.settings  # type: ignore[assignment]
        if s.auto not in {"off", "light", "medium", "heavy"}:
            raise ValueError(f"auto must be off, light, medium or heavy, not {s.auto!r}")
        valset = valset or trainset
        auto = None if s.auto == "off" else s.auto
        optimizer = dspy.MIPROv2(
            metric=scalar_metric(ctx.metric, s.metric_threshold), prompt_model=ctx.lm_for("prompt"),
            max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos, auto=auto,
            num_candidates=None if auto else s.num_candidates, num_threads=s.num_threads, max_errors=s.max_errors,
            seed=ctx.seed, init_temperature=s.init_temperature, verbose=False, track_stats=True,
            metric_threshold=s.metric_threshold,
        )
        return optimizer.compile(
            program, trainset=trainset, valset=valset, num_trials=None if auto else s.num_trials, seed=ctx.seed,
            minibatch=s.minibatch and len(valset) > s.minibatch_size,
            minibatch_size=min(s.minibatch_size, len(valset)), minibatch_full_eval_steps=s.minibatch_full_eval_steps,
            program_aware_proposer=s.program_aware_proposer, data_aware_proposer=s.data_aware_proposer,
            view_data_batch_size=s.view_data_batch_size, tip_aware_proposer=s.tip_aware_proposer,
            fewshot_aware_proposer=s.fewshot_aware_proposer,
        )

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos cap the demo sets; candidates sets instruction/demo candidates and twice as many trials."""
        return {"max_bootstrapped_demos": max(1, demos // 2), "max_labeled_demos": demos,
                "num_candidates": max(2, candidates), "num_trials": 2 * max(2, candidates)}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        s: MIPROv2Settings = self.settings  # type: ignore[assignment]
        n_val = n_val or n_train
        candidates, trials = s.num_candidates, s.num_trials
        if s.auto != "off":
            candidates = {"light": 6, "medium": 12, "heavy": 18}[s.auto]
            n_val = min(n_val, {"light": 100, "medium": 300, "heavy": 1000}[s.auto])
            variables = n_predictors * (2 if (s.max_bootstrapped_demos or s.max_labeled_demos) else 1)
            trials = int(max(2 * variables * math.log2(candidates), 1.5 * candidates))
        demo = s.max_labeled_demos
        # DSPy's demo-set candidates: zero-shot and labeled-only cost nothing to build; the rest bootstrap.
        bootstrapped_sets = max(0, candidates - 2)
        stages = [Stage("bootstrap demo sets", bootstrapped_sets * n_train * n_predictors, demos=demo,
                        note=f"at most; {bootstrapped_sets} bootstrapped sets")]
        proposals = 0
        if s.data_aware_proposer:
            proposals += math.ceil(n_train / s.view_data_batch_size) + 1
        if s.program_aware_proposer:
            proposals += 2 * n_predictors
        proposals += candidates * n_predictors
        stages.append(Stage("propose instructions", proposals, demos=demo if s.fewshot_aware_proposer else 0,
                            prompt_scale=1.5, output_scale=1.5, note="data summary + one call per instruction"))
        minibatch = s.minibatch and n_val > s.minibatch_size
        if minibatch:
            full_evals = trials // s.minibatch_full_eval_steps + 1
            stages.append(Stage("trials on minibatches", trials * min(s.minibatch_size, n_val) * n_predictors, demos=demo,
                                note=f"{trials} trials x {min(s.minibatch_size, n_val)} examples"))
            stages.append(Stage("full validation runs", (full_evals + 1) * n_val * n_predictors, demos=demo,
                                note=f"{full_evals + 1} runs x {n_val} examples (incl. the default program)"))
        else:
            stages.append(Stage("trials on validation", (trials + 1) * n_val * n_predictors, demos=demo,
                                note=f"{trials + 1} runs x {n_val} examples (incl. the default program)"))
        return stages
