"""The shadows' child processes, shared by `runtime.shadow.ShadowRunner` (Full Auto) and
`runtime.planner_shadow.PlannerShadow` (planner): start one with the 'spawn' method at a lowered priority, wait for
it to load its candidate, kill it once; what a candidate sends to its process; closing open shadows at exit.

A child's loop (`runtime.shadow_child.serve`, `runtime.planner_child.serve`) is called as `target(conn, source,
deadline_s)` and first sends ("ready", the module's identity as JSON) or ("failed", one line).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Optional

from runtime.shadow_child import CandidateSource, error_text
from runtime.shadow_log import ShadowModule

GRACE_S = 1.0  # past the deadline, before a silent child is killed: the pipe and the scheduler take time too
# The exit code of a shadow process that met a shadow being started while it imported the caller's script: the script
# starts one at import, outside `if __name__ == "__main__":`, and 'spawn' imports the main script again in the child.
UNGUARDED_EXIT = 86
UNGUARDED = ("the shadow's process imports the script that starts the shadow again (multiprocessing's 'spawn'), and "
             "that script starts a shadow as it is imported: start it under `if __name__ == \"__main__\":` (the "
             "example of docs/planner-shadow.md shows how)")
START_TIMEOUT_S = 120.0  # a fresh interpreter imports the runtime and loads the module (DSPy: seconds)
_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()  # open runners (and planner shadows): closed at exit
_REGISTERED = False


class StartError(Exception):
    """The shadow's process did not start, or did not load the candidate; one line."""


class Child:
    """One shadow process and the parent's end of its pipe."""

    def __init__(self, source: CandidateSource, deadline_s: float, start_timeout_s: float, nice: int,
                 target: Callable[..., None]) -> None:
        """`target(conn, source, deadline_s)`: the child's loop (`runtime.shadow_child.serve`, or the planner's
        `runtime.planner_child.serve`); it sends ("ready", module identity JSON) or ("failed", why) first."""
        context = multiprocessing.get_context("spawn")
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            # in a shadow's process, importing the caller's main script: stop here, and tell the caller why
            print(f"error: {UNGUARDED}", file=sys.stderr)
            sys.exit(UNGUARDED_EXIT)
        self._lock, self._killed = threading.Lock(), False
        self.conn, theirs = context.Pipe(duplex=True)
        self.process = context.Process(target=target, args=(theirs, source, deadline_s), name="shadow-candidate",
                                       daemon=True)
        try:
            self.process.start()
        except Exception as exc:  # the candidate, its LM or setup cannot be pickled for the child
            self.conn.close()
            raise StartError(f"cannot be sent to the shadow's process ({error_text(exc)}): pass the module's folder "
                              "(with program=, inputs=, lm= or setup= that pickle)") from None
        finally:
            theirs.close()
        lower_priority(self.process.pid, nice)  # at once: its imports and loading run at that priority too
        reply = self.receive(start_timeout_s)
        if not reply or reply[0] != "ready":
            self.stop()
            if reply and reply[0] == "failed":
                raise StartError(reply[1])
            if self.process.exitcode == UNGUARDED_EXIT:
                raise StartError(UNGUARDED)
            raise StartError(f"the shadow's process exited (code {self.process.exitcode}) before it loaded the "
                              "candidate (its own error is on stderr, before this line)" if reply else
                              f"the shadow's process did not load the candidate within {start_timeout_s:g} s")
        self.module = ShadowModule.model_validate_json(reply[1])

    def receive(self, timeout: float) -> Optional[tuple]:
        """The child's next message; ("gone",) when its end closed (it died or was killed), None when none came in
        time."""
        try:
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            return ("gone",)
        return None

    def stop(self, wait_s: float = 5.0) -> None:
        """Ask the child to stop, kill it if it does not, and release its pipe."""
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(wait_s)
        self.kill()

    def kill(self) -> None:
        """Kill the child (if still running) and close the pipe; once, from either thread."""
        with self._lock:
            if self._killed:
                return
            self._killed = True
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5.0)
        self.conn.close()


def lower_priority(pid: Optional[int], nice: int) -> None:
    """Add `nice` to the child's niceness (a busy machine then runs the deployed process first)."""
    if not nice or pid is None:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))
    except (OSError, AttributeError):  # not permitted, or no such call here: it runs at the loop's priority
        pass


def source_of(candidate: Any, **load: Any) -> tuple[CandidateSource, Any, str]:
    """What the child loads, the candidate's manifest and where it is (for refusals)."""
    folder: Optional[Path] = None
    if isinstance(candidate, (str, Path)):
        from runtime.frozen.loader import verify_frozen

        folder = Path(candidate).resolve()
        manifest = verify_frozen(folder)  # refused here at once; the child loads it in full
    else:
        manifest = candidate.manifest
    if manifest.uses_lm and load["lm"] is None and load["setup"] is None and getattr(candidate, "lm", None) is None:
        load["lm"] = _configured_lm()
    if folder is not None:
        return CandidateSource(folder=str(folder), **load), manifest, str(folder)
    return CandidateSource(candidate=candidate, **load), manifest, str(getattr(candidate, "path", ""))


def _configured_lm() -> Any:
    """The LM configured in this thread, if DSPy is in use here (sent to the child, which has none)."""
    dspy = sys.modules.get("dspy")
    return None if dspy is None else dspy.settings.lm


def _close_at_exit() -> None:
    """Close the open runners at interpreter exit: registered after multiprocessing's own exit handler (which
    terminates daemonic children), so it runs first (atexit runs the last registered first)."""
    global _REGISTERED
    if not _REGISTERED:
        _REGISTERED = True
        atexit.register(_close_all)


def _close_all() -> None:
    """At interpreter exit: every runner still open writes what is queued (bounded) and stops its process."""
    for runner in list(_LIVE):
        try:
            runner.close(runner.deadline_s + GRACE_S)
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


def live(shadow: Any) -> None:
    """Close `shadow` (anything with `close(timeout)` and `deadline_s`) at interpreter exit if still open."""
    _LIVE.add(shadow)
    _close_at_exit()


def gone(shadow: Any) -> None:
    """`shadow` was closed: nothing to do for it at exit."""
    _LIVE.discard(shadow)


__all__ = ["Child", "GRACE_S", "START_TIMEOUT_S", "StartError", "gone", "live", "lower_priority", "source_of"]
