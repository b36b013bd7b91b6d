"""Release: export a compiled program as a frozen module (and the original runtime's manifest), gate and
promote a module (through the replay gates, or shadowing and a sequential gate), keep the model registry, and run the
closed loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.release.export import export_frozen, load_exported, ExportResult, ExportSource
    from guidebench.release.dsrs import CompiledModuleManifest, build_hub, compiled_id
    from guidebench.release.gates import GatesConfig, SequentialGates, load_gates, evaluate_gates
    from guidebench.release.promotion import (promote_module, rollback_module, PromotionLedger, PromotionRecord,
                                              SequentialEvidence)
    from guidebench.release.shadow import ShadowReport, shadow_report, start_shadow
    from guidebench.release.model_registry import ModuleRegistry, RegisteredModule
    from guidebench.release.closed_loop import run_loop, LoopSummary

_WHERE: dict[str, str] = {
    "export_frozen": "export", "load_exported": "export", "ExportResult": "export", "ExportSource": "export",
    "CompiledModuleManifest": "dsrs", "build_hub": "dsrs", "compiled_id": "dsrs",
    "GatesConfig": "gates", "SequentialGates": "gates", "load_gates": "gates", "evaluate_gates": "gates",
    "promote_module": "promotion", "rollback_module": "promotion", "PromotionLedger": "promotion", "PromotionRecord": "promotion",
    "SequentialEvidence": "promotion",
    "ShadowReport": "shadow", "shadow_report": "shadow", "start_shadow": "shadow",
    "ModuleRegistry": "model_registry", "RegisteredModule": "model_registry",
    "run_loop": "closed_loop", "LoopSummary": "closed_loop",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
