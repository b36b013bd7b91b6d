"""The predictions every decision program returns, and the safe defaults used when output is unusable."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

import dspy

from runtime.advisor import FAMILIES, DirectiveValidation, OptimizationDirective
from runtime.fullauto import GuidanceDecision


def decision_prediction(decision: GuidanceDecision, **extra: Any) -> dspy.Prediction:
    """Prediction of a Full Auto program: the decision's four outputs, the decision and its parse errors."""
    return dspy.Prediction(
        action=decision.action,
        next_input=decision.next_input,
        reason=decision.reason,
        confidence=decision.confidence,
        decision=decision,
        parse_errors=list(decision.parse_errors),
        **extra,
    )


def safe_directive(allowed_families: Optional[Iterable[str]] = None,
                   tried: Optional[Mapping[str, int]] = None) -> OptimizationDirective:
    """The documented safe directive: change nothing, re-validate and re-measure the current best.

    It is the planner's analogue of `pause`: it costs one iteration and cannot break the kernel.
    Its family is the least-tried allowed one so that it never violates a block.
    """
    allowed = [family for family in (allowed_families or FAMILIES) if family in FAMILIES] or list(FAMILIES)
    tried = tried or {}
    family = min(allowed, key=lambda f: (tried.get(f, 0), FAMILIES.index(f)))
    return OptimizationDirective(
        objective="Keep the current best kernel and re-validate it",
        primary_hypothesis="No new hypothesis: the planner's output could not be used this iteration.",
        strategy_family=family,
        strategy_modifiers=["safe_default"],
        risk="Low",
        expected_effect_cycles=0,
        change_summary=["No code change"],
        step_plan=[
            "Leave the kernel unchanged",
            "Run the correctness tests",
            "Measure the cycle count and record it",
        ],
        validation=DirectiveValidation(
            commands=["python tests/submission_tests.py"],
            pass_criteria=["correctness tests pass", "cycles equal the current best"],
        ),
        next_packet_requests=[],
        did_web_search=False,
    )


def directive_prediction(directive: OptimizationDirective, directive_errors: Iterable[str] = (),
                         parse_errors: Iterable[str] = (), **extra: Any) -> dspy.Prediction:
    """Prediction of a planner program: the (validated or safe) directive and what went wrong."""
    return dspy.Prediction(
        directive=directive,
        directive_errors=list(directive_errors),
        parse_errors=list(parse_errors),
        **extra,
    )
