"""Shadow decisions: a frozen candidate decides beside the deployed program, on the same turn, and is never enforced.

    shadow = ShadowRunner("exports/candidate", "logs/workspace", deadline_s=2.0)
    ...                                     # the deployed loop decides, enforces and logs its decision line
    shadow.submit(line, run.guardrail_config())   # returns at once; the candidate decides on another thread
    ...
    shadow.close()

`submit` only queues the decision line: the candidate runs on the runner's worker thread, each call on a
thread of its own that the worker waits for at most `deadline_s`. The enforced decision is never touched,
and the caller never waits for, nor sees an exception of, the candidate. The worker appends one line per
submitted decision to `shadow-decisions.jsonl` next to the decision log (`runtime.shadow_log` defines it):
the candidate's decision after the same guardrails (`runtime.guardrails.apply_guardrails`, the deployed
run's config), or why there is none: it raised (`error`), answered something that is not a valid decision
(`invalid`), or did not answer within the deadline (`timeout`). A call past its deadline keeps running on
its own thread (Python cannot stop a thread); while `max_overdue` such calls still run, further turns are
written as `timeout` without calling the candidate, and so are turns submitted while `max_pending` wait, so
a hung or slow candidate costs the loop neither time nor memory.
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

from runtime.fullauto import (ORPHAN_RUN, DecisionLogLine, FullAutoTurnSummary, GuardrailConfig, GuardrailContext,
                              GuidanceDecision)
from runtime.checksums import module_checksum
from runtime.guardrails import apply_guardrails
from runtime.records import inputs_hash
from runtime.shadow_log import SCHEMA_VERSION, SHADOW_FILE, ShadowAnswer, ShadowDecisionLine, ShadowModule

_ERROR_CHARS = 300
_STOP = object()


def module_identity(manifest: Any, folder: Path) -> ShadowModule:
    """The identity a shadow line names an exported module by: name, version and entry from its manifest
    (`runtime.frozen.manifest.FrozenManifest`), the checksum of its folder's files."""
    return ShadowModule(name=manifest.name, version=manifest.version, entry=manifest.entry,
                        checksum=module_checksum(folder))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _error_text(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:_ERROR_CHARS]


@dataclass
class _Job:
    line: Any
    config: Any
    run: bool  # False: written as a timeout without calling the candidate (the shadow was behind)


@dataclass
class _Call:
    """One call of the candidate on its own thread."""

    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Optional[BaseException] = None
    seconds: float = 0.0
    timed_out: bool = False


def _read_line(line: Any) -> DecisionLogLine:
    if isinstance(line, DecisionLogLine):
        return line
    if isinstance(line, (str, bytes)):
        return DecisionLogLine.model_validate_json(line)
    return DecisionLogLine.model_validate(line)


def _read_config(config: Any, run_id: str) -> GuardrailConfig:
    if run_id == ORPHAN_RUN:  # the writer had dropped the run and its config: the defaults, as the import reads it
        return GuardrailConfig()
    from runtime.frozen.arguments import read_config

    return read_config(config)


def _decision_of(result: Any) -> Optional[GuidanceDecision]:
    """The candidate's decision from what it returned (`decide` gives (decision, raw, usage)); None if none."""
    if isinstance(result, tuple) and result:
        result = result[0]
    if isinstance(result, GuidanceDecision):
        return result
    return None


def _check_lm(candidate: Any) -> None:
    """A loaded module that calls an LM and has none would answer the safe pause on every turn: refused now."""
    from runtime.frozen.modules import FrozenGuidanceModule, require_lm

    if isinstance(candidate, FrozenGuidanceModule):
        require_lm(candidate)


