"""Import workers that die with the import: a `--num-proc` worker whose parent is killed (SIGKILL, the OOM killer)
exits too, instead of waiting on its pool's queue forever.

A pool's worker holds both ends of the pool's task pipe (it was forked with them), so a dead parent never closes
it: the worker blocks for good, holding memory and the shard it was writing. `die_with_parent(pid)`, called by the
worker before its first unit, asks Linux to SIGKILL it when its parent goes (`prctl(PR_SET_PDEATHSIG)`), and on
another system starts a thread that exits the process once its parent process id changes (the worker was
re-parented). It then checks that the parent is still the one that started the pool: it may have died before the
request was made.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 1.0  # the watchdog thread's period, where prctl is not available
_armed_for: set[int] = set()


def _ask_the_kernel() -> bool:
    """PR_SET_PDEATHSIG(SIGKILL) on Linux; False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_S)
    os._exit(1)


def die_with_parent(parent_pid: int) -> None:
    """Make this process (a worker started by process `parent_pid`) exit when that process dies; once per process,
    nothing in the parent itself (a one-process import runs its units there)."""
    if os.getpid() == parent_pid or parent_pid in _armed_for:
        return
    _armed_for.add(parent_pid)
    if not _ask_the_kernel():
        threading.Thread(target=_watch, args=(parent_pid,), name="import-parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the request: nobody will send the signal
        os._exit(1)


__all__ = ["die_with_parent"]
