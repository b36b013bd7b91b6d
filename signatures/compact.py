"""Compact signatures: the Full Auto decision and the planner directive from the compact rendering.

The inputs are `runtime.inputs.compact_summary_inputs` / `compact_packet_inputs` (no ids, numbers
instead of JSON blobs, one short line per fact), so the prompt spends its tokens on what decides the
answer. `FullAutoCompactStateSignature` reads the same lines plus what the compact and the original
signatures never see, the facts the rule policy decides on: the turn counters and the agent's last
message, clipped (`runtime.inputs.compact_state_inputs`). The outputs carry a budget in their
descriptions: the decision answers in the order action, confidence, reason, next_input (a cut-off
answer loses the optional part, not the action), the reason and the next input in a few words, and the
next input only when continuing: the embedded model's engine stops decoding after the reason of any
other action and caps each text at its words (`guidebench.lm.grammar`); the directive keeps every list
short. The output
names and types are the original signatures', so the same parsing, guardrails and directive checks
apply. `PlannerGivenFamilySignature` is the LM half of `planner.hybrid`: the family comes in as an input
(the pivot rules chose it) and the model writes only the directive fields the protocol leaves open.
"""

from __future__ import annotations

import dspy

from runtime.advisor import DirectiveValidation, Risk, StrategyFamily
from runtime.fullauto import Action


class FullAutoCompactSignature(dspy.Signature):
    """Decide what an autonomous coding loop does after a turn: continue with a next input, pause for a person, stop, or ask for a review."""

    status: str = dspy.InputField(desc="turn status, with the error when it failed")
    plan: str = dspy.InputField(desc="plan steps done out of all, and the current step")
    diff: str = dspy.InputField(desc="lines added and removed, and the files changed")
    tokens: str = dspy.InputField(desc="tokens used so far")
    approvals: str = dspy.InputField(desc="approvals waiting for a person")
    tool_inputs: str = dspy.InputField(desc="tool inputs waiting for a person")
    recent: str = dspy.InputField(desc="the last decisions, oldest first")
    compactions: str = dspy.InputField(desc="context compactions so far")
    action: Action = dspy.OutputField()
    confidence: float = dspy.OutputField(desc="0.0 to 1.0, one decimal")
    reason: str = dspy.OutputField(desc="one short sentence, at most 6 words")
    next_input: str = dspy.OutputField(desc="the next instruction, at most 8 words; empty unless action is continue")


class FullAutoCompactStateSignature(FullAutoCompactSignature):
    """Decide what an autonomous coding loop does after a turn: continue with a next input, pause for a person, stop, or ask for a review."""

    # The compact inputs and outputs are inherited (the prompt lists these three inputs after them).
    turn_count: str = dspy.InputField(desc="turns so far")
    no_progress_count: str = dspy.InputField(desc="turns in a row whose plan and diff did not change")
    message: str = dspy.InputField(desc="the agent's last message, clipped")


class PlannerCompactSignature(dspy.Signature):
    """Plan the next attempt to lower the cycle count of a VLIW kernel. Use an allowed family; pivot when the current one is blocked or has plateaued; lower the bound (reduce_loads or break_deps) when the slack is small. Keep every list short."""

    goal: str = dspy.InputField(desc="the target or the best to beat")
    plateau: str = dspy.InputField(desc="valid attempts since the last new best")
    families: str = dspy.InputField(desc="allowed and blocked families, current family streak / cap")
    best: str = dspy.InputField(desc="best cycles overall, by family, invalid attempts")
    bound: str = dspy.InputField(desc="tight lower bound, schedule estimate, slack")
    attempts: str = dspy.InputField(desc="recent attempts, oldest first")
    objective: str = dspy.OutputField(desc="one short sentence")
    primary_hypothesis: str = dspy.OutputField(desc="one sentence")
    strategy_family: StrategyFamily = dspy.OutputField()
    strategy_modifiers: list[str] = dspy.OutputField(desc="0-2 short tags")
    risk: Risk = dspy.OutputField()
    expected_effect_cycles: int = dspy.OutputField(desc="negative means faster")
    change_summary: list[str] = dspy.OutputField(desc="1-2 short items")
    step_plan: list[str] = dspy.OutputField(desc="3-4 short steps")
    validation: DirectiveValidation = dspy.OutputField(desc="one command, one or two criteria")
    next_packet_requests: list[str] = dspy.OutputField(desc="0-1 items")
    did_web_search: bool = dspy.OutputField()


class PlannerGivenFamilySignature(dspy.Signature):
    """Write the next attempt to lower the cycle count of a VLIW kernel within the given strategy family: a hypothesis, up to two of the family's techniques, the risk, the expected change in cycles, the changes and their validation."""

    # `planner.hybrid`: the pivot rules chose the family (`programs.rules_planner.rule_choice`); the model writes
    # the fields the protocol leaves open, the rest of the directive is the rule planner's.
    family: str = dspy.InputField(desc="the strategy family to use")
    why: str = dspy.InputField(desc="why the pivot rules chose it")
    goal: str = dspy.InputField(desc="the target or the best to beat")
    best: str = dspy.InputField(desc="best cycles overall, by family, invalid attempts")
    bound: str = dspy.InputField(desc="tight lower bound, schedule estimate, slack")
    primary_hypothesis: str = dspy.OutputField(desc="one sentence")
    strategy_modifiers: list[str] = dspy.OutputField(desc="0-2 short tags")
    risk: Risk = dspy.OutputField()
    expected_effect_cycles: int = dspy.OutputField(desc="negative means faster")
    change_summary: list[str] = dspy.OutputField(desc="1-2 short items")
    validation: DirectiveValidation = dspy.OutputField(desc="one command, one or two criteria")


COMPACT_DECISION_INPUT_FIELDS: tuple[str, ...] = tuple(FullAutoCompactSignature.input_fields)
COMPACT_STATE_INPUT_FIELDS: tuple[str, ...] = tuple(FullAutoCompactStateSignature.input_fields)
COMPACT_PLANNER_INPUT_FIELDS: tuple[str, ...] = tuple(PlannerCompactSignature.input_fields)
