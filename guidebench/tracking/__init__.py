"""MLflow tracking: where runs are stored, one tracked run per command, library versions and
parameters on every run, and the compile run's candidates and metrics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guidebench.tracking.runs import guidebench_home, default_tracking_uri, configure, tracked_run, log_metrics, library_versions, reap_stale_runs
    from guidebench.tracking.compile import compile_run, log_split_metrics, log_paired, log_candidates

_WHERE: dict[str, str] = {
    "guidebench_home": "runs", "default_tracking_uri": "runs", "configure": "runs", "tracked_run": "runs", "log_metrics": "runs", "library_versions": "runs", "reap_stale_runs": "runs",
    "compile_run": "compile", "log_split_metrics": "compile", "log_paired": "compile", "log_candidates": "compile",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (keeps `import guidebench.tracking` cheap)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
