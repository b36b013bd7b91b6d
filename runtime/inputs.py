"""Signature inputs as text: a Full Auto turn summary and an advisor packet rendered for the prompt.

One rendering, used by training and production alike: `programs.decision_inputs` /
`programs.planner_inputs` (datasets, demos, compiles, replay) call these functions, and so does a
frozen module loaded standalone (`runtime.frozen.modules`). A compiled program therefore sees the
same input strings in production as in its demos and its training.

Pure functions of the record shapes in `runtime.fullauto` and `runtime.advisor`; no dspy needed.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .advisor import AdvisorPacket
from .fullauto import FullAutoTurnSummary

# The planner sees the last attempts of the log, one line each.
LOG_TAIL_LINES = 20
TEXT_CLIP = 160
LOG_LINE_CLIP = 200
NO_ATTEMPTS = "(no attempts yet)"
# What `packet_inputs` returns: the planner signature's inputs, plus the whole packet as JSON
# (`packet`) for programs and policies that need more than the rendered text.
PACKET_INPUT_NAMES: tuple[str, ...] = (
    "goal", "plateau_valid_iters_since_best", "strategy_family_constraints", "experiment_summary",
    "experiment_log_tail", "performance_profile", "packet",
)
_PROFILE_KEYS: tuple[str, ...] = (
    "min_cycles_by_engine", "resource_lb_cycles", "cp_lb_cycles", "tight_lb_cycles",
    "schedule_cycles_estimate", "schedule_slack_pct",
)


def input_text(value: Any) -> str:
    """A value as a signature input: text unchanged, None empty, anything else JSON (sorted keys)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def compact_json(obj: Any) -> str:
    """Compact JSON with sorted keys (what the planner's JSON inputs hold)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def clip_text(text: Any, limit: int = TEXT_CLIP) -> str:
    """Whitespace folded to single spaces, cut to `limit` characters with an ellipsis."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary_inputs(summary: FullAutoTurnSummary) -> dict[str, str]:
    """Every turn-summary field as text: the signature's inputs plus the extras programs may use."""
    return {name: input_text(value) for name, value in summary.model_dump(mode="json").items()}


def log_line(entry: Mapping[str, Any] | str) -> str:
    """One attempt of the log tail as one line: iteration, tags, validity, cycles, delta, hypothesis."""
    if isinstance(entry, str):
        try:
            parsed = json.loads(entry)
        except ValueError:
            return clip_text(entry, LOG_LINE_CLIP)
        if not isinstance(parsed, Mapping):
            return clip_text(entry, LOG_LINE_CLIP)
        entry = parsed
    tags = entry.get("strategy_tags") or []
    tags_text = "+".join(str(tag) for tag in tags) if isinstance(tags, list) else str(tags)
    parts = [f"#{entry.get('iteration_id', '?')}", tags_text or "(no tags)",
             "valid" if entry.get("valid") is True else "invalid",
             f"cycles={entry.get('cycles')}"]
    if entry.get("delta_vs_best") is not None:
        parts.append(f"delta={entry.get('delta_vs_best')}")
    if entry.get("new_best"):
        parts.append("new_best")
    hypothesis = clip_text(entry.get("hypothesis") or entry.get("result_summary"))
    if hypothesis:
        parts.append(f"- {hypothesis}")
    return " ".join(parts)


def goal_text(packet: AdvisorPacket) -> str:
    """The packet's goal with its numbers."""
    if packet.goal == "threshold":
        return f"threshold: reach {packet.threshold_target} cycles (best so far {packet.best_cycles})"
    aspiration = packet.aspiration_cycles if packet.aspiration_cycles is not None else (
        packet.best_cycles - 1 if packet.best_cycles is not None else None)
    return f"best: beat {packet.best_cycles} cycles (aspiration {aspiration})"


def tail_entries(packet: AdvisorPacket) -> list[dict[str, Any]]:
    """The packet's log tail as dicts: the original sends raw JSONL lines, which are parsed here.

    A line that is not a JSON object cannot take part in the pivot policy and is left out; it still
    appears, verbatim, in the rendered `experiment_log_tail` input.
    """
    entries = []
    for item in packet.experiment_log_tail:
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError:
                continue
        if isinstance(item, Mapping):
            entries.append(dict(item))
    return entries


def packet_inputs(packet: AdvisorPacket) -> dict[str, str]:
    """The planner's signature inputs as compact text, plus the full packet JSON as `packet`."""
    summary = packet.experiment_summary
    summary_view = {
        "best_cycles": summary.best_cycles,
        "best_cycles_by_family": summary.best_cycles_by_family,
        "invalid_counts": summary.invalid_counts,
    }
    profile = packet.performance_profile
    profile_view = "" if profile is None else compact_json({
        key: value for key, value in profile.model_dump().items()
        if key in _PROFILE_KEYS and value not in (None, {})
    })
    tail = packet.experiment_log_tail[-LOG_TAIL_LINES:]
    plateau = packet.plateau_valid_iters_since_best
    return {
        "goal": goal_text(packet),
        "plateau_valid_iters_since_best": "" if plateau is None else str(plateau),
        "strategy_family_constraints": compact_json(packet.strategy_family_constraints.model_dump()),
        "experiment_summary": compact_json(summary_view),
        "experiment_log_tail": "\n".join(log_line(entry) for entry in tail) or NO_ATTEMPTS,
        "performance_profile": profile_view,
        "packet": packet.model_dump_json(),
    }


__all__ = [
    "LOG_TAIL_LINES", "PACKET_INPUT_NAMES", "clip_text", "compact_json", "goal_text", "input_text", "log_line",
    "packet_inputs", "summary_inputs", "tail_entries",
]
