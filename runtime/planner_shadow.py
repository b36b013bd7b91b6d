"""The planner's decision log and shadow: every directive with its stated probabilities, and a candidate beside it.

    shadow = PlannerShadow(deployed, "repo/experiments", candidate="exports/candidate", repository=root_commit)
    decision = shadow.decide(packet, iteration_id)   # the deployed module's decision, unchanged
    ...                                              # the loop applies decision.directive, logs the attempt
    shadow.close()

`decide` runs the deployed planner (a loaded `FrozenPlannerModule`) on the caller's thread, exactly as calling
`deployed.decide(packet)` would, and hands the line to a worker thread; `submit(packet, decision, iteration_id)` does
the same for a decision the caller already made. The worker runs the candidate, if any, on the same packet (each
call on a thread of its own, waited for at most `deadline_s`), and appends one `runtime.planner_log.PlannerDecisionLine`
to `planner-decisions.jsonl` in `log_dir`. The deployed directive is never touched, and the caller never waits for,
nor sees an exception of, the candidate or the writer: a candidate that raises is written `error`, one that gives
only its safe default `invalid`, one that misses the deadline (or is not run because earlier calls still hang, or
because `max_pending` lines wait) `timeout`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from runtime.checksums import module_checksum
from runtime.planner_log import PLANNER_FILE, SCHEMA_VERSION, PlannerCandidate, PlannerDecisionLine
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
    run: bool  # False: the candidate is written as a timeout without being called (the shadow was behind)


@dataclass
class _Call:
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Optional[BaseException] = None
    seconds: float = 0.0
    timed_out: bool = False


def _load(module: Any, **kwargs: Any) -> Any:
    if isinstance(module, (str, Path)):
        from runtime.frozen.loader import load_frozen

        return load_frozen(module, **{k: v for k, v in kwargs.items() if v is not None})
    return module


class PlannerShadow:
    """Log every deployed planner decision with its probabilities, and a shadowing candidate's choice beside it.

    `deployed`, `candidate`: loaded planner modules (`load_frozen`) or their folders (loaded with `program=` /
    `candidate_program=`). Loading refuses what the runtime refuses (`FrozenModuleError`) at construction;
    afterwards nothing the candidate or the writer does reaches the caller.
    """

    def __init__(self, deployed: Any, log_dir: str | Path, *, candidate: Any = None, repository: str = "",
                 deadline_s: float = 5.0, max_pending: int = 256, max_overdue: int = 2, program: Any = None,
                 candidate_program: Any = None, lm: Any = None):
        if deadline_s <= 0 or max_pending < 1 or max_overdue < 1:
            raise ValueError("deadline_s must be positive, max_pending and max_overdue at least 1")
        self.deployed = _load(deployed, program=program, lm=lm)
        self.candidate = _load(candidate, program=candidate_program, lm=lm) if candidate is not None else None
        self.identity = planner_identity(self.deployed)
        self.candidate_identity = planner_identity(self.candidate) if self.candidate is not None else None
        self.repository = repository
        self.deadline_s, self.max_pending, self.max_overdue = deadline_s, max_pending, max_overdue
        self.path = Path(log_dir) / PLANNER_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.written = 0
        self.write_errors: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._overdue = 0
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._work, name="planner-shadow", daemon=True)
        self._worker.start()

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
        """Write every queued line, then stop the worker (a candidate call still hanging is abandoned)."""
        self._queue.put(_STOP)
        self._worker.join(timeout)

    def __enter__(self) -> "PlannerShadow":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
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

    def _candidate(self, job: _Job) -> PlannerCandidate:
        identity = self.candidate_identity
        with self._lock:
            behind = self._overdue >= self.max_overdue
        if not job.run or behind:
            why = "not run: earlier calls still exceed the deadline" if behind else "not run: the shadow was behind"
            return PlannerCandidate(module=identity, status="timeout", error=why, latency_s=self.deadline_s,
                                    deadline_s=self.deadline_s)
        call = self._call(job.packet)
        if call.timed_out:
            return PlannerCandidate(module=identity, status="timeout", latency_s=self.deadline_s,
                                    deadline_s=self.deadline_s, error=f"no answer within {self.deadline_s:g} s")
        if call.error is not None:
            return PlannerCandidate(module=identity, status="error", error=_error_text(call.error),
                                    latency_s=call.seconds, deadline_s=self.deadline_s)
        result = call.result
        status = "invalid" if result.used_default else "ok"
        return PlannerCandidate(module=identity, status=status, family=result.family,
                                probabilities=dict(result.probabilities), exploration=result.exploration,
                                error="; ".join(result.errors)[:_ERROR_CHARS] if status == "invalid" else "",
                                latency_s=call.seconds, deadline_s=self.deadline_s)

    def _call(self, packet: Any) -> _Call:
        call = _Call()

        def run() -> None:
            started = time.perf_counter()
            try:
                call.result = self.candidate.decide(packet)
            except BaseException as exc:  # noqa: BLE001 - the candidate's fault is recorded, never raised
                call.error = exc
            call.seconds = time.perf_counter() - started
            with self._lock:  # done and overdue change together: a late answer frees its overdue slot once
                call.done.set()
                if call.timed_out:
                    self._overdue -= 1

        threading.Thread(target=run, name="planner-candidate", daemon=True).start()
        if not call.done.wait(self.deadline_s):
            with self._lock:
                if not call.done.is_set():
                    call.timed_out = True
                    self._overdue += 1
        return call

    def _append(self, line: PlannerDecisionLine) -> None:
        text = json.dumps(line.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
        self.written += 1


__all__ = ["PlannerShadow", "planner_identity"]
