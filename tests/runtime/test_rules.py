"""runtime.rules: the rule policy as a pure runtime function (the one full_auto.rules runs), its rule names in
order, and the gate that lets chosen rules decide before an LM."""

from __future__ import annotations

import json

import pytest

import programs
import programs.rules_full_auto
import runtime.rules
from program_support import summary
from runtime.rules import RULE_NAMES, check_rules, gated_decision, rule_decision

# One turn per rule, in RULE_NAMES order: the first rule that matches decides.
TURNS = {
    "turn_failed": {"last_turn_status": "failed", "turn_error": "sandbox crashed"},
    "interrupted": {"last_turn_status": "interrupted"},
    "pending_input": {"pending_approvals": "1"},
    "done": {"turn_plan": json.dumps([{"step": "a", "status": "completed"}]), "last_agent_message": "All tests pass."},
    "stalled": {"turn_plan": "- [x] write code\n- [ ] add tests", "no_progress_count": 2},
    "fix_failures": {"last_agent_message": "2 failed, 10 passed"},
    "open_steps": {"turn_plan": "- [x] write code\n- [ ] add tests"},
    "default_continue": {},
}


def test_the_rule_names_are_every_rule_in_the_policys_order():
    assert tuple(TURNS) == RULE_NAMES
    for rule, fields in TURNS.items():
        assert rule_decision(programs.decision_inputs(summary(**fields)))[1] == rule


def test_the_programs_layer_runs_the_runtimes_function():
    assert programs.rules_full_auto.rule_decision is runtime.rules.rule_decision
    inputs = programs.decision_inputs(summary(**TURNS["stalled"]))
    out = programs.get("full_auto.rules")(**inputs)
    decision, rule = rule_decision(inputs)
    assert (out.decision, out.rule) == (decision, rule)


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_a_gated_rule_decides_and_any_other_leaves_the_turn_to_the_lm(rule):
    inputs = programs.decision_inputs(summary(**TURNS[rule]))
    assert gated_decision(inputs, {rule}) == rule_decision(inputs)
    assert gated_decision(inputs, set(RULE_NAMES) - {rule}) is None
    assert gated_decision(inputs, ()) is None


def test_rule_sets_are_checked_and_put_in_the_policys_order():
    assert check_rules(["done", "turn_failed", "done"]) == ["turn_failed", "done"]
    assert check_rules([]) == []
    with pytest.raises(ValueError, match="unknown rule 'finished'; the rules are turn_failed, interrupted"):
        check_rules(["turn_failed", "finished"])
