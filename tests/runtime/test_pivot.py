"""Pivot policy (formats.md §2.4 and issue 2): streak, bonus, blocking, best, plateau, pivot_required; and
validate_directive: every constraint of formats.md §2.2, the extra checks, and blocked families."""

from __future__ import annotations

import copy
import json

import pytest

from runtime import (
    FAMILIES,
    ExperimentLogEntry,
    FamilyConstraints,
    OptimizationDirective,
    best_cycles,
    family_constraints,
    family_of,
    plateau_valid_iters_since_best,
    validate_directive,
)
from runtime.pivot import current_streak, invalid_streak, near_bound, overall_best, pivot_required, tag_best

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


def test_a_tags_best_below_the_log_is_the_runners_best_with_no_plateau():
    # the log's lowest valid cycles is 1460; the next entry's best_before (the runner's best of the log and
    # the best/* tags when it recorded that entry) is 1440: a best the local log does not hold
    log = [e(S, cycles=1480), e(R, cycles=1460), e(B, cycles=1470), e(S, valid=False, cycles=None)]
    following = e(R, cycles=1475, best_before=1440)
    assert tag_best(following) == 1440
    assert [tag_best(x) for x in (None, e(), e(best_before=True), e(best_before="1440"))] == [None] * 4
    assert (best_cycles(log), plateau_valid_iters_since_best(log)) == (1460, 1)
    assert (best_cycles(log, tag_best(following)), plateau_valid_iters_since_best(log, 1440)) == (1440, None)
    assert (best_cycles(log, 1460), plateau_valid_iters_since_best(log, 1460)) == (1460, 1)  # the log's own best
    assert (best_cycles(log, 1500), plateau_valid_iters_since_best(log, 1500)) == (1460, 1)  # a worse tag
    assert (best_cycles([], 1440), plateau_valid_iters_since_best([], 1440)) == (1440, None)
    assert overall_best(1460, 1440) == (1440, False) and overall_best(1460, None) == (1460, True)
    assert overall_best(None, None) == (None, False)
    # the plateau rules follow: six stale attempts on the log alone are no plateau for the runner
    assert pivot_required(valid_run(6)) == (True, ["hard_plateau"])
    assert pivot_required(valid_run(6), tag_best=1000) == (False, [])
    assert pivot_required(valid_run(3), NEAR, tag_best=1000) == (False, [])
    assert near_bound(valid_run(3), NEAR, tag_best=1100) is True  # a tag equal to the log's best
    # a plateau known for the whole log (a packet's) wins over the count on a shorter tail
    assert pivot_required(valid_run(0), plateau=6) == (True, ["hard_plateau"])
    assert pivot_required(valid_run(6), plateau=None) == (False, [])


def test_a_packets_best_and_plateau_are_the_pivot_inputs_of_its_tail():
    from runtime import AdvisorPacket, packet_pivot_inputs
    from runtime.pivot import COUNT_FROM_ENTRIES

    stated = AdvisorPacket(best_cycles=1440, plateau_valid_iters_since_best=6)
    assert packet_pivot_inputs(stated) == {"tag_best": 1440, "plateau": 6}
    # no plateau stated (a tags' best, or no best yet): counted on the tail, with the packet's best
    tagged = {"best_cycles": 1000, "plateau_valid_iters_since_best": None}
    assert packet_pivot_inputs(tagged) == {"tag_best": 1000, "plateau": COUNT_FROM_ENTRIES}
    assert pivot_required(valid_run(6), **packet_pivot_inputs(tagged)) == (False, [])
    assert pivot_required(valid_run(0), **packet_pivot_inputs(stated)) == (True, ["hard_plateau"])
    assert packet_pivot_inputs({"best_cycles": True}) == {"tag_best": None, "plateau": COUNT_FROM_ENTRIES}


def test_pivot_functions_reject_non_dict_entries():
    with pytest.raises(TypeError):
        family_constraints(["not a dict"])


# --------------------------------------------------------------------------- validate_directive