class ShadowRunner:
    """Run a frozen candidate beside the deployed program and append its decisions to `shadow-decisions.jsonl`.

    `candidate`: a Full Auto frozen module folder (loaded with `load_frozen(candidate, lm=..., program=...,
    inputs=...)`) or a module `load_frozen` returned. `log_dir`: the workspace folder holding the decision log.
    Loading refuses a module the runtime would refuse, and one that calls an LM with none set (`FrozenModuleError`),
    at construction; afterwards nothing the candidate does reaches the caller.
    """

    def __init__(self, candidate: Any, log_dir: str | Path, *, deadline_s: float = 5.0, max_pending: int = 256,
                 max_overdue: int = 2, lm: Any = None, program: Any = None, inputs: Any = None):
        if deadline_s <= 0 or max_pending < 1 or max_overdue < 1:
            raise ValueError("deadline_s must be positive, max_pending and max_overdue at least 1")
        if isinstance(candidate, (str, Path)):
            from runtime.frozen.loader import load_frozen

            candidate = load_frozen(candidate, lm=lm, program=program, inputs=inputs)
        manifest = candidate.manifest
        if manifest.kind != "full_auto":
            raise ValueError(f"{manifest.package} is a {manifest.kind} module; shadow decisions are Full Auto's")
        _check_lm(candidate)
        self.candidate = candidate
        self.module = module_identity(manifest, candidate.path)
        self.path = Path(log_dir) / SHADOW_FILE
        self.deadline_s = float(deadline_s)
        self.max_pending = max_pending
        self.max_overdue = max_overdue
        self.counts: dict[str, int] = {"submitted": 0, "written": 0, "ok": 0, "invalid": 0, "error": 0,
                                       "timeout": 0, "unreadable": 0, "lost": 0, "refused": 0}
        self._jobs: queue.Queue = queue.Queue()
        self._overdue = 0
        self._lock = threading.Lock()
        self._closed = False
        self._worker: Optional[threading.Thread] = None
        self._handle: Any = None  # the sidecar, opened by the worker on its first line

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
            if self._worker is None:
                self._start()
        except Exception:  # noqa: BLE001 - the deployed loop must never see the shadow fail
            self.counts["refused"] += 1

    def _start(self) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="shadow-runner", daemon=True)
                self._worker.start()

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every submitted decision has its line (True), or `timeout` seconds passed (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._jobs.unfinished_tasks:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop taking decisions, write the lines of those submitted; True when every line was written in time."""
        self._closed = True
        written = self.flush(timeout)
        worker, self._worker = self._worker, None  # stopped once: closing again waits for nothing
        if worker is not None:
            self._jobs.put(_STOP)  # after the lines still queued when the flush timed out
            worker.join(timeout if written else 0)
        return written

    def __enter__(self) -> "ShadowRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- the worker's side
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is _STOP:
                    if self._handle is not None:
                        self._handle.close()
                    return
                line = self._shadow(job)
                if line is not None:
                    self._write(line)
            except Exception:  # noqa: BLE001 - a bug here must not stop the next turns' lines
                self.counts["lost"] += 1
            finally:
                self._jobs.task_done()

    def _shadow(self, job: _Job) -> Optional[ShadowDecisionLine]:
        """The sidecar line of one decision (None for a decision line that cannot be read: nothing joins it)."""
        try:
            logged = _read_line(job.line)
            config = _read_config(job.config, logged.run_id)
            summary = logged.summary.as_turn_summary()
        except Exception:  # noqa: BLE001 - not a decision line: counted, no line to join
            self.counts["unreadable"] += 1
            return None
        keys = dict(schema_version=SCHEMA_VERSION, workspace_id=logged.workspace_id, run_id=logged.run_id,
                    sequence_id=logged.sequence_id, thread_id=logged.thread_id, turn_id=logged.turn_id,
                    decision_timestamp=logged.timestamp, deployed_action=logged.action,
                    inputs_hash=inputs_hash(summary, config), config=config, module=self.module,
                    deadline_s=self.deadline_s)
        if not job.run or self._overdue >= self.max_overdue:
            why = (f"not run: {self.max_pending} decisions were already waiting" if not job.run else
                   f"not run: {self._overdue} earlier call(s) still running past the deadline")
            return self._line(keys, "timeout", error=why, latency_s=0.0)
        call = self._call(summary, config)
        if call.timed_out:
            return self._line(keys, "timeout", error=f"no answer within {self.deadline_s:g} s",
                              latency_s=self.deadline_s)
        if call.error is not None:
            return self._line(keys, "error", error=_error_text(call.error), latency_s=call.seconds)
        decision = _decision_of(call.result)
        if decision is None:
            return self._line(keys, "invalid", error=f"returned {type(call.result).__name__}, not a decision",
                              latency_s=call.seconds)
        enforced, audit = apply_guardrails(decision, GuardrailContext.from_summary(summary), config)
        return self._line(keys, "invalid" if decision.parse_errors else "ok", latency_s=call.seconds,
                          decision=ShadowAnswer.of(decision), enforced=ShadowAnswer.of(enforced), guardrail=audit,
                          parse_errors=[str(error) for error in decision.parse_errors])

    def _call(self, summary: FullAutoTurnSummary, config: GuardrailConfig) -> _Call:
        """Run the candidate on a thread of its own (a daemon: one that hangs cannot keep the process alive) and
        wait for it at most the deadline; a call still running then is overdue until it returns."""
        call = _Call()

        def run() -> None:
            started = time.perf_counter()
            try:
                call.result = self.candidate.decide(summary, config)
            except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its error
                call.error = exc
            call.seconds = time.perf_counter() - started
            with self._lock:
                if call.timed_out:
                    self._overdue -= 1
                call.done.set()

        threading.Thread(target=run, name="shadow-candidate", daemon=True).start()
        if not call.done.wait(self.deadline_s):
            with self._lock:
                if not call.done.is_set():
                    call.timed_out = True
                    self._overdue += 1
        return call

    def _line(self, keys: dict[str, Any], status: str, **fields: Any) -> ShadowDecisionLine:
        self.counts[status] += 1
        return ShadowDecisionLine(timestamp=_now(), status=status, **keys, **fields)

    def _write(self, line: ShadowDecisionLine) -> None:
        """Append one line and flush it (a crash loses at most the line being written)."""
        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._handle = open(self.path, "a", encoding="utf-8", newline="\n")
            self._handle.write(json.dumps(line.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
                               + "\n")
            self._handle.flush()
            self.counts["written"] += 1
        except OSError:  # a full disk, a folder gone: counted, and the next line tries again
            self.counts["lost"] += 1
            self._handle = None
