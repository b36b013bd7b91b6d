"""validate_directive: every constraint of formats.md §2.2, the extra checks, and blocked families."""

from __future__ import annotations

import copy
import json

import pytest

from runtime import FAMILIES, OptimizationDirective, family_constraints, validate_directive

S, R, B = FAMILIES


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


# --------------------------------------------------------------------------- blocked families

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
