"""What the planner's packet shows before an attempt, as numbers an outcome model reads (NumPy only).

The outcome model (`runtime.outcome`) estimates what an attempt of each strategy family brings from the
packet alone: the packet is all a planner sees before the attempt, and all a frozen `planner.learned` gets
in production. Nothing here reads the attempt's own outcome.

Every feature is scale-free, so that kernels of very different scale (a best of 1,400 cycles or of
100,000) share one model: cycles enter only as ratios to the current best (log ratios for bests, shares
of the best for improvements), counts as counts.

Two parts:
- context features (`CONTEXT_NAMES`): the episode so far. Iterations so far and since the last
  improvement, the progress over the log tail (the best before the tail's first attempt over today's best;
  while the tail still holds the first attempt that is the episode's start, which the packet does not
  carry otherwise), the recent improvement rate, the invalid streak, the goal's distance, the pivot
  flags the packet carries (blocked family, current streak, plateau, recovery, near bound) and, when the
  packet has a usable performance profile (the runner's archive, formats.md §2.3.2, or a simulator's side file),
  its slack, which bound binds and by how much, each bound relative to the best, the slack's share and the dominant
  engine (`PROFILE_NAMES`); a packet without one has them all 0 and `has_profile` 0, so records with and without
  a profile share one model.
- family features (`FAMILY_NAMES`), one set per family: its attempts and valid attempts in the tail, its
  improvements and their mean share of the best, its last attempt's gain, how long ago it was tried and
  last improved, whether it is the current family or blocked, how far its best is from the best, and what
  its measured cycles showed, merged or not (the last change, the largest drop, a drop an invalid attempt
  measured): an attempt that failed its tests still shows whether the change made the code faster; and, from a
  usable profile, its room (`family_rooms`: the slack for rescheduling, how far its own bound binds above the
  other for a bound-lowering family, as a share of the best; 0 without a profile).
- cross features (`PacketFeatures.cross`): the share of the best each family took off since each other
  family was last tried (what a family met when last tried may no longer hold).

`candidate_row(features, family)` is what the model scores for one family: the context, the family's
one-hot code, its own family features, the other two families' (in FAMILIES order), how its recent payoff
and its last improvement compare with theirs, and what the other two won since it was last tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .advisor import FAMILIES, AdvisorPacket
from .inputs import tail_entries
from .pivot import (HARD_PLATEAU, INVALID_STREAK, current_streak, family_constraints, family_of, invalid_streak,
                    near_bound, packet_pivot_inputs, slack_fraction)

FEATURES_VERSION = 3
NEVER = 21.0  # "attempts since" when the tail (at most 20 lines) never shows it
RECENT = 5  # attempts the recent improvement rate looks back on

# What the packet's performance profile adds (all 0 without a usable one, `has_profile` 0): each lower bound
# relative to the best (log ratios), which bound binds and by how much (resource minus critical path, as a share of
# the tight bound), the slack's share of the schedule, the dominant engine and its lead over the next one.
PROFILE_NAMES: tuple[str, ...] = (
    "resource_gap", "cp_gap", "tight_gap", "bind_margin", "slack_share", "dominant_load", "dominant_valu",
    "dominant_other", "dominant_lead",
)
CONTEXT_NAMES: tuple[str, ...] = (
    "has_best", "log_iteration", "tail_length", "log_progress_tail", "tail_holds_start", "recent_gain",
    "since_improvement", "plateau", "invalid_streak", "invalid_share", "goal_threshold", "log_goal_gap",
    "any_blocked", "current_streak", "meaningful_win", "hard_plateau", "recovery", "near_bound",
    "has_profile", "slack", "load_binds", "cp_binds", *PROFILE_NAMES,
)
FAMILY_NAMES: tuple[str, ...] = (
    "tries", "valid_share", "wins", "gain_rate", "last_gain", "last_valid", "since_tried", "since_win",
    "is_current", "is_blocked", "best_gap", "has_valid", "last_valid_gain", "valid_no_gain", "wins_by_others_since",
    "recent_tries", "last_change", "max_drop", "since_measured", "unmerged_drop", "room",
)
ROW_NAMES: tuple[str, ...] = (
    *CONTEXT_NAMES, *(f"is:{family}" for family in FAMILIES), *(f"own:{name}" for name in FAMILY_NAMES),
    *(f"other{k}:{name}" for k in (1, 2) for name in FAMILY_NAMES),
    "gain_rate_vs_others", "since_win_vs_others", "last_valid_gain_vs_others",
    *(f"other{k}:gain_since_own" for k in (1, 2)),
)


@dataclass(frozen=True)
class PacketFeatures:
    """The features of one packet: the context and one row of family features per family (FAMILIES order)."""

    context: np.ndarray
    families: np.ndarray  # shape (len(FAMILIES), len(FAMILY_NAMES))
    best: Optional[int]
    # [f, g]: the share of the best family g took off since family f was last tried (`_cross`)
    cross: np.ndarray = field(default_factory=lambda: np.zeros((len(FAMILIES), len(FAMILIES))))

    def row(self, family: str) -> np.ndarray:
        """The model's input row for an attempt of `family` from this packet."""
        return candidate_row(self, family)


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gain(entry: Mapping[str, Any]) -> float:
    """Cycles the attempt took off the best it started from (0 when it did not beat it or is invalid)."""
    if entry.get("valid") is not True:
        return 0.0
    delta = _int(entry.get("delta_vs_best"))
    if delta is not None:
        return float(max(0, -delta))
    cycles, before = _int(entry.get("cycles")), _int(entry.get("best_before"))
    return float(max(0, before - cycles)) if cycles is not None and before is not None else 0.0


