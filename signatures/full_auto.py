"""Signatures of the Full Auto next-action decision (formats.md §1.2)."""

from __future__ import annotations

import dspy

from runtime.fullauto import Action

DECISION_OUTPUT_FIELDS: tuple[str, ...] = ("action", "next_input", "reason", "confidence")


class FullAutoDecisionSignature(dspy.Signature):
    """Full Auto Decision: Decide what to do after a Codex turn completes.
Return a single action and, if continuing, the next user input to send.
Codex thread id."""

    # Verbatim as the original runtime's signature macro builds it (formats.md §1.2): the
    # instruction is the first input field's doc-comment lines, trimmed and joined with "\n";
    # every field description is empty (no `desc` attribute); action is a String, confidence an
    # f32. A clearer wording is the variant `FullAutoDecisionClearSignature`.
    thread_id: str = dspy.InputField(desc="")
    turn_id: str = dspy.InputField(desc="")
    last_turn_status: str = dspy.InputField(desc="")
    turn_error: str = dspy.InputField(desc="")
    turn_plan: str = dspy.InputField(desc="")
    diff_summary: str = dspy.InputField(desc="")
    token_usage: str = dspy.InputField(desc="")
    pending_approvals: str = dspy.InputField(desc="")
    pending_tool_inputs: str = dspy.InputField(desc="")
    recent_actions: str = dspy.InputField(desc="")
    compaction_events: str = dspy.InputField(desc="")
    action: str = dspy.OutputField(desc="")
    next_input: str = dspy.OutputField(desc="")
    reason: str = dspy.OutputField(desc="")
    confidence: float = dspy.OutputField(desc="")


class FullAutoDecisionClearSignature(dspy.Signature):
    """Decide what to do after a Codex turn completes. Return a single action and, if continuing, the next user input to send."""

    thread_id: str = dspy.InputField()
    turn_id: str = dspy.InputField()
    last_turn_status: str = dspy.InputField(desc="completed | interrupted | failed")
    turn_error: str = dspy.InputField()
    turn_plan: str = dspy.InputField()
    diff_summary: str = dspy.InputField()
    token_usage: str = dspy.InputField()
    pending_approvals: str = dspy.InputField()
    pending_tool_inputs: str = dspy.InputField()
    recent_actions: str = dspy.InputField(desc="JSON of the last decisions")
    compaction_events: str = dspy.InputField()
    action: Action = dspy.OutputField()
    next_input: str = dspy.OutputField(desc="text to send if continuing; empty means the fallback prompt")
    reason: str = dspy.OutputField(desc="brief")
    confidence: float = dspy.OutputField(desc="0.0-1.0")


FULL_AUTO_INPUT_FIELDS: tuple[str, ...] = tuple(FullAutoDecisionSignature.input_fields)


class GuidanceDecisionSignature(dspy.Signature):
    """Guidance goal intent for the run."""

    # Verbatim as the original macro builds it: the instruction is the first input field's doc
    # comment; no field has a `desc`. A clearer wording is `GuidanceDecisionClearSignature`.
    goal_intent: str = dspy.InputField(desc="")
    goal_success_criteria: str = dspy.InputField(desc="")
    summary: str = dspy.InputField(desc="")
    state: str = dspy.InputField(desc="")
    action: str = dspy.OutputField(desc="")
    next_input: str = dspy.OutputField(desc="")
    reason: str = dspy.OutputField(desc="")
    confidence: float = dspy.OutputField(desc="")


class GuidanceDecisionClearSignature(dspy.Signature):
    """Decide what to do next toward a goal, given its success criteria, the latest turn summary and the loop state. Return a single action and, if continuing, the next user input to send."""

    goal_intent: str = dspy.InputField()
    goal_success_criteria: str = dspy.InputField()
    summary: str = dspy.InputField(desc="the latest turn summary")
    state: str = dspy.InputField(desc="loop state: turn count, no-progress count, recent actions")
    action: Action = dspy.OutputField()
    next_input: str = dspy.OutputField(desc="text to send if continuing; empty means the fallback prompt")
    reason: str = dspy.OutputField(desc="brief")
    confidence: float = dspy.OutputField(desc="0.0-1.0")
