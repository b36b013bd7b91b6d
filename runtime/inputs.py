"""Signature inputs as text: a Full Auto turn summary and an advisor packet rendered for the prompt.

One rendering, used by training and production alike: `programs.decision_inputs` /
`programs.planner_inputs` (datasets, demos, compiles, replay) call these functions, and so does a
frozen module loaded standalone (`runtime.frozen.modules`). A compiled program therefore sees the
same input strings in production as in its demos and its training.

Two renderings of the same facts: the original's (every summary field as the loop logged it; the
planner's packet parts as compact JSON) and a compact one for `full_auto.compact` / `planner.compact`
(`compact_summary_inputs`, `compact_packet_inputs`: no ids, numbers instead of JSON blobs, one line
per fact); `full_auto.compact_state` also reads the turn counters and the agent's last message,
clipped (`compact_state_inputs`). All are always rendered, under different field names, so a labeled
example, a demo and the runtime carry whatever any signature asks for, and each signature picks its
own fields.

Pure functions of the record shapes in `runtime.fullauto` and `runtime.advisor`; no dspy needed.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any, Mapping, Optional

from pydantic import ValidationError

from .advisor import AdvisorPacket
from .fullauto import FullAutoTurnSummary, tokens_from_usage

# The planner sees the last attempts of the log, one line each.
LOG_TAIL_LINES = 20
TEXT_CLIP = 160
LOG_LINE_CLIP = 200
NO_ATTEMPTS = "(no attempts yet)"
# What `packet_inputs` returns: the planner signature's inputs, plus the whole packet as JSON
# (`packet`) for programs and policies that need more than the rendered text.
# The compact renderings' field names (the compact planner also reads `goal`, which is compact already).
COMPACT_SUMMARY_NAMES: tuple[str, ...] = (
    "status", "plan", "diff", "tokens", "approvals", "tool_inputs", "recent", "compactions",
)
COMPACT_PACKET_NAMES: tuple[str, ...] = ("plateau", "families", "best", "bound", "attempts")
# What the compact state rendering adds for `full_auto.compact_state` (`compact_state_inputs`): the turn
# counters, one number each as the summary gives them (so under the summary's own names), and the agent's
# last message on one clipped line (`message`).
COMPACT_STATE_NAMES: tuple[str, ...] = ("turn_count", "no_progress_count", "message")
# What `summary_inputs` returns: every turn-summary field, then the compact renderings' fields.
SUMMARY_INPUT_NAMES: tuple[str, ...] = tuple(dict.fromkeys(
    (*FullAutoTurnSummary.model_fields, *COMPACT_SUMMARY_NAMES, *COMPACT_STATE_NAMES)))
PACKET_INPUT_NAMES: tuple[str, ...] = (
    "goal", "plateau_valid_iters_since_best", "strategy_family_constraints", "experiment_summary",
    "experiment_log_tail", "performance_profile", "packet", *COMPACT_PACKET_NAMES,
)
# The compact rendering's limits: what one line of it may hold.
RECENT_ACTIONS = 5
RECENT_ATTEMPTS = 5
DIFF_FILE_NAMES = 3
PENDING_NAMES = 2
STEP_CLIP = 60
ERROR_CLIP = 100
FALLBACK_CLIP = 80
MESSAGE_CLIP = 200
_STEP_DONE = {"completed", "complete", "done", "finished"}
_STAT_LINE = re.compile(r"^\s*(\S.*?)\s+\|\s+(\d+)\s*(\+*)(-*)\s*$")
_STAT_BINARY = re.compile(r"^\s*(\S.*?)\s+\|\s+Bin\b")
_STAT_TOTAL = re.compile(r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?")
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
    """Every turn-summary field as text (the signature's inputs plus the extras programs may use), and
    the compact renderings' fields (`compact_summary_inputs`, `compact_state_inputs`)."""
    text = {name: input_text(value) for name, value in summary.model_dump(mode="json").items()}
    return {**text, **compact_summary_inputs(summary), **compact_state_inputs(summary)}


# ----- the compact rendering of a turn summary ------------------------------------------------------

def plan_steps(turn_plan: str) -> list[tuple[str, str]]:
    """(step, status) pairs from a plan given as JSON (`[{step, status}]`, `{plan: [...]}`) or checklist text."""
    text = (turn_plan or "").strip()
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        data = data.get("plan") or data.get("steps")
    if isinstance(data, list):
        steps = []
        for item in data:
            if isinstance(item, Mapping):
                step = str(item.get("step") or item.get("title") or item.get("text") or "").strip()
                steps.append((step, str(item.get("status") or "pending").strip().lower()))
            elif isinstance(item, str):
                steps.append((item.strip(), "pending"))
        return steps
    steps = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:[-*]|\d+[.)])?\s*\[([ xX~-])\]\s*(.+)$", line)
        if match:
            status = "completed" if match.group(1) in "xX" else "pending"
            steps.append((match.group(2).strip(), status))
    return steps


