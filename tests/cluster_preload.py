"""Loaded into a test's `dask worker` (`--preload`): what the cluster tests need to see inside a worker.

- Every task the worker runs is logged (its pid and the function's type) under GUIDEBENCH_TEST_TASK_LOG, so a test
  can tell that a command's units ran on the cluster and on which workers.
- With GUIDEBENCH_TEST_PAUSE_AFTER=N the worker imports N shards, then pauses in the next one (a marker file
  GUIDEBENCH_TEST_PAUSE_MARKER says so): the test kills the worker, or the whole cluster, mid-task there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from guidebench.cluster import dask_engine
from guidebench.data import shards

# Dask may load a preload file twice into one module (by its path, then its copy in the worker's scratch folder):
# the originals are kept where a second load finds them, and the patches are made once.
if not hasattr(dask_engine, "original_call"):
    dask_engine.original_call = dask_engine._call
    shards.original_run = shards.UnitJob.run
_done = [0]


def _logged_call(item, fn):
    folder = os.environ.get("GUIDEBENCH_TEST_TASK_LOG")
    if folder:
        with (Path(folder) / f"{os.getpid()}.log").open("a", encoding="utf-8") as handle:
            handle.write(f"{getattr(fn, '__qualname__', None) or type(fn).__name__}\n")
    return dask_engine.original_call(item, fn)


def _pausing_run(self, unit, folder):
    after = os.environ.get("GUIDEBENCH_TEST_PAUSE_AFTER")
    if after is not None and _done[0] >= int(after):
        Path(os.environ["GUIDEBENCH_TEST_PAUSE_MARKER"]).write_text(str(os.getpid()), encoding="utf-8")
        time.sleep(3600)  # killed here by the test
    shards.original_run(self, unit, folder)
    _done[0] += 1


if dask_engine._call is dask_engine.original_call:
    dask_engine._call = _logged_call
    shards.UnitJob.run = _pausing_run
