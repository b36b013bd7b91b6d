"""The noisy "deployed" Full Auto policy of the simulator: what the logged loop decided.

It reads only the observable turn summary (never the simulator's hidden state), guesses the
next action with a few heuristics a real prompt-based model would roughly follow, and then
errs: with probability `noise` it picks another action, its confidence is noisy, and with
probability `p_unparseable` its raw output cannot be parsed (the loop then falls back to
`pause` / 0.0 through `runtime.parse_decision`). It returns raw model text in the DSPy
`[[ ## field ## ]]` layout so that the real parser runs on it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from runtime.fullauto import ACTIONS, FullAutoTurnSummary

RISKY_PATHS = ("migrations/", "auth/", ".github/workflows/", "deploy/", "secrets")
QUESTION_MARKERS = ("I need clarification", "Which option", "Should I")


@dataclass(frozen=True)
class PolicyNoise:
    """How wrong the deployed policy is."""

    noise: float = 0.15
    p_unparseable: float = 0.04


def _pending(text: str) -> int:
    text = (text or "").strip()
    return int(text) if text.isdigit() else 0


def _plan_steps(turn_plan: str) -> list[dict]:
    try:
        plan = json.loads(turn_plan) if turn_plan.strip() else {}
    except ValueError:
        return []
    steps = plan.get("plan", []) if isinstance(plan, dict) else []
    return [step for step in steps if isinstance(step, dict)]


def guess(summary: FullAutoTurnSummary) -> tuple[str, float, str, str]:
    """The policy's honest guess from the summary: (action, confidence, reason, next_input)."""
    if summary.last_turn_status == "failed":
        return "stop", 0.9, f"the turn failed: {summary.turn_error[:80]}", ""
    if summary.last_turn_status == "interrupted":
        return "pause", 0.85, "the user interrupted the turn", ""
    if _pending(summary.pending_approvals) or _pending(summary.pending_tool_inputs):
        return "pause", 0.85, "an approval or tool input is pending", ""
    steps = _plan_steps(summary.turn_plan)
    open_steps = [step.get("step", "") for step in steps if step.get("status") != "completed"]
    if steps and not open_steps and "all tests pass" in summary.last_agent_message.lower():
        return "stop", 0.85, "every plan step is done and the tests pass", ""
    if any(marker in summary.last_agent_message for marker in QUESTION_MARKERS):
        return "pause", 0.75, "the agent asked a question", ""
    if any(path in summary.last_agent_message for path in RISKY_PATHS):
        return "review", 0.7, "this turn changed sensitive files", ""
    if summary.no_progress_count >= 2:
        return "pause", 0.6, "no progress for several turns", ""
    target = open_steps[0] if open_steps else "the remaining work"
    return "continue", 0.78, "work remains on the plan", f"Continue with the next plan step: {target}"


def render_raw(action: str, next_input: str, reason: str, confidence: float) -> str:
    """Raw model output in the `[[ ## field ## ]]` layout."""
    return (f"[[ ## action ## ]]\n{action}\n\n[[ ## next_input ## ]]\n{next_input}\n\n"
            f"[[ ## reason ## ]]\n{reason}\n\n[[ ## confidence ## ]]\n{confidence:.2f}\n\n[[ ## completed ## ]]")


_GARBAGE = (
    "I think we should probably keep going, the tests look mostly fine",
    "[[ ## action ## ]]\nproceed\n\n[[ ## confidence ## ]]\nhigh",
    '{"action": "continue", "confidence": ',
    "",
)


def deployed_raw_output(summary: FullAutoTurnSummary, rng: random.Random, noise: PolicyNoise = PolicyNoise()) -> str:
    """One raw output of the noisy deployed policy for a turn summary."""
    if rng.random() < noise.p_unparseable:
        return rng.choice(_GARBAGE)
    action, confidence, reason, next_input = guess(summary)
    if rng.random() < noise.noise:
        action = rng.choice([other for other in ACTIONS if other != action])
        confidence = rng.uniform(0.3, 0.9)
        reason = f"{reason} (second thoughts)"
        if action == "continue" and not next_input:
            next_input = "Continue working on the task."
    else:
        confidence = min(0.99, max(0.05, rng.gauss(confidence, 0.1)))
    if action != "continue":
        next_input = ""
    return render_raw(action, next_input, reason, round(confidence, 2))
