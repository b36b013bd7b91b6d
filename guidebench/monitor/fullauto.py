"""What the monitor watches in a Full Auto workspace (formats.md §1.4): the decisions file, the raw file, the run
files and events, and the labels side file as labels arrive.

Per decision: the guardrail override (the enforced action differs from the model's, as the replay metric
`guardrail_override_rate` counts it), the enforced action (the action mix) and whether the turn's features are
inside the champion's support. Per raw line: a parse failure (the production parser reported errors) and a
safe-fail pause (the answer's action was unknown or missing, so the decision defaulted to pause). Per label,
whenever it arrives, on the decision it belongs to (run_id, sequence_id, turn_id; else run_id and turn_id): the
objective (1 - cost / 5, 0 for a safe-fail answer, as `evals.metrics_fullauto`), the accuracy of the
enforced action and the label mix (the share of labels that say continue). A label that arrives before its decision
waits for it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from evals.metrics_fullauto import COST

from guidebench.monitor._base import MetricSpec, MonitorState
from guidebench.monitor.checks import Observations
from guidebench.monitor.readers import Appended, Line, appended, lines_of, loads, quarantine, read_bytes, read_new, \
    record_key
from guidebench.monitor.support import fit_support, outside, support_baseline, trained_scaling, turn_vector

DECISIONS_FILE = "fullauto-decisions.jsonl"
RAW_FILE = "fullauto-decisions-raw.jsonl"
LABELS_FILE = "labels.jsonl"
RUNS_DIR = "runs"
ACTIONS = ("continue", "pause", "stop")
PENDING_LIMIT = 200_000  # turns awaiting labels (and labels awaiting turns) kept; older ones are counted, then let go
DEFAULT_CONFIG = {"min_confidence": 0.55, "max_turns": 200, "no_progress_limit": 3, "max_tokens": None}

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(name="override_rate", meaning="share of decisions the guardrails overrode",
               evidence=("guardrail_override_rate",)),
    MetricSpec(name="parse_failure_rate", meaning="share of answers the production parser reported errors in"),
    MetricSpec(name="safe_fail_pause_rate", meaning="share of answers without a known action, paused by default"),
    MetricSpec(name="action_share.continue", meaning="share of decisions that continued"),
    MetricSpec(name="action_share.pause", meaning="share of decisions that paused"),
    MetricSpec(name="action_share.stop", meaning="share of decisions that stopped"),
    MetricSpec(name="objective", meaning="objective on labeled turns (1 - cost/5)", binary=False,
               evidence=("objective",), unit="labeled turns"),
    MetricSpec(name="accuracy", meaning="enforced action equal to the label, on labeled turns",
               evidence=("action_accuracy",), unit="labeled turns"),
    MetricSpec(name="label_share.continue", meaning="share of labeled turns whose label is continue (the label mix)",
               unit="labeled turns"),
    MetricSpec(name="out_of_support", meaning="share of turns whose features are outside the champion's support",
               one_sided=True),
)


def dispatch(action: Any) -> Optional[str]:
    """The action production dispatches: review is a pause."""
    text = str(action or "").strip().lower()
    return "pause" if text == "review" else text if text in ACTIONS else None


def workspaces(logs: Path) -> list[Path]:
    """Every workspace folder under LOGS (LOGS itself when it holds a decisions file)."""
    if (logs / DECISIONS_FILE).is_file():
        return [logs]
    return sorted(p.parent for p in logs.rglob(DECISIONS_FILE))


class FullAutoWatch:
    """One pass over the new records of every workspace."""

    def __init__(self, state: MonitorState, champion: Any, alpha_k: float, reference: int) -> None:
        self.state = state
        self.obs: dict[str, Observations] = {}
        # Metrics observed on the same records share their times and places (a pass makes 100,000 observations).
        self.raw_at, self.raw_where, (self.parse_failed, self.safe_failed) = self._group(
            "parse_failure_rate", "safe_fail_pause_rate")
        self.decision_at, self.decision_where, (self.overridden, *self.shares) = self._group(
            "override_rate", *(f"action_share.{action}" for action in ACTIONS))
        self.label_at, self.label_where, (self.objective, self.accurate, self.said_continue) = self._group(
            "objective", "accuracy", "label_share.continue")
        self.obs["out_of_support"] = Observations()
        assert set(self.obs) == {spec.name for spec in METRICS}
        self.seen = set(state.seen)
        self.pending = state.pending.setdefault("turns", {})  # label key -> [enforced action, safe-fail, where]
        self.by_turn = state.pending.setdefault("turn_keys", {})  # run|turn -> label key
        self.early = state.pending.setdefault("labels", {})  # label key -> [label action, where]
        self.failed = state.pending.setdefault("safe_fail", {})  # label key -> 1 (raw line without an action)
        self.configs = state.pending.setdefault("configs", {})
        self.rows: list[list[float]] = []
        self.row_at: list[str] = []
        self.row_where: list[str] = []
        self.champion, self.alpha_k, self.reference = champion, alpha_k, reference

    def _group(self, *names: str) -> tuple[list[str], list[str], list[list[float]]]:
        at: list[str] = []
        where: list[str] = []
        for name in names:
            self.obs[name] = Observations(at=at, where=where)
        return at, where, [self.obs[name].values for name in names]

    def count(self, name: str, k: int = 1) -> None:
        self.state.counts[name] = self.state.counts.get(name, 0) + k

    def _new(self, kind: str, line: Line, *parts: Any) -> bool:
        key = record_key(kind, *parts)
        if key in self.seen:
            self.count("duplicates_skipped")
            return False
        self.seen.add(key)
        self.state.seen.append(key)
        return True

    def _config(self, runs: str, run_id: str) -> dict[str, Any]:
        if run_id not in self.configs:
            try:  # os.path.join is `Path /` (an absolute part wins there too) at a tenth of its cost
                data = loads(read_bytes(os.path.join(runs, f"{run_id}.json")), _utf8_json)
                self.configs[run_id] = {k: data.get(k, v) for k, v in DEFAULT_CONFIG.items()}
            except (OSError, ValueError, AttributeError):
                return dict(DEFAULT_CONFIG)  # not written yet (or never: an orphan decision); asked again next time
        return self.configs[run_id]

    def read(self, logs: Path) -> None:
        """Read what every workspace appended."""
        for root in workspaces(logs):
            name = root.relative_to(logs).as_posix() if root != logs else "."
            for line in read_new(root / RAW_FILE, self.state, f"{name}/{RAW_FILE}"):
                self.raw(line)
            runs = os.path.join(root, RUNS_DIR)
            for line in read_new(root / DECISIONS_FILE, self.state, f"{name}/{DECISIONS_FILE}"):
                self.decision(runs, line)
            for line in read_new(root / LABELS_FILE, self.state, f"{name}/{LABELS_FILE}"):
                self.label(line)
            self.events(root, name)
        self.support_rows()
        self.trim()

    def raw(self, line: Line) -> None:
        d = line.data
        if not self._new("raw", line, d.get("run_id"), d.get("sequence_id"), d.get("turn_id"), d.get("timestamp")):
            return
        diagnostics = d.get("parse_diagnostics")
        if not isinstance(diagnostics, dict):
            quarantine(self.state, line.file, line.number, "parse_diagnostics", "missing or not an object")
            return
        errors = diagnostics.get("parse_errors") or []
        action = str(diagnostics.get("action_parsed") or diagnostics.get("action_raw") or "").strip().lower()
        safe_fail = action not in ACTIONS + ("review",)
        self.raw_at.append(str(d.get("timestamp") or ""))
        self.raw_where.append(line.where())
        self.parse_failed.append(float(bool(errors)))
        self.safe_failed.append(float(safe_fail))
        if safe_fail:  # the decision may be waiting for its label already (the raw file was read later)
            key = _label_key(d)
            if key in self.pending:
                self.pending[key][1] = 1
            else:
                self.failed[key] = 1
        self.count("raw_lines")

    def decision(self, runs: str, line: Line) -> None:
        d = line.data
        if not self._new("decision", line, d.get("run_id"), d.get("sequence_id"), d.get("turn_id"),
                         d.get("timestamp")):
            return
        enforced = dispatch(d.get("action"))
        if enforced is None:
            quarantine(self.state, line.file, line.number, "action", f"not an action: {d.get('action')!r}")
            return
        at, where = str(d.get("timestamp") or ""), line.where()
        audit = d.get("guardrail")
        model_action = dispatch(audit.get("original_action")) if isinstance(audit, dict) else enforced
        self.decision_at.append(at)
        self.decision_where.append(where)
        self.overridden.append(float(model_action != enforced))
        for action, values in zip(ACTIONS, self.shares):
            values.append(float(enforced == action))
        summary = d.get("summary")
        if isinstance(summary, dict):
            self.rows.append(turn_vector(summary, self._config(runs, str(d.get("run_id")))))
            self.row_at.append(at)
            self.row_where.append(where)
        key, turn_key = _label_key(d), _turn_key(d)
        safe_fail = bool(self.failed.pop(key, 0))
        waiting = self.early.pop(key, None) or self.early.pop(turn_key, None)
        if waiting is not None:
            self.score(waiting[0], enforced, safe_fail, at, where)
        else:
            self.pending[key] = [enforced, int(safe_fail), where, at]
            self.by_turn[turn_key] = key
        self.count("decisions")

    def label(self, line: Line) -> None:
        d = line.data
        label = d.get("label")
        action = dispatch(label.get("action")) if isinstance(label, dict) else None
        if action is None:
            quarantine(self.state, line.file, line.number, "label.action", "missing or not an action")
            return
        if not self._new("label", line, d.get("run_id"), d.get("sequence_id"), d.get("turn_id")):
            return
        key, turn_key = _label_key(d), _turn_key(d)
        turn = self.pending.pop(key, None)
        if turn is None and d.get("sequence_id") is None:
            key = self.by_turn.get(turn_key, key)
            turn = self.pending.pop(key, None)
        if turn is None:
            self.early[key if d.get("sequence_id") is not None else turn_key] = [action, line.where()]
            self.count("labels_before_their_turn")
            return
        self.by_turn.pop(turn_key, None)
        self.score(action, turn[0], bool(turn[1]), turn[3] if len(turn) > 3 else "", turn[2])
        self.count("labels")

    def score(self, label: str, enforced: str, safe_fail: bool, at: str, where: str) -> None:
        objective = 0.0 if safe_fail else 1.0 - COST[label][enforced] / 5.0
        self.label_at.append(at)
        self.label_where.append(where)
        self.objective.append(objective)
        self.accurate.append(float(label == enforced))
        self.said_continue.append(float(label == "continue"))

    def events(self, root: Path, name: str) -> None:
        """Count run events by type (run_started, run_paused, run_disabled), from each run's events file."""
        folder = os.path.join(root, RUNS_DIR)
        if not os.path.isdir(folder):
            return
        with os.scandir(folder) as entries:
            files = sorted((e.name, e.stat().st_size) for e in entries if e.name.endswith("_events.jsonl"))
        found: Counter[str] = Counter()
        for file_name, size in files:
            key = f"{name}/{RUNS_DIR}/{file_name}"
            cursor = self.state.cursors.get(key)
            if cursor is not None and cursor.offset == size:
                continue
            chunk = appended(os.path.join(folder, file_name), self.state, key)
            if chunk is not None:
                found.update(_event_types(chunk, self.state))
        for event_type, k in found.items():
            self.count(f"events.{event_type}", k)

    def support_rows(self) -> None:
        """Fill the reference window of the support, fit it, then score the turns after it."""
        state, obs = self.state, self.obs["out_of_support"]
        if state.support is None:
            kept = state.pending.setdefault("support_rows", [])
            take = max(self.reference - len(kept), 0)
            kept.extend(self.rows[:take])
            self.rows, self.row_at, self.row_where = self.rows[take:], self.row_at[take:], self.row_where[take:]
            if len(kept) < self.reference or not kept:
                return
            trained = trained_scaling(self.champion.program_state) if self.champion else None
            name = self.champion.package if self.champion else "the champion"
            state.support = fit_support(kept, trained, self.alpha_k, name)
            state.pending.pop("support_rows", None)
            metric = state.metrics["out_of_support"]
            metric.baseline = support_baseline(state.support)
        obs.values.extend(outside(self.rows, state.support).tolist())
        obs.at.extend(self.row_at)
        obs.where.extend(self.row_where)

    def trim(self) -> None:
        """Keep the waiting turns and labels bounded; what is let go is counted."""
        for name, table in (("turns_never_labeled", self.pending), ("labels_without_turn", self.early),
                            ("safe_fail_without_turn", self.failed), ("run_configs_forgotten", self.configs)):
            extra = len(table) - PENDING_LIMIT
            for key in list(table)[:max(extra, 0)]:
                del table[key]
            if extra > 0:
                self.count(name, extra)
        extra = len(self.by_turn) - PENDING_LIMIT
        for key in list(self.by_turn)[:max(extra, 0)]:
            del self.by_turn[key]


