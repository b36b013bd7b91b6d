"""Deterministic guardrails (formats.md §1.3) and the safe parser of model output."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Optional, Union

from .fullauto import ACTIONS, GuardrailAudit, GuardrailConfig, GuardrailContext, GuidanceDecision, f32, f32_shortest

OUTPUT_FIELDS: tuple[str, ...] = ("action", "next_input", "reason", "confidence")

# The reasons the original loop writes when a rule overrides the model (the logged
# `reason` of an enforced decision); replay reproduces them so logged and replayed
# decisions compare equal.
RULE_REASONS: dict[str, str] = {
    "turn_failed": "Turn failed; stopping Full Auto.",
    "turn_interrupted": "Turn interrupted; pausing Full Auto.",
    "max_turns": "Reached Full Auto turn limit.",
    "no_progress": "No progress detected across multiple turns.",
    "max_tokens": "Token budget exceeded; stopping Full Auto.",
    "review_requested": "Review requested; pausing Full Auto.",
}


def low_confidence_reason(confidence: float) -> str:
    """The original's reason for a low-confidence pause: its f32 with two decimals (0.515 -> "0.51")."""
    return f"Low confidence ({f32(confidence):.2f}) decision; pausing Full Auto."


def _logged(confidence: float) -> Optional[float]:
    """A confidence as the audit logs it: serde writes a NaN or infinite f32 as null."""
    return confidence if math.isfinite(confidence) else None


_LOW_CONFIDENCE_VALUE = re.compile(r"^Low confidence \((-?inf|NaN)\) decision; pausing Full Auto\.$")


def logged_confidence(value: Optional[float], *, rule: Optional[str] = None, reason: str = "",
                      raw: Any = None) -> float:
    """A logged f32 confidence back as the value the original compared; null recovered as far as the log allows.

    The writer logs NaN, inf and -inf alike as null. Which one it was, from the best evidence on: the
    model's raw confidence (`raw`: the diagnostics' `confidence_raw`, read as the original reads it),
    the low-confidence reason the original printed ("Low confidence (-inf) ..."), then the audit's
    `rule`: only -inf is below a finite minimum, so `low_confidence` with a null confidence was -inf.
    Otherwise NaN: NaN and inf both fail `confidence < min_confidence`, so the guardrails end as the
    original's did either way (when a hard rule fired, the comparison never ran).
    """
    if value is not None:
        return float(value)
    if raw is not None:
        parsed, error = _confidence(raw)
        if error is None and not math.isfinite(parsed):
            return parsed
    match = _LOW_CONFIDENCE_VALUE.match(reason or "")
    if match:
        return float(match.group(1))
    if rule == "low_confidence":
        return -math.inf
    return math.nan


def hard_rule(context: GuardrailContext, config: GuardrailConfig) -> Optional[tuple[str, str]]:
    """Rules 1-5, first match wins: (enforced action, rule), or None when none applies."""
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


_rule_1_to_5 = hard_rule  # former private name, kept for callers that used it


