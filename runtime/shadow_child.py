"""The shadow's own process: it loads the candidate, decides each submitted turn and renders its sidecar line.

`runtime.shadow.ShadowRunner` starts `serve` in a child process (the 'spawn' start method: a fresh interpreter,
so a CPU-bound candidate holds its own interpreter lock, never the deployed loop's) and talks to it over one
pipe. Everything a line needs is computed here, so the deployed process only forwards decision lines and writes
the finished lines; it reads a line's keys itself only when the child cannot answer (it hung, died or would not
start).

The pipe's messages, in order:
- child -> parent, once: `("ready", module identity as JSON)` or `("failed", one line)`;
- parent -> child: `("job", decision line, config, why not run or "")`, or None to stop;
- child -> parent, per job: `("keys", the line's keys as JSON)` (before the candidate is called: what the parent
  writes if the candidate never answers), then `("line", status, the line as JSON)`; or `("unreadable",)` for a
  decision line or config that cannot be read (nothing joins it: no line).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from runtime.checksums import module_checksum
from runtime.fullauto import ORPHAN_RUN, DecisionLogLine, GuardrailConfig, GuardrailContext, GuidanceDecision
from runtime.guardrails import apply_guardrails
from runtime.records import inputs_hash
from runtime.shadow_log import SCHEMA_VERSION, ShadowAnswer, ShadowDecisionLine, ShadowModule

_ERROR_CHARS = 300


def module_identity(manifest: Any, folder: Path) -> ShadowModule:
    """The identity a shadow line names an exported module by: name, version and entry from its manifest
    (`runtime.frozen.manifest.FrozenManifest`), the checksum of its folder's files."""
    return ShadowModule(name=manifest.name, version=manifest.version, entry=manifest.entry,
                        checksum=module_checksum(folder))


def now() -> str:
    """The current time as the sidecar writes it (RFC 3339, UTC, microseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def error_text(exc: BaseException) -> str:
    """An exception as one short line."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:_ERROR_CHARS]


def line_text(line: ShadowDecisionLine) -> str:
    """A sidecar line as written: compact JSON, one line."""
    return json.dumps(line.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


@dataclass
class CandidateSource:
    """What the child loads: a folder (with `load_frozen`'s arguments) or a candidate object sent whole.

    `setup` runs first in the child (a picklable function: for example one that configures the LM a module
    calls); `lm`, `program` and `inputs` are `load_frozen`'s, sent to the child by pickling."""

    folder: Optional[str] = None
    candidate: Any = None
    lm: Any = None
    program: Any = None
    inputs: Any = None
    setup: Optional[Callable[[], Any]] = None

    def load(self) -> Any:
        """The candidate, loaded in this process; refuses one that calls an LM with none set."""
        if self.setup is not None:
            self.setup()
        from runtime.frozen.modules import FrozenGuidanceModule, require_lm

        if self.folder is None:
            candidate = self.candidate
            if self.lm is not None and getattr(candidate, "lm", None) is None:
                candidate.lm = self.lm  # the LM configured in the deployed process, which this one has not
        else:
            from runtime.frozen.loader import load_frozen

            candidate = load_frozen(self.folder, lm=self.lm, program=self.program, inputs=self.inputs)
        if isinstance(candidate, FrozenGuidanceModule):
            require_lm(candidate)  # it would answer the safe pause on every turn
        return candidate


def read_line(line: Any) -> DecisionLogLine:
    """A decision line from what the loop submitted: the model, its dict or its JSON text."""
    if isinstance(line, DecisionLogLine):
        return line
    if isinstance(line, (str, bytes)):
        return DecisionLogLine.model_validate_json(line)
    return DecisionLogLine.model_validate(line)


def read_config(config: Any, run_id: str) -> GuardrailConfig:
    """The guardrail config the shadow is judged with (the defaults for a decision of run "unknown")."""
    if run_id == ORPHAN_RUN:  # the writer had dropped the run and its config: the defaults, as the import reads it
        return GuardrailConfig()
    from runtime.frozen.arguments import read_config as read

    return read(config)


def line_keys(line: Any, config: Any, module: ShadowModule, deadline_s: float) -> dict[str, Any]:
    """The keys of a decision's sidecar line (ValueError and others for a line or config that cannot be read)."""
    logged = read_line(line)
    used = read_config(config, logged.run_id)
    summary = logged.summary.as_turn_summary()
    return dict(schema_version=SCHEMA_VERSION, workspace_id=logged.workspace_id, run_id=logged.run_id,
                sequence_id=logged.sequence_id, thread_id=logged.thread_id, turn_id=logged.turn_id,
                decision_timestamp=logged.timestamp, deployed_action=logged.action,
                inputs_hash=inputs_hash(summary, used), config=used, module=module, deadline_s=deadline_s)


def keys_text(keys: dict[str, Any]) -> str:
    """Keys as JSON (what the child sends before calling the candidate)."""
    return json.dumps({k: (v.model_dump(mode="json") if hasattr(v, "model_dump") else v) for k, v in keys.items()})


def line_of(keys: Any, status: str, **fields: Any) -> ShadowDecisionLine:
    """A sidecar line from its keys (a dict, or the JSON `keys_text` wrote) and its outcome."""
    data = json.loads(keys) if isinstance(keys, str) else {k: (v.model_dump(mode="json") if hasattr(v, "model_dump")
                                                                else v) for k, v in keys.items()}
    outcome = {k: (v.model_dump(mode="json") if hasattr(v, "model_dump") else v) for k, v in fields.items()}
    return ShadowDecisionLine.model_validate_json(json.dumps({**data, "timestamp": now(), "status": status,
                                                              **outcome}))


def _decision_of(result: Any) -> Optional[GuidanceDecision]:
    """The candidate's decision from what it returned (`decide` gives (decision, raw, usage)); None if none."""
    if isinstance(result, tuple) and result:
        result = result[0]
    if isinstance(result, GuidanceDecision):
        return result
    return None


def judge(candidate: Any, keys: dict[str, Any], deadline_s: float) -> ShadowDecisionLine:
    """Call the candidate on the keys' decision and return its line: ok, invalid, error, or timeout when it
    answered after the deadline (the parent kills a child that does not answer at all)."""
    summary = keys.pop("_summary")
    started = time.perf_counter()
    try:
        result, error = candidate.decide(summary, keys["config"]), None
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its error
        result, error = None, exc
    seconds = time.perf_counter() - started
    if seconds > deadline_s:
        return line_of(keys, "timeout", error=f"no answer within {deadline_s:g} s", latency_s=deadline_s)
    if error is not None:
        return line_of(keys, "error", error=error_text(error), latency_s=seconds)
    decision = _decision_of(result)
    if decision is None:
        return line_of(keys, "invalid", error=f"returned {type(result).__name__}, not a decision", latency_s=seconds)
    enforced, audit = apply_guardrails(decision, GuardrailContext.from_summary(summary), keys["config"])
    return line_of(keys, "invalid" if decision.parse_errors else "ok", latency_s=seconds,
                   decision=ShadowAnswer.of(decision), enforced=ShadowAnswer.of(enforced), guardrail=audit,
                   parse_errors=[str(error) for error in decision.parse_errors])


def _exit_with_parent() -> None:
    """Exit when the deployed process is gone, whatever the candidate is doing (a thread of its own)."""
    import multiprocessing
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="shadow-parent-watch", daemon=True).start()


