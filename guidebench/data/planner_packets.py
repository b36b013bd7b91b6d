"""Rebuild the packet the real loop runner gave its planner (formats.md §2.3, §2.3.1) before each log entry.

Restated from `tools/loop_runner.py` (`_build_iteration_packet`, `_compute_experiment_summary`,
`_compute_strategy_family_constraints`, `_plateau_valid_iters_since_best`, `_tail_lines`):
- `best_cycles` is the lowest cycles of a valid entry so far AND of the durable `best/*` git tags. A
  log has no tags, but the runner writes `best_before` on every new-shape entry from that same
  overall best (log and tags) at record time, so the entry about to be predicted carries the tags'
  best: the packet's best is the lower of the two. When that best is not in the local log,
  `plateau_valid_iters_since_best` is null, as the runner's is (never a count from `best_before`).
- `experiment_log_tail` is the last 20 raw file lines, unparsed and unchanged.
- `experiment_summary`: `best_cycles_by_family` (an `unknown` bucket for valid attempts without a
  family tag), `last_attempt` / `last_valid_attempt` / `recent_attempts` (last 8) with the
  runner's keys (`iteration_id`, `branch`, `head_sha`, `valid`, `cycles`, `delta_vs_best`,
  `strategy_tags`, `result_summary`, `reason`), `recent_strategy_combos` (last 15), and
  `invalid_counts` {total, correctness, scope, tests} (an attempt counts once per reason).
- `strategy_family_constraints` with the runner's `policy` and `reason`.
- goal and threshold: the episode's side information when simulated; otherwise recovered from the
  log, line by line (see `line_evidence` and `GoalEvidence`).
- Entries are what the runner reads with `_read_jsonl`: every line that is a JSON object, also one
  that fails the workbench's validation (the importer feeds those too, without making a record).

`PacketBuilder` keeps only what the packet needs, so memory stays bounded however long the log is;
its results equal `runtime.pivot` evaluated on the whole prefix with the same tags' best
(`pivot.tag_best` of the entry, combined by `pivot.overall_best`; tests check this).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any, Mapping, Optional

from pydantic import ValidationError

from runtime import pivot
from runtime.advisor import THRESHOLDS, AdvisorPacket, ExperimentSummary, PerformanceProfile

from guidebench.data.ingest import INT64_RANGE

TAIL_LINES = 20
RECENT_ATTEMPTS = 8
RECENT_COMBOS = 15
ATTEMPT_KEYS = ("iteration_id", "branch", "head_sha", "valid", "cycles", "delta_vs_best", "strategy_tags",
                "result_summary")
DEFAULT_THRESHOLD = 1363  # the runner's --threshold default
_ABOVE_TARGET = re.compile(r"\(above target (\d+)\)")


def coerce_cycles(entry: Mapping[str, Any]) -> Optional[int]:
    """The runner's `_coerce_cycles`: `int(cycles)` when that works, else None."""
    cycles = entry.get("cycles")
    if cycles is None:
        return None
    try:
        return int(cycles)
    except (TypeError, ValueError, OverflowError):
        return None


def valid_cycles(entry: Mapping[str, Any]) -> Optional[int]:
    """The runner's `_valid_cycles`: cycles of an entry whose `valid` is true."""
    return coerce_cycles(entry) if entry.get("valid") is True else None


def entry_reason(entry: Mapping[str, Any]) -> Optional[str]:
    """The runner's `_entry_reason`: why an attempt was invalid, for the planner's memory."""
    reasons = [text for key, text in (("tests_diff_empty", "tests changed"), ("scope_ok", "scope violation"),
                                      ("correctness_pass", "incorrect output")) if entry.get(key) is False]
    if not reasons and entry.get("valid") is False:
        return "invalid (unknown reason)"
    return ", ".join(reasons) if reasons else None


