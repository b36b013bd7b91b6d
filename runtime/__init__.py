"""Production surface of guidebench: typed contracts, guardrails, pivot policy, frozen-module loader.

Kept small on purpose: no MLflow, Optuna or pandas imports here.
"""

from .advisor import (
    BASELINE_CYCLES,
    FAMILIES,
    SLOT_LIMITS,
    THRESHOLDS,
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
    GUARDRAIL_RULES,
    DecisionLogLine,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    LoggedTurnSummary,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    next_progress_count,
    tokens_from_usage,
)
from .guardrails import apply_guardrails, parse_decision
from .pivot import (
    PIVOT_RULES,
    best_cycles,
    current_streak,
    family_constraints,
    family_of,
    invalid_streak,
    meaningful_win,
    near_bound,
    overall_best,
    packet_pivot_inputs,
    pivot_required,
    plateau_valid_iters_since_best,
    tag_best,
    validate_directive,
    validate_directive_original,
)
from .records import (
    DecisionRecord,
    LoggedDecision,
    OutcomeLabel,
    PlannerRecord,
    SourceRef,
    canonical_json,
    inputs_hash,
    sha256_hex,
)

__all__ = [
    "ACTIONS", "BASELINE_CYCLES", "FAMILIES", "GUARDRAIL_RULES", "PIVOT_RULES", "SLOT_LIMITS", "THRESHOLDS",
    "AdvisorPacket", "DecisionLogLine", "DecisionRecord", "DirectiveValidation", "ExperimentLogEntry",
    "ExperimentSummary", "FamilyConstraints", "FullAutoTurnSummary", "GuardrailAudit", "GuardrailConfig",
    "GuardrailContext", "GuidanceDecision", "LoggedDecision", "LoggedTurnSummary", "OptimizationDirective",
    "OutcomeLabel", "PerformanceProfile", "PlannerRecord", "RawDecisionLogLine", "RunEvent", "RunFile",
    "SourceRef", "apply_guardrails", "best_cycles", "canonical_json", "current_streak", "family_constraints",
    "family_of", "inputs_hash", "invalid_streak", "meaningful_win", "near_bound", "next_progress_count",
    "overall_best", "packet_pivot_inputs", "parse_decision", "pivot_required", "plateau_valid_iters_since_best", "sha256_hex",
    "tag_best", "tokens_from_usage",
    "validate_directive", "validate_directive_original",
]
from .frozen.loader import load_frozen  # noqa: E402
from .frozen.manifest import FrozenModuleError  # noqa: E402
from .frozen.arguments import FrozenInputError  # noqa: E402
__all__ += ["FrozenInputError", "FrozenModuleError", "load_frozen"]
