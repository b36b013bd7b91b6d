"""Import workers that die with the import: a `--num-proc` worker whose parent is killed (SIGKILL, the OOM killer)
exits too, instead of waiting on its pool's queue forever.

A pool's worker holds both ends of the pool's task pipe (it was forked with them), so a dead parent never closes
it: the worker blocks for good, holding memory and the shard it was writing; `datasets`' map also forks a manager
process for its progress queue, which outlives its parent the same way. `die_with_parent(pid)` asks Linux to SIGKILL
the calling process when its parent goes (`prctl(PR_SET_PDEATHSIG)`), and on another system starts a thread that
exits the process once its parent process id changes (it was re-parented). It then checks that the parent is still
the one that started it: the parent may have died before the request was made.

Inside `children_die_with_this_process()`, every process this one forks (the pool's workers, the manager) calls it
as it starts (`os.register_at_fork`); a unit's job also calls it before its first unit, for workers started another
way ('spawn').
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 1.0  # the watchdog thread's period, where prctl is not available
_armed_for: set[int] = set()
_forking_for: Optional[int] = None  # the process whose forked children die with it (inside the block below)
_hooked = False


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


def _forked() -> None:
    if _forking_for is not None and os.getppid() == _forking_for:  # a child of the import, not a grandchild
        die_with_parent(_forking_for)


@contextmanager
def children_die_with_this_process() -> Iterator[None]:
    """Every process forked inside the block by this process dies with it (see the module)."""
    global _forking_for, _hooked
    if not _hooked and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)
        _hooked = True
    before, _forking_for = _forking_for, os.getpid()
    try:
        yield
    finally:
        _forking_for = before


__all__ = ["children_die_with_this_process", "die_with_parent"]
