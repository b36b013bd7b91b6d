"""programs.stack: the module stack (summarize, select, verify); the verifier only makes a decision more careful."""

from __future__ import annotations

import programs
from programs.seeds import DECISION_SEEDS


def _section(fields: dict) -> str:
    return "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in fields.items()) + "\n\n[[ ## completed ## ]]"


def test_stack_verifier_can_only_make_the_decision_more_careful(scripted_lm):
    scripted_lm([
        _section({"state_summary": "Tests keep failing the same way.", "progress": "stalled"}),
        _section({"action": "continue", "next_input": "try again", "reason": "retry", "confidence": "0.8"}),
        _section({"verdict": "stop", "rationale": "it is looping", "confidence": "0.9"}),
    ])
    out = programs.get("full_auto.stack")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    assert (out.action, out.next_input, out.confidence, out.verdict) == ("stop", "", 0.9, "stop")
    assert "it is looping" in out.reason and out.stage_errors == []


def test_stack_survives_unusable_summary_and_verdict(scripted_lm):
    scripted_lm([
        "no idea",
        _section({"action": "pause", "next_input": "", "reason": "unclear", "confidence": "0.7"}),
        "garbage",
    ])
    out = programs.get("full_auto.stack")(**programs.decision_inputs(DECISION_SEEDS[1].summary))
    assert (out.action, out.confidence, out.parse_errors) == ("pause", 0.7, [])
    assert out.state_summary.startswith("status: completed") and len(out.stage_errors) == 2
