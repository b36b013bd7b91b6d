"""Signatures match the record shapes of formats.md and the runtime's pydantic models."""

from __future__ import annotations

import typing

import programs

from runtime.advisor import FAMILIES, DirectiveValidation, OptimizationDirective
from runtime.fullauto import ACTIONS, GuidanceDecision
from signatures import (
    DECISION_OUTPUT_FIELDS,
    DIRECTIVE_FIELDS,
    FULL_AUTO_INPUT_FIELDS,
    FullAutoDecisionSignature,
    GuidanceDecisionSignature,
    OptimizationDirectiveSignature,
    SelectNextAction,
    SummarizeTurnState,
    VerifyDecision,
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


def test_directive_signature_outputs_every_directive_field_typed():
    outputs = OptimizationDirectiveSignature.output_fields
    assert list(outputs) == list(OptimizationDirective.model_fields) == list(DIRECTIVE_FIELDS)
    assert set(typing.get_args(_annotation(OptimizationDirectiveSignature, "strategy_family"))) == set(FAMILIES)
    assert set(typing.get_args(_annotation(OptimizationDirectiveSignature, "risk"))) == {"Low", "Medium", "High"}
    assert _annotation(OptimizationDirectiveSignature, "expected_effect_cycles") is int
    assert _annotation(OptimizationDirectiveSignature, "did_web_search") is bool
    assert _annotation(OptimizationDirectiveSignature, "validation") is DirectiveValidation
    for name in ("strategy_modifiers", "change_summary", "step_plan", "next_packet_requests"):
        assert _annotation(OptimizationDirectiveSignature, name) == list[str]
    # The packet goes in as its main parts (formats.md §2.3).
    assert "strategy_family_constraints" in OptimizationDirectiveSignature.input_fields
    assert "experiment_log_tail" in OptimizationDirectiveSignature.input_fields


def test_module_stack_signatures_chain():
    assert {"state_summary", "progress"} <= set(SummarizeTurnState.output_fields)
    assert {"state_summary", "progress"} <= set(SelectNextAction.input_fields)
    assert list(SelectNextAction.output_fields) == list(FullAutoDecisionSignature.output_fields)
    assert {"proposed_action", "proposed_reason"} <= set(VerifyDecision.input_fields)
    assert set(typing.get_args(_annotation(VerifyDecision, "verdict"))) == {"keep", "pause", "stop"}
    for signature in (SummarizeTurnState, SelectNextAction, VerifyDecision):
        assert signature.instructions.strip()
