"""`planner.learned`: the family the outcome model expects most of, among the families it may choose.

An outcome model fit on the logs (`runtime.outcome`, fit by the `fit` recipe: `guidebench compile --program
planner.learned --optimizer fit --data DATASET`) estimates for each family what its attempt brings from the
packet alone. The program picks the family with the highest expected improvement of the best among its choice
set (`choose_among`), writes the rest of the directive as `planner.rules` does, and states that estimate as
`expected_effect_cycles` (negative: fewer cycles). A family the model never saw in train has no estimate; when no
family of the set has one, the rule planner's choice stands and the prediction says so.

The choice set (`CHOICE_SETS`, the fit recipe's `choose_among` setting, kept in program state):
- `allowed` (the default): the families the real loop runner allows, the ones its directive check accepts (every
  family but a blocked one: the streak cap, formats.md §2.2). The runner enforces nothing else: the pivot
  protocol's other rules (a pivot on a plateau, lowering the bound near it) are advice in the planner's prompt
  (`tools/loop_runner.py`), so the program follows them when the model expects them to pay, and leaves them when
  it expects another allowed family to take more cycles off. This serves the user's objective, cycles.
- `compliant`: the families the pivot protocol allows as `evals.metrics_planner` scores it
  (`programs.rules_planner.protocol_view`: pivot compliance 1.0 by construction), for a loop that must keep the
  protocol whatever it costs. reports/offpolicy.md measures what it costs.
Pivot compliance is scored either way, as a metric of its own.
No LM call. The model is program state (`outcome_model`, JSON): an export loads it with NumPy alone.
"""

from __future__ import annotations

from typing import Any, Optional

import dspy

from runtime.advisor import FAMILIES
from runtime.outcome import OUTCOME_MODEL_KEY, FamilyEstimate, OutcomeModel, OutcomeModelError

from .batch import AnswersInBatches
from .inputs import packet_from_inputs
from .learned import FittedModel
from .results import directive_prediction, safe_directive
from .rules_planner import (BOUND_LOWERING, ProtocolView, RuleChoice, explored_directive, protocol_view,
                           rule_choice, rule_directive)

NAME = "planner.learned"
# The families the program may choose (see the module): the runner's allowed ones, or the protocol's compliant ones.
CHOICE_SETS: tuple[str, ...] = ("allowed", "compliant")
DEFAULT_CHOICE = "allowed"


class OutcomeModelParameter(FittedModel):
    """The fitted outcome model of a planner (`runtime.outcome`) and the families the planner chooses among
    (`choose_among`, one of `CHOICE_SETS`; the fit recipe sets it, an older state without it gets the default)."""

    model_class = OutcomeModel
    error_class = OutcomeModelError

    def __init__(self, state: Optional[dict[str, Any]] = None) -> None:
        self.choose_among = DEFAULT_CHOICE
        super().__init__(state)

    def set_choice(self, choose_among: str) -> None:
        """Choose among this set of families (`CHOICE_SETS`)."""
        if choose_among not in CHOICE_SETS:
            raise OutcomeModelError(f"choose_among is {choose_among!r}; use one of {', '.join(CHOICE_SETS)}")
        self.choose_among = choose_among

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """The model's JSON state and the choice set."""
        return {**super().dump_state(json_mode), "choose_among": self.choose_among}

    def load_state(self, state: dict[str, Any]) -> "OutcomeModelParameter":
        """Load `dump_state()` data (OutcomeModelError names what is wrong)."""
        super().load_state(state)
        self.set_choice(state.get("choose_among", DEFAULT_CHOICE))
        return self


def choice_set(view: ProtocolView, choose_among: str) -> list[str]:
    """The families the program chooses among at a packet: the runner's allowed ones or the protocol's compliant
    ones (`CHOICE_SETS`)."""
    return list(view.allowed if choose_among == "allowed" else view.compliant)


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

    @property
    def choose_among(self) -> str:
        """The families the program chooses among (`CHOICE_SETS`)."""
        return getattr(self, OUTCOME_MODEL_KEY).choose_among

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The directive of the allowed family with the highest estimated improvement (the safe default without a
        packet)."""
        model = self.model
        packet = packet_from_inputs(inputs)
        if packet is None:
            error = f"{NAME} needs the full advisor packet as the `packet` input (see programs.planner_inputs)"
            return directive_prediction(safe_directive(), parse_errors=[error], rule_reasons=[])
        view = protocol_view(packet)
        candidates = choice_set(view, self.choose_among)
        estimates = model.estimates(packet, candidates)
        known = {family: e for family, e in estimates.items() if e is not None}
        shown = {family: (None if e is None else round(_value(e), 3)) for family, e in estimates.items()}
        shares = {family: (None if e is None else 100.0 * e.gain_share) for family, e in estimates.items()}
        # `compliant`: the families this program may choose (an exploring export draws among them);
        # `protocol_compliant`: those the pivot protocol allows
        context = dict(estimates=shown, estimate_shares=shares, compliant=candidates,
                       protocol_compliant=list(view.compliant), choose_among=self.choose_among)
        if not known:
            choice = rule_choice(packet)
            note = (f"no estimate for {', '.join(candidates)} (the model never saw them in train): the rule "
                    "planner's choice")
            directive, reasons = rule_directive(packet, choice)
            return directive_prediction(directive, rule_reasons=[*reasons, note], decided_by="rules", **context)
        family = max(known, key=lambda f: (_value(known[f]), -FAMILIES.index(f)))
        best = known[family]
        why = (f"learned: {family} expected to take {_value(best):.1f} "
               f"{'cycles' if best.cycles is not None else 'of the best (share)'} off the best "
               f"(P(valid) {best.p_valid:.2f}) among {', '.join(candidates)}")
        reasons = (*view.reasons, why) if family in view.compliant else \
            (*view.reasons, why, f"outside the pivot protocol's advice ({', '.join(view.compliant)}): the model "
                                 f"expects {family} to take more cycles off")
        choice = RuleChoice(family=family, reasons=reasons, lowering=view.lowering and family in BOUND_LOWERING,
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


__all__ = ["CHOICE_SETS", "DEFAULT_CHOICE", "NAME", "OutcomeModelParameter", "PlannerLearned", "choice_set"]