def step_done(status: str) -> bool:
    """True for a plan step status that means finished."""
    return status in _STEP_DONE


def count_of(value: Any) -> int:
    """A count written as text ("2"), a JSON list/dict (its length) or empty (0); other text counts as 1."""
    text = str(value if value is not None else "").strip()
    if not text or text.lower() in ("none", "null", "[]", "{}"):
        return 0
    if text.lstrip("-").isdigit():
        return max(0, int(text))
    try:
        data = json.loads(text)
    except ValueError:
        return 1
    if isinstance(data, (list, dict)):
        return len(data)
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return max(0, int(data))
    return 1


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def status_line(status: str, error: str) -> str:
    """The turn status, with the error (clipped) when there is one: `failed: sandbox crashed`."""
    status = " ".join((status or "").split()) or "completed"
    error = clip_text(error, ERROR_CLIP)
    return f"{status}: {error}" if error else status


def plan_line(turn_plan: str) -> str:
    """A plan as counts plus the current step: `3/5 done; current: write tests` (`none` without a plan)."""
    steps = plan_steps(turn_plan)
    if not steps:
        return clip_text(turn_plan, FALLBACK_CLIP) or "none"
    done = sum(1 for _, status in steps if step_done(status))
    open_steps = [(step, status) for step, status in steps if not step_done(status)]
    line = f"{done}/{len(steps)} done"
    if open_steps:
        # Codex's app server spells it `inProgress` (read lower-cased), older plans `in_progress`
        current = next((step for step, status in open_steps if status in ("in_progress", "inprogress")),
                       open_steps[0][0])
        line += f"; current: {clip_text(current, STEP_CLIP)}"
    return line


def _names_line(names: list[str], limit: int) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")


def diff_line(diff_summary: str) -> str:
    """A diff as counts plus file names: `+12 -3 in 2 files: a.py, b.py` (`none` when empty).

    Reads `git diff --stat` text (its totals line when present, else each file's count split by its
    +/- bar) and unified diffs, also the unified diff inside the app server's `turn/diff/updated`
    params (`{"threadId", "turnId", "diff"}`, as the original logs them); anything else is kept, clipped.
    """
    text = (diff_summary or "").strip()
    snapshot = _json_or_none(text) if text.startswith("{") else None
    if isinstance(snapshot, Mapping) and isinstance(snapshot.get("diff"), str):
        text = snapshot["diff"].strip()
    if not text:
        return "none"
    files: list[str] = []
    added = removed = 0
    total: Optional[re.Match[str]] = None
    unified = False
    for line in text.splitlines():
        stat, binary = _STAT_LINE.match(line), _STAT_BINARY.match(line)
        if stat or binary:
            files.append((stat or binary).group(1))
            if stat:
                changed, plus, minus = int(stat.group(2)), len(stat.group(3)), len(stat.group(4))
                share = plus / (plus + minus) if plus + minus else 1.0
                added += round(changed * share)
                removed += changed - round(changed * share)
        elif _STAT_TOTAL.search(line):
            total = _STAT_TOTAL.search(line)
        elif line.startswith("+++ "):
            unified = True
            path = line[4:].strip()
            if path != "/dev/null":
                files.append(path[2:] if path.startswith("b/") else path)
        elif line.startswith("--- "):
            unified = True
        elif line.startswith("+") and unified:
            added += 1
        elif line.startswith("-") and unified:
            removed += 1
    if total is not None:
        added, removed = int(total.group(2) or 0), int(total.group(3) or 0)
        count = max(int(total.group(1)), len(files))
    elif files:
        count = len(files)
    else:
        return clip_text(text, FALLBACK_CLIP)
    names = list(dict.fromkeys(PurePosixPath(name).name or name for name in files))
    line = f"+{added} -{removed} in {count} file{'s' if count != 1 else ''}"
    return f"{line}: {_names_line(names, DIFF_FILE_NAMES)}" if names else line


def tokens_line(token_usage: str) -> str:
    """Token usage as one number (the total), `unknown` when the usage states none."""
    total = tokens_from_usage(token_usage)
    return "unknown" if total is None else str(total)


def _item_name(item: Any) -> str:
    if isinstance(item, Mapping):
        for key in ("command", "name", "tool", "title", "reason", "message"):
            value = item.get(key)
            if isinstance(value, list):
                value = " ".join(str(part) for part in value)
            if value:
                return clip_text(value, 30)
        return ""
    return clip_text(item, 30) if isinstance(item, str) else ""


