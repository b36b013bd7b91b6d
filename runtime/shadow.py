"""Shadow decisions: a frozen candidate decides beside the deployed program, on the same turn, and is never enforced.

    shadow = ShadowRunner("exports/candidate", "logs/workspace", deadline_s=2.0)
    ...                                     # the deployed loop decides, enforces and logs its decision line
    shadow.submit(line, run.guardrail_config())   # returns at once; the candidate decides in another process
    ...
    shadow.close()

The candidate runs in a process of its own (`runtime.shadow_child`, started with the 'spawn' method): threads of
one process share its interpreter lock, so a CPU-bound candidate on a thread slowed every deployed decision
(`reports/shadow_latency.md` measures both). `submit` only queues the decision line; the runner's thread forwards
it to the child and writes the line the child renders, one per submitted decision, to `shadow-decisions.jsonl`
next to the decision log (`runtime.shadow_log` defines it): the candidate's decision after the same guardrails
(`runtime.guardrails.apply_guardrails`, the deployed run's config), or why there is none: it raised (`error`),
answered something that is not a valid decision (`invalid`), or did not answer within the deadline (`timeout`).
A child that has not answered `deadline_s` (plus a second of grace) after a call is killed and a fresh one
started; a child that dies is replaced too. While `max_pending` decisions wait, further turns are written as
`timeout` without calling the candidate. The enforced decision is never touched, and the caller never waits
for, nor sees an exception of, the candidate. `close()` (also at interpreter exit) stops the child.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from runtime._shadow_process import GRACE_S, START_TIMEOUT_S, Child, StartError, gone, live, source_of
from runtime.fullauto import DecisionLogLine
from runtime.shadow_child import line_keys, line_of, line_text, module_identity, serve
from runtime.shadow_log import SHADOW_FILE, ShadowModule

_STOP = object()


@dataclass
class _Job:
    line: Any
    config: Any
    run: bool  # False: written as a timeout without calling the candidate (the shadow was behind)


def _payload(value: Any) -> Any:
    """What is sent to the child for a submitted value: a decision line as its JSON text (pydantic's own
    serializer: quick, and read back exactly), anything else as given."""
    return value.model_dump_json() if isinstance(value, DecisionLogLine) else value


class ShadowRunner:
    """Run a frozen candidate beside the deployed program and append its decisions to `shadow-decisions.jsonl`.

    `candidate`: a Full Auto frozen module folder (loaded in the shadow's process with `load_frozen(candidate,
    lm=..., program=..., inputs=...)`, after `setup()` when given: a picklable function that prepares that
    process, for example by configuring the LM the module calls; without `lm` and `setup`, a module that calls an
    LM gets the one configured here, sent by pickling) or a module `load_frozen` returned (sent by pickling).
    `log_dir`: the workspace folder holding the decision log. A module the runtime would refuse, one that calls
    an LM with none set, and one that cannot be sent are refused at construction (`FrozenModuleError`), which
    returns once the shadow's process has loaded the candidate; afterwards nothing the candidate does reaches the
    caller. `nice` (default 19, the lowest priority): added to the shadow process's niceness, so that on a busy
    machine the deployed process gets a core first (0: the same priority).
    """

    def __init__(self, candidate: Any, log_dir: str | Path, *, deadline_s: float = 5.0, max_pending: int = 256,
                 lm: Any = None, program: Any = None, inputs: Any = None, setup: Any = None,
                 start_timeout_s: float = START_TIMEOUT_S, nice: int = 19):
        if deadline_s <= 0 or max_pending < 1 or start_timeout_s <= 0:
            raise ValueError("deadline_s and start_timeout_s must be positive, max_pending at least 1")
        self.source, manifest, where = source_of(candidate, lm=lm, program=program, inputs=inputs, setup=setup)
        if manifest.kind != "full_auto":
            raise ValueError(f"{manifest.package} is a {manifest.kind} module; shadow decisions are Full Auto's")
        self.path = Path(log_dir) / SHADOW_FILE
        self.deadline_s = float(deadline_s)
        self.max_pending = max_pending
        self.start_timeout_s = float(start_timeout_s)
        self.nice = int(nice)
        self.counts: dict[str, int] = {"submitted": 0, "written": 0, "ok": 0, "invalid": 0, "error": 0,
                                       "timeout": 0, "unreadable": 0, "lost": 0, "refused": 0, "restarts": 0}
        self._jobs: queue.Queue = queue.Queue()
        self._closed = False
        self._abandon = False  # set when close() timed out: what is still queued is written without the child
        self._broken = ""  # why no child could be started again (every further turn says so)
        self._handle: Any = None  # the sidecar, opened on its first line
        try:
            self._child: Optional[Child] = Child(self.source, self.deadline_s, self.start_timeout_s, self.nice, serve)
        except StartError as exc:
            from runtime.frozen.manifest import FrozenModuleError

            raise FrozenModuleError(str(exc), where) from None
        self.module: ShadowModule = self._child.module
        self._worker = threading.Thread(target=self._work, name="shadow-runner", daemon=True)
        self._worker.start()
        live(self)

    @property
    def pid(self) -> Optional[int]:
        """The shadow process's id (None once closed, or when none could be started again)."""
        child = self._child
        return child.process.pid if child is not None and not self._closed else None

    # --- the caller's side: O(1), never raises
    def submit(self, decision_line: Any, config: Any = None) -> None:
        """Queue the deployed loop's decision line (a `DecisionLogLine`, its dict or JSON text, as written) and the
        run's guardrail config (a `GuardrailConfig`, `RunFile`, dict, JSON text or None: the defaults); returns
        at once. Do not change the line after submitting it."""
        try:
            if self._closed:
                self.counts["refused"] += 1
                return
            self.counts["submitted"] += 1
            self._jobs.put_nowait(_Job(decision_line, config, run=self._jobs.qsize() < self.max_pending))
        except Exception:  # noqa: BLE001 - the deployed loop must never see the shadow fail
            self.counts["refused"] += 1

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every submitted decision has its line (True), or `timeout` seconds passed (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._jobs.unfinished_tasks:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop taking decisions, write the lines of those submitted and stop the shadow's process; True when every
        line was written in time (the lines still queued then are written as not run)."""
        self._closed = True
        written = self.flush(timeout)
        worker, self._worker = self._worker, None  # stopped once: closing again waits for nothing
        if worker is not None:
            if not written:
                self._abandon = True
                child = self._child
                if child is not None:
                    child.kill()  # ends a call still waited for
            self._jobs.put(_STOP)  # after the lines still queued
            worker.join()
        gone(self)
        return written

    def __enter__(self) -> "ShadowRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- the runner's thread
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is _STOP:
                    self._shut()
                    return
                self._shadow(job)
            except Exception:  # noqa: BLE001 - a bug here must not stop the next turns' lines
                self.counts["lost"] += 1
            finally:
                self._jobs.task_done()

    def _shut(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.stop()
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _shadow(self, job: _Job) -> None:
        """One decision's line: rendered by the child, or here when the child cannot answer."""
        child = self._child
        if self._abandon or child is None:
            why = "not run: the shadow was closed before its turn" if self._abandon else \
                f"not run: the shadow's process could not be started again: {self._broken}"
            self._write_here(job, "timeout" if self._abandon else "error", why)
            return
        not_run = "" if job.run else f"not run: {self.max_pending} decisions were already waiting"
        try:
            child.conn.send(("job", _payload(job.line), job.config, not_run))
        except (OSError, ValueError):  # the child is gone: replaced, and this turn says so
            self._replace(child)
            self._write_here(job, "error", "the shadow's process had exited before this turn")
            return
        except Exception:  # noqa: BLE001 - a submitted value that cannot be pickled is not a decision line
            self.counts["unreadable"] += 1
            return
        self._reply(job, child, time.perf_counter())

    def _reply(self, job: _Job, child: Child, sent: float) -> None:
        limit = self.deadline_s + GRACE_S
        first = child.receive(limit)
        if first and first[0] == "unreadable":
            self.counts["unreadable"] += 1
        elif first and first[0] == "line":
            self._write(first[1], first[2])
        elif first and first[0] == "keys":
            answer = child.receive(limit)
            if answer and answer[0] == "line":
                self._write(answer[1], answer[2])
            else:
                self._lost_child(child, job, first[1], sent, gone=answer is not None)
        else:
            self._lost_child(child, job, None, sent, gone=first is not None)

    def _lost_child(self, child: Child, job: _Job, keys: Optional[str], sent: float, gone: bool) -> None:
        """The child hung (killed now) or died (`gone`: its end of the pipe closed): the turn's line from here, and
        a fresh child."""
        seconds = time.perf_counter() - sent
        if gone:
            child.process.join(5.0)  # its pipe closes as it exits: wait for the exit code
        died = not child.process.is_alive()
        code = child.process.exitcode
        self._replace(child)
        if self._abandon:
            status, why, latency = "timeout", "not run: the shadow was closed before it answered", 0.0
        elif died:
            status, why, latency = "error", f"the shadow's process exited (code {code}) while deciding", seconds
        else:
            status, why, latency = "timeout", f"no answer within {self.deadline_s:g} s", self.deadline_s
        if keys is None:
            self._write_here(job, status, why, latency)
        else:
            self._write(status, line_text(line_of(keys, status, error=why, latency_s=latency)))

    def _replace(self, child: Child) -> None:
        child.kill()
        self._child = None
        if self._abandon:
            return
        try:
            self._child = Child(self.source, self.deadline_s, self.start_timeout_s, self.nice, serve)
            self.counts["restarts"] += 1
        except StartError as exc:
            self._broken = str(exc)

    def _write_here(self, job: _Job, status: str, why: str, latency: float = 0.0) -> None:
        """A line rendered in this process (rare: the child could not answer)."""
        try:
            keys = line_keys(job.line, job.config, self.module, self.deadline_s)
        except Exception:  # noqa: BLE001 - not a decision line: counted, no line to join
            self.counts["unreadable"] += 1
            return
        self._write(status, line_text(line_of(keys, status, error=why, latency_s=latency)))

    def _write(self, status: str, text: str) -> None:
        """Append one line and flush it (a crash loses at most the line being written)."""
        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._handle = open(self.path, "a", encoding="utf-8", newline="\n")
            self._handle.write(text + "\n")
            self._handle.flush()
            self.counts[status] += 1
            self.counts["written"] += 1
        except OSError:  # a full disk, a folder gone: counted, and the next line tries again
            self.counts["lost"] += 1
            self._handle = None


__all__ = ["ShadowRunner", "module_identity"]
