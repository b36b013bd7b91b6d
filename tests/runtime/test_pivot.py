"""Pivot policy (formats.md §2.4 and issue 2): streak, bonus, blocking, best, plateau, pivot_required."""

from __future__ import annotations

import pytest

from runtime import (
    FAMILIES,
    ExperimentLogEntry,
    FamilyConstraints,
    best_cycles,
    family_constraints,
    family_of,
    plateau_valid_iters_since_best,
)
from runtime.pivot import current_streak, invalid_streak, near_bound, pivot_required

S, R, B = FAMILIES  # family:schedule, family:reduce_loads, family:break_deps


def e(family=S, valid=True, cycles=1500, tags=None, **extra):
    """A log line as a dict; family None gives a non-family first tag."""
    if tags is None:
        tags = ([family] if family else ["vliw-pack"]) + ["mod"]
    entry = {"strategy_tags": tags, "valid": valid, "cycles": cycles}
    entry.update(extra)
    return entry


# --------------------------------------------------------------------------- family_of

@pytest.mark.parametrize("entry,family", [
    (e(S), S), (e(R), R), (e(B), B),
    (e(tags=["gather", S]), None),               # later tags are never read
    (e(tags=[]), None),
    (e(tags=["family:other"]), None),
    (e(tags=[" family:schedule"]), None),
    (e(tags=[3, S]), None),
    (e(tags="family:schedule"), None),           # not a list
    (e(tags=None) | {"strategy_tags": None}, None),
    ({"valid": True, "cycles": 1}, None),        # no tags at all
], ids=str)
def test_family_of(entry, family):
    assert family_of(entry) == family


# --------------------------------------------------------------------------- constraints
# (id, log, current family, streak len, meaningful win, max consecutive, blocked)
CONSTRAINT_CASES = [
    ("empty-log", [], None, 0, False, 2, []),
    ("one", [e(S)], S, 1, False, 2, []),
    ("two-blocked", [e(S), e(S)], S, 2, False, 2, [S]),
    ("three-blocked", [e(S), e(S), e(S)], S, 3, False, 2, [S]),
    ("other-family-before", [e(R), e(R), e(S)], S, 1, False, 2, []),
    ("switch-resets", [e(S), e(S), e(R)], R, 1, False, 2, []),
    ("streak-broken-by-no-family", [e(S), e(S), e(None), e(S)], S, 1, False, 2, []),
    ("streak-broken-by-empty-tags", [e(S), e(tags=[]), e(S), e(S)], S, 2, False, 2, [S]),
    ("last-without-family", [e(S), e(S), e(None)], None, 0, False, 2, []),
    ("last-with-family-in-later-tag", [e(S), e(S), e(tags=["x", S])], None, 0, False, 2, []),
    ("invalid-entries-count-in-streak", [e(S, valid=False, cycles=None), e(S, valid=False, cycles=None)],
     S, 2, False, 2, [S]),
    # bonus: last valid beats the streak's earlier best valid by >= 10
    ("win-exactly-10", [e(S, cycles=1500), e(S, cycles=1490)], S, 2, True, 3, []),
    ("win-9-not-enough", [e(S, cycles=1500), e(S, cycles=1491)], S, 2, False, 2, [S]),
    ("win-vs-earlier-best-not-last", [e(S, cycles=1480), e(S, cycles=1600), e(S, cycles=1475)],
     S, 3, False, 2, [S]),
    ("win-then-cap-3", [e(S, cycles=1500), e(S, cycles=1505), e(S, cycles=1490)], S, 3, True, 3, [S]),
    ("win-first-of-streak-no-earlier", [e(R, cycles=1600), e(S, cycles=1400)], S, 1, False, 2, []),
    ("win-only-within-streak", [e(R, cycles=1400), e(S, cycles=1500), e(S, cycles=1480)], S, 2, True, 3, []),
    ("beating-global-best-is-not-a-win", [e(R, cycles=1500), e(S, valid=False, cycles=None),
                                          e(S, cycles=1400)], S, 2, False, 2, [S]),
    ("global-best-better-than-streak", [e(R, cycles=1300), e(S, cycles=1420), e(S, cycles=1415)],
     S, 2, False, 2, [S]),
    ("invalid-earlier-low-cycles-ignored", [e(S, valid=False, cycles=1300), e(S, cycles=1490)],
     S, 2, False, 2, [S]),
    ("invalid-inside-streak-skipped", [e(S, cycles=1500), e(S, valid=False, cycles=1200), e(S, cycles=1490)],
     S, 3, True, 3, [S]),
    ("last-invalid-no-win", [e(S, cycles=1500), e(S, valid=False, cycles=1400)], S, 2, False, 2, [S]),
    ("last-valid-without-cycles", [e(S, cycles=1500), e(S, cycles=None)], S, 2, False, 2, [S]),
    ("valid-must-be-true", [e(S, cycles=1500), e(S, valid="true", cycles=1400)], S, 2, False, 2, [S]),
    ("valid-1-is-not-true", [e(S, cycles=1500), e(S, valid=1, cycles=1400)], S, 2, False, 2, [S]),
    ("float-cycles-ignored", [e(S, cycles=1500), e(S, cycles=1400.0)], S, 2, False, 2, [S]),
    ("bool-cycles-ignored", [e(S, cycles=1500), e(S, cycles=True)], S, 2, False, 2, [S]),
    ("win-broken-by-no-family", [e(S, cycles=1500), e(None, cycles=1500), e(S, cycles=1480)],
     S, 1, False, 2, []),
]


