"""runtime.rules: the rule policy as a pure runtime function (the one full_auto.rules runs), its rule names in
order, and the gate that lets chosen rules decide before an LM."""

from __future__ import annotations

import pytest

import programs
import programs.rules_full_auto
import runtime.rules
from program_support import RULE_TURNS, summary
from runtime.rules import RULE_NAMES, check_rules, gated_decision, rule_decision


def test_the_rule_names_are_every_rule_in_the_policys_order():
    assert tuple(RULE_TURNS) == RULE_NAMES
    for rule, fields in RULE_TURNS.items():
        assert rule_decision(programs.decision_inputs(summary(**fields)))[1] == rule


def test_the_programs_layer_runs_the_runtimes_function():
    assert programs.rules_full_auto.rule_decision is runtime.rules.rule_decision
    inputs = programs.decision_inputs(summary(**RULE_TURNS["stalled"]))
    out = programs.get("full_auto.rules")(**inputs)
    decision, rule = rule_decision(inputs)
    assert (out.decision, out.rule) == (decision, rule)


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_a_gated_rule_decides_and_any_other_leaves_the_turn_to_the_lm(rule):
    inputs = programs.decision_inputs(summary(**RULE_TURNS[rule]))
    assert gated_decision(inputs, {rule}) == rule_decision(inputs)
    assert gated_decision(inputs, set(RULE_NAMES) - {rule}) is None
    assert gated_decision(inputs, ()) is None


def test_rule_sets_are_checked_and_put_in_the_policys_order():
    assert check_rules(["done", "turn_failed", "done"]) == ["turn_failed", "done"]
    assert check_rules([]) == []
    with pytest.raises(ValueError, match="unknown rule 'finished'; the rules are turn_failed, interrupted"):
        check_rules(["turn_failed", "finished"])
