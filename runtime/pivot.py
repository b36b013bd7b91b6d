"""Pivot policy of the kernel-optimization loop (formats.md §2.4, issue 2), on raw log dicts.

Every function takes the experiment log as a list of dicts as found in `log.jsonl` lines
(pydantic entries are accepted too) and reads only the keys the policy needs:
`strategy_tags`, `valid` and `cycles`.

The real loop runner's best is the lowest valid cycles of the log AND of the durable `best/*` git
tags (formats.md §2.3.1). A log holds no tags, but the runner writes `best_before` on every new-shape
entry from that overall best at record time, so the entry about to be planned carries the tags' best
(`tag_best(next_entry)`). The best and plateau functions take it as `tag_best`; a best that is not in
the local log gives a null plateau, as the runner's does. The packet builder
(`guidebench.data.planner_packets`), the planner metrics and the rule planner use these same functions;
the packet's readers call them with `packet_pivot_inputs(packet)`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

from pydantic import ValidationError

from .advisor import FAMILIES, FamilyConstraints, OptimizationDirective

MEANINGFUL_WIN_CYCLES = 10
MAX_CONSECUTIVE_DEFAULT = 2
MAX_CONSECUTIVE_BONUS = 3
HARD_PLATEAU = 6
INVALID_STREAK = 3
NEAR_BOUND_SLACK = 0.04
NEAR_BOUND_STALL = 3
# Names of the rules pivot_required reports, in the order it checks them.
PIVOT_RULES: tuple[str, ...] = ("family_blocked", "hard_plateau", "invalid_streak", "near_bound")

Entry = Mapping[str, Any]


def _as_dict(entry: Any) -> Mapping[str, Any]:
    if type(entry) is dict:  # nearly every call: a plain dict skips typing.Mapping's slow isinstance
        return entry
    if isinstance(entry, Mapping):
        return entry
    if hasattr(entry, "model_dump"):
        return entry.model_dump()
    raise TypeError(f"log entry must be a dict, got {type(entry).__name__}")


def _entries(entries: Optional[Iterable[Any]]) -> list[Mapping[str, Any]]:
    return [_as_dict(entry) for entry in (entries or [])]


def family_of(entry: Entry) -> Optional[str]:
    """`strategy_tags[0]` when the tags are a non-empty list starting with a family, else None.

    Later tags are never read (old logs may carry a family tag elsewhere).
    """
    tags = _as_dict(entry).get("strategy_tags")
    if isinstance(tags, list) and tags and isinstance(tags[0], str) and tags[0] in FAMILIES:
        return tags[0]
    return None


def _cycles(entry: Entry) -> Optional[int]:
    value = entry.get("cycles")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _valid_cycles(entry: Entry) -> Optional[int]:
    """Integer cycles of a valid entry (`valid is True`), else None."""
    return _cycles(entry) if entry.get("valid") is True else None


def current_streak(entries: Sequence[Any]) -> tuple[Optional[str], list[Mapping[str, Any]]]:
    """The current family and its streak (oldest first).

    Walk back from the last entry over all entries, valid or not, while the family equals
    the last entry's; an entry without family ends the streak. When the last entry has no
    family there is no current family and the streak is empty.
    """
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
    """The streak's last entry is valid with cycles and beats the streak's earlier best valid cycles by >= 10.

    Compared within the streak only, never with the global best; False when no earlier
    entry of the streak is valid.
    """
    items = _entries(streak)
    if not items:
        return False
    last = _valid_cycles(items[-1])
    earlier = [c for c in (_valid_cycles(e) for e in items[:-1]) if c is not None]
    return last is not None and bool(earlier) and min(earlier) - last >= MEANINGFUL_WIN_CYCLES


def family_constraints(entries: Sequence[Any]) -> FamilyConstraints:
    """Allowed and blocked families for the next directive, from the log so far.

    `max_consecutive` is 3 after a meaningful win, else 2; the current family is blocked
    when its streak length reaches it. `allowed_families` always lists the three families.
    """
    family, streak = current_streak(entries)
    win = meaningful_win(streak)
    max_consecutive = MAX_CONSECUTIVE_BONUS if win else MAX_CONSECUTIVE_DEFAULT
    blocked = [family] if family is not None and len(streak) >= max_consecutive else []
    reason = (f"Blocked {family} due to streak_len={len(streak)} >= max_consecutive={max_consecutive}."
              if blocked else None)  # the runner's wording
    return FamilyConstraints(
        allowed_families=list(FAMILIES),
        blocked_families=blocked,
        current_family=family,
        current_family_streak_len=len(streak),
        last_attempt_meaningful_win=win,
        max_consecutive=max_consecutive,
        policy={"max_consecutive_default": MAX_CONSECUTIVE_DEFAULT, "max_consecutive_bonus": MAX_CONSECUTIVE_BONUS,
                "bonus_min_improvement_cycles": MEANINGFUL_WIN_CYCLES},
        reason=reason,
    )


def tag_best(next_entry: Any) -> Optional[int]:
    """The `best/*` tags' best as the runner recorded it: the integer `best_before` of the entry about to be
    planned (None when it has none, e.g. an older short-shape entry or no next entry yet)."""
    if next_entry is None:
        return None
    value = _as_dict(next_entry).get("best_before")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def overall_best(local_best: Optional[int], tags_best: Optional[int]) -> tuple[Optional[int], bool]:
    """The runner's best from the log's best and the tags' best: (best, whether it is in the local log).

    The lower of the two; a tags' best strictly below the log's is not in the log.
    """
    if tags_best is not None and (local_best is None or tags_best < local_best):
        return tags_best, False
    return local_best, local_best is not None


def _local_best(items: Sequence[Mapping[str, Any]]) -> Optional[int]:
    values = [c for c in (_valid_cycles(e) for e in items) if c is not None]
    return min(values) if values else None


def best_cycles(entries: Sequence[Any], tag_best: Optional[int] = None) -> Optional[int]:
    """Lowest integer cycles among valid entries and the tags' best `tag_best`; None when there is none."""
    return overall_best(_local_best(_entries(entries)), tag_best)[0]


