"""Signatures of the Full Auto module stack: summarize the turn, select the next action, verify it."""

from __future__ import annotations

from typing import Literal

import dspy

from runtime.fullauto import Action

Progress = Literal["progressing", "stalled", "blocked", "done", "failed"]
Verdict = Literal["keep", "pause", "stop"]


class SummarizeTurnState(dspy.Signature):
    """Summarize where a coding agent's task stands after its latest turn: what was done, what is pending, and whether it is progressing."""

    last_turn_status: str = dspy.InputField(desc="completed | interrupted | failed")
    turn_error: str = dspy.InputField()
    turn_plan: str = dspy.InputField()
    diff_summary: str = dspy.InputField()
    pending_approvals: str = dspy.InputField()
    pending_tool_inputs: str = dspy.InputField()
    recent_actions: str = dspy.InputField(desc="JSON of the last decisions")
    state_summary: str = dspy.OutputField(desc="two or three sentences")
    progress: Progress = dspy.OutputField()


class SelectNextAction(dspy.Signature):
    """Choose the next action of the autonomous loop from the state summary. Return a single action and, if continuing, the next user input to send."""

    state_summary: str = dspy.InputField()
    progress: str = dspy.InputField()
    recent_actions: str = dspy.InputField(desc="JSON of the last decisions")
    action: Action = dspy.OutputField()
    next_input: str = dspy.OutputField(desc="text to send if continuing; empty means the fallback prompt")
    reason: str = dspy.OutputField(desc="brief")
    confidence: float = dspy.OutputField(desc="0.0-1.0")


class VerifyDecision(dspy.Signature):
    """Check a proposed next action against the state summary: keep it when it fits, or say the loop must pause or stop instead."""

    state_summary: str = dspy.InputField()
    progress: str = dspy.InputField()
    proposed_action: str = dspy.InputField()
    proposed_reason: str = dspy.InputField()
    verdict: Verdict = dspy.OutputField()
    rationale: str = dspy.OutputField(desc="brief")
    confidence: float = dspy.OutputField(desc="0.0-1.0")
