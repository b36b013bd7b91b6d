"""The `logged` program: the deployed policy's decisions, replayed exactly as they were logged.

Its answer for a record is the model's own decision from the log (the audit's original action and
confidence when an audit was logged, else the logged action), so the deployed policy is always on
the board next to the candidates. Its decisions already went through production's guardrails:
`replays_log = True` tells replay to take the enforced decision and audit from the log and to keep
today's re-applied guardrails alongside for comparison.
"""

from __future__ import annotations

from typing import Any

import dspy

from runtime.guardrails import parse_decision

from .batch import AnswersInBatches
from .results import decision_prediction

NAME = "logged"


class LoggedDecisionProgram(AnswersInBatches, dspy.Module):
    """Answers with the decision the log recorded for the record's inputs (no LM)."""

    replays_log = True
    program_name = NAME
    kind = "full_auto"

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The logged model decision from `programs.decision_inputs(record)` (`logged_*` fields)."""
        action = inputs.get("logged_action")
        if not action:
            raise ValueError("no logged decision in the inputs: `logged` replays decision records only")
        decision = parse_decision({
            "action": action,
            "confidence": inputs.get("logged_confidence"),
            "reason": inputs.get("logged_reason") or "",
            "next_input": inputs.get("logged_next_input") or "",
        })
        return decision_prediction(decision)

