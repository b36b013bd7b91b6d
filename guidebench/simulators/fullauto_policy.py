"""The noisy "deployed" Full Auto policy of the simulator, and how the original turns its answer into a decision.

The policy reads only what the original gives its model (the logged turn summary: status, error, plan,
diff, token usage, pending counts, recent actions, compactions; never the simulator's hidden state or
an agent message, which the logging build does not have), guesses the next action with a few
heuristics a real prompt-based model would roughly follow, and then errs: with probability `noise`
it picks another action, its confidence is noisy, and with probability `p_unparseable` its answer
is garbage. It answers with LM completion text in the `[[ ## field ## ]]` layout.

The answer then goes the original's way (restated from dsrs `adapter/chat.rs` and openagents
`full_auto.rs` at 02539c71): the chat adapter cuts the output sections into the prediction's `data`
(strings for the String fields; `confidence`, an f32 field, as JSON when it parses, else the first
number in the text, else the text), `run_full_auto_decision` reads the four fields
(`Prediction::get` gives "" for a missing one) into the decision and the diagnostics struct, and the
raw prediction is logged as `{data, lm_usage}`.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from typing import Any, Optional

from runtime.fullauto import ACTIONS, FullAutoTurnSummary, GuidanceDecision, f32_shortest
from runtime.guardrails import serde_json_text

RISKY_PATHS = ("drop_legacy", "auth/permissions", ".github/workflows/", "deploy/", "secrets")
OUTPUT_FIELDS: tuple[str, ...] = ("action", "next_input", "reason", "confidence")  # the signature's order
_RUST_F32 = re.compile(r"[+-]?(?:inf|infinity|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", re.I)


@dataclass(frozen=True)
class PolicyNoise:
    """How wrong the deployed policy is."""

    noise: float = 0.15
    p_unparseable: float = 0.04


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def _plan(summary: FullAutoTurnSummary) -> tuple[str, list[dict]]:
    """(explanation, steps) of the plan snapshot (the app server's `turn/plan/updated` params)."""
    plan = _json(summary.turn_plan)
    if not isinstance(plan, dict):
        return "", []
    steps = plan.get("plan") if isinstance(plan.get("plan"), list) else []
    return str(plan.get("explanation") or ""), [step for step in steps if isinstance(step, dict)]


def _diff(summary: FullAutoTurnSummary) -> str:
    diff = _json(summary.diff_summary)
    return str(diff.get("diff") or "") if isinstance(diff, dict) else summary.diff_summary


def _pending(text: str) -> int:
    text = (text or "").strip()
    return int(text) if text.isdigit() else 0


def guess(summary: FullAutoTurnSummary) -> tuple[str, float, str, str]:
    """The policy's honest guess from the summary: (action, confidence, reason, next_input)."""
    if summary.last_turn_status == "failed":
        return "stop", 0.9, f"the turn failed: {summary.turn_error[:80]}", ""
    if summary.last_turn_status == "interrupted":
        return "pause", 0.85, "the user interrupted the turn", ""
    if _pending(summary.pending_approvals) or _pending(summary.pending_tool_inputs):
        return "pause", 0.85, "an approval or tool input is pending", ""
    explanation, steps = _plan(summary)
    open_steps = [str(step.get("step", "")) for step in steps if step.get("status") != "completed"]
    if steps and not open_steps and "all tests pass" in explanation.lower():
        return "stop", 0.85, "every plan step is done and the tests pass", ""
    if explanation.startswith("Blocked:") or explanation.rstrip().endswith("?"):
        return "pause", 0.75, "the agent asked a question", ""
    if any(path in _diff(summary) for path in RISKY_PATHS):
        return "review", 0.7, "this turn changed sensitive files", ""
    if summary.no_progress_count >= 2:
        return "pause", 0.6, "no progress for several turns", ""
    target = open_steps[0] if open_steps else "the remaining work"
    return "continue", 0.78, "work remains on the plan", f"Continue with the next plan step: {target}"


def render_raw(action: str, next_input: str, reason: str, confidence: Any) -> str:
    """LM completion text in the `[[ ## field ## ]]` layout (confidence as given: a number or text)."""
    value = f"{confidence:.2f}" if isinstance(confidence, float) else str(confidence)
    return (f"[[ ## action ## ]]\n{action}\n\n[[ ## next_input ## ]]\n{next_input}\n\n"
            f"[[ ## reason ## ]]\n{reason}\n\n[[ ## confidence ## ]]\n{value}\n\n[[ ## completed ## ]]")


_GARBAGE = (
    "I think we should probably keep going, the tests look mostly fine",
    "[[ ## action ## ]]\nproceed\n\n[[ ## confidence ## ]]\nhigh",
    '{"action": "continue", "confidence": ',
    "",
    "[[ ## action ## ]]\ncontinue\n\n[[ ## reason ## ]]\nthe plan has open steps",
)
_CONFIDENCE_TEXTS = ("{:.2f} (fairly sure)", "~{:.1f}", "NaN")


def deployed_raw_output(summary: FullAutoTurnSummary, rng: random.Random, noise: PolicyNoise = PolicyNoise()) -> str:
    """One LM completion of the noisy deployed policy for a turn summary."""
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
    text: Any = round(confidence, 2)
    if rng.random() < 0.03:  # models sometimes decorate the number, or give none at all
        text = rng.choice(_CONFIDENCE_TEXTS).format(round(confidence, 2))
    return render_raw(action, next_input, reason, text)


# --------------------------------------------------------------------------- the original's reading

def _number_in(text: str) -> Optional[float]:
    """dsrs `extract_json_from_text` for an f32 field: the first whitespace word that is a number once trimmed."""
    for word in text.split():
        trimmed = word.strip("".join(ch for ch in set(word) if not (ch.isnumeric() or ch in ".-")))
        if re.fullmatch(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", trimmed):
            return float(trimmed)
    return None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # serde_json refuses NaN / Infinity


def chat_adapter_data(completion: str) -> dict[str, Any]:
    """The prediction `data` dsrs' ChatAdapter cuts from a completion (missing sections are left out)."""
    data: dict[str, Any] = {}
    for name in OUTPUT_FIELDS:
        marker = f"[[ ## {name} ## ]]\n"
        if marker not in completion:
            continue
        text = completion.split(marker)[1].split("[[ ## ")[0].strip()
        if name != "confidence":
            data[name] = text
            continue
        try:
            data[name] = json.loads(text, parse_constant=_not_json)  # serde_json::from_str
        except ValueError:
            number = _number_in(text)
            data[name] = number if number is not None else text
    return data


def _text_value(value: Any) -> tuple[str, Optional[str]]:
    """`read_prediction_string_value`: (parsed, raw); raw is None for null and for arrays/objects."""
    if isinstance(value, str):
        return value, value
    if isinstance(value, (bool, int, float)):
        text = serde_json_text(value)
        return text, text
    if value is None:
        return "", None
    return serde_json_text(value), None


def _confidence_value(value: Any) -> tuple[float, Any, Optional[str]]:
    """`read_prediction_confidence`: (the f32, the raw value or None, the error)."""
    if isinstance(value, bool):
        return 0.0, value, "confidence not numeric"
    if isinstance(value, (int, float)):
        return f32_shortest(float(value)), value, None  # `as_f64() as f32`
    if isinstance(value, str):
        if _RUST_F32.fullmatch(value):  # `str::parse::<f32>`
            return f32_shortest(float(value)), value, None
        return 0.0, value, "confidence not parseable"
    if value is None:
        return 0.0, None, "confidence missing"
    return 0.0, value, "confidence not numeric"


def original_decision(data: dict[str, Any]) -> tuple[GuidanceDecision, dict[str, Any]]:
    """`run_full_auto_decision` on a prediction's data: the decision and the diagnostics struct (plain floats).

    `Prediction::get` gives "" for a field the model did not answer; an unknown or missing action is
    pause with the model's confidence kept; an unparseable confidence is 0.0 with the action kept.
    """
    errors: list[str] = []
    action_parsed, action_raw = _text_value(data.get("action", ""))
    if action_raw is None:
        errors.append("action missing or not a string")
    next_parsed, next_raw = _text_value(data.get("next_input", ""))
    reason_parsed, reason_raw = _text_value(data.get("reason", ""))
    if reason_raw is None:
        errors.append("reason missing or not a string")
    confidence, confidence_raw, error = _confidence_value(data.get("confidence", ""))
    if error:
        errors.append(error)
    action = action_parsed.strip().lower()
    decision = GuidanceDecision(
        action=action if action in ACTIONS else "pause", reason=reason_parsed,
        next_input=next_parsed if next_parsed.strip() else "", confidence=confidence, parse_errors=errors)
    diagnostics = {
        "raw_prediction": None, "action_raw": action_raw, "next_input_raw": next_raw, "reason_raw": reason_raw,
        "confidence_raw": confidence_raw, "action_parsed": action_parsed, "next_input_parsed": next_parsed,
        "reason_parsed": reason_parsed, "confidence_parsed": confidence if math.isfinite(confidence) else None,
        "parse_errors": errors,
    }
    return decision, diagnostics


def lm_usage(prompt_chars: int, completion: str) -> dict[str, int]:
    """The `lm_usage` of one call (about four characters a token), `cost_msats` 0 as for an API provider."""
    prompt = 420 + prompt_chars // 4
    completion_tokens = max(1, len(completion) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens, "cost_msats": 0}
