"""Optuna search over programs and optimizer settings: the study, its workers (one machine or many),
and the loopback services (PostgreSQL, MLflow server) that a distributed search uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guidebench.search.study import SearchRequest, run_search_command, build_space
    from guidebench.search.workers import Worker, run_pool, worker_main, reap_stale_trials
    from guidebench.search.services import PostgresCluster, postgres_cluster, MlflowServer, mlflow_server

_WHERE: dict[str, str] = {
    "SearchRequest": "study", "run_search_command": "study", "build_space": "study",
    "Worker": "workers", "run_pool": "workers", "worker_main": "workers", "reap_stale_trials": "workers",
    "PostgresCluster": "services", "postgres_cluster": "services", "MlflowServer": "services", "mlflow_server": "services",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (keeps `import guidebench.search` cheap)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