def directive(**overrides):
    base = {
        "objective": "Cut gather loads in the inner rounds",
        "primary_hypothesis": "Caching the top tree levels removes most per-lane loads",
        "strategy_family": "family:reduce_loads",
        "strategy_modifiers": ["gather", "cache"],
        "risk": "Medium",
        "expected_effect_cycles": -25,
        "change_summary": ["Cache levels 0-2 in scratch"],
        "step_plan": ["Profile loads", "Add the cache", "Run the submission tests"],
        "validation": {"commands": ["python3 -B tests/submission_tests.py"],
                       "pass_criteria": ["correctness passes"]},
        "next_packet_requests": [],
        "did_web_search": False,
    }
    base.update(copy.deepcopy(overrides))
    return base


def without(key):
    d = directive()
    del d[key]
    return d


def with_validation(**overrides):
    d = directive()
    d["validation"].update(overrides)
    return d


def strs(n, text="item"):
    return [f"{text} {i}" for i in range(n)]


KEYS = list(directive())

VALID = [
    ("base", directive()),
    ("each-family-schedule", directive(strategy_family=S)),
    ("each-family-break-deps", directive(strategy_family=B)),
    ("modifiers-0", directive(strategy_modifiers=[])),
    ("modifiers-3", directive(strategy_modifiers=strs(3))),
    ("risk-low", directive(risk="Low")),
    ("risk-high", directive(risk="High")),
    ("effect-0", directive(expected_effect_cycles=0)),
    ("effect-positive", directive(expected_effect_cycles=40)),
    ("change-summary-5", directive(change_summary=strs(5))),
    ("step-plan-12", directive(step_plan=strs(12))),
    ("commands-6", with_validation(commands=strs(6))),
    ("pass-criteria-6", with_validation(pass_criteria=strs(6))),
    ("next-packet-requests-6", directive(next_packet_requests=strs(6))),
    ("did-web-search-true", directive(did_web_search=True)),
    ("empty-objective-is-a-string", directive(objective="")),
]


@pytest.mark.parametrize("obj", [v[1] for v in VALID], ids=[v[0] for v in VALID])
def test_valid_directives(obj):
    assert validate_directive(obj) == []
    assert validate_directive(obj, []) == []
    OptimizationDirective.model_validate(obj)


# (id, directive, field the error must name)
INVALID = [
    *[(f"missing-{key}", without(key), key) for key in KEYS],
    ("extra-key", directive(strategy_tags=["family:schedule"]), "strategy_tags"),
    ("objective-int", directive(objective=3), "objective"),
    ("objective-null", directive(objective=None), "objective"),
    ("hypothesis-list", directive(primary_hypothesis=["x"]), "primary_hypothesis"),
    ("family-unknown", directive(strategy_family="family:unroll"), "strategy_family"),
    ("family-untagged", directive(strategy_family="schedule"), "strategy_family"),
    ("family-padded", directive(strategy_family=" family:schedule"), "strategy_family"),
    ("family-list", directive(strategy_family=[S]), "strategy_family"),
    ("modifiers-4", directive(strategy_modifiers=strs(4)), "strategy_modifiers"),
    ("modifiers-empty-string", directive(strategy_modifiers=["gather", ""]), "strategy_modifiers"),
    ("modifiers-blank-string", directive(strategy_modifiers=["  "]), "strategy_modifiers"),
    ("modifiers-non-string", directive(strategy_modifiers=[1]), "strategy_modifiers"),
    ("modifiers-string", directive(strategy_modifiers="gather"), "strategy_modifiers"),
    ("risk-lowercase", directive(risk="low"), "risk"),
    ("risk-other", directive(risk="Extreme"), "risk"),
    ("effect-float", directive(expected_effect_cycles=-25.0), "expected_effect_cycles"),
    ("effect-string", directive(expected_effect_cycles="-25"), "expected_effect_cycles"),
    ("effect-bool", directive(expected_effect_cycles=True), "expected_effect_cycles"),
    ("effect-null", directive(expected_effect_cycles=None), "expected_effect_cycles"),
    ("change-summary-0", directive(change_summary=[]), "change_summary"),
    ("change-summary-6", directive(change_summary=strs(6)), "change_summary"),
    ("change-summary-blank", directive(change_summary=["ok", " "]), "change_summary"),
    ("change-summary-non-string", directive(change_summary=[{"a": 1}]), "change_summary"),
    ("step-plan-2", directive(step_plan=strs(2)), "step_plan"),
    ("step-plan-13", directive(step_plan=strs(13)), "step_plan"),
    ("step-plan-blank", directive(step_plan=["a", "b", ""]), "step_plan"),
    ("validation-not-object", directive(validation=["python3 tests"]), "validation"),
    ("validation-extra-key", with_validation(notes="x"), "validation.notes"),
    ("validation-missing-commands", directive(validation={"pass_criteria": ["ok"]}), "validation.commands"),
    ("validation-missing-criteria", directive(validation={"commands": ["ok"]}), "validation.pass_criteria"),
    ("commands-0", with_validation(commands=[]), "validation.commands"),
    ("commands-7", with_validation(commands=strs(7)), "validation.commands"),
    ("commands-blank", with_validation(commands=[""]), "validation.commands"),
    ("commands-non-string", with_validation(commands=[1]), "validation.commands"),
    ("pass-criteria-0", with_validation(pass_criteria=[]), "validation.pass_criteria"),
    ("pass-criteria-7", with_validation(pass_criteria=strs(7)), "validation.pass_criteria"),
    ("pass-criteria-blank", with_validation(pass_criteria=["\t"]), "validation.pass_criteria"),
    ("next-packet-requests-7", directive(next_packet_requests=strs(7)), "next_packet_requests"),
    ("next-packet-requests-blank", directive(next_packet_requests=[""]), "next_packet_requests"),
    ("next-packet-requests-null", directive(next_packet_requests=None), "next_packet_requests"),
    ("did-web-search-string", directive(did_web_search="false"), "did_web_search"),
    ("did-web-search-int", directive(did_web_search=0), "did_web_search"),
]