@pytest.mark.parametrize("log,family,length,win,cap,blocked",
                         [c[1:] for c in CONSTRAINT_CASES], ids=[c[0] for c in CONSTRAINT_CASES])
def test_family_constraints(log, family, length, win, cap, blocked):
    fc = family_constraints(log)
    assert isinstance(fc, FamilyConstraints)
    assert fc.current_family == family
    assert fc.current_family_streak_len == length
    assert fc.last_attempt_meaningful_win is win
    assert fc.max_consecutive == cap
    assert fc.blocked_families == blocked
    assert fc.allowed_families == list(FAMILIES)  # always all three, fixed order
    assert len(fc.blocked_families) <= 1


def test_constraints_shape_and_dict_access():
    fc = family_constraints([e(S), e(S)])
    assert fc.model_dump() == {
        "allowed_families": ["family:schedule", "family:reduce_loads", "family:break_deps"],
        "blocked_families": ["family:schedule"], "current_family": "family:schedule",
        "current_family_streak_len": 2, "last_attempt_meaningful_win": False, "max_consecutive": 2,
        # the runner's policy and its wording of the block
        "policy": {"max_consecutive_default": 2, "max_consecutive_bonus": 3, "bonus_min_improvement_cycles": 10},
        "reason": "Blocked family:schedule due to streak_len=2 >= max_consecutive=2.",
    }
    assert fc["blocked_families"] == [S]
    assert fc.families_for_next() == [R, B]


def test_streak_is_oldest_first():
    log = [e(R), e(S, cycles=1), e(S, cycles=2)]
    family, streak = current_streak(log)
    assert family == S and [x["cycles"] for x in streak] == [1, 2]


def test_pydantic_entries_are_accepted():
    base = {"iteration_id": 1, "timestamp_utc": "2026-02-01T21:30:00Z", "branch": "b", "base_branch": "main",
            "base_sha": "a", "head_sha": "b", "files_changed": [], "tests_diff_empty": True,
            "delta_vs_best": None, "hypothesis": "", "change_summary": [], "result_summary": ""}
    entries = [ExperimentLogEntry(**base, valid=True, cycles=c, strategy_tags=[S]) for c in (1500, 1490)]
    assert family_constraints(entries).last_attempt_meaningful_win is True
    assert best_cycles(entries) == 1490