def apply_guardrails(
    decision: Union[GuidanceDecision, Mapping[str, Any]],
    context: Union[GuardrailContext, Mapping[str, Any]],
    config: Union[GuardrailConfig, Mapping[str, Any], None] = None,
) -> tuple[GuidanceDecision, GuardrailAudit]:
    """Enforce the guardrail rules on a model decision; returns (enforced decision, audit).

    Rules 1-5 (turn failed/interrupted, max turns, no progress, max tokens) replace the
    decision: action of the rule, confidence 1.0, next_input cleared. Rule 6 (confidence
    below min_confidence, any action) and rule 7 (review) turn the action into pause and
    keep the model's confidence. The audit is always returned (`triggered` False when no
    rule fired). Dicts are accepted for the three arguments.
    """
    if not isinstance(decision, GuidanceDecision):
        decision = GuidanceDecision.model_validate(decision)
    if not isinstance(context, GuardrailContext):
        context = GuardrailContext.model_validate(context)
    if config is None:
        config = GuardrailConfig()
    elif not isinstance(config, GuardrailConfig):
        config = GuardrailConfig.model_validate(config)

    enforced = decision.model_copy(deep=True)
    rule: Optional[str] = None
    hard = hard_rule(context, config)
    if hard is not None:
        action, rule = hard
        # The hard rules are certain and end the turn-to-turn loop: no follow-up input.
        enforced = decision.model_copy(
            update={"action": action, "confidence": 1.0, "next_input": "", "reason": RULE_REASONS[rule]}, deep=True)
    elif f32(decision.confidence) < f32(config.min_confidence):  # f32 against f32, as the original
        rule = "low_confidence"
        enforced = decision.model_copy(
            update={"action": "pause", "reason": low_confidence_reason(decision.confidence)}, deep=True)
    elif decision.action == "review":
        rule = "review_requested"
        enforced = decision.model_copy(update={"action": "pause", "reason": RULE_REASONS[rule]}, deep=True)
    audit = GuardrailAudit(
        triggered=rule is not None,
        rule=rule,
        original_action=decision.action,
        original_confidence=_logged(decision.confidence),
        enforced_action=enforced.action,
        enforced_confidence=_logged(enforced.confidence),
    )
    return enforced, audit


# --------------------------------------------------------------------------- parsing

_FIELD_MARKER = re.compile(r"\[\[\s*##\s*(\w+)\s*##\s*\]\]")
_KEY_LINE = re.compile(
    r"^\s*(?:[-*]\s+)?[\"'`*]*(action|next_input|reason|confidence)[\"'`*]*\s*[:=]\s*(.*)$", re.I)
_FENCED = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
_NOT_PARSED = "output is not JSON, `[[ ## field ## ]]` sections or `key: value` lines"
_HEADER_LINE = re.compile(r"\[\[ ## (\w+) ## \]\]")


class AmbiguousOutput(ValueError):
    """An output field given more than once with different values (e.g. echoed or injected marker text)."""


def _ambiguity(fields: list[str]) -> str:
    return (f"ambiguous output: {', '.join(f'`{name}`' for name in fields)} given more than once with different "
            "values (echoed or injected field markers?); no value is picked")


def conflicting_sections(text: str, names: Any = OUTPUT_FIELDS) -> list[str]:
    """Output fields whose `[[ ## field ## ]]` header lines occur more than once with different values.

    Sections are cut as DSPy's ChatAdapter cuts them (a header at the start of a line). A model that
    repeats a section word for word is not ambiguous; one whose answer holds a second `confidence`
    or `action` section with another value is: which one is "the" answer cannot be told, and text
    quoted from the turn summary (a prompt injection) could otherwise choose it.
    """
    wanted = set(names)
    values: dict[str, set[str]] = {}
    current: Optional[str] = None
    chunks: dict[int, list[str]] = {}
    order: list[tuple[int, str]] = []
    for line in (text or "").splitlines():
        match = _HEADER_LINE.match(line.strip())
        if match:
            current = match.group(1)
            order.append((len(order), current))
            chunks[len(order) - 1] = [line.strip()[match.end():].strip()]
        elif current is not None:
            chunks[len(order) - 1].append(line)
    for index, name in order:
        if name in wanted:
            values.setdefault(name, set()).add("\n".join(chunks[index]).strip())
    return sorted(name for name, seen in values.items() if len(seen) > 1)


def _json_object(text: str) -> Optional[dict[str, Any]]:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        data: dict[str, Any] = {}
        clashes = []
        for key, value in items:
            if key in data and data[key] != value and str(key).strip().lower() in OUTPUT_FIELDS:
                clashes.append(str(key))
            data.setdefault(key, value)
        if clashes:
            raise AmbiguousOutput(_ambiguity(sorted(set(clashes))))
        return data

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except AmbiguousOutput:
        raise
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _has_output_field(fields: Mapping[str, Any]) -> bool:
    return any(str(key).strip().lower() in OUTPUT_FIELDS for key in fields)