def plateau_valid_iters_since_best(entries: Sequence[Any], tag_best: Optional[int] = None) -> Optional[int]:
    """Valid attempts after the most recent one that reached the best; None without a best in the log.

    The best is `best_cycles(entries, tag_best)`. Walks back from the end, skipping entries that are
    not valid or have no cycles, and counts the others until one equals the best. A best that only
    the tags hold (`tag_best` below every valid cycles of the log) gives None, as in the runner.
    """
    items = _entries(entries)
    best, in_log = overall_best(_local_best(items), tag_best)
    if best is None or not in_log:
        return None
    count = 0
    for entry in reversed(items):
        cycles = _valid_cycles(entry)
        if cycles is None:
            continue
        if cycles == best:
            return count
        count += 1
    return None  # unreachable: the best comes from these entries


def invalid_streak(entries: Sequence[Any]) -> int:
    """Number of consecutive attempts at the end of the log that are not valid (`valid is not True`)."""
    count = 0
    for entry in reversed(_entries(entries)):
        if entry.get("valid") is True:
            break
        count += 1
    return count


# --------------------------------------------------------------------------- bounds

def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _split_packet(profile: Any, threshold_target: Optional[int]) -> tuple[Optional[Mapping[str, Any]], Optional[int]]:
    """Accept a performance profile (dict or model) or a whole packet carrying one."""
    if profile is None:
        return None, threshold_target
    if hasattr(profile, "model_dump"):
        profile = profile.model_dump()
    if not isinstance(profile, Mapping):
        return None, threshold_target
    if "performance_profile" in profile:  # a packet
        if threshold_target is None:
            target = profile.get("threshold_target")
            threshold_target = target if isinstance(target, int) and not isinstance(target, bool) else None
        inner = profile.get("performance_profile")
        if hasattr(inner, "model_dump"):
            inner = inner.model_dump()
        return (inner if isinstance(inner, Mapping) else None), threshold_target
    return profile, threshold_target


def slack_fraction(profile: Any) -> Optional[float]:
    """Schedule slack as a fraction of the tight lower bound, when the profile gives it.

    Computed from `schedule_cycles_estimate` and `tight_lb_cycles` when both are there
    (exact; the packet's `schedule_slack_pct` may be rounded), else `schedule_slack_pct`.
    """
    p, _ = _split_packet(profile, None)
    if p is None:
        return None
    estimate, tight = _number(p.get("schedule_cycles_estimate")), _number(p.get("tight_lb_cycles"))
    if estimate is not None and tight is not None and tight > 0:
        return (estimate - tight) / tight
    return _number(p.get("schedule_slack_pct"))


def _slack_within_bound(profile: Mapping[str, Any]) -> bool:
    """Schedule slack <= 4% of the tight bound (in integers when the profile has integer cycles)."""
    estimate, tight = profile.get("schedule_cycles_estimate"), profile.get("tight_lb_cycles")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (estimate, tight)) and tight > 0:
        return (estimate - tight) * 100 <= 4 * tight
    slack = slack_fraction(profile)
    return slack is not None and slack <= NEAR_BOUND_SLACK + 1e-12