def _change(entry: Mapping[str, Any]) -> Optional[float]:
    """(cycles - best_before) / best_before of a measured attempt, valid or not (None when not measured)."""
    cycles, before = _int(entry.get("cycles")), _int(entry.get("best_before"))
    if cycles is None or before is None or before <= 0:
        return None
    return float(min(max((cycles - before) / before, -1.0), 1.0))


def _log_ratio(high: Optional[float], low: Optional[float]) -> float:
    if high is None or low is None or high <= 0 or low <= 0:
        return 0.0
    return math.log(high / low)


def _window_start(entries: Sequence[Mapping[str, Any]], best: Optional[int]) -> Optional[int]:
    """The best before the tail's first attempt (its `best_before`, else the highest cycles the tail shows)."""
    if not entries:
        return best
    first = _int(entries[0].get("best_before"))
    if first is not None:
        return first
    seen = [c for c in (_int(e.get("cycles")) for e in entries) if c is not None]
    return max(seen + ([best] if best is not None else [])) if seen or best is not None else None


def _iteration(entries: Sequence[Mapping[str, Any]]) -> int:
    ids = [i for i in (_int(e.get("iteration_id")) for e in entries) if i is not None]
    return max(ids) if ids else len(entries)


def _since(entries: Sequence[Mapping[str, Any]], test: Any) -> float:
    for back, entry in enumerate(reversed(entries)):
        if test(entry):
            return float(back)
    return NEVER


def _positive(value: Any) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def profile_usable(profile: Any) -> bool:
    """Whether a performance profile can serve as context: positive bounds and estimate, engines' cycles known (a
    missing, non-numeric or zero bound, where every ratio divides, is not)."""
    if profile is None:
        return False
    engines = profile.min_cycles_by_engine or {}
    return all(_positive(getattr(profile, key)) for key in ("resource_lb_cycles", "cp_lb_cycles", "tight_lb_cycles",
                                                             "schedule_cycles_estimate")) \
        and bool(engines) and all(_positive(v) is not None or v == 0 for v in engines.values())


def _clip(value: float, low: float, high: float) -> float:
    return float(min(max(value, low), high))


def profile_context(packet: AdvisorPacket) -> np.ndarray:
    """The `PROFILE_NAMES` features of a packet (zeros without a usable profile)."""
    profile = packet.performance_profile
    if not profile_usable(profile):
        return np.zeros(len(PROFILE_NAMES))
    resource, cp = float(profile.resource_lb_cycles), float(profile.cp_lb_cycles)
    tight, estimate = float(profile.tight_lb_cycles), float(profile.schedule_cycles_estimate)
    best = float(packet.best_so_far or estimate)
    engines = sorted(((float(v), k) for k, v in (profile.min_cycles_by_engine or {}).items()), reverse=True)
    dominant = engines[0][1]
    lead = (engines[0][0] - engines[1][0]) / tight if len(engines) > 1 else 1.0
    return np.asarray([
        _clip(math.log(best / resource), -1.0, 3.0), _clip(math.log(best / cp), -1.0, 3.0),
        _clip(math.log(best / tight), -1.0, 3.0), _clip((resource - cp) / tight, -1.0, 1.0),
        _clip((estimate - tight) / estimate, -1.0, 1.0), float(dominant == "load"), float(dominant == "valu"),
        float(dominant not in ("load", "valu")), _clip(lead, 0.0, 1.0),
    ], dtype=np.float64)


