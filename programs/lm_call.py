"""Calling a DSPy predictor so that unparseable model output never raises."""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Optional

import dspy
from dspy.utils.exceptions import AdapterParseError

from runtime.guardrails import conflicting_sections
from runtime.strict_adapter import StrictChatAdapter

# Without a configured adapter, programs use ChatAdapter without its JSON fallback: on a small
# local model the fallback fails too and costs a second call (design.md). A configured adapter wins.
# The strict variant refuses an answer that gives an output field twice with different values.
DEFAULT_ADAPTER = StrictChatAdapter(use_json_adapter_fallback=False)

_MARKER = re.compile(r"\[\[\s*##\s*(\w+)\s*##\s*\]\]")


@dataclass
class PredictorOutcome:
    """What a predictor call gave: output fields, or the raw text and why it did not parse."""

    fields: dict[str, Any]
    parsed: bool
    raw: Optional[str] = None
    errors: list[str] = field(default_factory=list)


def output_sections(text: str) -> dict[str, str]:
    """Split `[[ ## field ## ]]` sections out of raw model text (first occurrence of each wins); a field
    given twice with different values is left out (ambiguous: see `runtime.strict_adapter`)."""
    sections: dict[str, str] = {}
    markers = list(_MARKER.finditer(text or ""))
    for index, marker in enumerate(markers):
        end = markers[index + 1].start() if index + 1 < len(markers) else len(text)
        sections.setdefault(marker.group(1).lower(), text[marker.end():end].strip())
    for name in conflicting_sections(text or "", list(sections)):
        sections.pop(name.lower(), None)
    return sections


def _parse_error_summary(exc: AdapterParseError) -> str:
    parsed = exc.parsed_result if isinstance(exc.parsed_result, dict) else None
    expected = list(exc.signature.output_fields) if exc.signature is not None else []
    if parsed is not None and expected:
        missing = [name for name in expected if name not in parsed]
        return f"{exc.adapter_name}: output fields missing or unparseable: {', '.join(missing)}"
    message = str(exc).split("\n\n", 1)[0].strip()
    return f"{exc.adapter_name}: {message}"[:300]


def call_predictor(predictor: Any, **inputs: Any) -> PredictorOutcome:
    """Run a predictor; an AdapterParseError becomes the raw sections and an error, never an exception."""
    adapter_context = nullcontext() if dspy.settings.adapter is not None else dspy.context(adapter=DEFAULT_ADAPTER)
    try:
        with adapter_context:
            prediction = predictor(**inputs)
    except AdapterParseError as exc:
        raw = exc.lm_response if isinstance(exc.lm_response, str) else str(exc.lm_response or "")
        return PredictorOutcome(fields=output_sections(raw), parsed=False, raw=raw,
                                errors=[_parse_error_summary(exc)])
    return PredictorOutcome(fields=dict(prediction.items()), parsed=True)


def select_inputs(inputs: dict[str, Any], names: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The named inputs as strings (missing or None become ""); extras are dropped."""
    return {name: "" if inputs.get(name) is None else str(inputs.get(name)) for name in names}