def _fields_from_text(text: str) -> tuple[dict[str, Any], Optional[str]]:
    """Pull output fields out of JSON, `[[ ## field ## ]]` sections, fenced JSON or `key: value` lines.

    An output field given twice with different values is ambiguous: no fields, and the reason.
    """
    try:
        return _fields_or_raise(text)
    except AmbiguousOutput as exc:
        return {}, str(exc)


def _fields_or_raise(text: str) -> tuple[dict[str, Any], Optional[str]]:
    stripped = text.strip()
    whole = _json_object(stripped)
    if whole is not None:
        return whole, None
    # Field markers before embedded JSON: a marked answer quoting a JSON blob (from its input, say)
    # is still read from its own sections.
    markers = list(_FIELD_MARKER.finditer(stripped))
    if any(marker.group(1).lower() in OUTPUT_FIELDS for marker in markers):
        fields: dict[str, Any] = {}
        clashes = set()
        for index, marker in enumerate(markers):
            end = markers[index + 1].start() if index + 1 < len(markers) else len(stripped)
            name = marker.group(1).lower()
            value = stripped[marker.end():end].strip()
            if name in fields and fields[name] != value and name in OUTPUT_FIELDS:
                clashes.add(name)
            fields.setdefault(name, value)
        if clashes:
            return {}, _ambiguity(sorted(clashes))
        return fields, None
    for fenced in _FENCED.finditer(stripped):
        data = _json_object(fenced.group(1).strip())
        if data is not None and _has_output_field(data):
            return data, None
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        data = _json_object(stripped[start:end + 1])
        if data is not None and _has_output_field(data):
            return data, None
    fields = {}
    clashes = set()
    for line in stripped.splitlines():
        match = _KEY_LINE.match(line)
        if match:
            value = match.group(2).strip().rstrip(",").strip().strip("\"'`*").strip()
            name = match.group(1).lower()
            if name in fields and fields[name] != value:
                clashes.add(name)
            fields.setdefault(name, value)
    if clashes:
        return {}, _ambiguity(sorted(clashes))
    if fields:
        return fields, None
    return {}, _NOT_PARSED


# Rust's `str::parse::<f32>`: no surrounding whitespace, no `_`, "inf"/"infinity"/"nan" in any case.
_RUST_FLOAT = re.compile(r"[+-]?(?:inf|infinity|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", re.I)


def _confidence(value: Any) -> tuple[float, Optional[str]]:
    """The confidence as the original reads it: a number or numeric text as an f32, else 0.0 (never clamped)."""
    if isinstance(value, bool):
        return 0.0, "confidence not numeric"
    if isinstance(value, (int, float)):
        return f32_shortest(float(value)), None
    if isinstance(value, str):
        if _RUST_FLOAT.fullmatch(value):
            return f32_shortest(float(value)), None
        return 0.0, "confidence missing" if not value else "confidence not parseable"
    if value is None:
        return 0.0, "confidence missing"
    return 0.0, "confidence not numeric"


_U64_MAX = 2 ** 64 - 1


def _serde_float(value: float) -> str:
    """An f64 as serde_json writes it (ryu): shortest digits, plain from 1e-5 up to 1e16, else `1.5e-7`."""
    if not math.isfinite(value):
        return "null"  # serde writes a non-finite float as null
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    mantissa, exponent = repr(abs(value)).partition("e")[::2]
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    point = len(whole.lstrip("0")) + (int(exponent) if exponent else 0)  # digits before the decimal point
    if not whole.lstrip("0"):  # 0.00123: the leading zeros of the fraction move the point left
        point = -(len(fraction) - len(fraction.lstrip("0"))) + (int(exponent) if exponent else 0)
    digits = digits.rstrip("0") or "0"
    length, kk = len(digits), point
    k = kk - length  # value = digits * 10^k, 10^(kk-1) <= value < 10^kk
    if 0 <= k and kk <= 16:
        return f"{sign}{digits}{'0' * k}.0"
    if 0 < kk <= 16:
        return f"{sign}{digits[:kk]}.{digits[kk:]}"
    if -5 < kk <= 0:
        return f"{sign}0.{'0' * -kk}{digits}"
    if length == 1:
        return f"{sign}{digits}e{kk - 1}"
    return f"{sign}{digits[0]}.{digits[1:]}e{kk - 1}"


