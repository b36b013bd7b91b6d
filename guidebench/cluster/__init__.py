"""Where the data path's independent units run: this process, or a cluster engine's workers.

`session(address)` connects to a running Dask distributed scheduler (`--cluster ADDRESS` or GUIDEBENCH_CLUSTER on
`data import`, `eval`, `postmortem`, `compile`) and installs its map for the block (`evals.tasks`): import shards,
per-record replay, the post-mortem's resamples and the off-policy bootstrap then run as the engine's tasks, and give
byte for byte what one process gives. Without an address nothing is imported and nothing changes.
docs/scaling.md says how to start a cluster and why Dask.
"""

from __future__ import annotations

import argparse
import os
from contextlib import contextmanager
from typing import Iterator, Optional

from guidebench.cluster._base import ENV, ClusterError, Executor
from guidebench.cluster.local import LocalExecutor

CLUSTER_HELP = (f"address of a running Dask scheduler (tcp://HOST:8786; default: {ENV}): import shards, "
                "per-record replay and resamples run as its tasks, with the same outputs as one process; every "
                "worker must read the same paths (docs/scaling.md)")


def add_cluster_argument(parser: argparse.ArgumentParser) -> None:
    """`--cluster ADDRESS` on a command whose units can run on a cluster."""
    parser.add_argument("--cluster", default=None, metavar="ADDRESS", help=CLUSTER_HELP)


def cluster_address(given: Optional[str]) -> Optional[str]:
    """The address to use: the flag's, else GUIDEBENCH_CLUSTER's, else None (this process)."""
    address = given if given is not None else os.environ.get(ENV)
    return address.strip() or None if address else None


def connect(address: str, *, progress: bool = False) -> Executor:
    """An executor on the cluster at `address` (Dask distributed; its package is the `cluster` extra)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterError(f"--cluster {address}: Dask distributed is not installed here; install the extra: "
                           f"pip install 'guidebench[cluster]'") from None
    from guidebench.cluster.dask_engine import DaskExecutor

    return DaskExecutor(address, progress=progress)


@contextmanager
def session(address: Optional[str], *, progress: bool = False) -> Iterator[Optional[Executor]]:
    """Run the block with the cluster at `address` as the map of `evals.tasks` (None: the block as it is)."""
    if address is None:
        yield None
        return
    from evals.tasks import using

    executor = connect(address, progress=progress)
    try:
        with using(executor.map):
            yield executor
    finally:
        executor.close()


__all__ = ["CLUSTER_HELP", "ClusterError", "Executor", "LocalExecutor", "add_cluster_argument", "cluster_address",
           "connect", "session"]