class _CountFromEntries:
    """Marker default: count the plateau on the entries given."""

    def __repr__(self) -> str:
        return "COUNT_FROM_ENTRIES"


COUNT_FROM_ENTRIES: Any = _CountFromEntries()


def _plateau(entries: Sequence[Any], tag_best: Optional[int], plateau: Any) -> Optional[int]:
    return plateau_valid_iters_since_best(entries, tag_best) if plateau is COUNT_FROM_ENTRIES else plateau


def near_bound(entries: Sequence[Any], profile: Any = None, threshold_target: Optional[int] = None, *,
               tag_best: Optional[int] = None, plateau: Any = COUNT_FROM_ENTRIES) -> bool:
    """Near the lower bound: the next plan must lower the bound, not reschedule.

    True when the schedule slack is <= 4% of the tight bound and there was no new best in
    the last 3 valid attempts (plateau >= 3), or when the threshold target is below the
    tight bound. False without a profile. The plateau is counted on `entries` with the tags'
    best `tag_best`, unless `plateau` gives it (e.g. a packet's, counted on the whole log).
    """
    p, threshold_target = _split_packet(profile, threshold_target)
    if p is None:
        return False
    tight = _number(p.get("tight_lb_cycles"))
    if threshold_target is not None and tight is not None and threshold_target < tight:
        return True
    if not _slack_within_bound(p):
        return False
    stall = _plateau(entries, tag_best, plateau)
    return stall is not None and stall >= NEAR_BOUND_STALL


def packet_pivot_inputs(packet: Any) -> dict[str, Any]:
    """The `tag_best` and `plateau` keywords of `pivot_required` and `near_bound` on a packet's log tail.

    The packet's `best_cycles` is the runner's (log and `best/*` tags) and goes in as the tags' best; its
    `plateau_valid_iters_since_best`, counted on the whole log, is used when it states one, else the
    plateau is counted on the tail with that best (null when the best is not in the log, as the
    runner's). Every reader of a packet (the rule planner, the planner metrics) calls the pivot policy
    with these, so they agree with the packet.
    """
    if isinstance(packet, Mapping):
        best, stated = packet.get("best_cycles"), packet.get("plateau_valid_iters_since_best")
    else:
        best, stated = getattr(packet, "best_cycles", None), getattr(packet, "plateau_valid_iters_since_best", None)
    best = best if isinstance(best, int) and not isinstance(best, bool) else None
    stated = stated if isinstance(stated, int) and not isinstance(stated, bool) else None
    return {"tag_best": best, "plateau": COUNT_FROM_ENTRIES if stated is None else stated}


def pivot_required(
    entries: Sequence[Any], profile: Any = None, threshold_target: Optional[int] = None, *,
    tag_best: Optional[int] = None, plateau: Any = COUNT_FROM_ENTRIES,
) -> tuple[bool, list[str]]:
    """Whether the next directive must change family or mechanism, with the names of the rules that say so.

    Rules (names in `PIVOT_RULES`): `family_blocked` (the current family reached its
    consecutive cap), `hard_plateau` (>= 6 valid attempts since the best), `invalid_streak`
    (3 invalid attempts in a row: recovery mode) and `near_bound` (see `near_bound`).
    `profile` is a performance profile or a packet carrying one (its `threshold_target`
    is then used too). The plateau is the runner's: counted with the tags' best `tag_best`
    (null, so no plateau rule, when that best is not in the log), unless `plateau` gives it.
    """
    items = _entries(entries)
    reasons: list[str] = []
    if family_constraints(items).blocked_families:
        reasons.append("family_blocked")
    stall = _plateau(items, tag_best, plateau)
    if stall is not None and stall >= HARD_PLATEAU:
        reasons.append("hard_plateau")
    if invalid_streak(items) >= INVALID_STREAK:
        reasons.append("invalid_streak")
    if near_bound(items, profile, threshold_target, plateau=stall):
        reasons.append("near_bound")
    return bool(reasons), reasons


# --------------------------------------------------------------------------- directive

def _blocked_set(blocked_families: Any) -> set[str]:
    if blocked_families is None:
        return set()
    if isinstance(blocked_families, FamilyConstraints):
        blocked_families = blocked_families.blocked_families
    elif isinstance(blocked_families, Mapping):
        blocked_families = blocked_families.get("blocked_families") or []
    if isinstance(blocked_families, str):
        blocked_families = [blocked_families]
    return {f.strip() for f in blocked_families if isinstance(f, str) and f.strip() in FAMILIES}


