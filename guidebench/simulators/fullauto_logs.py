"""The Full Auto log files exactly as the original writer serializes them (formats.md §1.4, §1.4.1).

Restated from the public source (openagents `full_auto.rs`, `full_auto_logging.rs`,
`backend/app_server.rs`, `codex.rs` at 02539c71; serde_json with `preserve_order`):
- every line is `serde_json::to_string` of a struct: keys in the struct's field order, compact, no
  escaping of non-ASCII, floats as ryu writes them (`runtime.guardrails.serde_json_text`);
- an f32 written as a struct field is its shortest text (0.8); one nested in a `serde_json::Value`
  (the guardrail audit, the decision event's `data`, the diagnostics) was converted by `to_value`,
  which widens it to a double (0.800000011920929); a NaN or infinite f32 is `null` either way;
- the logged summary is the `FullAutoTurnSummary` of that build: no `last_agent_message`, no
  `last_guidance_directive`;
- `runs/<run_id>.json` is `to_string_pretty` of the run metadata, without a final newline;
- the events are `run_started` (sequence 0), `decision` (its `data` is the whole decision line as a
  value), `run_paused` (`{action, reason}`, after a decision that is not continue) and
  `run_disabled` (`{workspace_id}`, sequence = the run's last decision sequence).
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Mapping, Optional

from runtime.fullauto import DecisionLogLine, RawDecisionLogLine, RunEvent, RunFile, f32_shortest
from runtime.guardrails import serde_json_text

# The build that writes the decision logs: its summary struct, in field order.
SUMMARY_FIELDS: tuple[str, ...] = (
    "thread_id", "turn_id", "last_turn_status", "turn_error", "turn_plan", "diff_summary", "token_usage",
    "pending_approvals", "pending_tool_inputs", "recent_actions", "compaction_events", "turn_count",
    "no_progress_count",
)
AUDIT_FIELDS: tuple[str, ...] = ("triggered", "rule", "original_action", "original_confidence", "enforced_action",
                                 "enforced_confidence")
DIAGNOSTICS_FIELDS: tuple[str, ...] = (
    "raw_prediction", "action_raw", "next_input_raw", "reason_raw", "confidence_raw", "action_parsed",
    "next_input_parsed", "reason_parsed", "confidence_parsed", "parse_errors",
)


def f32_direct(value: Optional[float]) -> Optional[float]:
    """An f32 written as a struct field: its shortest text (0.8); None (null) when not finite or absent."""
    if value is None or not math.isfinite(value):
        return None
    return f32_shortest(value)


def f32_widened(value: Optional[float]) -> Optional[float]:
    """An f32 inside a `serde_json::Value`: widened to a double (0.8 -> 0.800000011920929); None when not finite."""
    if value is None or not math.isfinite(value):
        return None
    held = f32_shortest(value)
    return struct.unpack("<f", struct.pack("<f", held))[0]


def line_text(obj: Any) -> str:
    """One JSONL line as `serde_json::to_string` writes it (with the newline `writeln!` adds)."""
    return serde_json_text(obj) + "\n"


def pretty_text(obj: Any) -> str:
    """`serde_json::to_string_pretty`: two-space indent, `"key": value`, non-ASCII kept, no final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False)


def audit_value(audit: Any) -> Optional[dict[str, Any]]:
    """The guardrail audit as the decision line nests it (a `serde_json::Value`: f32s widened)."""
    if audit is None:
        return None
    data = audit.model_dump() if hasattr(audit, "model_dump") else dict(audit)
    return {key: f32_widened(data.get(key)) if key.endswith("_confidence") else data.get(key) for key in AUDIT_FIELDS}


def summary_value(summary: Any) -> dict[str, Any]:
    """The logged summary: the fields of the writing build only, in its order."""
    data = summary.model_dump() if hasattr(summary, "model_dump") else dict(summary)
    return {key: data.get(key) for key in SUMMARY_FIELDS}


def decision_line(line: DecisionLogLine) -> dict[str, Any]:
    """A `fullauto-decisions.jsonl` line (the `FullAutoDecisionLog` struct; `confidence` a direct f32)."""
    return {
        "timestamp": line.timestamp, "sequence_id": line.sequence_id, "run_id": line.run_id,
        "workspace_id": line.workspace_id, "thread_id": line.thread_id, "turn_id": line.turn_id,
        "action": line.action, "confidence": f32_direct(line.confidence), "reason": line.reason,
        "next_input_preview": line.next_input_preview, "state": line.state, "model": line.model,
        "guardrail": audit_value(line.guardrail), "summary": summary_value(line.summary),
    }


def decision_event_data(line: DecisionLogLine) -> dict[str, Any]:
    """The `decision` event's data: the decision line through `to_value`, so its confidence is widened too."""
    return {**decision_line(line), "confidence": f32_widened(line.confidence)}


def diagnostics_value(diagnostics: Any) -> Any:
    """The parse diagnostics as the raw line nests them: the struct's `confidence_parsed` f32 widened."""
    if isinstance(diagnostics, Mapping) and "confidence_parsed" in diagnostics:
        value = diagnostics["confidence_parsed"]
        widened = f32_widened(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        return {**diagnostics, "confidence_parsed": widened}
    return diagnostics


def raw_line(line: RawDecisionLogLine) -> dict[str, Any]:
    """A `fullauto-decisions-raw.jsonl` line (the `FullAutoDecisionRawLog` struct)."""
    return {
        "timestamp": line.timestamp, "sequence_id": line.sequence_id, "run_id": line.run_id,
        "workspace_id": line.workspace_id, "thread_id": line.thread_id, "turn_id": line.turn_id,
        "raw_prediction": line.raw_prediction, "parse_diagnostics": diagnostics_value(line.parse_diagnostics),
    }


def event_line(event: RunEvent, data: Any = None) -> dict[str, Any]:
    """A `runs/<run_id>_events.jsonl` line (`data` replaces the event's own when given)."""
    return {"timestamp": event.timestamp, "sequence_id": event.sequence_id, "event_type": event.event_type,
            "data": event.data if data is None else data}


def run_file_text(run_file: RunFile) -> str:
    """`runs/<run_id>.json`: the run metadata, pretty, `min_confidence` a direct f32."""
    return pretty_text({
        "run_id": run_file.run_id, "workspace_id": run_file.workspace_id, "thread_id": run_file.thread_id,
        "started_at": run_file.started_at, "decision_model": run_file.decision_model,
        "min_confidence": f32_direct(run_file.min_confidence), "max_turns": run_file.max_turns,
        "no_progress_limit": run_file.no_progress_limit, "max_tokens": run_file.max_tokens,
    })
