"""Full Auto log files exactly as the original writer serializes them (formats.md §1.4, §1.4.1).

Restated from the public source (openagents `full_auto.rs`, `full_auto_logging.rs`, `app_server.rs`,
`codex.rs` at 02539c71): serde structs written with `serde_json::to_string` (one line) or
`to_string_pretty` (run files); an f32 field written directly is its shortest f32 text (0.8), but
one nested in a `serde_json::Value` (the guardrail audit, the events' `data`, the diagnostics) is
widened to a double (0.800000011920929); a NaN or infinite f32 becomes `null`; the summary has no
`last_agent_message` / `last_guidance_directive`; a run ends at the first decision that is not
`continue`, and re-enabling starts a new run id on the same thread (turn_count from 0); a decision
made after the run state was dropped is logged with run_id "unknown", sequence_id 0, the
unenforced action and `guardrail: null` (its events go to `runs/unknown_events.jsonl`); a model
answer without a field reads it as "" (`Prediction::get`).
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

from runtime import GuardrailConfig, GuardrailContext, GuidanceDecision, apply_guardrails
from runtime.fullauto import guardrail_tokens


def widened(value: float) -> Optional[float]:
    """An f32 nested in a serde_json::Value: widened to a double, null when not finite."""
    if not math.isfinite(value):
        return None
    return struct.unpack("<f", struct.pack("<f", value))[0]


def direct(value: float) -> Optional[float]:
    """An f32 field written directly: its shortest text (Python's float of it), null when not finite."""
    if not math.isfinite(value):
        return None
    held = struct.unpack("<f", struct.pack("<f", value))[0]
    for digits in range(1, 10):
        candidate = float(f"{held:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == held:
            return candidate
    return held


def rfc3339(moment: datetime) -> str:
    """chrono's serde form of a DateTime<Utc> (nanoseconds, `Z`)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}123Z"


def _nested(value: Any) -> Any:
    """A serialized struct turned into a serde_json::Value: every f32 widened."""
    if isinstance(value, F32):
        return widened(value.value)
    if isinstance(value, dict):
        return {key: _nested(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nested(item) for item in value]
    return value


def _direct(value: Any) -> Any:
    if isinstance(value, F32):
        return direct(value.value)
    if isinstance(value, dict):
        return {key: _direct(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_direct(item) for item in value]
    return value


@dataclass(frozen=True)
class F32:
    """A value the writer holds as an f32."""

    value: float


@dataclass
class Turn:
    """One completed turn and the model's raw answer for it."""

    action: str
    confidence: Any  # a number, numeric text, or something the original cannot parse
    reason: str = "r"
    next_input: str = ""
    status: str = "completed"
    plan: Optional[dict] = None
    diff: Optional[dict] = None
    token_usage: Optional[dict] = None
    error: str = ""


@dataclass
class RealWriter:
    """Writes one workspace's log folder the way the original app does."""

    root: Path
    workspace_id: str = "ws-1"
    config: GuardrailConfig = field(default_factory=GuardrailConfig)
    clock: datetime = field(default_factory=lambda: datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc))
    decisions: list[dict] = field(default_factory=list)

    def _tick(self, seconds: float = 30.0) -> datetime:
        self.clock += timedelta(seconds=seconds)
        return self.clock

    def _append(self, path: Path, obj: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")

    def run(self, thread_id: str, turns: list[Turn], *, gap_s: float = 30.0, disable: bool = False) -> str:
        """One run: enable Full Auto on the thread, decide after each turn until the first non-continue."""
        run_id = f"fullauto-{uuid.uuid4()}"
        started = self._tick(gap_s)
        runs = self.root / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        metadata = {"run_id": run_id, "workspace_id": self.workspace_id, "thread_id": thread_id,
                    "started_at": rfc3339(started), "decision_model": "codex:gpt-5.1-codex-mini",
                    "min_confidence": direct(self.config.min_confidence), "max_turns": self.config.max_turns,
                    "no_progress_limit": self.config.no_progress_limit, "max_tokens": self.config.max_tokens}
        (runs / f"{run_id}.json").write_text(json.dumps(metadata, indent=2), encoding="utf-8")
        self._append(runs / f"{run_id}_events.jsonl", {"timestamp": rfc3339(started), "sequence_id": 0,
                                                       "event_type": "run_started", "data": {"thread_id": thread_id}})
        state = {"turn_count": 0, "no_progress": 0, "last_signature": None, "recent": [], "seq": 0}
        for turn in turns:
            action = self._decide(run_id, thread_id, turn, state)
            if action != "continue":
                break
        if disable:
            self._append(runs / f"{run_id}_events.jsonl", {
                "timestamp": rfc3339(self._tick(5)), "sequence_id": state["seq"], "event_type": "run_disabled",
                "data": {"workspace_id": self.workspace_id}})
        return run_id

    def _summary(self, thread_id: str, turn_id: str, turn: Turn, state: dict) -> dict:
        state["turn_count"] += 1
        plan = json.dumps(turn.plan, indent=2) if turn.plan is not None else ""
        diff = json.dumps(turn.diff, indent=2) if turn.diff is not None else ""
        if plan.strip() or diff.strip():
            signature = f"plan:{plan.strip()}\ndiff:{diff.strip()}"
            if signature == state["last_signature"]:
                state["no_progress"] += 1
            else:
                state["no_progress"], state["last_signature"] = 0, signature
        recent = json.dumps(state["recent"], indent=2) if state["recent"] else "[]"
        return {"thread_id": thread_id, "turn_id": turn_id, "last_turn_status": turn.status, "turn_error": turn.error,
                "turn_plan": plan, "diff_summary": diff,
                "token_usage": json.dumps(turn.token_usage, indent=2) if turn.token_usage is not None else "",
                "pending_approvals": "0", "pending_tool_inputs": "0", "recent_actions": recent,
                "compaction_events": "0", "turn_count": state["turn_count"], "no_progress_count": state["no_progress"]}

    def _decide(self, run_id: str, thread_id: str, turn: Turn, state: dict, orphan: bool = False) -> str:
        turn_id = str(uuid.uuid4())
        summary = self._summary(thread_id, turn_id, turn, state)
        data = {"action": turn.action, "next_input": turn.next_input, "reason": turn.reason,
                "confidence": turn.confidence}
        from runtime import parse_decision

        model = parse_decision(data)
        now = self._tick()
        if orphan:
            enforced, audit, sequence_id, run = model, None, 0, "unknown"
        else:
            context = GuardrailContext(last_turn_status=summary["last_turn_status"], turn_count=summary["turn_count"],
                                       no_progress_count=summary["no_progress_count"],
                                       tokens_used=guardrail_tokens(summary["token_usage"]))
            enforced, audit_model = apply_guardrails(model, context, self.config)
            state["seq"] += 1
            sequence_id, run = state["seq"], run_id
            audit = {"triggered": audit_model.triggered, "rule": audit_model.rule,
                     "original_action": audit_model.original_action,
                     "original_confidence": F32(model.confidence), "enforced_action": audit_model.enforced_action,
                     "enforced_confidence": F32(enforced.confidence)}
            state["recent"] = (state["recent"] + [{"turn_id": turn_id, "action": enforced.action,
                                                   "reason": enforced.reason,
                                                   # a struct field: the shortest f32
                                                   "confidence": direct(enforced.confidence),
                                                   "timestamp": int(now.timestamp())}])[-5:]
        log = {"timestamp": rfc3339(now), "sequence_id": sequence_id, "run_id": run, "workspace_id": self.workspace_id,
               "thread_id": thread_id, "turn_id": turn_id, "action": enforced.action, "confidence": F32(enforced.confidence),
               "reason": enforced.reason, "next_input_preview": enforced.next_input[:140],
               "state": "running" if enforced.action == "continue" else "paused",
               "model": "codex:gpt-5.1-codex-mini", "guardrail": audit, "summary": summary}
        self._append(self.root / "fullauto-decisions.jsonl", _direct({**log, "guardrail": _nested(audit)}))
        prediction = {"data": data, "lm_usage": {"prompt_tokens": 812, "completion_tokens": 41, "total_tokens": 853,
                                                 "cost_msats": 0}}
        diagnostics = _diagnostics(prediction, data, model)
        self._append(self.root / "fullauto-decisions-raw.jsonl", {
            "timestamp": rfc3339(now), "sequence_id": sequence_id, "run_id": run, "workspace_id": self.workspace_id,
            "thread_id": thread_id, "turn_id": turn_id, "raw_prediction": prediction,
            "parse_diagnostics": _nested(diagnostics)})
        # an orphan's events go to runs/unknown_events.jsonl: the writer appends to the file of its run id
        events = self.root / "runs" / f"{run}_events.jsonl"
        self._append(events, {"timestamp": rfc3339(now), "sequence_id": sequence_id, "event_type": "decision",
                              "data": _nested(log)})
        if enforced.action != "continue":
            self._append(events, {"timestamp": rfc3339(now), "sequence_id": sequence_id, "event_type": "run_paused",
                                  "data": {"action": enforced.action, "reason": enforced.reason}})
        self.decisions.append({"run_id": run, "sequence_id": sequence_id, "enforced": enforced, "model": model})
        return enforced.action

    def orphan(self, thread_id: str, turn: Turn) -> None:
        """A decision that finished after the run state was dropped (`run_id` "unknown")."""
        self._decide("unknown", thread_id, turn, {"turn_count": 0, "no_progress": 0, "last_signature": None,
                                                  "recent": [], "seq": 0}, orphan=True)


def _diagnostics(prediction: dict, data: dict, model: GuidanceDecision) -> dict:
    # `Prediction::get(key, None)` gives "" for a key the model did not answer
    def raw_text(value: Any) -> Optional[str]:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return json.dumps(value)
        return None

    errors = []
    if raw_text(data.get("action", "")) is None:
        errors.append("action missing or not a string")
    if raw_text(data.get("reason", "")) is None:
        errors.append("reason missing or not a string")
    return {"raw_prediction": prediction, "action_raw": raw_text(data.get("action", "")),
            "next_input_raw": raw_text(data.get("next_input", "")), "reason_raw": raw_text(data.get("reason", "")),
            "confidence_raw": data.get("confidence", ""), "action_parsed": str(data.get("action", "")),
            "next_input_parsed": str(data.get("next_input", "")), "reason_parsed": str(data.get("reason", "")),
            "confidence_parsed": F32(model.confidence), "parse_errors": errors}


PLAN_OPEN = {"explanation": "fix the importer", "plan": [{"step": "profile", "status": "completed"},
                                                         {"step": "stream rows", "status": "in_progress"}]}
PLAN_DONE = {"explanation": "fix the importer", "plan": [{"step": "profile", "status": "completed"},
                                                         {"step": "stream rows", "status": "completed"}]}


def write_real_workspace(root: Path) -> RealWriter:
    """A workspace with every shape the real writer produces (see the module docstring)."""
    writer = RealWriter(root)
    usage = {"threadId": "t", "turnId": "u", "tokenUsage": {"total": {"totalTokens": 51234, "inputTokens": 50000},
                                                           "last": {"totalTokens": 1234}}}
    # thread A: two productive continues, then a low-confidence pause (0.515 -> "0.51") ends the run ...
    writer.run("thread-a", [
        Turn("continue", 0.8, next_input="stream the rows", plan=PLAN_OPEN, diff={"files": 1}, token_usage=usage),
        Turn("continue", "0.9", next_input="batch inserts", plan=PLAN_OPEN, diff={"files": 2}),
        Turn("continue", 0.515, plan=PLAN_OPEN, diff={"files": 3}),
    ])
    # ... the user re-enables at once with no change: a new run id on the same thread, productive
    writer.run("thread-a", [
        Turn("continue", 0.85, next_input="finish", plan=PLAN_OPEN, diff={"files": 4}),
        Turn("Stop", 0.9, plan=PLAN_DONE, diff={"files": 5}),  # any case: trimmed and lower-cased
    ], gap_s=40)
    # thread B: a NaN confidence (logged null) goes through, an unknown action keeps its confidence,
    # an unknown status is kept, a missing confidence becomes 0.0 and trips low_confidence
    writer.run("thread-b", [
        Turn("continue", "NaN", next_input="keep going", plan=PLAN_OPEN, diff={"a": 1}),
        Turn("proceed", 0.95, plan=PLAN_OPEN, diff={"a": 2}, status="cancelled"),
    ], disable=True)
    writer.run("thread-b", [
        Turn("continue", "high", plan=PLAN_OPEN, diff={"a": 3}),
    ], gap_s=3600)
    writer.run("thread-b", [
        Turn("review", 0.9, plan=PLAN_OPEN, diff={"a": 4}),
    ], gap_s=20)
    writer.run("thread-c", [
        Turn("continue", -0.2, plan=PLAN_OPEN, diff={"c": 1}),
    ])
    # a -inf confidence (logged null, like NaN) is below the minimum: the original paused
    writer.run("thread-c", [
        Turn("continue", "-inf", next_input="go", plan=PLAN_OPEN, diff={"c": 1}),
    ], gap_s=15)
    writer.run("thread-c", [
        Turn("continue", 0.7, plan=PLAN_OPEN, diff={"c": 1}, status="failed", error="tests crashed"),
    ], gap_s=10)
    writer.orphan("thread-c", Turn("continue", 0.8, plan=PLAN_OPEN, diff={"c": 2}))
    writer.orphan("thread-a", Turn("pause", 0.6, plan=PLAN_DONE, diff={"files": 5}))
    return writer
