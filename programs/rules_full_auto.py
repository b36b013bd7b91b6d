"""No-LM reference policies of the Full Auto decision: the rule policy and the always-continue baseline."""

from __future__ import annotations

from typing import Any

import dspy

from runtime.fullauto import GuidanceDecision
# The rule policy is the runtime's (a frozen full_auto.hybrid applies it without this layer); re-exported here.
from runtime.rules import NO_PROGRESS_PAUSE, mentions_failure, rule_decision

from .batch import AnswersInBatches
from .results import decision_prediction

__all__ = ["NO_PROGRESS_PAUSE", "AlwaysContinue", "FullAutoRules", "mentions_failure", "rule_decision"]


class FullAutoRules(AnswersInBatches, dspy.Module):
    """Reference policy without an LM: stop on failure, pause on pending input, continue while progressing, stop when done."""

    def forward(self, **inputs: Any) -> dspy.Prediction:
        decision, rule = rule_decision(inputs)
        return decision_prediction(decision, rule=rule)


class AlwaysContinue(dspy.Module):
    """Baseline policy without an LM: always continue with the fallback prompt, fully confident."""

    def forward(self, **inputs: Any) -> dspy.Prediction:
        decision = GuidanceDecision(action="continue", confidence=1.0, next_input="",
                                    reason="Baseline policy: always continue.")
        return decision_prediction(decision, rule="always_continue")