def _stdout_to_stderr() -> None:
    """Send whatever the candidate prints to stderr: the child inherits the deployed loop's stdout, which may be the
    loop's own channel (a directive read from it), and a candidate must never write there. Both Python's
    `sys.stdout` and file descriptor 1 (a C extension, a subprocess) move."""
    import sys

    try:
        sys.stdout.flush()
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):  # no stderr to point at: drop its output instead
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    sys.stdout = sys.stderr


def _answer(conn: Any, candidate: Any, module: ShadowModule, deadline_s: float, job: tuple) -> None:
    _, line, config, not_run = job
    try:
        logged = read_line(line)
        keys = line_keys(logged, config, module, deadline_s)
    except Exception:  # noqa: BLE001 - not a decision line: counted by the parent, no line to join
        conn.send(("unreadable",))
        return
    if not_run:
        conn.send(("line", "timeout", line_text(line_of(keys, "timeout", error=not_run, latency_s=0.0))))
        return
    conn.send(("keys", keys_text(keys)))
    item = judge(candidate, {**keys, "_summary": logged.summary.as_turn_summary()}, deadline_s)
    conn.send(("line", item.status, line_text(item)))


def serve(conn: Any, source: CandidateSource, deadline_s: float) -> None:
    """The Full Auto child's main loop (`serve_jobs`), each job a logged decision line."""
    serve_jobs(conn, source, lambda candidate, module, job: _answer(conn, candidate, module, deadline_s, job))


def serve_jobs(conn: Any, source: CandidateSource, answer: Callable[[Any, ShadowModule, Any], None]) -> None:
    """A shadow child's main loop: load the candidate, then `answer(candidate, module, job)` each job until told to
    stop or the pipe closes (a planner's child answers its packets with it too)."""
    _exit_with_parent()
    _stdout_to_stderr()
    try:
        candidate = source.load()
        module = module_identity(candidate.manifest, Path(candidate.path))
    except BaseException as exc:  # noqa: BLE001 - the parent raises it at construction
        conn.send(("failed", getattr(exc, "reason", None) or error_text(exc)))
        return
    conn.send(("ready", module.model_dump_json()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the parent closed its end
            return
        if job is None:
            return
        answer(candidate, module, job)


__all__ = ["CandidateSource", "judge", "line_keys", "line_of", "line_text", "module_identity", "serve",
           "serve_jobs"]
