"""Production surface of guidebench: typed contracts, guardrails, pivot policy, frozen-module loader.

Kept small on purpose: no MLflow, Optuna or pandas imports here. Names are re-exported lazily
(`runtime._lazy`): `import runtime` costs nothing until a name is used, so a command line that only
reads one contract module (or `guidebench --help`, which reads none) does not build every pydantic model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .advisor import (
        BASELINE_CYCLES, FAMILIES, SLOT_LIMITS, THRESHOLDS, AdvisorPacket, DirectiveValidation,
        ExperimentLogEntry, ExperimentSummary, FamilyConstraints, OptimizationDirective, PerformanceProfile
    )
    from .fullauto import (
        ACTIONS, GUARDRAIL_RULES, DecisionLogLine, FullAutoTurnSummary, GuardrailAudit, GuardrailConfig,
        GuardrailContext, GuidanceDecision, LoggedTurnSummary, RawDecisionLogLine, RunEvent, RunFile,
        next_progress_count, tokens_from_usage
    )
    from .guardrails import apply_guardrails, parse_decision
    from .pivot import (
        PIVOT_RULES, best_cycles, current_streak, family_constraints, family_of, invalid_streak,
        meaningful_win, near_bound, overall_best, packet_pivot_inputs, pivot_required,
        plateau_valid_iters_since_best, tag_best, validate_directive, validate_directive_original
    )
    from .records import (
        DecisionRecord, LoggedDecision, OutcomeLabel, PlanArchive, PlannerRecord, ShadowDecision, SourceRef,
        canonical_json, content_hash, inputs_hash, packet_content_hash, packet_hash, sha256_hex
    )
    from .provenance import OverlapCheck, Provenance, check_overlap
    from .shadow import ShadowRunner
    from .shadow_log import SHADOW_FILE, ShadowDecisionLine, ShadowModule
    from .frozen.loader import load_frozen
    from .frozen.manifest import FrozenModuleError
    from .frozen.arguments import FrozenInputError
    from .exploration import ExplorationSettings
    from .planner_log import PLANNER_FILE, PlannerDecisionLine
    from .planner_shadow import PlannerShadow

# public name -> the submodule that defines it
_EXPORTS: dict[str, tuple[str, ...]] = {
    "advisor": ("BASELINE_CYCLES", "FAMILIES", "SLOT_LIMITS", "THRESHOLDS", "AdvisorPacket",
        "DirectiveValidation", "ExperimentLogEntry", "ExperimentSummary", "FamilyConstraints",
        "OptimizationDirective", "PerformanceProfile"),
    "fullauto": ("ACTIONS", "GUARDRAIL_RULES", "DecisionLogLine", "FullAutoTurnSummary", "GuardrailAudit",
        "GuardrailConfig", "GuardrailContext", "GuidanceDecision", "LoggedTurnSummary", "RawDecisionLogLine",
        "RunEvent", "RunFile", "next_progress_count", "tokens_from_usage"),
    "guardrails": ("apply_guardrails", "parse_decision"),
    "pivot": ("PIVOT_RULES", "best_cycles", "current_streak", "family_constraints", "family_of",
        "invalid_streak", "meaningful_win", "near_bound", "overall_best", "packet_pivot_inputs", "pivot_required",
        "plateau_valid_iters_since_best", "tag_best", "validate_directive", "validate_directive_original"),
    "records": ("DecisionRecord", "LoggedDecision", "OutcomeLabel", "PlanArchive", "PlannerRecord", "ShadowDecision",
        "SourceRef", "canonical_json", "content_hash", "inputs_hash", "packet_content_hash", "packet_hash",
        "sha256_hex"),
    "provenance": ("OverlapCheck", "Provenance", "check_overlap"),
    "shadow": ("ShadowRunner",),
    "shadow_log": ("SHADOW_FILE", "ShadowDecisionLine", "ShadowModule"),
    "frozen.loader": ("load_frozen",),
    "frozen.manifest": ("FrozenModuleError",),
    "frozen.arguments": ("FrozenInputError",),
    "exploration": ("ExplorationSettings",),
    "planner_log": ("PLANNER_FILE", "PlannerDecisionLine"),
    "planner_shadow": ("PlannerShadow",),
}
_WHERE: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
