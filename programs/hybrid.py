"""full_auto.hybrid: deterministic rules decide the unambiguous turns, an LM program decides the rest.

The rules are the rule policy's (`runtime.rules.rule_decision`, the same function `full_auto.rules`
runs and a frozen module applies in production). Which of them short-circuit is the program's
`rule_gate` parameter: a turn whose deciding rule is in the gate gets the rule's decision without an
LM call; any other turn goes to the LM program (`full_auto.compact_state` by default). The gate is
part of the program's state (`dump_state` / `load_state`, also inside a `knn_fewshot` wrapper), so a
compiled program and its export keep it, and the search tunes it (`RULE_SET_CHOICES`).

Optimizers compile the LM program's predictor only (`lm_program.decide`); the gate is no predictor,
and a reset (the student of an optimizer) keeps it. They train that predictor on the turns it decides
(`lm_examples`): a demo of a turn the rules take is never needed.
Each prediction says which path decided it: `decided_by` is the rule's name or "lm".
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

import dspy
from dspy.predict.parameter import Parameter

from runtime.rules import RULE_GATE_KEY, RULE_NAMES, check_rules, gated_decision

from .full_auto import FullAutoCompactState
from .results import decision_prediction

LM_PATH = "lm"
# The default gate: the turns whose right action is a fact of the turn, not a judgement: a failed turn stops,
# an interrupted one pauses, a pending approval or tool input pauses, a finished plan with nothing failing
# stops. Stalls and open plans (continue, pause for a person, ask for a review) are the LM's.
DEFAULT_RULES: tuple[str, ...] = ("turn_failed", "interrupted", "pending_input", "done")
# The gates the search chooses from (`guidebench.search.engine`), each written as its rules joined by "+": nested,
# from the hard facts alone to every rule but the two that read the plan (open steps, default continue),
# so the LM always decides something. The full rule set makes no LM call: that is `full_auto.rules`.
RULE_SET_CHOICES: tuple[str, ...] = (
    "turn_failed+interrupted+pending_input",
    "+".join(DEFAULT_RULES),
    "+".join((*DEFAULT_RULES, "stalled")),
    "+".join((*DEFAULT_RULES, "stalled", "fix_failures")),
)


def parse_rule_set(text: str) -> list[str]:
    """The rule names of a gate written as `a+b+c` (empty: no rule), checked (ValueError names an unknown rule)."""
    return check_rules(name.strip() for name in text.split("+") if name.strip())


class RuleGate(Parameter):
    """The rules that decide before the LM: a program parameter that is no predictor, saved in the program's state."""

    def __init__(self, rules: Iterable[str] = DEFAULT_RULES) -> None:
        self.rules = check_rules(rules)

    def reset(self) -> None:
        """Keep the rules: they are the program's structure, not what an optimizer learns (its student is a reset copy)."""

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """The rules, in the policy's order."""
        return {"rules": list(self.rules)}

    def load_state(self, state: dict[str, Any]) -> "RuleGate":
        """Load the rules of `dump_state()` (ValueError on an unknown rule)."""
        rules = state.get("rules") if isinstance(state, dict) else None
        if not isinstance(rules, list):
            raise ValueError(f"a rule gate state is {{'rules': [...]}}, got {state!r}")
        self.rules = check_rules(rules)
        return self

    def __repr__(self) -> str:
        return f"RuleGate({'+'.join(self.rules)})"


class FullAutoHybrid(dspy.Module):
    """The rule policy's decision when a gated rule makes it, else the LM program's; `decided_by` names the path."""

    def __init__(self, rules: Optional[Iterable[str]] = None, lm_program: Optional[dspy.Module] = None) -> None:
        super().__init__()
        self.rule_gate = RuleGate(DEFAULT_RULES if rules is None else rules)
        self.lm_program = lm_program if lm_program is not None else FullAutoCompactState()

    @property
    def rules(self) -> list[str]:
        """The gated rules, in the policy's order."""
        return list(self.rule_gate.rules)

    def set_rules(self, rules: Iterable[str]) -> None:
        """Gate these rules (checked against `runtime.rules.RULE_NAMES`)."""
        self.rule_gate.rules = check_rules(rules)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        gated = gated_decision(inputs, self.rule_gate.rules)
        if gated is not None:
            decision, rule = gated
            return decision_prediction(decision, rule=rule, decided_by=rule)
        prediction = self.lm_program(**inputs)
        prediction.decided_by = LM_PATH
        return prediction

    def lm_examples(self, examples: Sequence[dspy.Example]) -> list[dspy.Example]:
        """The examples the LM program decides (no gated rule makes their decision); all of them if none is left."""
        chosen = [ex for ex in examples if gated_decision(ex.inputs(), self.rule_gate.rules) is None]
        return chosen or list(examples)


def rule_gate_of(program: dspy.Module) -> Optional[RuleGate]:
    """The program's rule gate, where its state holds it (`rule_gate`, top level), or None."""
    gate = dict(program.named_parameters()).get(RULE_GATE_KEY)
    return gate if isinstance(gate, RuleGate) else None


__all__ = ["DEFAULT_RULES", "LM_PATH", "RULE_NAMES", "RULE_SET_CHOICES", "FullAutoHybrid", "RuleGate",
           "parse_rule_set", "rule_gate_of"]
