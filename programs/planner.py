"""LM programs of the kernel-optimization planner: Predict and chain of thought over the directive signature,
and the compact variant."""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence

import dspy
import json_repair

from runtime.advisor import FAMILIES, DirectiveValidation, OptimizationDirective
from runtime.inputs import compact_planner_inputs
from runtime.pivot import validate_directive
from signatures import DIRECTIVE_FIELDS, PLANNER_INPUT_FIELDS, OptimizationDirectiveSignature, PlannerCompactSignature

from .inputs import blocked_families, packet_from_inputs, tail_entries
from .lm_call import PredictorOutcome, call_predictor, select_inputs
from .results import directive_prediction, safe_directive
from .rules_planner import family_tries
from .seeds import compact_planner_demos, planner_demos

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_INT = re.compile(r"[-+\u2212]?\d[\d,_]*")
_RISKS = {"low": "Low", "medium": "Medium", "high": "High"}
# The compact directive's output budget, in the embedded model's tokens: its seed directives take 222
# and 226 after the prefilled first marker, field markers included; the cap leaves room for the lists
# at the longest lengths its signature allows (planner.predict's answers run to 320 and more).
COMPACT_DIRECTIVE_MAX_TOKENS = 400


def _as_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(item).strip() for item in value]
    text = str(value if value is not None else "").strip()
    if not text or text.lower() in ("[]", "none", "n/a"):
        return []
    data = json_repair.loads(text) if text.startswith("[") else None
    if isinstance(data, list):
        return [str(item).strip() for item in data]
    return [_BULLET.sub("", line).strip() for line in text.splitlines() if _BULLET.sub("", line).strip()]


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a cycle count")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    match = _INT.search(str(value))
    if not match:
        raise ValueError(f"no integer in {str(value)[:40]!r}")
    return int(match.group(0).replace("\u2212", "-").replace(",", "").replace("_", ""))


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().strip("\"'`.").lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"not a boolean: {str(value)[:40]!r}")


def _as_family(value: Any) -> str:
    text = str(value).strip().strip("\"'`.").lower()
    name = text.split(":", 1)[1] if text.startswith("family:") else text
    family = f"family:{name}"
    if family not in FAMILIES:
        raise ValueError(f"unknown strategy family {str(value)[:40]!r}")
    return family


def _as_risk(value: Any) -> str:
    risk = _RISKS.get(str(value).strip().strip("\"'`.").lower())
    if risk is None:
        raise ValueError(f"risk must be Low, Medium or High, got {str(value)[:40]!r}")
    return risk


def _as_validation(value: Any) -> dict[str, Any]:
    if isinstance(value, DirectiveValidation):
        return value.model_dump()
    data = value if isinstance(value, Mapping) else json_repair.loads(str(value))
    if not isinstance(data, Mapping):
        raise ValueError("validation must be a JSON object with commands and pass_criteria")
    return {key: _as_list(item) if isinstance(item, (list, str)) else item for key, item in data.items()}


_CONVERTERS = {
    "objective": lambda v: str(v).strip(),
    "primary_hypothesis": lambda v: str(v).strip(),
    "strategy_family": _as_family,
    "strategy_modifiers": _as_list,
    "risk": _as_risk,
    "expected_effect_cycles": _as_int,
    "change_summary": _as_list,
    "step_plan": _as_list,
    "validation": _as_validation,
    "next_packet_requests": _as_list,
    "did_web_search": _as_bool,
}


def directive_fields(fields: Mapping[str, Any], names: Sequence[str] = DIRECTIVE_FIELDS
                     ) -> tuple[dict[str, Any], list[str]]:
    """Convert the named output fields (typed or raw text) into directive values; errors name the field."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name in names:
        if name not in fields or fields[name] is None:
            errors.append(f"{name}: missing")
            continue
        try:
            values[name] = _CONVERTERS[name](fields[name])
        except (ValueError, TypeError) as exc:
            errors.append(f"{name}: {exc}")
    return values, errors


def directive_result(outcome: PredictorOutcome, inputs: Mapping[str, Any], **extra: Any) -> dspy.Prediction:
    """The planner's prediction: a validated directive, or the safe directive with the reasons why."""
    packet = packet_from_inputs(inputs)
    blocked = blocked_families(inputs)
    if packet is not None:
        allowed = [f for f in packet.strategy_family_constraints.families_for_next() if f not in blocked]
        tried = family_tries(tail_entries(packet))
    else:
        allowed, tried = [f for f in FAMILIES if f not in blocked], None
    extra = {"adapter_errors": list(outcome.errors), "raw_output": outcome.raw, **extra}
    values, field_errors = directive_fields(outcome.fields)
    if field_errors:
        return directive_prediction(safe_directive(allowed, tried), parse_errors=[*outcome.errors, *field_errors],
                                    **extra)
    problems = validate_directive(values, blocked)
    if problems:
        return directive_prediction(safe_directive(allowed, tried), directive_errors=problems, **extra)
    return directive_prediction(OptimizationDirective.model_validate(values), **extra)


class PlannerPredict(dspy.Module):
    """One `dspy.Predict` over OptimizationDirectiveSignature (seed demos until compiled)."""

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.plan = dspy.Predict(OptimizationDirectiveSignature)
        self.plan.demos = planner_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.plan, **select_inputs(inputs, PLANNER_INPUT_FIELDS))
        return directive_result(outcome, inputs)


class PlannerChainOfThought(dspy.Module):
    """Chain of thought over OptimizationDirectiveSignature."""

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.plan = dspy.ChainOfThought(OptimizationDirectiveSignature)
        self.plan.predict.demos = planner_demos(with_reasoning=True) if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.plan, **select_inputs(inputs, PLANNER_INPUT_FIELDS))
        return directive_result(outcome, inputs, reasoning=str(outcome.fields.get("reasoning") or ""))


class PlannerCompact(dspy.Module):
    """The same directive from the compact rendering of the packet, with short lists and an output cap.

    Inputs are `runtime.inputs.compact_planner_inputs` (what the planner acts on: goal, plateau,
    families, bests, bound and the last attempts, one line each); the answer is capped at
    COMPACT_DIRECTIVE_MAX_TOKENS and checked exactly as `PlannerPredict`'s.
    """

    def __init__(self, demos: Optional[list[dspy.Example]] = None) -> None:
        super().__init__()
        self.plan = dspy.Predict(PlannerCompactSignature, max_tokens=COMPACT_DIRECTIVE_MAX_TOKENS)
        self.plan.demos = compact_planner_demos() if demos is None else list(demos)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outcome = call_predictor(self.plan, **compact_planner_inputs(inputs))
        return directive_result(outcome, inputs)
