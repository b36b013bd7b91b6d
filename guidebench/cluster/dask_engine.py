"""Dask distributed: a scheduler's address (`dask scheduler` plus `dask worker ADDRESS` on each machine).

Imported only when a command is given `--cluster` (or GUIDEBENCH_CLUSTER): without it nothing of Dask loads.
A task is a guidebench function and its item, pickled by Dask (cloudpickle): the function is sent to each worker
once (`scatter(..., broadcast=True)`), the items one per task. A worker that dies mid-task loses its tasks to the
scheduler, which runs them again on another worker (Dask's `distributed.scheduler.allowed-failures`, 3 by default):
the tasks are pure functions of their item, so the result is the one a first run gives. A scheduler that goes away
ends the command with one line naming it; what the finished tasks wrote (an import's shards) is kept for the rerun.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any, Callable, Optional, Sequence

from guidebench.cluster._base import ClusterError, Executor

CONNECT_TIMEOUT_S = 20
WORKERS_TIMEOUT_S = 60


def _call(item: Any, fn: Callable[[Any], Any]) -> Any:
    """What a worker runs: the scattered function (Dask resolves the future) on one item."""
    return fn(item)


def _quiet_dask() -> None:
    """Dask logs a lost connection with its tracebacks while it retries, from its client's threads, also after the
    command has said what went wrong in one line (`ClusterError`): its loggers say only what would stop it for good,
    for the rest of the process. Each `distributed.*` logger has a level of its own (dask's logging config), so the
    parent's level alone would not hold them."""
    names = [name for name in logging.root.manager.loggerDict
             if name == "distributed" or name.startswith("distributed.")]
    for name in names or ["distributed"]:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _lost(address: str, exc: BaseException) -> ClusterError:
    return ClusterError(f"the cluster at {address} went away while tasks ran ({type(exc).__name__}); start it again "
                        f"(`dask scheduler`, `dask worker {address}`) and rerun the same command: finished import "
                        f"shards are kept, the rest is redone")


class DaskExecutor(Executor):
    """Tasks on a running Dask distributed scheduler."""

    name = "dask"

    def __init__(self, address: str, *, progress: bool = False) -> None:
        import distributed

        self.address, self.progress = address, progress
        _quiet_dask()
        try:
            self.client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the cluster at {address} ({type(exc).__name__}): start "
                               f"`dask scheduler` there (and `dask worker {address}` on each machine), or leave out "
                               f"--cluster / GUIDEBENCH_CLUSTER") from None
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except (OSError, TimeoutError):
            self.close()
            raise ClusterError(f"the cluster at {address} has no worker after {WORKERS_TIMEOUT_S} s: start "
                               f"`dask worker {address}` on a machine that reads the data") from None

    def workers(self) -> int:
        """How many workers the scheduler has now."""
        return len(self.client.scheduler_info(n_workers=-1).get("workers", {}))

    def describe(self) -> str:
        return f"dask {self.address} ({self.workers()} worker(s))"

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list:
        import distributed

        if not items:
            return []
        try:
            shared = self.client.scatter(fn, broadcast=True, hash=False)
            futures = self.client.map(_call, list(items), fn=shared, pure=False)
        except (OSError, TimeoutError, concurrent.futures.CancelledError) as exc:
            raise _lost(self.address, exc) from None
        try:
            self._wait(distributed, futures)
            return [future.result() for future in futures]
        except (OSError, TimeoutError, concurrent.futures.CancelledError) as exc:
            errored = next((future for future in futures if future.status == "error"), None)
            if errored is not None and errored.exception() is exc:
                raise  # the task's own error (a file it could not read), as one process raises it
            raise _lost(self.address, exc) from None
        finally:
            pending = [future for future in futures if not future.done()]
            if pending and self.client.status == "running":
                self.client.cancel(pending)

    def _wait(self, distributed: Any, futures: list) -> None:
        """Wait for every task (a bar over them); the first task that fails raises its error here."""
        from evals.progress import progress_bar

        with progress_bar(len(futures), f"tasks on {self.address}", self.progress, unit="task") as bar:
            for future in distributed.as_completed(futures, loop=self.client.loop):
                if future.status == "error":
                    future.result()
                if future.status == "cancelled":
                    raise concurrent.futures.CancelledError(f"task {future.key} cancelled")
                bar.update(1)

    def close(self) -> None:
        try:
            self.client.close(timeout=5)
        except Exception:  # noqa: BLE001 - a scheduler already gone: nothing of ours is left to close
            pass
