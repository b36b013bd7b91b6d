"""planner.hybrid: the pivot protocol in code, the LM writes what the protocol leaves open.

The rule planner (`programs.rules_planner.rule_choice`) picks the strategy family: allowed by the packet's
constraints, a new family whenever a pivot rule demands one, a bound-lowering family near the bound. So pivot
compliance is 1.0 by construction. The rules also fix what the protocol and the packet fix: the objective (the
goal's numbers), the step plan's shape (three orthogonal approaches and one wild card, the tests, the
measurement; a restart from the last valid kernel in recovery mode), the packet requests, `did_web_search`
(false: the program searches nothing) and, in recovery mode, Low risk.

One LM call (`PlannerGivenFamilySignature`, a short prompt: the chosen family, why, and the goal, best and bound
lines) writes the rest: hypothesis, modifiers, risk, expected effect, changes (which go into the step plan) and
validation. Each field is checked on its own against the strict directive schema; a field the answer does not
give validly keeps the rule planner's value, and the prediction says so (`lm_errors`, one line per field, and
`lm_fields`, those the LM wrote). The directive is therefore always a strict, valid `OptimizationDirective`; it is
not the safe default, so `directive_errors` and `parse_errors` stay empty unless the packet is missing.

Optimizers compile the one predictor (`write`) on the training attempts whose logged family is the family the
rules choose for that packet (`lm_examples`): a demo then shows the situation the LM is asked about. Whatever
demos a predictor holds, those of the chosen family go last, next to the input (the small model copies the demo
it saw last). The program has no parameter beyond its predictor: its rules are code, so an export loads only
installed (`runtime.load_frozen(DIR, program=...)`); standalone, the runtime refuses it (it cannot fill `family`
and `why`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import dspy

from runtime.advisor import AdvisorPacket, OptimizationDirective
from runtime.pivot import validate_directive
from signatures import PlannerGivenFamilySignature

from .inputs import given_family_inputs, packet_from_inputs
from .lm_call import call_predictor
from .planner import directive_fields
from .results import directive_prediction, safe_directive
from .rules_planner import RuleChoice, plan_steps, rule_choice, rule_directive
from .seeds import given_family_demos

LM_FIELDS: tuple[str, ...] = tuple(PlannerGivenFamilySignature.output_fields)
# The answer's budget in the embedded model's tokens: the seed answers take about half of it, markers included.
GIVEN_FAMILY_MAX_TOKENS = 240
MISSING_PACKET = "planner.hybrid needs the full advisor packet as the `packet` input (see programs.planner_inputs)"


def family_last(demos: Sequence[Any], family: str) -> list[Any]:
    """The demos (examples, or dicts once loaded) with those of `family` last (stable: each group keeps its order)."""
    return sorted(demos, key=lambda demo: hasattr(demo, "get") and demo.get("family") == family)


def merge_fields(rule: OptimizationDirective, choice: RuleChoice, fields: dict[str, Any], best: Optional[int]
                 ) -> tuple[OptimizationDirective, list[str], list[str]]:
    """The rule directive with each LM field that is valid on its own in place of the rule's; (directive, the LM's
    fields used, one error per field the rules kept)."""
    values, errors = directive_fields(fields, LM_FIELDS)
    merged = rule.model_dump()
    used: list[str] = []
    for name in LM_FIELDS:
        if name not in values:
            continue
        if name == "risk" and choice.recovery:  # three invalid attempts in a row: a careful change
            if values[name] != merged[name]:
                errors.append(f"risk: {values[name]} in recovery mode")
            continue
        # The schema takes a blank hypothesis; the rule planner's says more than nothing.
        blank = isinstance(values[name], str) and not values[name].strip()
        problems = [f"{name}: blank"] if blank else validate_directive({**merged, name: values[name]})
        if problems:
            errors.append(problems[0])
            continue
        merged[name] = values[name]
        used.append(name)
    if "change_summary" in used:
        merged["step_plan"] = plan_steps(choice, merged["change_summary"], best)
    return OptimizationDirective.model_validate(merged), used, [f"{e} (the rule planner's value is used)"
                                                                 for e in errors]


class PlannerHybrid(dspy.Module):
    """The rules choose the family (and what the protocol fixes), one LM call writes the rest of the directive."""

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.write = dspy.Predict(PlannerGivenFamilySignature, max_tokens=GIVEN_FAMILY_MAX_TOKENS)
        self.write.demos = given_family_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        packet: Optional[AdvisorPacket] = packet_from_inputs(inputs)
        if packet is None:
            return directive_prediction(safe_directive(), parse_errors=[MISSING_PACKET], rule_reasons=[])
        choice = rule_choice(packet)
        rule, reasons = rule_directive(packet, choice)
        # Any `family` or `why` in the inputs (a training example's) is ignored: the rules choose here.
        lm_inputs = given_family_inputs(packet, choice.family, choice.reasons)
        outcome = call_predictor(self.write, demos=family_last(self.write.demos, lm_inputs["family"]), **lm_inputs)
        directive, used, errors = merge_fields(rule, choice, outcome.fields, packet.best_cycles)
        return directive_prediction(directive, rule_reasons=reasons, lm_fields=used, lm_errors=errors,
                                    adapter_errors=list(outcome.errors), raw_output=outcome.raw)

    def lm_examples(self, examples: Sequence[dspy.Example]) -> list[dspy.Example]:
        """The labeled attempts logged in the family the rules choose for their packet, with the LM's `family` and
        `why` (if none is: every example, each with its own directive's family)."""
        chosen, every = [], []
        for example in examples:
            packet = packet_from_inputs(example)
            if packet is None:
                continue
            choice = rule_choice(packet)
            logged = example.get("logged_family")  # None: an untagged attempt, its directive's family is a guess
            lm_inputs = given_family_inputs(packet, logged or example.get("strategy_family") or choice.family,
                                            choice.reasons)
            # Not marked as inputs: the program computes them, a training run passes the packet's inputs only.
            extended = dspy.Example(**{**example.toDict(), **lm_inputs}).with_inputs(*example.inputs().keys())
            every.append(extended)
            if logged == choice.family:
                chosen.append(extended)
        return chosen or every or list(examples)


__all__ = ["GIVEN_FAMILY_MAX_TOKENS", "LM_FIELDS", "PlannerHybrid", "family_last", "merge_fields"]
