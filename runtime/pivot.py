"""Pivot policy of the kernel-optimization loop (formats.md §2.4), on raw log dicts."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from pydantic import ValidationError

from .advisor import FAMILIES, FamilyConstraints, OptimizationDirective, PerformanceProfile

MEANINGFUL_WIN_CYCLES = 10
HARD_PLATEAU = 6
INVALID_STREAK = 3
NEAR_BOUND_SLACK = 0.04
NEAR_BOUND_STALL = 3

Entry = Mapping[str, Any]


def _as_dict(entry: Any) -> Mapping[str, Any]:
    if isinstance(entry, Mapping):
        return entry
    if hasattr(entry, "model_dump"):
        return entry.model_dump()
    raise TypeError(f"log entry must be a dict, got {type(entry).__name__}")


def _entries(entries: Iterable[Any]) -> list[Mapping[str, Any]]:
    return [_as_dict(entry) for entry in entries]


def family_of(entry: Entry) -> Optional[str]:
    """`strategy_tags[0]` when the tags are a non-empty list starting with a family, else None."""
    tags = _as_dict(entry).get("strategy_tags")
    if isinstance(tags, list) and tags and isinstance(tags[0], str) and tags[0] in FAMILIES:
        return tags[0]
    return None


def _cycles(entry: Entry) -> Optional[int]:
    value = entry.get("cycles")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _valid_cycles(entry: Entry) -> Optional[int]:
    """Cycles of a valid entry (`valid is True`), else None."""
    return _cycles(entry) if entry.get("valid") is True else None


def current_streak(entries: Sequence[Any]) -> tuple[Optional[str], list[Mapping[str, Any]]]:
    """The current family and its streak (oldest first); an entry without family ends it."""
    items = _entries(entries)
    if not items:
        return None, []
    family = family_of(items[-1])
    if family is None:
        return None, []
    streak: list[Mapping[str, Any]] = []
    for entry in reversed(items):
        if family_of(entry) != family:
            break
        streak.append(entry)
    return family, streak[::-1]


def meaningful_win(streak: Sequence[Entry]) -> bool:
    """The streak's last entry is valid and beats the streak's earlier best valid cycles by >= 10."""
    if not streak:
        return False
    last = _valid_cycles(streak[-1])
    earlier = [c for c in (_valid_cycles(e) for e in streak[:-1]) if c is not None]
    return last is not None and bool(earlier) and min(earlier) - last >= MEANINGFUL_WIN_CYCLES


def family_constraints(entries: Sequence[Any]) -> FamilyConstraints:
    """Allowed and blocked families for the next directive, from the log so far."""
    family, streak = current_streak(entries)
    win = meaningful_win(streak)
    max_consecutive = 3 if win else 2
    blocked = [family] if family is not None and len(streak) >= max_consecutive else []
    allowed = [f for f in FAMILIES if f not in blocked] or list(FAMILIES)
    return FamilyConstraints(
        allowed_families=allowed,
        blocked_families=blocked,
        current_family=family,
        current_family_streak_len=len(streak),
        last_attempt_meaningful_win=win,
        max_consecutive=max_consecutive,
    )


def best_cycles(entries: Sequence[Any]) -> Optional[int]:
    """Lowest integer cycles among valid entries; None when there is none."""
    values = [c for c in (_valid_cycles(e) for e in _entries(entries)) if c is not None]
    return min(values) if values else None


def plateau_valid_iters_since_best(entries: Sequence[Any]) -> Optional[int]:
    """Valid attempts after the most recent one that reached the best; None without a best."""
    items = _entries(entries)
    best = best_cycles(items)
    if best is None:
        return None
    count = 0
    for entry in reversed(items):
        cycles = _valid_cycles(entry)
        if cycles is None:
            continue
        if cycles == best:
            return count
        count += 1
    return count


def invalid_streak(entries: Sequence[Any]) -> int:
    """Number of consecutive invalid attempts at the end of the log."""
    count = 0
    for entry in reversed(_entries(entries)):
        if entry.get("valid") is True:
            break
        count += 1
    return count


def _profile(profile: Any) -> Optional[PerformanceProfile]:
    if profile is None:
        return None
    if isinstance(profile, PerformanceProfile):
        return profile
    try:
        return PerformanceProfile.model_validate(profile)
    except ValidationError:
        return None


def slack_fraction(profile: Any) -> Optional[float]:
    """Schedule slack as a fraction of the tight lower bound, when the profile gives it."""
    p = _profile(profile)
    if p is None:
        return None
    if p.schedule_cycles_estimate is not None and p.tight_lb_cycles:
        return (p.schedule_cycles_estimate - p.tight_lb_cycles) / p.tight_lb_cycles
    return p.schedule_slack_pct


def near_bound(entries: Sequence[Any], profile: Any = None, threshold_target: Optional[int] = None) -> bool:
    """Slack <= 4% of the tight bound with no new best in 3 valid attempts, or target below the bound."""
    p = _profile(profile)
    if p is None:
        return False
    if threshold_target is not None and p.tight_lb_cycles is not None and threshold_target < p.tight_lb_cycles:
        return True
    slack = slack_fraction(p)
    stalled = (plateau_valid_iters_since_best(entries) or 0) >= NEAR_BOUND_STALL
    return slack is not None and slack <= NEAR_BOUND_SLACK and stalled


def pivot_required(
    entries: Sequence[Any], profile: Any = None, threshold_target: Optional[int] = None
) -> tuple[bool, list[str]]:
    """Whether the next directive must change family or mechanism, with the rules that say so."""
    items = _entries(entries)
    reasons: list[str] = []
    constraints = family_constraints(items)
    if constraints.blocked_families:
        reasons.append(
            f"family_blocked: {constraints.current_family} reached {constraints.current_family_streak_len}"
            f"/{constraints.max_consecutive} consecutive attempts")
    plateau = plateau_valid_iters_since_best(items)
    if plateau is not None and plateau >= HARD_PLATEAU:
        reasons.append(f"hard_plateau: {plateau} valid attempts since the best (>= {HARD_PLATEAU})")
    invalid = invalid_streak(items)
    if invalid >= INVALID_STREAK:
        reasons.append(f"invalid_streak: {invalid} invalid attempts in a row (recovery mode)")
    if near_bound(items, profile, threshold_target):
        reasons.append("near_bound: schedule slack within 4% of the tight bound and stalled; lower the bound "
                       "(family:reduce_loads or family:break_deps)")
    return bool(reasons), reasons


def validate_directive(obj: Any, blocked_families: Iterable[str] = ()) -> list[str]:
    """Every error of a directive against formats.md §2.2 and the blocked families; [] when valid."""
    errors: list[str] = []
    if not isinstance(obj, Mapping):
        return [f"directive must be a JSON object, got {type(obj).__name__}"]
    try:
        OptimizationDirective.model_validate(dict(obj))
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(part) for part in err["loc"]) or "directive"
            errors.append(f"{where}: {err['msg']}")
    blocked = {f for f in blocked_families if f in FAMILIES}
    family = obj.get("strategy_family")
    if family in blocked and len(blocked) < len(FAMILIES):
        errors.append(f"strategy_family: {family} is blocked for this directive")
    return errors