# --------------------------------------------------------------------------- best and plateau
# (id, log, best, plateau)
BEST_CASES = [
    ("empty", [], None, None),
    ("no-valid", [e(valid=False, cycles=1400), e(valid=False, cycles=None)], None, None),
    ("valid-without-cycles", [e(cycles=None)], None, None),
    ("best-is-last", [e(cycles=1500), e(cycles=1450)], 1450, 0),
    ("two-since-best", [e(cycles=1450), e(cycles=1460), e(cycles=1470)], 1450, 2),
    ("invalid-lower-ignored", [e(cycles=1450), e(valid=False, cycles=1000)], 1450, 0),
    ("invalid-skipped-in-count", [e(cycles=1450), e(valid=False, cycles=None), e(cycles=1460),
                                  e(valid=False, cycles=1300)], 1450, 1),
    ("valid-null-cycles-skipped", [e(cycles=1450), e(cycles=None), e(cycles=None)], 1450, 0),
    ("repeated-best-most-recent-wins", [e(cycles=1400), e(cycles=1410), e(cycles=1400), e(cycles=1420)], 1400, 1),
    ("repeated-best-at-end", [e(cycles=1400), e(cycles=1410), e(cycles=1400)], 1400, 0),
    ("families-do-not-matter", [e(S, cycles=1450), e(None, cycles=1460), e(R, cycles=1470)], 1450, 2),
    ("six-since-best", [e(cycles=1400)] + [e(cycles=1401 + i) for i in range(6)], 1400, 6),
    ("public-loop-best", [e(cycles=c) for c in (1443, 1441, 1436, 1435, 1434, 1432, 1429)], 1429, 0),
    ("string-cycles-ignored", [e(cycles="1300"), e(cycles=1450)], 1450, 0),
]


@pytest.mark.parametrize("log,best,plateau", [c[1:] for c in BEST_CASES], ids=[c[0] for c in BEST_CASES])
def test_best_and_plateau(log, best, plateau):
    assert best_cycles(log) == best
    assert plateau_valid_iters_since_best(log) == plateau


@pytest.mark.parametrize("log,count", [
    ([], 0),
    ([e()], 0),
    ([e(), e(valid=False)], 1),
    ([e(valid=False), e(valid=False), e()], 0),
    ([e(), e(valid=False), e(valid=None), e(valid="true")], 3),
])
def test_invalid_streak(log, count):
    assert invalid_streak(log) == count


# --------------------------------------------------------------------------- pivot_required
NEAR = {"tight_lb_cycles": 1000, "schedule_cycles_estimate": 1040, "schedule_slack_pct": 0.04}
FAR = {"tight_lb_cycles": 1000, "schedule_cycles_estimate": 1041, "schedule_slack_pct": 0.041}


def valid_run(n_since_best, family_cycle=(S, R)):
    """A best, then n valid non-improving attempts, families alternating so nothing is blocked."""
    log = [e(B, cycles=1100)]
    for i in range(n_since_best):
        log.append(e(family_cycle[i % 2], cycles=1110 + i))
    return log


