"""Deterministic guardrails (formats.md §1.3) and the safe parser of model output."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Optional

from .fullauto import ACTIONS, GuardrailAudit, GuardrailConfig, GuardrailContext, GuidanceDecision

OUTPUT_FIELDS: tuple[str, ...] = ("action", "next_input", "reason", "confidence")


def _rule_1_to_5(context: GuardrailContext, config: GuardrailConfig) -> Optional[tuple[str, str]]:
    """The hard rules, first match wins: (enforced action, rule) or None."""
    if context.last_turn_status == "failed":
        return "stop", "turn_failed"
    if context.last_turn_status == "interrupted":
        return "pause", "turn_interrupted"
    if config.max_turns > 0 and context.turn_count >= config.max_turns:
        return "stop", "max_turns"
    if config.no_progress_limit > 0 and context.no_progress_count >= config.no_progress_limit:
        return "stop", "no_progress"
    if config.max_tokens is not None and context.tokens_used is not None and context.tokens_used >= config.max_tokens:
        return "stop", "max_tokens"
    return None


def apply_guardrails(
    decision: GuidanceDecision,
    context: GuardrailContext,
    config: Optional[GuardrailConfig] = None,
) -> tuple[GuidanceDecision, GuardrailAudit]:
    """Enforce the guardrail rules on a model decision; returns (enforced decision, audit)."""
    config = config or GuardrailConfig()
    enforced = decision.model_copy()
    rule: Optional[str] = None
    hard = _rule_1_to_5(context, config)
    if hard is not None:
        action, rule = hard
        # The hard rules are certain and end the turn-to-turn loop: no follow-up input.
        enforced = decision.model_copy(update={"action": action, "confidence": 1.0, "next_input": ""})
    elif decision.confidence < config.min_confidence:
        rule = "low_confidence"
        enforced = decision.model_copy(update={"action": "pause"})
    elif decision.action == "review":
        rule = "review_requested"
        enforced = decision.model_copy(update={"action": "pause"})
    audit = GuardrailAudit(
        triggered=rule is not None,
        rule=rule,
        original_action=decision.action,
        original_confidence=decision.confidence,
        enforced_action=enforced.action,
        enforced_confidence=enforced.confidence,
    )
    return enforced, audit


_FIELD_MARKER = re.compile(r"\[\[\s*##\s*(\w+)\s*##\s*\]\]")
_KEY_LINE = re.compile(r"^\s*[\"']?(action|next_input|reason|confidence)[\"']?\s*[:=]\s*(.*)$", re.I)


def _fields_from_text(text: str) -> tuple[dict[str, Any], Optional[str]]:
    """Pull output fields out of JSON, `[[ ## field ## ]]` sections or `key: value` lines."""
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", stripped, re.S)
    candidates = [fenced.group(1)] if fenced else []
    brace = re.search(r"\{.*\}", stripped, re.S)
    if brace:
        candidates.append(brace.group(0))
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data, None
    markers = list(_FIELD_MARKER.finditer(stripped))
    if markers:
        fields: dict[str, Any] = {}
        for index, marker in enumerate(markers):
            end = markers[index + 1].start() if index + 1 < len(markers) else len(stripped)
            fields[marker.group(1).lower()] = stripped[marker.end():end].strip()
        return fields, None
    fields = {}
    for line in stripped.splitlines():
        match = _KEY_LINE.match(line)
        if match and match.group(1).lower() not in fields:
            fields[match.group(1).lower()] = match.group(2).strip().strip("\"'")
    if fields:
        return fields, None
    return {}, "output is not JSON, `[[ ## field ## ]]` sections or `key: value` lines"


def _confidence(value: Any) -> tuple[Optional[float], Optional[str]]:
    if isinstance(value, bool) or value is None:
        return None, "confidence is missing" if value is None else "confidence is a boolean"
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().rstrip("%").strip()
        try:
            number = float(text)
        except ValueError:
            return None, f"confidence is not numeric: {value[:40]!r}"
        if value.strip().endswith("%"):
            number /= 100.0
    else:
        return None, f"confidence has type {type(value).__name__}"
    if not math.isfinite(number):
        return None, f"confidence is not finite: {value!r}"
    return min(1.0, max(0.0, number)), None


def parse_decision(raw: Any) -> GuidanceDecision:
    """Parse model output (text, dict or prediction) into a decision; never raises.

    Any error gives the safe default — `pause` with confidence 0.0 — and keeps the
    errors in `parse_errors`.
    """
    errors: list[str] = []
    try:
        if isinstance(raw, GuidanceDecision):
            return raw
        if isinstance(raw, Mapping):
            fields = dict(raw)
        elif isinstance(raw, str):
            fields, error = _fields_from_text(raw)
            if error:
                errors.append(error)
        elif raw is not None and all(hasattr(raw, name) for name in ("action", "confidence")):
            fields = {name: getattr(raw, name, None) for name in OUTPUT_FIELDS}
        else:
            fields = {}
            errors.append(f"cannot parse output of type {type(raw).__name__}")
        fields = {str(k).strip().lower(): v for k, v in fields.items()}

        action_value = fields.get("action")
        action = str(action_value).strip().strip("\"'`*.").lower() if action_value is not None else ""
        if action not in ACTIONS:
            errors.append("action is missing" if not action else f"unknown action {str(action_value)[:40]!r}")
        confidence, error = _confidence(fields.get("confidence"))
        if error:
            errors.append(error)
        next_input = fields.get("next_input") or ""
        reason = fields.get("reason") or ""
        next_input = next_input if isinstance(next_input, str) else json.dumps(next_input)
        reason = reason if isinstance(reason, str) else json.dumps(reason)
        if errors:
            return GuidanceDecision(action="pause", next_input="", reason=reason[:500],
                                    confidence=0.0, parse_errors=errors)
        return GuidanceDecision(action=action, next_input=next_input, reason=reason, confidence=confidence)
    except Exception as exc:  # the safe default must hold for any input whatsoever
        errors.append(f"{type(exc).__name__}: {exc}"[:300])
        return GuidanceDecision(action="pause", confidence=0.0, parse_errors=errors)
