"""Errors the CLI reports as one clear line instead of a traceback, and the two ends a command does not choose:
a write the machine refuses (a full disk) and Ctrl-C."""

import errno
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional


class GuidebenchError(Exception):
    """A user-facing error: bad input, a missing file, an impossible request."""


def refuse_unfitted(entry: str, where: str) -> None:
    """Raise the one-line error for a trained program taken straight from the registry (it has no model yet)."""
    import programs

    if programs.spec(entry).trained:
        raise GuidebenchError(f"{where} {entry}: a trained program must be fitted first: `guidebench compile "
                              f"--program {entry} --optimizer fit --data DIR`, then use its compile (`--results "
                              "COMPILE/test`, `--from-mlflow`) or its export")


# ----- writes the machine refuses ------------------------------------------------------------------

# What the operating system says when it refuses a write for a reason of its own, never the input's.
_FREE = "free some space (or give --out, GUIDEBENCH_HOME another disk) and run the command again"
_REFUSED_WRITES = {errno.ENOSPC: ("the disk is full", _FREE), errno.EDQUOT: ("the disk quota is used up", _FREE),
                   errno.EROFS: ("the file system is read-only",
                                 "give --out, GUIDEBENCH_HOME a writable place and run the command again")}
# SQLite (MLflow's and Optuna's stores) says it in words, not with an errno.
_SQLITE_FULL = "database or disk is full"


def refused_write(exc: BaseException) -> Optional[OSError]:
    """The OSError behind `exc` (itself, or what it was raised from or during) when the machine refused a write
    (full disk, quota, read-only file system); None when the failure is something else."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _REFUSED_WRITES:
            return current
        if _SQLITE_FULL in str(current):
            return OSError(errno.ENOSPC, _SQLITE_FULL)
        current = current.__cause__ or current.__context__
    return None


def write_refused_line(exc: BaseException, where: object = None) -> Optional[str]:
    """One line for a write the machine refused (what, where: the file, else `where`; what to do), or None when
    `exc` is not one."""
    found = refused_write(exc)
    if found is None:
        return None
    what, advice = _REFUSED_WRITES[found.errno]
    where = f" {found.filename or where}" if found.filename or where else ""
    return f"cannot write{where}: {what} ({found.strerror}), not a fault of the input; {advice}"


# ----- Ctrl-C ------------------------------------------------------------------------------------

_INTERRUPTED = threading.Event()


def _on_interrupt(signum: int, frame: object) -> None:
    _INTERRUPTED.set()
    raise KeyboardInterrupt


@contextmanager
def remembered_interrupts() -> Iterator[None]:
    """SIGINT (Ctrl-C, `kill -INT`) raises KeyboardInterrupt as Python's own handler does, and is remembered for
    the block.

    A KeyboardInterrupt can be lost on its way up: raised inside a class body's `__set_name__` it becomes a
    RuntimeError, and a library that imports an optional part under `except Exception` goes on. Remembered, it
    still stops the command at its next `check_interrupted()`, and the command ends with rc 130, never 0.

    SIGINT is the workbench's stop signal (a worker supervisor stops its workers with it, DSPy's parallel
    evaluation catches it), so it is taken also when the command started with SIGINT ignored (a shell without job
    control starts background commands so): otherwise such a command would ignore it until DSPy's first parallel
    evaluation and stop on it from then on. Installed in the main thread only, over Python's own handler or an
    ignored SIGINT, never over a handler of someone else's; the previous one is put back.
    """
    _INTERRUPTED.clear()
    previous = signal.getsignal(signal.SIGINT)
    installed = threading.current_thread() is threading.main_thread() and \
        previous in (signal.default_int_handler, signal.SIG_IGN, signal.SIG_DFL)
    if installed:
        signal.signal(signal.SIGINT, _on_interrupt)
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)


def check_interrupted() -> None:
    """Raise KeyboardInterrupt when Ctrl-C was pressed, even if the KeyboardInterrupt it raised was swallowed."""
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


# ----- a command's failure, as its user sees it ------------------------------------------------------

def run_reporting(call: Callable[[], Optional[int]], *, prefix: str, error_log: Callable[[], Path],
                  debug: bool = False) -> int:
    """Run a command's body and turn its failure into one line on stderr, `PREFIX: error: ...`: the CLI's and each
    search worker's (both call this). A `GuidebenchError` (the user's mistake) and a write the machine refused give
    rc 2; anything else is a bug: rc 1, its traceback kept in the file `error_log()` names (`debug`: raised as is).
    A Ctrl-C a library turned into another exception on its way up ends the command as Ctrl-C (KeyboardInterrupt)."""
    try:
        return int(call() or 0)
    except GuidebenchError as exc:
        check_interrupted()
        _say(f"{prefix}: error: {exc}")
        return 2
    except Exception as exc:  # a clear line for the user, the traceback kept for the bug report
        check_interrupted()
        refused = write_refused_line(exc)  # a full disk is the machine's, not a bug: no traceback to keep
        if refused:
            _say(f"{prefix}: error: {refused}")
            return 2
        if debug:
            raise
        _say(f"{prefix}: error: {type(exc).__name__}: {exc}{_keep_traceback(error_log)}")
        return 1


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _keep_traceback(error_log: Callable[[], Path]) -> str:
    """Write the traceback being handled to `error_log()`; ` (traceback in FILE)`, or "" when it cannot be kept."""
    import traceback

    try:
        log = error_log()
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(traceback.format_exc())
    except OSError:
        return ""
    return f" (traceback in {log})"