def pending_line(value: str) -> str:
    """Pending approvals or tool inputs as a count, with short names when the value lists them: `1 (psql -f x)`."""
    count = count_of(value)
    data = _json_or_none(str(value or "").strip())
    names = [name for name in (_item_name(item) for item in data) if name] if isinstance(data, list) else []
    return f"{count} ({_names_line(names, PENDING_NAMES)})" if names else str(count)


def recent_line(recent_actions: str) -> str:
    """The last decisions' actions, oldest first: `continue, continue, pause` (`none` when there are none)."""
    text = (recent_actions or "").strip()
    data = _json_or_none(text) if text else []
    if not isinstance(data, list):
        return clip_text(text, FALLBACK_CLIP)
    actions = [str(item.get("action") or "?") if isinstance(item, Mapping) else str(item) for item in data]
    actions = [" ".join(action.split()) for action in actions if str(action).strip()]
    return ", ".join(actions[-RECENT_ACTIONS:]) or "none"


def compact_summary_inputs(summary: FullAutoTurnSummary) -> dict[str, str]:
    """The compact rendering of a turn summary (`COMPACT_SUMMARY_NAMES`): no ids, one short line per fact."""
    return {
        "status": status_line(summary.last_turn_status, summary.turn_error),
        "plan": plan_line(summary.turn_plan),
        "diff": diff_line(summary.diff_summary),
        "tokens": tokens_line(summary.token_usage),
        "approvals": pending_line(summary.pending_approvals),
        "tool_inputs": pending_line(summary.pending_tool_inputs),
        "recent": recent_line(summary.recent_actions),
        "compactions": str(count_of(summary.compaction_events)),
    }


def message_line(message: str) -> str:
    """The agent's last message on one line (`none` when empty); a long one keeps its start and its end
    (where a report usually concludes: "... 2 tests still fail"), MESSAGE_CLIP characters in all."""
    text = " ".join((message or "").split())
    if len(text) <= MESSAGE_CLIP:
        return text or "none"
    half = (MESSAGE_CLIP - 5) // 2
    return f"{text[:half].rstrip()} ... {text[-(MESSAGE_CLIP - 5 - half):].lstrip()}"


def compact_state_inputs(summary: FullAutoTurnSummary) -> dict[str, str]:
    """What the compact state rendering adds (`COMPACT_STATE_NAMES`): the turn counters and the clipped last message."""
    return {
        "turn_count": str(summary.turn_count),
        "no_progress_count": str(summary.no_progress_count),
        "message": message_line(summary.last_agent_message),
    }


def compact_decision_inputs(inputs: Mapping[str, Any],
                            names: tuple[str, ...] = COMPACT_SUMMARY_NAMES) -> dict[str, str]:
    """The compact fields of decision inputs (`names`: COMPACT_SUMMARY_NAMES, optionally with COMPACT_STATE_NAMES):
    as given when present, else rendered from the summary fields.

    Inputs from `summary_inputs` carry every rendering; a mapping of summary fields alone (e.g. built by
    hand) is rendered here, so a compact program answers the same either way.
    """
    if all(name in inputs for name in names):
        return {name: input_text(inputs[name]) for name in names}
    fields = {name: inputs[name] for name in FullAutoTurnSummary.model_fields if inputs.get(name) is not None}
    fields.setdefault("thread_id", "")
    fields.setdefault("turn_id", "")
    for name in ("turn_count", "no_progress_count"):
        if not str(fields.get(name, "0")).strip().isdigit():
            fields.pop(name, None)
    try:
        summary = FullAutoTurnSummary.model_validate(fields, strict=False)
    except ValidationError:
        summary = FullAutoTurnSummary(thread_id="", turn_id="", **{
            name: input_text(fields.get(name)) for name in (
                "last_turn_status", "turn_error", "last_agent_message", "turn_plan", "diff_summary", "token_usage",
                "pending_approvals", "pending_tool_inputs", "compaction_events", "recent_actions") if name in fields})
    rendered = {**compact_summary_inputs(summary), **compact_state_inputs(summary)}
    return {name: rendered[name] for name in names}


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


def _family(name: Any) -> str:
    text = str(name or "")
    return text.split(":", 1)[1] if text.startswith("family:") else text


def families_line(packet: AdvisorPacket) -> str:
    """Families as the next directive must see them: `allowed reduce_loads, break_deps; blocked schedule;
    current schedule 2/2` (streak length of the current family / its cap)."""
    constraints = packet.strategy_family_constraints
    allowed = ", ".join(_family(f) for f in constraints.families_for_next())
    blocked = ", ".join(_family(f) for f in constraints.blocked_families) or "none"
    current = constraints.current_family
    streak = f"{_family(current)} {constraints.current_family_streak_len}/{constraints.max_consecutive}" \
        if current else "none"
    return f"allowed {allowed}; blocked {blocked}; current {streak}"


