"""signatures.full_auto: the Full Auto signature is the original (fields, types, instruction, empty
descriptions); the clearer wording and the guidance signature are variants with the same outputs."""

from __future__ import annotations

import typing

import programs
from runtime.fullauto import ACTIONS, GuidanceDecision
from signatures import (
    DECISION_OUTPUT_FIELDS,
    FULL_AUTO_INPUT_FIELDS,
    FullAutoDecisionSignature,
    GuidanceDecisionSignature,
)

ORIGINAL_INSTRUCTION = ("Full Auto Decision: Decide what to do after a Codex turn completes.\n"
                        "Return a single action and, if continuing, the next user input to send.\n"
                        "Codex thread id.")


def _annotation(signature, name):
    return signature.fields[name].annotation


def test_full_auto_signature_is_the_original():
    assert list(FullAutoDecisionSignature.input_fields) == [
        "thread_id", "turn_id", "last_turn_status", "turn_error", "turn_plan", "diff_summary", "token_usage",
        "pending_approvals", "pending_tool_inputs", "recent_actions", "compaction_events"]
    assert FULL_AUTO_INPUT_FIELDS == tuple(FullAutoDecisionSignature.input_fields)
    assert all(_annotation(FullAutoDecisionSignature, name) is str for name in FULL_AUTO_INPUT_FIELDS)
    assert list(FullAutoDecisionSignature.output_fields) == ["action", "next_input", "reason", "confidence"]
    assert FullAutoDecisionSignature.instructions == ORIGINAL_INSTRUCTION
    assert _annotation(FullAutoDecisionSignature, "confidence") is float
    assert _annotation(FullAutoDecisionSignature, "action") is str  # a String in the original
    assert _annotation(FullAutoDecisionSignature, "next_input") is str
    # every field description is empty, as the original macro builds it
    fields = {**FullAutoDecisionSignature.input_fields, **FullAutoDecisionSignature.output_fields}
    assert all(field.json_schema_extra["desc"] == "" for field in fields.values())
    # The four outputs are exactly the fields of a decision.
    assert set(DECISION_OUTPUT_FIELDS) == set(GuidanceDecision.model_fields) - {"parse_errors"}


def test_the_rendered_prompt_has_the_original_text_and_no_invented_description():
    from dspy.adapters import ChatAdapter

    system = ChatAdapter().format(FullAutoDecisionSignature, demos=[], inputs={
        name: "x" for name in FULL_AUTO_INPUT_FIELDS})[0]["content"]
    assert "Full Auto Decision: Decide what to do after a Codex turn completes." in system
    assert "Codex thread id." in system and "${" not in system
    assert "1. `thread_id` (str): \n" in system or "1. `thread_id` (str):\n" in system


def test_the_clear_wording_is_a_variant():
    from signatures import FullAutoDecisionClearSignature, GuidanceDecisionClearSignature

    assert FullAutoDecisionClearSignature.instructions.startswith("Decide what to do after a Codex turn")
    assert set(typing.get_args(_annotation(FullAutoDecisionClearSignature, "action"))) == set(ACTIONS)
    assert list(FullAutoDecisionClearSignature.input_fields) == list(FullAutoDecisionSignature.input_fields)
    assert GuidanceDecisionSignature.instructions == "Guidance goal intent for the run."
    assert list(GuidanceDecisionClearSignature.output_fields) == list(GuidanceDecisionSignature.output_fields)
    assert programs.spec("full_auto.predict_clear").uses_lm


def test_guidance_signature_has_goal_inputs_and_the_same_outputs():
    assert list(GuidanceDecisionSignature.input_fields) == ["goal_intent", "goal_success_criteria", "summary", "state"]
    assert list(GuidanceDecisionSignature.output_fields) == list(FullAutoDecisionSignature.output_fields)
    assert _annotation(GuidanceDecisionSignature, "confidence") is float