def _directive_object(obj: Any) -> tuple[Any, Optional[str]]:
    """A directive given as a dict, JSON text/bytes or model, as a mapping; else the one-line error."""
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8", errors="replace")
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            return None, f"directive: not valid JSON ({exc})"
    if isinstance(obj, OptimizationDirective):
        obj = obj.model_dump()
    if not isinstance(obj, Mapping):
        return None, f"directive: must be a JSON object, got {type(obj).__name__}"
    return obj, None


def validate_directive(obj: Any, blocked_families: Any = ()) -> list[str]:
    """Every error of a directive against formats.md §2.2 and the blocked families; [] when valid.

    Strict: every key required, no extra keys, exact types (no coercion). Beyond the
    original it also checks the 1-6 bounds inside `validation`, rejects extra keys inside
    it and blank strings in every list. A blocked family is not allowed unless all three
    are blocked. `obj` may be a dict or its JSON text; `blocked_families` a list of family
    strings, a `FamilyConstraints` or a dict carrying `blocked_families`.
    """
    obj, error = _directive_object(obj)
    if error:
        return [error]
    errors: list[str] = []
    try:
        OptimizationDirective.model_validate(dict(obj))
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(part) for part in err["loc"]) or "directive"
            errors.append(f"{where}: {err['msg']}")
    blocked = _blocked_set(blocked_families)
    family = obj.get("strategy_family")
    if isinstance(family, str) and family in blocked and len(blocked) < len(FAMILIES):
        allowed = ", ".join(f for f in FAMILIES if f not in blocked)
        errors.append(f"strategy_family: {family} is blocked for this directive (allowed: {allowed})")
    return errors


# --------------------------------------------------------------------------- the original's check

_ORIGINAL_KEYS = ("objective", "primary_hypothesis", "strategy_family", "strategy_modifiers", "risk",
                  "expected_effect_cycles", "change_summary", "step_plan", "validation", "next_packet_requests",
                  "did_web_search")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def validate_directive_original(obj: Any, blocked_families: Any = ()) -> list[str]:
    """The loop runner's own directive check (`_validate_directive`), looser than `validate_directive`.

    It accepts what the strict check refuses (formats.md §2.3.1): `expected_effect_cycles: true` (a bool
    is an int in Python), a padded family (compared after strip), blank items in every list but the
    modifiers, any number of validation commands and criteria, extra keys inside `validation`. It
    stops at the first error, as the original raises; [] when it accepts the directive.
    """
    obj, error = _directive_object(obj)
    if not error:
        error = _original_error(obj, _blocked_set(blocked_families))
    return [error] if error else []


def _original_error(directive: Mapping[str, Any], blocked: set[str]) -> Optional[str]:
    missing = [key for key in _ORIGINAL_KEYS if key not in directive]
    if missing:
        return f"Directive is missing required keys: {missing}"
    extras = [key for key in directive if key not in _ORIGINAL_KEYS]
    if extras:
        return f"Directive has unexpected keys (not allowed): {extras}"
    for key, kind in (("objective", str), ("primary_hypothesis", str), ("risk", str),
                      ("expected_effect_cycles", int), ("did_web_search", bool), ("strategy_family", str)):
        if not isinstance(directive[key], kind):
            return f"Directive.{key} must be {kind.__name__}, got {type(directive[key]).__name__}."
    family = directive["strategy_family"].strip()
    allowed = [f for f in FAMILIES if f not in blocked] or list(FAMILIES)
    if not family:
        return "Directive.strategy_family must be a non-empty string."
    if family not in allowed:
        return "Directive.strategy_family must be one of: " + ", ".join(repr(f) for f in allowed)
    modifiers = directive["strategy_modifiers"]
    if not _strings(modifiers) or len(modifiers) > 3 or any(not item.strip() for item in modifiers):
        return "Directive.strategy_modifiers must be 0..3 non-empty strings."
    for key, low, high in (("change_summary", 1, 5), ("step_plan", 3, 12)):
        if not _strings(directive[key]) or not low <= len(directive[key]) <= high:
            return f"Directive.{key} must be an array of {low}..{high} strings."
    validation = directive["validation"]
    if not isinstance(validation, dict) or not _strings(validation.get("commands")) \
            or not _strings(validation.get("pass_criteria")):
        return "Directive.validation must be an object with string arrays commands and pass_criteria."
    requests = directive["next_packet_requests"]
    if not _strings(requests) or len(requests) > 6:
        return "Directive.next_packet_requests must be an array of 0..6 strings."
    if directive["risk"] not in ("Low", "Medium", "High"):
        return "Directive.risk must be one of: Low, Medium, High."
    return None
