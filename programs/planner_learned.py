"""`planner.learned`: the family the outcome model expects most of, among those the pivot protocol allows.

An outcome model fit on the logs (`runtime.outcome`, fit by the `fit` recipe: `guidebench compile --program
planner.learned --optimizer fit --data DATASET`) estimates for each family what its attempt brings from the
packet alone. The program takes the families the pivot protocol allows at this iteration
(`programs.rules_planner.protocol_view`: pivot compliance 1.0 by construction), picks the one with the highest
expected improvement of the best, writes the rest of the directive as `planner.rules` does, and states that
estimate as `expected_effect_cycles` (negative: fewer cycles). A family the model never saw in train has no
estimate; when no allowed family has one, the rule planner's choice stands and the prediction says so.
No LM call. The model is program state (`outcome_model`, JSON): an export loads it with NumPy alone.
"""

from __future__ import annotations

from typing import Any

import dspy

from runtime.advisor import FAMILIES
from runtime.outcome import OUTCOME_MODEL_KEY, FamilyEstimate, OutcomeModel, OutcomeModelError

from .batch import AnswersInBatches
from .inputs import packet_from_inputs
from .learned import FittedModel
from .results import directive_prediction, safe_directive
from .rules_planner import RuleChoice, explored_directive, protocol_view, rule_choice, rule_directive

NAME = "planner.learned"


class OutcomeModelParameter(FittedModel):
    """The fitted outcome model of a planner (`runtime.outcome`)."""

    model_class = OutcomeModel
    error_class = OutcomeModelError


def _value(estimate: FamilyEstimate) -> float:
    return estimate.cycles if estimate.cycles is not None else estimate.gain_share


class PlannerLearned(AnswersInBatches, dspy.Module):
    """The allowed family of highest estimated improvement (an outcome model fit on the logs), no LM call."""

    program_name = NAME
    # An export may explore: epsilon-greedy, or a softmax of the estimates (`runtime.exploration`).
    exploration_policies: tuple[str, ...] = ("epsilon", "softmax")

    def __init__(self) -> None:
        super().__init__()
        setattr(self, OUTCOME_MODEL_KEY, OutcomeModelParameter())

    @property
    def model(self) -> OutcomeModel:
        """The fitted model (NotFittedError before the fit)."""
        return getattr(self, OUTCOME_MODEL_KEY).fitted_model(NAME)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The directive of the allowed family with the highest estimated improvement (the safe default without a
        packet)."""
        model = self.model
        packet = packet_from_inputs(inputs)
        if packet is None:
            error = f"{NAME} needs the full advisor packet as the `packet` input (see programs.planner_inputs)"
            return directive_prediction(safe_directive(), parse_errors=[error], rule_reasons=[])
        view = protocol_view(packet)
        estimates = model.estimates(packet, view.compliant)
        known = {family: e for family, e in estimates.items() if e is not None}
        shown = {family: (None if e is None else round(_value(e), 3)) for family, e in estimates.items()}
        shares = {family: (None if e is None else 100.0 * e.gain_share) for family, e in estimates.items()}
        context = dict(estimates=shown, estimate_shares=shares, compliant=list(view.compliant))
        if not known:
            choice = rule_choice(packet)
            note = (f"no estimate for {', '.join(view.compliant)} (the model never saw them in train): the rule "
                    "planner's choice")
            directive, reasons = rule_directive(packet, choice)
            return directive_prediction(directive, rule_reasons=[*reasons, note], decided_by="rules", **context)
        family = max(known, key=lambda f: (_value(known[f]), -FAMILIES.index(f)))
        best = known[family]
        why = (f"learned: {family} expected to take {_value(best):.1f} "
               f"{'cycles' if best.cycles is not None else 'of the best (share)'} off the best "
               f"(P(valid) {best.p_valid:.2f}) among {', '.join(view.compliant)}")
        choice = RuleChoice(family=family, reasons=(*view.reasons, why), lowering=view.lowering,
                            recovery=view.recovery)
        directive, reasons = rule_directive(packet, choice)
        if best.cycles is not None:
            directive = directive.model_copy(update={"expected_effect_cycles": -int(round(best.cycles))})
        return directive_prediction(directive, rule_reasons=reasons, decided_by="model", **context)

    def directive_for(self, family: str, **inputs: Any) -> dspy.Prediction:
        """The directive for a family an exploring export drew, with the model's estimate as its expected effect."""
        packet = packet_from_inputs(inputs)
        if packet is None or family not in FAMILIES:
            raise ValueError(f"{NAME}: no packet, or {family!r} is not a family")
        estimate = self.model.estimates(packet, [family])[family]
        directive, reasons = explored_directive(packet, family, f"explore: {family} drawn")
        if estimate is not None and estimate.cycles is not None:
            directive = directive.model_copy(update={"expected_effect_cycles": -int(round(estimate.cycles))})
        return directive_prediction(directive, rule_reasons=reasons, decided_by="explore")


__all__ = ["NAME", "OutcomeModelParameter", "PlannerLearned"]
