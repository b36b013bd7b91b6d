"""Frozen modules: the manifest format, the loader that verifies a module before it runs, and the
standalone programs it returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from runtime.frozen.loader import load_frozen, verify_frozen, read_program_state, read_demo_selection
    from runtime.frozen.manifest import FrozenManifest, FrozenModuleError, FORMAT_VERSION, MANIFEST_FILE, PROGRAM_FILE, KNN_FILE
    from runtime.frozen.modules import FrozenDecisionProgram, FrozenPlannerProgram, FrozenGuidanceModule, FrozenPlannerModule, NearestDemosProgram
    from runtime.frozen.knn import DemoSelector
    from runtime.frozen.arguments import FrozenInputError

_WHERE: dict[str, str] = {
    "load_frozen": "loader", "verify_frozen": "loader", "read_program_state": "loader", "read_demo_selection": "loader",
    "FrozenManifest": "manifest", "FrozenModuleError": "manifest", "FORMAT_VERSION": "manifest", "MANIFEST_FILE": "manifest", "PROGRAM_FILE": "manifest", "KNN_FILE": "manifest",
    "FrozenDecisionProgram": "modules", "FrozenPlannerProgram": "modules", "FrozenGuidanceModule": "modules", "FrozenPlannerModule": "modules", "NearestDemosProgram": "modules",
    "DemoSelector": "knn",
    "FrozenInputError": "arguments",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
