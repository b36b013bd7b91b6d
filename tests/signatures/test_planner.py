"""signatures.planner: the directive signature outputs every directive field, typed as the runtime's model."""

from __future__ import annotations

import typing

from runtime.advisor import FAMILIES, DirectiveValidation, OptimizationDirective
from signatures import DIRECTIVE_FIELDS, OptimizationDirectiveSignature


def _annotation(signature, name):
    return signature.fields[name].annotation


def test_directive_signature_outputs_every_directive_field_typed():
    outputs = OptimizationDirectiveSignature.output_fields
    assert list(outputs) == list(OptimizationDirective.model_fields) == list(DIRECTIVE_FIELDS)
    assert set(typing.get_args(_annotation(OptimizationDirectiveSignature, "strategy_family"))) == set(FAMILIES)
    assert set(typing.get_args(_annotation(OptimizationDirectiveSignature, "risk"))) == {"Low", "Medium", "High"}
    assert _annotation(OptimizationDirectiveSignature, "expected_effect_cycles") is int
    assert _annotation(OptimizationDirectiveSignature, "did_web_search") is bool
    assert _annotation(OptimizationDirectiveSignature, "validation") is DirectiveValidation
    for name in ("strategy_modifiers", "change_summary", "step_plan", "next_packet_requests"):
        assert _annotation(OptimizationDirectiveSignature, name) == list[str]
    # The packet goes in as its main parts (formats.md §2.3).
    assert "strategy_family_constraints" in OptimizationDirectiveSignature.input_fields
    assert "experiment_log_tail" in OptimizationDirectiveSignature.input_fields
