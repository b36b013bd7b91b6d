"""The planner's decision log and shadow: every directive with its stated probabilities, and a candidate beside it.

    shadow = PlannerShadow(deployed, "repo/experiments", candidate="exports/candidate", repository=root_commit)
    decision = shadow.decide(packet, iteration_id)   # the deployed module's decision, unchanged
    ...                                              # the loop applies decision.directive, logs the attempt
    shadow.close()

`decide` runs the deployed planner (a loaded `FrozenPlannerModule`) on the caller's thread, exactly as calling
`deployed.decide(packet)` would, and hands the line to a worker thread; `submit(packet, decision, iteration_id)`
does the same for a decision the caller already made. The worker sends the packet to the candidate, if any, which
runs in a process of its own (`runtime.planner_child`, started by the shadows' child machinery in
`runtime._shadow_process`: the 'spawn' method, at `nice` 19; threads of one process share its interpreter lock, so a
CPU-bound candidate on a thread slowed every deployed decision), and appends one
`runtime.planner_log.PlannerDecisionLine` to `planner-decisions.jsonl` in `log_dir`. The deployed directive is never
touched, and the caller never waits for, nor sees an exception of, the candidate or the writer: a candidate that
raises is written `error`, one that gives only its safe default `invalid`, one that misses the deadline (or is not
run because `max_pending` lines wait) `timeout`. A child that has not answered `deadline_s` (plus a second of grace)
after a call is killed and a fresh one started; one that dies is replaced too (that turn is written `error`).
`close()` (also at interpreter exit) stops the child.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from runtime._shadow_process import GRACE_S, START_TIMEOUT_S, Child, StartError, gone, live, source_of
from runtime.checksums import module_checksum
from runtime.planner_child import serve
from runtime.planner_log import PLANNER_FILE, SCHEMA_VERSION, PlannerCandidate, PlannerDecisionLine
from runtime.shadow_child import CandidateSource
from runtime.shadow_log import ShadowModule

_ERROR_CHARS = 300
_STOP = object()


def planner_identity(module: Any) -> ShadowModule:
    """The identity a sidecar line names a loaded frozen module by (name, version, entry, folder checksum)."""
    manifest = module.manifest
    return ShadowModule(name=manifest.name, version=manifest.version, entry=manifest.entry,
                        checksum=module_checksum(Path(module.path)))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _error_text(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:_ERROR_CHARS]


@dataclass
class _Job:
    packet: Any
    decision: Any
    iteration_id: int
    latency_s: Optional[float]
    run: bool  # False: the candidate is written as a timeout without being called (max_pending lines waited)


def _load(module: Any, **kwargs: Any) -> Any:
    if isinstance(module, (str, Path)):
        from runtime.frozen.loader import load_frozen

        return load_frozen(module, **{k: v for k, v in kwargs.items() if v is not None})
    return module


class PlannerShadow:
    """Log every deployed planner decision with its probabilities, and a shadowing candidate's choice beside it.

    `deployed`: a loaded planner module (`load_frozen`) or its folder (loaded with `program=`). `candidate`: a
    planner module folder (loaded in the shadow's process with `candidate_program=` and `lm=`) or a loaded module
    (sent there by pickling). Loading refuses what the runtime refuses (`FrozenModuleError`) at construction, which
    returns once the shadow's process has loaded the candidate; afterwards nothing the candidate or the writer does
    reaches the caller. `nice`: added to the shadow process's niceness (0: the loop's priority).
    """

    def __init__(self, deployed: Any, log_dir: str | Path, *, candidate: Any = None, repository: str = "",
                 deadline_s: float = 5.0, max_pending: int = 256, program: Any = None,
                 candidate_program: Any = None, lm: Any = None, start_timeout_s: float = START_TIMEOUT_S,
                 nice: int = 19):
        if deadline_s <= 0 or max_pending < 1 or start_timeout_s <= 0:
            raise ValueError("deadline_s and start_timeout_s must be positive, max_pending at least 1")
        self.deployed = _load(deployed, program=program, lm=lm)
        self.identity = planner_identity(self.deployed)
        self.candidate = candidate  # as given (a folder or a module): a next shadow starts its own process with it
        self.repository = repository
        self.deadline_s, self.max_pending = float(deadline_s), max_pending
        self.start_timeout_s, self.nice = float(start_timeout_s), int(nice)
        self.path = Path(log_dir) / PLANNER_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.written, self.restarts = 0, 0
        self.write_errors: list[str] = []
        self._abandon = False  # set when close() timed out: the lines still queued are written without a child
        self._broken = ""  # why no child could be started again (every further line says so)
        self._child: Optional[Child] = None
        self.candidate_identity: Optional[ShadowModule] = None
        if candidate is not None:
            self.source_of = self._start(candidate, lm, candidate_program)
        self._queue: queue.Queue = queue.Queue()
        self._worker: Optional[threading.Thread] = threading.Thread(target=self._work, name="planner-shadow",
                                                                    daemon=True)
        self._worker.start()
        live(self)

    def _start(self, candidate: Any, lm: Any, program: Any) -> CandidateSource:
        from runtime.frozen.manifest import FrozenModuleError

        source, manifest, where = source_of(candidate, lm=lm, program=program, inputs=None, setup=None)
        if manifest.kind != "planner":
            raise ValueError(f"{manifest.package} is a {manifest.kind} module; the planner shadow runs planners")
        try:
            self._child = Child(source, self.deadline_s, self.start_timeout_s, self.nice, target=serve)
        except StartError as exc:
            raise FrozenModuleError(str(exc), where) from None
        self.candidate_identity = self._child.module
        return source

    @property
    def pid(self) -> Optional[int]:
        """The candidate's process id (None without a candidate, once closed, or when none could be restarted)."""
        child = self._child
        return child.process.pid if child is not None else None

    def decide(self, packet: Any, iteration_id: int) -> Any:
        """The deployed module's decision (`FrozenPlannerModule.decide`, its errors included), logged on the side."""
        started = time.perf_counter()
        decision = self.deployed.decide(packet)
        self.submit(packet, decision, iteration_id, latency_s=time.perf_counter() - started)
        return decision

    def submit(self, packet: Any, decision: Any, iteration_id: int, *, latency_s: Optional[float] = None) -> None:
        """Queue the line of a decision already made; returns at once and never raises."""
        try:
            run = self.candidate is not None and self._queue.qsize() < self.max_pending
            self._queue.put_nowait(_Job(packet, decision, int(iteration_id), latency_s, run))
        except Exception as exc:  # the deployed loop goes on whatever the shadow does
            self.write_errors.append(_error_text(exc))

    def close(self, timeout: Optional[float] = None) -> None:
        """Write every queued line, then stop the worker and the candidate's process (once; closing again waits for
        nothing). With `timeout`, a worker still busy then is left to finish and the child is killed."""
        worker, self._worker = self._worker, None
        if worker is not None:
            self._queue.put(_STOP)
            worker.join(timeout)
            if worker.is_alive():
                self._abandon = True
                child = self._child
                if child is not None:
                    child.kill()  # ends a call still waited for; the worker writes it and stops
        gone(self)

    def __enter__(self) -> "PlannerShadow":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                child, self._child = self._child, None
                if child is not None:
                    child.stop()
                return
            try:
                self._append(self._line(job))
            except Exception as exc:  # a line that cannot be built or written is counted, never raised
                self.write_errors.append(_error_text(exc))

    def _line(self, job: _Job) -> PlannerDecisionLine:
        decision = job.decision
        candidate = self._candidate(job) if self.candidate is not None else None
        return PlannerDecisionLine(
            schema_version=SCHEMA_VERSION, timestamp=_now(), repository=self.repository,
            iteration_id=job.iteration_id, packet_hash=decision.packet_hash, module=self.identity,
            exploration=decision.exploration, probabilities=dict(decision.probabilities), family=decision.family,
            greedy_family=decision.greedy_family, latency_s=job.latency_s, candidate=candidate)

    def _not_run(self, status: str, why: str, latency: float = 0.0) -> PlannerCandidate:
        return PlannerCandidate(module=self.candidate_identity, status=status, error=why, latency_s=latency,
                                deadline_s=self.deadline_s)

    def _candidate(self, job: _Job) -> PlannerCandidate:
        child = self._child
        if not job.run:
            return self._not_run("timeout", f"not run: {self.max_pending} decisions were already waiting",
                                 self.deadline_s)
        if child is None:
            return self._not_run("error", f"not run: the shadow's process could not be started again: "
                                          f"{self._broken or 'closed'}")
        try:
            child.conn.send(("job", job.packet))
        except (OSError, ValueError):  # the child is gone: replaced, and this turn says so
            self._replace(child)
            return self._not_run("error", "the shadow's process had exited before this turn")
        sent = time.perf_counter()
        answer = child.receive(self.deadline_s + GRACE_S)
        if answer and answer[0] == "line":
            return PlannerCandidate.model_validate_json(answer[2])
        seconds = time.perf_counter() - sent
        if answer is not None:  # its end of the pipe closed: it died (the exit code says how)
            child.process.join(5.0)
        died, code = not child.process.is_alive(), child.process.exitcode
        self._replace(child)
        if died:
            return self._not_run("error", f"the shadow's process exited (code {code}) while deciding", seconds)
        return self._not_run("timeout", f"no answer within {self.deadline_s:g} s", self.deadline_s)

    def _replace(self, child: Child) -> None:
        """Kill a hung or dead child and start a fresh one (unless closing)."""
        child.kill()
        self._child = None
        if self._abandon:  # close() gave up waiting: no fresh process
            return
        try:
            self._child = Child(self.source_of, self.deadline_s, self.start_timeout_s, self.nice, target=serve)
            self.restarts += 1
        except StartError as exc:
            self._broken = str(exc)

    def _append(self, line: PlannerDecisionLine) -> None:
        text = json.dumps(line.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
        self.written += 1


__all__ = ["PlannerShadow", "planner_identity"]