_EVENT_TYPE = re.compile(rb'"event_type"\s*:\s*"([A-Za-z_]+)"')


def _event_type(raw: bytes) -> dict[str, Any]:
    """Only the event's type (a decision event carries the whole decision line again: not parsed twice)."""
    match = _EVENT_TYPE.search(raw)
    if match is None:
        raise ValueError("no event_type")
    return {"event_type": match.group(1).decode()}


def _event_types(chunk: Appended, state: MonitorState) -> list[str]:
    """The type of each event line of the chunk, as `lines_of` with `_event_type` finds them (a line without one is
    quarantined there), without a Line per event when every line has its type (thousands of events files a pass)."""
    lines = chunk.body.splitlines()
    found = list(map(_EVENT_TYPE.search, lines))
    if all(found):  # so no line is blank either
        chunk.commit(state, len(lines))
        return [match.group(1).decode() for match in found]
    return [line.data["event_type"] for line in lines_of(chunk, state, _event_type)]


def _utf8_json(raw: bytes) -> Any:
    """A run file as it was always read (UTF-8 text, then JSON; no other encoding guessed)."""
    return json.loads(raw.decode("utf-8"))


def _label_key(d: dict[str, Any]) -> str:
    return f"{d.get('run_id')}|{d.get('sequence_id')}|{d.get('turn_id')}"


def _turn_key(d: dict[str, Any]) -> str:
    return f"{d.get('run_id')}|{d.get('turn_id')}"
