"""DSPy signatures of the decision programs: Full Auto next action, guidance, planner, module stack."""

from .full_auto import (
    DECISION_OUTPUT_FIELDS,
    FULL_AUTO_INPUT_FIELDS,
    FullAutoDecisionClearSignature,
    FullAutoDecisionSignature,
    GuidanceDecisionClearSignature,
    GuidanceDecisionSignature,
)
from .planner import DIRECTIVE_FIELDS, PLANNER_INPUT_FIELDS, OptimizationDirectiveSignature
from .stack import Progress, SelectNextAction, SummarizeTurnState, Verdict, VerifyDecision

__all__ = [
    "DECISION_OUTPUT_FIELDS", "DIRECTIVE_FIELDS", "FULL_AUTO_INPUT_FIELDS", "PLANNER_INPUT_FIELDS",
    "FullAutoDecisionClearSignature", "FullAutoDecisionSignature", "GuidanceDecisionClearSignature",
    "GuidanceDecisionSignature", "OptimizationDirectiveSignature", "Progress",
    "SelectNextAction", "SummarizeTurnState", "Verdict", "VerifyDecision",
]