def best_line(packet: AdvisorPacket) -> str:
    """The best cycle count overall, by family and the invalid attempts: `1802; schedule 1802, reduce_loads
    1811; invalid schedule 1`."""
    summary = packet.experiment_summary
    best = summary.best_cycles if summary.best_cycles is not None else packet.best_cycles
    by_family = ", ".join(f"{_family(f)} {c}" for f, c in sorted(summary.best_cycles_by_family.items(),
                                                                     key=lambda item: (item[1], item[0])))
    parts = [str(best) if best is not None else "none", by_family or "no family best"]
    invalid = ", ".join(f"{_family(f)} {n}" for f, n in sorted(summary.invalid_counts.items()) if n)
    if invalid:
        parts.append(f"invalid {invalid}")
    return "; ".join(parts)


def bound_line(packet: AdvisorPacket) -> str:
    """The schedule against its lower bound: `tight 1310, estimate 1802, slack 37.6%` (`unknown` without a profile)."""
    profile = packet.performance_profile
    if profile is None:
        return "unknown"
    parts = []
    if profile.tight_lb_cycles is not None:
        parts.append(f"tight {profile.tight_lb_cycles}")
    if profile.schedule_cycles_estimate is not None:
        parts.append(f"estimate {profile.schedule_cycles_estimate}")
    if profile.schedule_slack_pct is not None:
        parts.append(f"slack {profile.schedule_slack_pct:.1%}")
    return ", ".join(parts) or "unknown"


def attempt_line(entry: Mapping[str, Any] | str) -> str:
    """One attempt as one short line: `#3 schedule/slot_packing invalid`, `#2 schedule/list 1802 (-9) best`."""
    data = _json_or_none(entry) if isinstance(entry, str) else entry
    if not isinstance(data, Mapping):
        return clip_text(entry, FALLBACK_CLIP)
    tags = data.get("strategy_tags") if isinstance(data.get("strategy_tags"), list) else []
    tags = [_family(tag) for tag in tags if str(tag).strip()][:2]
    line = f"#{data.get('iteration_id', '?')} {'/'.join(tags) or 'untagged'}"
    if data.get("valid") is not True:
        return f"{line} invalid"
    line += f" {data.get('cycles')}"
    if data.get("delta_vs_best") is not None:
        line += f" ({data.get('delta_vs_best'):+})" if isinstance(data.get("delta_vs_best"), int) \
            else f" ({data.get('delta_vs_best')})"
    return f"{line} best" if data.get("new_best") else line


def compact_packet_inputs(packet: AdvisorPacket) -> dict[str, str]:
    """The compact rendering of a packet: only what the planner acts on (`COMPACT_PACKET_NAMES` and `goal`)."""
    plateau = packet.plateau_valid_iters_since_best
    tail = packet.experiment_log_tail[-RECENT_ATTEMPTS:]
    return {
        "goal": goal_text(packet),
        "plateau": "unknown" if plateau is None else str(plateau),
        "families": families_line(packet),
        "best": best_line(packet),
        "bound": bound_line(packet),
        "attempts": "\n".join(attempt_line(entry) for entry in tail) or NO_ATTEMPTS,
    }


def compact_planner_inputs(inputs: Mapping[str, Any]) -> dict[str, str]:
    """The compact fields of planner inputs: as given when present, else rendered from the `packet` JSON."""
    names = ("goal", *COMPACT_PACKET_NAMES)
    if all(name in inputs for name in names):
        return {name: input_text(inputs[name]) for name in names}
    raw = inputs.get("packet")
    try:
        packet = raw if isinstance(raw, AdvisorPacket) else AdvisorPacket.model_validate_json(raw) \
            if isinstance(raw, str) else AdvisorPacket.model_validate(raw or {})
    except (ValidationError, ValueError):
        packet = AdvisorPacket()
    return compact_packet_inputs(packet)


def packet_inputs(packet: AdvisorPacket) -> dict[str, str]:
    """The planner's signature inputs as compact text, the full packet JSON as `packet`, and the compact
    rendering's fields (`compact_packet_inputs`)."""
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
        **compact_packet_inputs(packet),
    }


__all__ = [
    "COMPACT_PACKET_NAMES", "COMPACT_STATE_NAMES", "COMPACT_SUMMARY_NAMES", "LOG_TAIL_LINES", "PACKET_INPUT_NAMES",
    "SUMMARY_INPUT_NAMES", "attempt_line", "best_line", "bound_line", "clip_text", "compact_decision_inputs",
    "compact_json", "compact_packet_inputs", "compact_planner_inputs", "compact_state_inputs",
    "compact_summary_inputs", "count_of", "diff_line", "families_line", "goal_text", "input_text", "log_line",
    "message_line", "packet_inputs", "pending_line", "plan_line",
    "plan_steps", "recent_line", "status_line", "step_done", "summary_inputs", "tail_entries", "tokens_line",
]
