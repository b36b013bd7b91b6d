"""LM programs of the Full Auto decision: the original Predict, chain of thought and the compact variants."""

from __future__ import annotations

from typing import Any, Optional

import dspy

from runtime.fullauto import GuidanceDecision
from runtime.guardrails import parse_decision
from runtime.inputs import COMPACT_STATE_NAMES, COMPACT_SUMMARY_NAMES, compact_decision_inputs
from signatures import (FULL_AUTO_INPUT_FIELDS, FullAutoCompactSignature, FullAutoCompactStateSignature,
                        FullAutoDecisionClearSignature, FullAutoDecisionSignature)

from .lm_call import PredictorOutcome, call_predictor, select_inputs
from .results import decision_prediction
from .seeds import compact_cot_demos, compact_decision_demos, compact_state_demos, decision_demos

# The compact decision's output budget, in the embedded model's tokens: its longest seed answer (a
# continue with a next input) is 64 tokens after the prefilled first marker, field markers included.
# The cap leaves room for a somewhat longer next input and stops a model that rambles on instead of
# closing the answer; next_input comes last, so a cut answer still holds action, confidence and reason.
COMPACT_DECISION_MAX_TOKENS = 80
# The compact chain of thought's budget: the same answer after one short sentence of reasoning. Its longest
# seed answer is 87 tokens after the prefilled first marker (the reasoning's); the cap leaves the compact
# decision's margin (16 tokens) for the answer and as much again for the reasoning. The reasoning comes
# first, so a model that rambles there loses the answer: the cap keeps such a call short, and it parses
# as the safe pause.
COMPACT_COT_MAX_TOKENS = 120


def decision_from_outcome(outcome: PredictorOutcome) -> GuidanceDecision:
    """Validate a predictor's output fields into a decision (safe pause when they do not validate)."""
    decision = parse_decision(outcome.fields)
    if decision.parse_errors and outcome.errors:
        decision = decision.model_copy(update={"parse_errors": [*outcome.errors, *decision.parse_errors]})
    return decision


def outcome_prediction(outcome: PredictorOutcome, **extra: Any) -> dspy.Prediction:
    """The program's prediction for one predictor outcome, with the adapter's diagnostics kept."""
    decision = decision_from_outcome(outcome)
    return decision_prediction(decision, adapter_errors=list(outcome.errors), raw_output=outcome.raw, **extra)


class FullAutoPredict(dspy.Module):
    """The original program: one `dspy.Predict` over FullAutoDecisionSignature (seed demos until compiled)."""

    signature: type[dspy.Signature] = FullAutoDecisionSignature

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.decide = dspy.Predict(self.signature)
        self.decide.demos = decision_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.decide, **select_inputs(inputs, FULL_AUTO_INPUT_FIELDS))
        return outcome_prediction(outcome)


class FullAutoZeroShot(FullAutoPredict):
    """The original program without any demo, to measure the zero-shot baseline."""

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__(demos=[] if demos is None else demos)


class FullAutoPredictClear(FullAutoPredict):
    """The original program with a clearer instruction, field descriptions and a typed action."""

    signature = FullAutoDecisionClearSignature


class FullAutoChainOfThought(dspy.Module):
    """Chain of thought over FullAutoDecisionSignature: reasoning first, then the four outputs."""

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.decide = dspy.ChainOfThought(FullAutoDecisionSignature)
        self.decide.predict.demos = decision_demos(with_reasoning=True) if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.decide, **select_inputs(inputs, FULL_AUTO_INPUT_FIELDS))
        return outcome_prediction(outcome, reasoning=str(outcome.fields.get("reasoning") or ""))


class FullAutoCompact(dspy.Module):
    """The same decision from the compact rendering of the same inputs, with an output budget.

    Inputs are `runtime.inputs.compact_decision_inputs` (the compact fields the inputs carry, or rendered
    from their summary fields); the answer is capped at COMPACT_DECISION_MAX_TOKENS through the
    predictor's config, and parsed and guardrailed exactly as `FullAutoPredict`'s.
    """

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.decide = dspy.Predict(FullAutoCompactSignature, max_tokens=COMPACT_DECISION_MAX_TOKENS)
        self.decide.demos = compact_decision_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.decide, **compact_decision_inputs(inputs))
        return outcome_prediction(outcome)


class FullAutoCompactState(dspy.Module):
    """full_auto.compact plus what neither signature sees: the turn counters and the agent's last message, clipped.

    Inputs are `runtime.inputs.compact_decision_inputs` with COMPACT_STATE_NAMES (`turn_count`,
    `no_progress_count`, `message`); the output budget, parsing and guardrails are `FullAutoCompact`'s.
    """

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.decide = dspy.Predict(FullAutoCompactStateSignature, max_tokens=COMPACT_DECISION_MAX_TOKENS)
        self.decide.demos = compact_state_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.decide, **compact_decision_inputs(
            inputs, (*COMPACT_SUMMARY_NAMES, *COMPACT_STATE_NAMES)))
        return outcome_prediction(outcome)


class FullAutoCompactChainOfThought(dspy.Module):
    """Chain of thought over FullAutoCompactSignature: one short sentence of reasoning, then the compact answer.

    The reasoning field asks for one short sentence, the seed demos show one, and the answer is capped at
    COMPACT_COT_MAX_TOKENS; inputs, parsing and guardrails are `FullAutoCompact`'s.
    """

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.decide = dspy.ChainOfThought(FullAutoCompactSignature, rationale_field=dspy.OutputField(
            desc="one short sentence on what decides the action"), max_tokens=COMPACT_COT_MAX_TOKENS)
        self.decide.predict.demos = compact_cot_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.decide, **compact_decision_inputs(inputs))
        return outcome_prediction(outcome, reasoning=str(outcome.fields.get("reasoning") or ""))
