"""DSPy signatures of the decision programs: Full Auto next action, guidance, planner, module stack, compact."""

from .compact import (
    COMPACT_DECISION_INPUT_FIELDS,
    COMPACT_PLANNER_INPUT_FIELDS,
    COMPACT_STATE_INPUT_FIELDS,
    FullAutoCompactSignature,
    FullAutoCompactStateSignature,
    PlannerCompactSignature,
    PlannerGivenFamilySignature,
)
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
    "COMPACT_DECISION_INPUT_FIELDS", "COMPACT_PLANNER_INPUT_FIELDS", "COMPACT_STATE_INPUT_FIELDS",
    "DECISION_OUTPUT_FIELDS", "DIRECTIVE_FIELDS", "FULL_AUTO_INPUT_FIELDS", "PLANNER_INPUT_FIELDS",
    "FullAutoCompactSignature", "FullAutoCompactStateSignature", "FullAutoDecisionClearSignature",
    "FullAutoDecisionSignature", "GuidanceDecisionClearSignature",
    "GuidanceDecisionSignature", "OptimizationDirectiveSignature", "PlannerCompactSignature",
    "PlannerGivenFamilySignature", "Progress", "SelectNextAction", "SummarizeTurnState", "Verdict", "VerifyDecision",
]
