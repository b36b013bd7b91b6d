"""The Full Auto rule policy as a pure function: which rule decides a turn, and what it decides.

`rule_decision(inputs)` is the reference policy (`full_auto.rules`) and the deterministic half of
`full_auto.hybrid`; it lives in the runtime so that a frozen hybrid module applies the very same rules
in production without the programs layer (`runtime.frozen.modules.FrozenDecisionProgram`). The rules
run in the order of `RULE_NAMES`, and the first that matches decides. `gated_decision` is the hybrid's
gate: the rule policy's decision when the rule that makes it is one of a chosen set, else None (the LM
decides). Inputs are the decision inputs as text (`runtime.inputs.summary_inputs`) or any mapping with
the turn-summary field names; no dspy needed.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Iterable, Mapping, Optional

from .fullauto import GuidanceDecision
# The plan and count readers are the compact rendering's: rules and compact prompts read plans and counts alike.
from .inputs import count_of, plan_steps, step_done

# Every rule of `rule_decision`, in the order they are tried.
RULE_NAMES: tuple[str, ...] = (
    "turn_failed", "interrupted", "pending_input", "done", "stalled", "fix_failures", "open_steps", "default_continue",
)
# Where a program's state (and a frozen module's program.json) holds its rule gate: {"rules": [...]}.
RULE_GATE_KEY = "rule_gate"

NO_PROGRESS_PAUSE = 2  # pause one turn before the no_progress guardrail (default limit 3) would stop

_DONE = re.compile(
    r"\b(all (?:the )?(?:\d+ )?tests (?:now )?pass(?:ed)?|task is (?:complete|done|finished)|"
    r"(?:work|fix|change|implementation) is (?:complete|done)|nothing (?:else )?(?:is )?left)\b", re.I)
_FAILING = re.compile(r"\b(?:[1-9]\d* failed|fail(?:s|ed|ing|ure|ures)?|errors?|traceback)\b", re.I)
_NEGATED = re.compile(r"\b(?:no|0|zero|without|none)\s+(?:\w+\s+)?(?:fail\w*|errors?)\b", re.I)


def mentions_failure(text: str) -> bool:
    """True when the text reports a failure ("2 failed", "still fails"), ignoring "no errors", "0 failed"."""
    return bool(_FAILING.search(_NEGATED.sub(" ", text or "")))


def _int(value: Any) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return 0


def rule_decision(inputs: Mapping[str, Any]) -> tuple[GuidanceDecision, str]:
    """The rule policy's decision for one turn and the name of the rule that made it."""
    status = str(inputs.get("last_turn_status") or "completed").strip().lower()
    error = str(inputs.get("turn_error") or "").strip()
    message = str(inputs.get("last_agent_message") or "")
    steps = plan_steps(str(inputs.get("turn_plan") or ""))
    open_steps = [step for step, state in steps if not step_done(state)]
    no_progress = _int(inputs.get("no_progress_count"))
    failing = bool(error) or mentions_failure(message)

    if status == "failed":
        return GuidanceDecision(action="stop", confidence=0.95,
                                reason=f"The last turn failed{': ' + error[:200] if error else '.'}"), "turn_failed"
    if status == "interrupted":
        return GuidanceDecision(action="pause", confidence=0.9,
                                reason="The last turn was interrupted; a person should look first."), "interrupted"
    approvals, tool_inputs = count_of(inputs.get("pending_approvals")), count_of(inputs.get("pending_tool_inputs"))
    if approvals or tool_inputs:
        waiting = "an approval" if approvals else "tool input"
        return GuidanceDecision(action="pause", confidence=0.9,
                                reason=f"The agent is waiting for {waiting}; a person must answer."), "pending_input"
    plan_done = bool(steps) and not open_steps
    if not failing and (plan_done or (_DONE.search(message) and not open_steps)):
        return GuidanceDecision(action="stop", confidence=0.85,
                                reason="The plan is complete and nothing is failing: the task is done."), "done"
    if no_progress >= NO_PROGRESS_PAUSE:
        return GuidanceDecision(action="pause", confidence=0.7,
                                reason=f"No progress for {no_progress} turns; a person should redirect."), "stalled"
    if failing:
        return GuidanceDecision(action="continue", confidence=0.75,
                                next_input="Fix the failing tests reported in the last turn, then run the tests again.",
                                reason="Tests are failing and the last turn made progress."), "fix_failures"
    if open_steps:
        return GuidanceDecision(action="continue", confidence=0.75,
                                next_input=f"Continue with the next step of the plan: {open_steps[0][:200]}",
                                reason=f"{len(open_steps)} plan step(s) still open."), "open_steps"
    return GuidanceDecision(action="continue", confidence=0.6, next_input="",
                            reason="No completion signal yet; continue."), "default_continue"


def check_rules(rules: Iterable[str]) -> list[str]:
    """Rule names checked against RULE_NAMES, without repeats, in the policy's order; ValueError names an unknown one."""
    chosen = set()
    for name in rules:
        if not isinstance(name, str) or name not in RULE_NAMES:
            raise ValueError(f"unknown rule {name!r}; the rules are {', '.join(RULE_NAMES)}")
        chosen.add(name)
    return [name for name in RULE_NAMES if name in chosen]


def gated_decision(inputs: Mapping[str, Any], rules: Collection[str]) -> Optional[tuple[GuidanceDecision, str]]:
    """The rule policy's decision and rule when that rule is one of `rules`; None when the LM should decide."""
    decision, rule = rule_decision(inputs)
    return (decision, rule) if rule in rules else None


__all__ = ["NO_PROGRESS_PAUSE", "RULE_GATE_KEY", "RULE_NAMES", "check_rules", "gated_decision", "mentions_failure",
           "rule_decision"]
