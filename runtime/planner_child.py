"""The planner shadow's own process: it loads the candidate planner and answers each packet with its sidecar entry.

`runtime.planner_shadow.PlannerShadow` starts `serve` through the shadows' child machinery (`runtime._shadow_process`:
the 'spawn' start method, lowered priority, killed and replaced when it hangs or dies), so a CPU-bound candidate
holds its own interpreter lock, never the deployed loop's. The pipe's messages, in order:
- child -> parent, once: `("ready", module identity as JSON)` or `("failed", one line)`;
- parent -> child: `("job", packet)`, or None to stop;
- child -> parent, per job: `("line", status, the `PlannerCandidate` as JSON)`.
"""

from __future__ import annotations

import time
from typing import Any

from runtime.planner_log import PlannerCandidate
from runtime.shadow_child import CandidateSource, error_text, serve_jobs
from runtime.shadow_log import ShadowModule

_ERROR_CHARS = 300


def judge(candidate: Any, module: ShadowModule, packet: Any, deadline_s: float) -> PlannerCandidate:
    """Call the candidate on a packet: ok, invalid (only its safe default for an answer it could not use), error (it
    or its program raised; a loaded module's `decide` answers its safe default then, and says so in `raised`), or
    timeout when it answered after the deadline (the parent kills a child that does not answer at all)."""
    started = time.perf_counter()
    try:
        result, error = candidate.decide(packet), None
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its error
        result, error = None, exc
    seconds = time.perf_counter() - started
    if seconds > deadline_s:
        return PlannerCandidate(module=module, status="timeout", error=f"no answer within {deadline_s:g} s",
                                latency_s=deadline_s, deadline_s=deadline_s)
    if error is None and getattr(result, "raised", ""):  # its program raised: the module answered its safe default
        error = result.raised
    if error is not None:
        return PlannerCandidate(module=module, status="error", latency_s=seconds, deadline_s=deadline_s,
                                error=error if isinstance(error, str) else error_text(error))
    try:
        status = "invalid" if result.used_default else "ok"
        return PlannerCandidate(module=module, status=status, family=result.family,
                                probabilities=dict(result.probabilities), exploration=result.exploration,
                                error=("; ".join(result.errors) or "its safe default")[:_ERROR_CHARS]
                                if status == "invalid" else "",
                                latency_s=seconds, deadline_s=deadline_s)
    except Exception as exc:  # noqa: BLE001 - not a planner decision
        return PlannerCandidate(module=module, status="invalid", latency_s=seconds, deadline_s=deadline_s,
                                error=f"returned {type(result).__name__}, not a planner decision "
                                      f"({error_text(exc)})"[:_ERROR_CHARS])


def serve(conn: Any, source: CandidateSource, deadline_s: float) -> None:
    """The planner child's main loop (`runtime.shadow_child.serve_jobs`), each job a packet."""
    def answer(candidate: Any, module: ShadowModule, job: Any) -> None:
        reply = judge(candidate, module, job[1], deadline_s)
        conn.send(("line", reply.status, reply.model_dump_json()))

    serve_jobs(conn, source, answer)


__all__ = ["judge", "serve"]
