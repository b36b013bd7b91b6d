"""Rebuild the planner's packet (formats.md §2.3) before each entry of an experiment log.

`PacketBuilder` walks one episode entry by entry and keeps only what the packet needs, so
memory stays bounded however long the log is: the best and plateau counters, the current
family streak, per-family bests, invalid counts, the last 20 lines and the last 8 attempts.
Its results equal `runtime.pivot` evaluated on the whole prefix (tests check this).

Choices where formats.md leaves room:
- `best_cycles` is the lowest valid cycles so far (`runtime.pivot.best_cycles`). When the entry
  about to be predicted carries `best_before` (newer shape) and it is lower, that value wins: it
  is the loop runner's own record of the best before this attempt and includes the baseline
  measurement, which is not a log line. The plateau then counts every valid attempt so far.
- `experiment_log_tail` holds the raw JSONL lines, as the original sends them.
- Attempts in `experiment_summary` are compact dicts (`ATTEMPT_KEYS`, `family` added).
- `invalid_counts`: `total`, `consecutive` (current invalid streak) and one count per reason,
  the first that applies: `correctness`, `tests_changed`, `scope`, else `unspecified`.
- `goal`/`threshold_target` come from the episode's side information (simulated episodes write
  them); without it the goal is `best` and `aspiration_cycles` = best - 1.
- `performance_profile`: the side information's profile for the iteration; otherwise a profile
  an entry carries (`performance_profile` key, measured on that attempt's code) is used for the
  next packets while that attempt is the best.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Mapping, Optional

from pydantic import ValidationError

from runtime import pivot
from runtime.advisor import AdvisorPacket, ExperimentSummary, PerformanceProfile

TAIL_LINES = 20
RECENT_ATTEMPTS = 8
ATTEMPT_KEYS = ("iteration_id", "strategy_tags", "valid", "cycles", "delta_vs_best", "correctness_pass",
                "tests_diff_empty", "scope_ok", "new_best", "hypothesis", "result_summary")


def compact_attempt(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The summary's view of one attempt: the keys of `ATTEMPT_KEYS` it has, plus its family."""
    attempt = {key: entry[key] for key in ATTEMPT_KEYS if key in entry}
    attempt["family"] = pivot.family_of(entry)
    return attempt


def invalid_reason(entry: Mapping[str, Any]) -> str:
    """Why an invalid entry is invalid: correctness, tests_changed, scope or unspecified."""
    if entry.get("correctness_pass") is False:
        return "correctness"
    if entry.get("tests_diff_empty") is False:
        return "tests_changed"
    if entry.get("scope_ok") is False:
        return "scope"
    return "unspecified"


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _profile(value: Any) -> Optional[PerformanceProfile]:
    if value is None:
        return None
    try:
        return PerformanceProfile.model_validate(value)
    except ValidationError:
        return None


class PacketBuilder:
    """The packet before each entry of one episode, updated one entry at a time."""

    def __init__(self) -> None:
        self._best: Optional[int] = None
        self._plateau = 0
        self._valid_count = 0
        self._streak: list[Mapping[str, Any]] = []
        self._best_by_family: dict[str, int] = {}
        self._invalid_counts: dict[str, int] = {"total": 0}
        self._invalid_streak = 0
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._recent: deque[dict[str, Any]] = deque(maxlen=RECENT_ATTEMPTS)
        self._last_valid: Optional[dict[str, Any]] = None
        self._entry_profile: Optional[PerformanceProfile] = None

    def packet(self, entry: Mapping[str, Any], *, goal: str = "best", threshold_target: Optional[int] = None,
               profile: Optional[PerformanceProfile] = None) -> AdvisorPacket:
        """The packet the planner saw before `entry` (which is not added; call `add` next)."""
        best, plateau = self._best, (self._plateau if self._best is not None else None)
        before = _int(entry.get("best_before"))
        if before is not None and (best is None or before < best):
            best, plateau = before, self._valid_count
        if goal != "threshold":
            goal, threshold_target = "best", None
        invalid = dict(self._invalid_counts, consecutive=self._invalid_streak)
        summary = ExperimentSummary(
            best_cycles=best, best_cycles_by_family=dict(self._best_by_family),
            last_attempt=self._recent[-1] if self._recent else None, last_valid_attempt=self._last_valid,
            recent_attempts=list(self._recent), invalid_counts=invalid,
        )
        return AdvisorPacket(
            goal=goal, threshold_target=threshold_target, best_cycles=best,
            aspiration_cycles=best - 1 if goal == "best" and best is not None else None,
            plateau_valid_iters_since_best=plateau,
            strategy_family_constraints=pivot.family_constraints(self._streak),
            experiment_log_tail=list(self._tail), experiment_summary=summary,
            performance_profile=profile if profile is not None else self._entry_profile,
        )

    def add(self, entry: Mapping[str, Any], line: str) -> None:
        """Account for one imported entry (its dict as logged and its JSONL line)."""
        family = pivot.family_of(entry)
        if family is None:
            self._streak = []
        elif self._streak and pivot.family_of(self._streak[-1]) == family:
            self._streak.append(entry)
        else:
            self._streak = [entry]
        cycles = _int(entry.get("cycles"))
        if entry.get("valid") is True:
            self._invalid_streak = 0
            if cycles is not None:
                self._add_valid(entry, family, cycles)
        else:
            self._invalid_streak += 1
            reason = invalid_reason(entry)
            self._invalid_counts["total"] += 1
            self._invalid_counts[reason] = self._invalid_counts.get(reason, 0) + 1
        attempt = compact_attempt(entry)
        self._recent.append(attempt)
        if entry.get("valid") is True:
            self._last_valid = attempt
        self._tail.append(line)

    def _add_valid(self, entry: Mapping[str, Any], family: Optional[str], cycles: int) -> None:
        self._valid_count += 1
        if self._best is None or cycles < self._best:
            self._best, self._plateau = cycles, 0
            carried = _profile(entry.get("performance_profile"))
            if carried is not None:
                self._entry_profile = carried
        elif cycles == self._best:
            self._plateau = 0
        else:
            self._plateau += 1
        if family is not None and cycles < self._best_by_family.get(family, cycles + 1):
            self._best_by_family[family] = cycles
