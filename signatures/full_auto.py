"""Signatures of the Full Auto next-action decision (formats.md §1.2)."""

from __future__ import annotations

import dspy

from runtime.fullauto import Action

DECISION_OUTPUT_FIELDS: tuple[str, ...] = ("action", "next_input", "reason", "confidence")


class FullAutoDecisionSignature(dspy.Signature):
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
    """Decide what to do next toward a goal, given its success criteria, the latest turn summary and the loop state. Return a single action and, if continuing, the next user input to send."""

    goal_intent: str = dspy.InputField()
    goal_success_criteria: str = dspy.InputField()
    summary: str = dspy.InputField(desc="the latest turn summary")
    state: str = dspy.InputField(desc="loop state: turn count, no-progress count, recent actions")
    action: Action = dspy.OutputField()
    next_input: str = dspy.OutputField(desc="text to send if continuing; empty means the fallback prompt")
    reason: str = dspy.OutputField(desc="brief")
    confidence: float = dspy.OutputField(desc="0.0-1.0")
