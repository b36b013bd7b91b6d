"""Release: export a compiled program as a frozen module (and the original runtime's manifest), read
packages, gate and promote a module, keep the model registry, and run the closed loop.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guidebench.release.export import export_frozen, load_exported, ExportResult, ExportSource
    from guidebench.release.dsrs import CompiledModuleManifest, build_hub, compiled_id
    from guidebench.release.packages import PackageManifest, Variant, resolve_variants
    from guidebench.release.gates import GatesConfig, load_gates, evaluate_gates
    from guidebench.release.promotion import promote_module, rollback_module, PromotionLedger, PromotionRecord
    from guidebench.release.model_registry import ModuleRegistry, RegisteredModule
    from guidebench.release.run_loop import run_loop, LoopSummary

_WHERE: dict[str, str] = {
    "export_frozen": "export", "load_exported": "export", "ExportResult": "export", "ExportSource": "export",
    "CompiledModuleManifest": "dsrs", "build_hub": "dsrs", "compiled_id": "dsrs",
    "PackageManifest": "packages", "Variant": "packages", "resolve_variants": "packages",
    "GatesConfig": "gates", "load_gates": "gates", "evaluate_gates": "gates",
    "promote_module": "promotion", "rollback_module": "promotion", "PromotionLedger": "promotion", "PromotionRecord": "promotion",
    "ModuleRegistry": "model_registry", "RegisteredModule": "model_registry",
    "run_loop": "run_loop", "LoopSummary": "run_loop",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (keeps `import guidebench.release` cheap)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
