"""Optuna search over programs and optimizer settings: the study, its workers (one machine or many),
and the loopback services (PostgreSQL, MLflow server) that a distributed search uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

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

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