def compact_attempt(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The runner's `_summarize_entry`: its keys (None when absent) and the reason."""
    return {**{key: entry.get(key) for key in ATTEMPT_KEYS}, "reason": entry_reason(entry)}


def _combo(entry: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    tags = entry.get("strategy_tags")
    if not isinstance(tags, list) or not tags or not all(isinstance(tag, str) for tag in tags):
        return None
    return {"strategy_tags": tags[:4], "valid": entry.get("valid"), "cycles": entry.get("cycles"),
            "iteration_id": entry.get("iteration_id"), "reason": entry_reason(entry)}


def _profile(value: Any) -> Optional[PerformanceProfile]:
    if value is None:
        return None
    try:
        return PerformanceProfile.model_validate(value)
    except ValidationError:
        return None


class Evidence(IntEnum):
    """What one log line says about the goal of the plan that produced it (`line_evidence`)."""

    STATED = 1  # goal threshold, target stated
    BEST = 2  # goal best
    MET = 3  # goal threshold, met; its value not written


_INT64 = range(-2**63, 2**63)  # what the evidence arrays (and the dataset's columns) hold


def strict_int(value: Any) -> Optional[int]:
    """A JSON integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def line_evidence(entry: Mapping[str, Any]) -> Optional[tuple[Evidence, Optional[int]]]:
    """(kind, value) of the goal evidence the entry itself carries, or None when it carries none.

    The runner's `record` writes "(above target T)" for a valid attempt above the threshold T and
    `threshold_met: true` at or below it; with the goal `best` it writes neither, and `threshold_met:
    false` on every line. So: "(above target T)" is (STATED, T); `threshold_met: true` is (MET, cycles);
    a valid attempt with cycles, `threshold_met: false` and no target is (BEST, None). Invalid attempts,
    and older lines without `threshold_met` (unless they state a target), carry none.
    """
    match = _ABOVE_TARGET.search(str(entry.get("result_summary") or ""))
    if match:  # a target longer than any integer column (and than int() takes): no runner writes it
        return (Evidence.STATED, int(match.group(1))) if len(match.group(1)) <= 18 else None
    cycles = strict_int(entry.get("cycles"))
    if entry.get("threshold_met") is True:
        return Evidence.MET, cycles
    if entry.get("threshold_met") is False and entry.get("valid") is True and cycles is not None:
        return Evidence.BEST, None
    return None


@dataclass(frozen=True)
class GoalFacts:
    """The goal and threshold of the plan before one entry, and how the log shows them (`source`).

    `proven`: the entry's own line proves both; `target_inferred`: the line proves a threshold goal was
    met, not its value; `nearest_line`: the line carries no evidence, the nearest line's is taken;
    `runner_default`: no line of the log carries evidence, the runner's defaults are assumed.
    """

    goal: str
    threshold_target: Optional[int]
    source: str


class GoalEvidence:
    """Every line of one log that carries goal evidence (`line_evidence`), to answer `goal_at` any line.

    The runner takes `--goal`/`--threshold` anew at every plan, so a log can hold several sessions with
    different goals: evidence holds for its own line only. A line without evidence takes the nearest
    line's (ties: the earlier one, the session it continues). A met threshold's value is the nearest
    stated target when the cycles meet it, else the tightest published threshold they meet (the runner's
    default 1363 is the tightest), else the cycles themselves. Kept in flat arrays: a few bytes per line.
    """

    def __init__(self) -> None:
        self._lines = array("q")  # line numbers with evidence, ascending
        self._kinds = array("b")
        self._values = array("q")  # the stated target, or the met cycles (-1: none)
        self._stated_lines = array("q")  # the lines stating a target, and their targets
        self._stated = array("q")

    def see(self, index: int, entry: Mapping[str, Any]) -> None:
        """Account for the entry at line `index` (lines come in ascending order)."""
        evidence = line_evidence(entry)
        if evidence is None or (self._lines and index <= self._lines[-1]):
            return
        kind, value = evidence
        if value is not None and value not in _INT64:  # no runner writes it; the dataset refuses the line
            return
        self._lines.append(index)
        self._kinds.append(kind)
        self._values.append(-1 if value is None else value)
        if kind == Evidence.STATED:
            self._stated_lines.append(index)
            self._stated.append(value)

    def goal_at(self, index: int) -> GoalFacts:
        """The goal and threshold of the plan that produced the entry at line `index`."""
        if not self._lines:
            return GoalFacts("threshold", DEFAULT_THRESHOLD, "runner_default")
        pos = bisect_left(self._lines, index)
        if pos < len(self._lines) and self._lines[pos] == index:
            return self._facts(pos)
        near = _nearest(self._lines, pos, index)
        return replace(self._facts(near), source="nearest_line")

    def _facts(self, pos: int) -> GoalFacts:
        kind, value = self._kinds[pos], self._values[pos]
        if kind == Evidence.BEST:
            return GoalFacts("best", None, "proven")
        if kind == Evidence.STATED:
            return GoalFacts("threshold", value, "proven")
        cycles = value if value >= 0 else None
        return GoalFacts("threshold", self._met_target(self._lines[pos], cycles), "target_inferred")

    def _met_target(self, index: int, cycles: Optional[int]) -> int:
        if self._stated_lines:
            stated = self._stated[_nearest(self._stated_lines, bisect_left(self._stated_lines, index), index)]
            if cycles is None or cycles <= stated:
                return stated
        if cycles is None:
            return DEFAULT_THRESHOLD
        return min((target for target in THRESHOLDS if target >= cycles), default=cycles)


def _nearest(lines: array, pos: int, index: int) -> int:
    """Of the sorted `lines`, the position nearest `index` (its insertion point `pos`); ties: the earlier."""
    if pos == 0:
        return 0
    if pos == len(lines) or index - lines[pos - 1] <= lines[pos] - index:
        return pos - 1
    return pos


class PacketOverflow(ValueError):
    """A packet the dataset cannot store: a value it derives (the aspiration, best - 1) leaves int64."""


def aspiration_of(best: Optional[int]) -> Optional[int]:
    """The runner's aspiration for goal `best`: one cycle below the best; PacketOverflow when that leaves int64
    (a best of -2**63, which every line may state within int64, has no storable aspiration)."""
    if best is None:
        return None
    if best - 1 < INT64_RANGE[0]:
        raise PacketOverflow(f"aspiration_cycles: the best so far, {best} (this line's best_before or an earlier "
                             "line's cycles), less 1 does not fit 64 bits (the dataset stores int64)")
    return best - 1


class PacketBuilder:
    """The packet before each entry of one episode, updated one entry at a time."""

    def __init__(self) -> None:
        self._best: Optional[int] = None
        self._plateau = 0
        self._streak: list[Mapping[str, Any]] = []
        self._best_by_family: dict[str, int] = {}
        self._invalid_counts: dict[str, int] = {"total": 0, "correctness": 0, "scope": 0, "tests": 0}
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._recent: deque[dict[str, Any]] = deque(maxlen=RECENT_ATTEMPTS)
        self._combos: deque[dict[str, Any]] = deque(maxlen=RECENT_COMBOS)
        self._last_valid: Optional[dict[str, Any]] = None
        self._entry_profile: Optional[PerformanceProfile] = None

    def packet(self, entry: Mapping[str, Any], *, goal: str = "best", threshold_target: Optional[int] = None,
               profile: Optional[PerformanceProfile] = None) -> AdvisorPacket:
        """The packet the planner saw before `entry` (which is not added; call `add` next)."""
        # the entry's `best_before` is the overall best (log and best/* tags) when it was planned
        best, in_log = pivot.overall_best(self._best, pivot.tag_best(entry))
        plateau = self._plateau if in_log else None  # a tags' best is not in the local log
        if goal != "threshold":
            goal, threshold_target = "best", None
        summary = ExperimentSummary(
            best_cycles=best, best_cycles_by_family=dict(self._best_by_family),
            last_attempt=self._recent[-1] if self._recent else None, last_valid_attempt=self._last_valid,
            recent_attempts=list(self._recent), invalid_counts=dict(self._invalid_counts),
            recent_strategy_combos=list(self._combos),
        )
        return AdvisorPacket(
            goal=goal, threshold_target=threshold_target, best_cycles=best,
            aspiration_cycles=aspiration_of(best) if goal == "best" else None,
            plateau_valid_iters_since_best=plateau, strategy_family_constraints=pivot.family_constraints(self._streak),
            experiment_log_tail=list(self._tail), experiment_summary=summary,
            performance_profile=profile if profile is not None else self._entry_profile,
        )

    def add_line(self, line: str) -> None:
        """A raw file line that is no entry (not a JSON object): the runner's tail still shows it."""
        self._tail.append(line)

    def add(self, entry: Mapping[str, Any], line: str) -> None:
        """Account for one entry the runner would read (its dict) and its raw file line."""
        family = pivot.family_of(entry)
        if family is None:
            self._streak = []
        elif self._streak and pivot.family_of(self._streak[-1]) == family:
            self._streak.append(entry)
        else:
            self._streak = [entry]
        cycles = valid_cycles(entry)
        if cycles is not None:
            self._add_valid(entry, family, cycles)
        if entry.get("valid") is not True:
            self._invalid_counts["total"] += 1
            for key, count in (("correctness_pass", "correctness"), ("scope_ok", "scope"),
                               ("tests_diff_empty", "tests")):
                self._invalid_counts[count] += int(entry.get(key) is False)
        attempt = compact_attempt(entry)
        self._recent.append(attempt)
        if cycles is not None:
            self._last_valid = attempt
        combo = _combo(entry)
        if combo is not None:
            self._combos.append(combo)
        self._tail.append(line)

    def _add_valid(self, entry: Mapping[str, Any], family: Optional[str], cycles: int) -> None:
        if self._best is None or cycles < self._best:
            self._best, self._plateau = cycles, 0
            carried = _profile(entry.get("performance_profile"))
            if carried is not None:
                self._entry_profile = carried
        elif cycles == self._best:
            self._plateau = 0
        else:
            self._plateau += 1
        bucket = family or "unknown"
        if cycles < self._best_by_family.get(bucket, cycles + 1):
            self._best_by_family[bucket] = cycles


def runner_packets(entries: list[dict[str, Any]], lines: list[str], goals: list[tuple[str, Optional[int]]]
                   ) -> list[dict[str, Any]]:
    """The planner fields of the packet before each entry (JSON values, no profile), as the runner builds them
    from its log: `entries[i]` is the object of file line `lines[i]`, `goals[i]` its plan's (goal, target).
    The experiments simulator writes them into its episodes' planner archives."""
    builder = PacketBuilder()
    packets = []
    for entry, line, (goal, target) in zip(entries, lines, goals):
        packet = builder.packet(entry, goal=goal, threshold_target=target).model_dump(mode="json")
        packet.pop("performance_profile", None)
        packets.append(packet)
        builder.add(entry, line)
    return packets