# (id, log, profile, threshold_target, required, reasons)
PIVOT_CASES = [
    ("empty", [], None, None, False, []),
    ("fresh", valid_run(0), None, None, False, []),
    ("family-blocked", [e(S), e(S)], None, None, True, ["family_blocked"]),
    ("bonus-not-blocked", [e(S, cycles=1500), e(S, cycles=1490)], None, None, False, []),
    ("plateau-5", valid_run(5), None, None, False, []),
    ("hard-plateau-6", valid_run(6), None, None, True, ["hard_plateau"]),
    ("hard-plateau-7", valid_run(7), None, None, True, ["hard_plateau"]),
    ("two-invalid", valid_run(0) + [e(S, valid=False, cycles=None), e(R, valid=False, cycles=None)],
     None, None, False, []),
    ("three-invalid", valid_run(0) + [e(S, valid=False, cycles=None), e(R, valid=False, cycles=None),
                                      e(S, valid=False, cycles=None)], None, None, True, ["invalid_streak"]),
    ("three-invalid-no-best", [e(S, valid=False, cycles=None), e(R, valid=False, cycles=None),
                               e(S, valid=False, cycles=None)], None, None, True, ["invalid_streak"]),
    ("invalid-and-blocked", [e(S, valid=False, cycles=None)] * 3, None, None, True,
     ["family_blocked", "invalid_streak"]),
    # near bound: slack <= 4% of the tight bound and no new best in the last 3 valid attempts
    ("near-bound-without-profile", valid_run(3), None, None, False, []),
    ("near-bound", valid_run(3), NEAR, None, True, ["near_bound"]),
    ("near-bound-stall-2", valid_run(2), NEAR, None, False, []),
    ("near-bound-slack-4.1pct", valid_run(3), FAR, None, False, []),
    ("near-bound-computed-slack", valid_run(3), {"tight_lb_cycles": 1000, "schedule_cycles_estimate": 1040},
     None, True, ["near_bound"]),
    ("near-bound-computed-slack-over", valid_run(3), {"tight_lb_cycles": 1000, "schedule_cycles_estimate": 1041},
     None, False, []),
    ("near-bound-pct-only", valid_run(3), {"schedule_slack_pct": 0.01}, None, True, ["near_bound"]),
    ("near-bound-pct-only-over", valid_run(3), {"schedule_slack_pct": 0.0400001}, None, False, []),
    ("near-bound-cycles-win-over-pct", valid_run(3),
     {"tight_lb_cycles": 1000, "schedule_cycles_estimate": 1100, "schedule_slack_pct": 0.01}, None, False, []),
    ("near-bound-odd-bound", valid_run(3), {"tight_lb_cycles": 1431, "schedule_cycles_estimate": 1488},
     None, True, ["near_bound"]),
    ("near-bound-odd-bound-over", valid_run(3), {"tight_lb_cycles": 1431, "schedule_cycles_estimate": 1489},
     None, False, []),
    ("near-bound-no-best", [e(S, valid=False, cycles=None)], NEAR, None, False, []),
    ("near-bound-invalid-do-not-stall",
     valid_run(2) + [e(B, valid=False, cycles=None), e(S, valid=False, cycles=None)], NEAR, None, False, []),
    ("near-bound-and-hard-plateau", valid_run(6), NEAR, None, True, ["hard_plateau", "near_bound"]),
    ("near-bound-empty-profile", valid_run(3), {}, None, False, []),
    ("near-bound-error-profile", valid_run(3), {"error": "import failed"}, None, False, []),
    # target below the tight bound: the plan must lower the bound, whatever the slack
    ("target-below-bound", valid_run(0), FAR, 999, True, ["near_bound"]),
    ("target-at-bound", valid_run(0), FAR, 1000, False, []),
    ("target-above-bound", valid_run(0), FAR, 1363, False, []),
    ("target-below-bound-no-profile", valid_run(0), None, 999, False, []),
    ("target-from-packet", valid_run(0), {"threshold_target": 999, "performance_profile": FAR}, None,
     True, ["near_bound"]),
    ("packet-near", valid_run(3), {"threshold_target": None, "performance_profile": NEAR}, None,
     True, ["near_bound"]),
]


@pytest.mark.parametrize("log,profile,target,required,reasons",
                         [c[1:] for c in PIVOT_CASES], ids=[c[0] for c in PIVOT_CASES])
def test_pivot_required(log, profile, target, required, reasons):
    got_required, got_reasons = pivot_required(log, profile, threshold_target=target)
    assert got_required is required
    assert got_reasons == reasons


def test_pivot_required_positional_profile_model():
    from runtime import PerformanceProfile

    required, reasons = pivot_required(valid_run(3), PerformanceProfile(**NEAR))
    assert required and reasons == ["near_bound"]
    assert near_bound(valid_run(3), NEAR) is True


def test_pivot_functions_reject_non_dict_entries():
    with pytest.raises(TypeError):
        family_constraints(["not a dict"])
