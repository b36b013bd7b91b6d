"""Frozen modules: the manifest format, the loader that verifies a module before it runs, and the
standalone programs it returns.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.frozen.loader import load_frozen, verify_frozen, read_program_state
    from runtime.frozen.manifest import FrozenManifest, FrozenModuleError, FORMAT_VERSION, MANIFEST_FILE, PROGRAM_FILE
    from runtime.frozen.modules import FrozenDecisionProgram, FrozenPlannerProgram, FrozenGuidanceModule, FrozenPlannerModule

_WHERE: dict[str, str] = {
    "load_frozen": "loader", "verify_frozen": "loader", "read_program_state": "loader",
    "FrozenManifest": "manifest", "FrozenModuleError": "manifest", "FORMAT_VERSION": "manifest", "MANIFEST_FILE": "manifest", "PROGRAM_FILE": "manifest",
    "FrozenDecisionProgram": "modules", "FrozenPlannerProgram": "modules", "FrozenGuidanceModule": "modules", "FrozenPlannerModule": "modules",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (keeps `import runtime.frozen` cheap)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
