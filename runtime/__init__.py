"""Production surface of guidebench: typed contracts, guardrails, pivot policy, frozen-module loader.

Kept small on purpose: no MLflow, Optuna or pandas imports here.
"""

from .advisor import (
    FAMILIES,
    AdvisorPacket,
    DirectiveValidation,
    ExperimentLogEntry,
    ExperimentSummary,
    FamilyConstraints,
    OptimizationDirective,
    PerformanceProfile,
)
from .fullauto import (
    ACTIONS,
    DecisionLogLine,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    tokens_from_usage,
)
from .guardrails import apply_guardrails, parse_decision
from .pivot import (
    best_cycles,
    family_constraints,
    family_of,
    pivot_required,
    plateau_valid_iters_since_best,
    validate_directive,
)
from .records import DecisionRecord, LoggedDecision, OutcomeLabel, PlannerRecord, SourceRef, canonical_json

__all__ = [
    "ACTIONS", "FAMILIES", "AdvisorPacket", "DecisionLogLine", "DecisionRecord", "DirectiveValidation",
    "ExperimentLogEntry", "ExperimentSummary", "FamilyConstraints", "FullAutoTurnSummary", "GuardrailAudit",
    "GuardrailConfig", "GuardrailContext", "GuidanceDecision", "LoggedDecision", "OptimizationDirective",
    "OutcomeLabel", "PerformanceProfile", "PlannerRecord", "RawDecisionLogLine", "RunEvent", "RunFile",
    "SourceRef", "apply_guardrails", "best_cycles", "canonical_json", "family_constraints", "family_of",
    "parse_decision", "pivot_required", "plateau_valid_iters_since_best", "tokens_from_usage",
    "validate_directive",
]