def _profile_features(packet: AdvisorPacket) -> tuple[float, float, float, float]:
    profile = packet.performance_profile
    slack = slack_fraction(profile) if profile_usable(profile) else None
    if profile is None or slack is None:
        return 0.0, 0.0, 0.0, 0.0
    tight = profile.tight_lb_cycles or 0
    load = (profile.min_cycles_by_engine or {}).get("load")
    cp = profile.cp_lb_cycles
    return (1.0, float(min(max(slack, -1.0), 1.0)), float(bool(tight and load is not None and load >= tight)),
            float(bool(tight and cp is not None and cp >= tight)))


def _context(packet: AdvisorPacket, entries: list[dict[str, Any]], best: Optional[int]) -> np.ndarray:
    iteration = _iteration(entries)
    start = _window_start(entries, best)
    scale = float(best) if best else 1.0
    recent = entries[-RECENT:]
    since_win = _since(entries, lambda e: _gain(e) > 0)
    plateau = _int(packet.plateau_valid_iters_since_best)
    constraints = packet.strategy_family_constraints
    _, streak = current_streak(entries)
    known = packet_pivot_inputs(packet)
    target = packet.threshold_target if packet.goal == "threshold" else None
    goal_gap = _log_ratio(best, target) if target is not None else 0.0
    first_id = _int(entries[0].get("iteration_id")) if entries else None
    invalid = sum(1 for e in entries if e.get("valid") is not True)
    has_profile, slack, load_binds, cp_binds = _profile_features(packet)
    return np.asarray([
        float(best is not None), math.log1p(iteration), float(len(entries)), _log_ratio(start, best),
        float(first_id == 1 or (first_id is None and iteration <= len(entries))),
        sum(_gain(e) for e in recent) / scale if best else 0.0,
        since_win, float(plateau if plateau is not None else since_win),
        float(invalid_streak(entries)), invalid / len(entries) if entries else 0.0,
        float(target is not None), goal_gap,
        float(bool(constraints.blocked_families or family_constraints(entries).blocked_families)),
        float(len(streak) or constraints.current_family_streak_len),
        float(constraints.last_attempt_meaningful_win),
        float(plateau is not None and plateau >= HARD_PLATEAU), float(invalid_streak(entries) >= INVALID_STREAK),
        float(near_bound(entries, packet.performance_profile, target, **known)),
        has_profile, slack, load_binds, cp_binds, *profile_context(packet),
    ], dtype=np.float64)


def family_rooms(packet: AdvisorPacket) -> dict[str, float]:
    """What each family can take off at most, as a share of the best, by the profile (0 without a usable one):
    cycles are the tight bound plus the schedule's slack, so rescheduling can take the slack, and lowering a bound
    helps only while that bound binds, down to the next one (for fewer loads: the load engine's bound above the
    critical path and every other engine's)."""
    profile = packet.performance_profile
    if not profile_usable(profile):
        return {family: 0.0 for family in FAMILIES}
    resource, cp = float(profile.resource_lb_cycles), float(profile.cp_lb_cycles)
    tight, estimate = float(profile.tight_lb_cycles), float(profile.schedule_cycles_estimate)
    best = float(packet.best_so_far or estimate)
    engines = {k: float(v) for k, v in (profile.min_cycles_by_engine or {}).items()}
    load = engines.pop("load", 0.0)  # fewer loads lower the load engine's bound only, down to the next bound
    rooms = {FAMILIES[0]: max(0.0, estimate - tight), FAMILIES[1]: max(0.0, load - max([cp, *engines.values()])),
             FAMILIES[2]: max(0.0, cp - resource)}
    return {family: _clip(room / best, 0.0, 1.0) for family, room in rooms.items()}