def serde_json_text(value: Any) -> str:
    """Compact JSON text as the original's serde_json writes a JSON value (`["a","b"]`, `0.5`, `1e20`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # serde_json holds integers as i64/u64; a larger one was read as an f64
        return str(value) if -2 ** 63 <= value <= _U64_MAX else _serde_float(float(value))
    if isinstance(value, float):
        return _serde_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = (f"{serde_json_text(str(key))}:{serde_json_text(item)}" for key, item in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(serde_json_text(item) for item in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _text(value: Any) -> str:
    """A text output as the original reads it: a string as is, null as "", anything else as its JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return serde_json_text(value)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _safe_default(errors: list[str], reason: str = "") -> GuidanceDecision:
    return GuidanceDecision(action="pause", next_input="", reason=reason[:500], confidence=0.0,
                            parse_errors=errors or ["unparseable output"])


def _action(value: Any) -> tuple[str, Optional[str]]:
    """The action as the original reads it: trimmed, lower-cased; anything else is pause."""
    text = value if isinstance(value, str) else (serde_json_text(value) if isinstance(value, (int, float, bool))
                                                 else None)
    if text is None:
        return "pause", "action missing or not a string"
    action = text.strip().lower()
    if action in ACTIONS:
        return action, None
    return "pause", f"unknown action {text[:40]!r} (read as pause)" if text.strip() else "action missing (read as pause)"


def parse_decision(raw: Any) -> GuidanceDecision:
    """Parse model output (text, bytes, dict or prediction) into a decision; never raises.

    Fields are read as the original reads them (formats.md §1.4.1): an unknown or missing action
    becomes `pause` with the model's confidence kept; a missing or unparseable confidence becomes
    0.0 with the action kept (the low-confidence guardrail then pauses); confidence is an f32, not
    clamped. Output with no readable fields at all, or ambiguous output (a field given twice with
    different values), gives the safe default `pause` with confidence 0.0. Every deviation is
    listed in `parse_errors`.
    """
    errors: list[str] = []
    try:
        if isinstance(raw, GuidanceDecision):
            return raw
        if isinstance(raw, (bytes, bytearray, memoryview)):
            raw = bytes(raw).decode("utf-8", errors="replace")
        if isinstance(raw, Mapping):
            fields = dict(raw)
        elif isinstance(raw, str):
            fields, error = _fields_from_text(raw)
            if error:
                errors.append(error)
        elif raw is not None and callable(getattr(raw, "toDict", None)):  # dspy.Prediction / Example
            fields = dict(raw.toDict())
        elif raw is not None and any(hasattr(raw, name) for name in OUTPUT_FIELDS):
            fields = {name: getattr(raw, name) for name in OUTPUT_FIELDS if hasattr(raw, name)}
        else:
            fields = {}
            errors.append("output is empty" if raw is None else f"cannot parse output of type {type(raw).__name__}")
        fields = {str(k).strip().lower(): v for k, v in fields.items()}

        reason = _text(fields.get("reason"))
        if errors or not _has_output_field(fields):
            return _safe_default(errors or [_NOT_PARSED], reason)
        action, error = _action(fields.get("action"))
        if error:
            errors.append(error)
        confidence, error = _confidence(fields.get("confidence"))
        if error:
            errors.append(error)
        return GuidanceDecision(action=action, next_input=_text(fields.get("next_input")), reason=reason,
                                confidence=confidence, parse_errors=errors)
    except Exception as exc:  # the safe default must hold for any input whatsoever
        errors.append(f"{type(exc).__name__}: {exc}"[:300])
        return _safe_default(errors)
