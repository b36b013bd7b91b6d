"""MLflow tracking: where runs are stored, one tracked run per command, library versions and
parameters on every run, and the compile run's candidates and metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.tracking.runs import guidebench_home, default_tracking_uri, configure, tracked_run, log_metrics, library_versions, quiet_mlflow, reap_stale_runs
    from guidebench.tracking.compile import compile_run, log_split_metrics, log_paired, log_candidates
    from guidebench.tracking.postmortem import log_postmortem, log_comparison, log_postmortem_file

_WHERE: dict[str, str] = {
    "guidebench_home": "runs", "default_tracking_uri": "runs", "configure": "runs", "tracked_run": "runs", "log_metrics": "runs", "library_versions": "runs", "quiet_mlflow": "runs", "reap_stale_runs": "runs",
    "compile_run": "compile", "log_split_metrics": "compile", "log_paired": "compile", "log_candidates": "compile",
    "log_postmortem": "postmortem", "log_comparison": "postmortem", "log_postmortem_file": "postmortem",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
