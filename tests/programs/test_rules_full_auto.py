"""programs.rules_full_auto: the rule policy's every rule, and the always-continue baseline."""

from __future__ import annotations

import json

import pytest

import programs
from program_support import summary


@pytest.mark.parametrize("fields, action, rule", [
    ({"last_turn_status": "failed", "turn_error": "sandbox crashed"}, "stop", "turn_failed"),
    ({"last_turn_status": "interrupted"}, "pause", "interrupted"),
    ({"pending_tool_inputs": "2"}, "pause", "pending_input"),
    ({"turn_plan": json.dumps([{"step": "a", "status": "completed"}]), "last_agent_message": "All tests pass."},
     "stop", "done"),
    ({"turn_plan": "- [x] write code\n- [ ] add tests", "no_progress_count": 2}, "pause", "stalled"),
    ({"last_agent_message": "2 failed, 10 passed"}, "continue", "fix_failures"),
    ({"turn_plan": "- [x] write code\n- [ ] add tests", "last_agent_message": "no errors"}, "continue", "open_steps"),
    ({}, "continue", "default_continue"),
])
def test_full_auto_rules(fields, action, rule):
    out = programs.get("rule")(**programs.decision_inputs(summary(**fields)))
    assert (out.action, out.rule) == (action, rule) and out.parse_errors == []
    assert out.confidence >= 0.55  # the rule policy is never stopped by the low-confidence guardrail


def test_always_continue_baseline():
    out = programs.get("full_auto.always_continue")(**programs.decision_inputs(summary()))
    assert (out.action, out.confidence, out.next_input) == ("continue", 1.0, "")