def _family_rows(packet: AdvisorPacket, entries: list[dict[str, Any]], best: Optional[int]) -> np.ndarray:
    scale = float(best) if best else 1.0
    rooms = family_rooms(packet)
    constraints = packet.strategy_family_constraints
    blocked = set(constraints.blocked_families) | set(family_constraints(entries).blocked_families)
    current = constraints.current_family or current_streak(entries)[0]
    by_family = packet.experiment_summary.best_cycles_by_family or {}
    fams = [family_of(e) for e in entries]  # once: the rows below ask each entry's family some 20 times

    def since(test: Callable[[int], bool]) -> float:  # `_since` by index
        return next((float(back) for back, i in enumerate(reversed(range(len(entries)))) if test(i)), NEVER)

    rows = []
    for family in FAMILIES:
        ours = [i for i, f in enumerate(fams) if f == family]
        mine = [entries[i] for i in ours]
        gains = [_gain(e) for e in mine]
        valid = sum(1 for e in mine if e.get("valid") is True)
        family_best = _int(by_family.get(family))
        last_valid = max((i for i in ours if entries[i].get("valid") is True), default=None)
        since_valid = range(last_valid + 1 if last_valid is not None else 0, len(entries))
        # Measured cycles show what the change did to the code even when the attempt was not merged (invalid, or
        # slower than the best): a drop there means the family can still pay, a rise that it now costs.
        changes = [c for c in (_change(e) for e in mine) if c is not None]
        unmerged = [-c for e in mine if (c := _change(e)) is not None and c < 0 and e.get("valid") is not True]
        rows.append([
            float(len(mine)), (valid + 1.0) / (len(mine) + 2.0), float(sum(g > 0 for g in gains)),
            sum(gains) / scale / len(mine) if mine and best else 0.0,
            gains[-1] / scale if mine and best else 0.0,
            float(mine[-1].get("valid") is True) if mine else 0.5,
            since(lambda i, f=family: fams[i] == f),
            since(lambda i, f=family: fams[i] == f and _gain(entries[i]) > 0),
            float(family == current), float(family in blocked),
            _log_ratio(family_best, best) if family_best is not None else 1.0,
            float(last_valid is not None),
            _gain(entries[last_valid]) / scale if last_valid is not None and best else 0.0,
            float(sum(1 for e in mine if e.get("valid") is True and _gain(e) == 0)),
            float(sum(1 for i in since_valid if fams[i] != family and _gain(entries[i]) > 0)),
            float(sum(1 for f in fams[-RECENT:] if f == family)),
            changes[-1] if changes else 0.0, -min(changes + [0.0]),
            since(lambda i, f=family: fams[i] == f and _change(entries[i]) is not None),
            max(unmerged, default=0.0), rooms[family],
        ])
    return np.asarray(rows, dtype=np.float64)


def _cross(entries: list[dict[str, Any]], best: Optional[int]) -> np.ndarray:
    """[f, g]: the share of the best family g took off since family f's last attempt (the whole tail when f has
    none). What another family won since shows whether what f met last time still holds (a bound another family
    lowered may leave f's bound the binding one)."""
    scale = float(best) if best else 1.0
    cross = np.zeros((len(FAMILIES), len(FAMILIES)))
    fams = [family_of(e) for e in entries]
    for i, family in enumerate(FAMILIES):
        last = max((k for k, f in enumerate(fams) if f == family), default=-1)
        for k in range(last + 1, len(entries)):
            other = fams[k]
            if other in FAMILIES and best:
                cross[i, FAMILIES.index(other)] += _gain(entries[k]) / scale
    return cross


def packet_features(packet: AdvisorPacket) -> PacketFeatures:
    """The context and family features of a packet (see the module docstring)."""
    entries = tail_entries(packet)
    best = packet.best_so_far
    return PacketFeatures(context=_context(packet, entries, best), families=_family_rows(packet, entries, best),
                          cross=_cross(entries, best), best=best)


def candidate_row(features: PacketFeatures, family: str) -> np.ndarray:
    """The model's input row for an attempt of `family`: context, one-hot family, own features, own vs others."""
    index = FAMILIES.index(family)
    own = features.families[index]
    others = np.delete(features.families, index, axis=0)  # the other two, in FAMILIES order
    rate, since, last = (FAMILY_NAMES.index(name) for name in ("gain_rate", "since_win", "last_valid_gain"))
    onehot = np.zeros(len(FAMILIES))
    onehot[index] = 1.0
    return np.concatenate([features.context, onehot, own, others.ravel(),
                           [own[rate] - float(others[:, rate].max()), own[since] - float(others[:, since].min()),
                            own[last] - float(others[:, last].max())], np.delete(features.cross[index], index)])


def policy_row(features: PacketFeatures) -> np.ndarray:
    """The input row of a model of which family a planner picks: the context and every family's features."""
    return np.concatenate([features.context, features.families.ravel()])


POLICY_NAMES: tuple[str, ...] = (
    *CONTEXT_NAMES, *(f"{family}:{name}" for family in FAMILIES for name in FAMILY_NAMES),
)

__all__ = ["CONTEXT_NAMES", "FAMILY_NAMES", "FEATURES_VERSION", "POLICY_NAMES", "PROFILE_NAMES", "PacketFeatures",
           "ROW_NAMES", "candidate_row", "packet_features", "policy_row", "family_rooms", "profile_context", "profile_usable"]
