"""Signature of the kernel-optimization planner: advisor packet in, OptimizationDirective out (formats.md §2)."""

from __future__ import annotations

import dspy

from runtime.advisor import DirectiveValidation, Risk, StrategyFamily

DIRECTIVE_FIELDS: tuple[str, ...] = (
    "objective", "primary_hypothesis", "strategy_family", "strategy_modifiers", "risk",
    "expected_effect_cycles", "change_summary", "step_plan", "validation", "next_packet_requests",
    "did_web_search",
)


class OptimizationDirectiveSignature(dspy.Signature):
    """Plan the next iteration of a loop that lowers the clock-cycle count of a VLIW kernel. Pick an allowed strategy family: pivot when the current family is blocked or has plateaued, and lower the bound (reduce_loads or break_deps) when the schedule is near its tight lower bound. Weigh three orthogonal approaches, carry exactly one wild-card idea, and give a concrete step plan with its validation."""

    goal: str = dspy.InputField(desc="best (beat the best cycles) or threshold (reach the target), with the numbers")
    plateau_valid_iters_since_best: str = dspy.InputField()
    strategy_family_constraints: str = dspy.InputField(desc="JSON: allowed and blocked families, current streak")
    experiment_summary: str = dspy.InputField(desc="JSON: best cycles overall and by family, invalid counts")
    experiment_log_tail: str = dspy.InputField(desc="recent attempts, oldest first")
    performance_profile: str = dspy.InputField(desc="JSON: lower bounds and schedule estimate, or empty")
    objective: str = dspy.OutputField()
    primary_hypothesis: str = dspy.OutputField()
    strategy_family: StrategyFamily = dspy.OutputField()
    strategy_modifiers: list[str] = dspy.OutputField(desc="0-3 short tags")
    risk: Risk = dspy.OutputField()
    expected_effect_cycles: int = dspy.OutputField(desc="expected change in cycles; negative means faster")
    change_summary: list[str] = dspy.OutputField(desc="1-5 items")
    step_plan: list[str] = dspy.OutputField(desc="3-12 steps")
    validation: DirectiveValidation = dspy.OutputField()
    next_packet_requests: list[str] = dspy.OutputField(desc="0-6 items")
    did_web_search: bool = dspy.OutputField()


PLANNER_INPUT_FIELDS: tuple[str, ...] = tuple(OptimizationDirectiveSignature.input_fields)
