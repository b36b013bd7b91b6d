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
  log (see `GoalEvidence`).
- Entries are what the runner reads with `_read_jsonl`: every line that is a JSON object, also one
  that fails the workbench's validation (the importer feeds those too, without making a record).

`PacketBuilder` keeps only what the packet needs, so memory stays bounded however long the log is;
its results equal `runtime.pivot` evaluated on the whole prefix with the same tags' best
(`pivot.tag_best` of the entry, combined by `pivot.overall_best`; tests check this).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from pydantic import ValidationError

from runtime import pivot
from runtime.advisor import AdvisorPacket, ExperimentSummary, PerformanceProfile

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


@dataclass
class GoalEvidence:
    """What a log says about the runner's goal: `threshold_met` and "(above target N)" in `result_summary`.

    With the goal `threshold` and target T, the runner writes "(above target T)" for a valid attempt
    above T and `threshold_met: true` at or below it; with the goal `best` it writes neither. So:
    an entry's own evidence first, else the episode's (the nearest entry with a target); a log with
    valid cycles and no evidence at all ran for `best`; one with no valid cycles gives no evidence,
    and the runner's defaults (`threshold`, 1363) are assumed.
    """

    targets: dict[int, int] = field(default_factory=dict)  # line index -> target
    met: set[int] = field(default_factory=set)
    any_valid: bool = False

    def see(self, index: int, entry: Mapping[str, Any]) -> None:
        """Account for the entry at line `index`."""
        match = _ABOVE_TARGET.search(str(entry.get("result_summary") or ""))
        if match:
            self.targets[index] = int(match.group(1))
        if entry.get("threshold_met") is True:
            self.met.add(index)
        self.any_valid = self.any_valid or valid_cycles(entry) is not None

    def goal_at(self, index: int) -> tuple[str, Optional[int]]:
        """(goal, threshold_target) of the plan that produced the entry at line `index`."""
        if index in self.targets:
            return "threshold", self.targets[index]
        if self.targets:
            nearest = min(self.targets, key=lambda other: (abs(other - index), other > index))
            return "threshold", self.targets[nearest]
        if self.met:
            return "threshold", DEFAULT_THRESHOLD
        return ("best", None) if self.any_valid else ("threshold", DEFAULT_THRESHOLD)


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
            aspiration_cycles=best - 1 if goal == "best" and best is not None else None,
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