@pytest.mark.parametrize("obj,field", [v[1:] for v in INVALID], ids=[v[0] for v in INVALID])
def test_invalid_directives_name_the_field(obj, field):
    errors = validate_directive(obj)
    assert errors, "expected at least one error"
    assert any(err.startswith(field) for err in errors), errors


def test_all_errors_are_reported():
    obj = directive(risk="low", step_plan=[], did_web_search="no")
    obj["extra"] = 1
    fields = {err.split(":")[0].split(".")[0] for err in validate_directive(obj)}
    assert {"risk", "step_plan", "did_web_search", "extra"} <= fields


@pytest.mark.parametrize("obj", [None, [], "not json", "[1, 2]", 42])
def test_non_objects(obj):
    errors = validate_directive(obj)
    assert errors and errors[0].startswith("directive")


def test_json_text_is_accepted():
    assert validate_directive(json.dumps(directive())) == []
    assert validate_directive(json.dumps(directive(risk="x")))


# --------------------------------------------------------------------------- validate_directive: blocked families

@pytest.mark.parametrize("family,blocked,ok", [
    (R, [R], False),
    (S, [R], True),
    (B, [R], True),
    (R, [], True),
    (R, None, True),
    (R, [S, B], True),
    (R, [S, R], False),
    (R, [S, R, B], True),          # all three blocked: all allowed
    (R, ("family:reduce_loads",), False),
    (R, ["not-a-family"], True),
])
def test_blocked_families(family, blocked, ok):
    errors = validate_directive(directive(strategy_family=family), blocked)
    assert (errors == []) is ok
    if not ok:
        assert errors == [f"strategy_family: {family} is blocked for this directive (allowed: "
                          + ", ".join(f for f in FAMILIES if f not in blocked) + ")"]


def test_blocked_from_family_constraints():
    fc = family_constraints([{"strategy_tags": [R], "valid": True, "cycles": 1500}] * 2)
    assert fc.blocked_families == [R]
    assert validate_directive(directive(strategy_family=R), fc)
    assert validate_directive(directive(strategy_family=R), fc.model_dump())
    assert validate_directive(directive(strategy_family=R), fc.blocked_families)
    assert validate_directive(directive(strategy_family=S), fc) == []


def test_blocked_and_other_errors_together():
    errors = validate_directive(directive(strategy_family=R, risk="none"), [R])
    assert len(errors) == 2


def test_unhashable_family_does_not_crash():
    assert validate_directive(directive(strategy_family={"a": 1}), [R])
