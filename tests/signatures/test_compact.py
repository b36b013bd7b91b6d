"""signatures.compact: the compact signatures read exactly the compact rendering's fields, answer in the
budgeted order with the original output names and types, and rebuild from their definition (export)."""

from __future__ import annotations

import pytest

from runtime.inputs import (COMPACT_PACKET_NAMES, COMPACT_STATE_NAMES, COMPACT_SUMMARY_NAMES, PACKET_INPUT_NAMES,
                            SUMMARY_INPUT_NAMES)
from runtime.signature_spec import build_signature, spec_of
from signatures import (DECISION_OUTPUT_FIELDS, FULL_AUTO_INPUT_FIELDS, FullAutoCompactSignature,
                        FullAutoCompactStateSignature, FullAutoDecisionClearSignature, OptimizationDirectiveSignature,
                        PlannerCompactSignature)


def test_compact_decision_signature_reads_the_compact_fields_and_answers_action_first():
    assert tuple(FullAutoCompactSignature.input_fields) == COMPACT_SUMMARY_NAMES
    assert "thread_id" not in FullAutoCompactSignature.input_fields
    # action, confidence, reason, then the optional next_input: a cut-off answer loses only the last.
    assert list(FullAutoCompactSignature.output_fields) == ["action", "confidence", "reason", "next_input"]
    assert set(FullAutoCompactSignature.output_fields) == set(DECISION_OUTPUT_FIELDS)
    for name in DECISION_OUTPUT_FIELDS:
        assert (FullAutoCompactSignature.output_fields[name].annotation
                == FullAutoDecisionClearSignature.output_fields[name].annotation)
    # next_input may be empty (the engine's grammar allows an empty line when the description says so).
    assert "empty" in FullAutoCompactSignature.output_fields["next_input"].json_schema_extra["desc"]


def test_compact_state_signature_adds_what_no_other_decision_signature_sees():
    assert tuple(FullAutoCompactStateSignature.input_fields) == (*COMPACT_SUMMARY_NAMES, *COMPACT_STATE_NAMES)
    assert not {"turn_count", "no_progress_count", "message"} & set(FULL_AUTO_INPUT_FIELDS)
    assert FullAutoCompactStateSignature.instructions == FullAutoCompactSignature.instructions
    for name, field in FullAutoCompactSignature.fields.items():  # the compact lines and the answer, unchanged
        assert FullAutoCompactStateSignature.fields[name].annotation == field.annotation
        assert FullAutoCompactStateSignature.fields[name].json_schema_extra == field.json_schema_extra
    assert list(FullAutoCompactStateSignature.output_fields) == list(FullAutoCompactSignature.output_fields)


def test_compact_planner_signature_reads_only_the_packet_facts_and_keeps_the_directive_types():
    assert tuple(PlannerCompactSignature.input_fields) == ("goal", *COMPACT_PACKET_NAMES)
    assert list(PlannerCompactSignature.output_fields) == list(OptimizationDirectiveSignature.output_fields)
    for name, field in OptimizationDirectiveSignature.output_fields.items():
        assert PlannerCompactSignature.output_fields[name].annotation == field.annotation


@pytest.mark.parametrize("signature, rendered", [(FullAutoCompactSignature, SUMMARY_INPUT_NAMES),
                                                 (FullAutoCompactStateSignature, SUMMARY_INPUT_NAMES),
                                                 (PlannerCompactSignature, PACKET_INPUT_NAMES)])
def test_compact_signatures_are_plain_one_line_declarations_the_runtime_can_fill(signature, rendered):
    from runtime.frozen.loader import RUNTIME_TYPES

    assert "\n" not in signature.instructions
    for field in signature.fields.values():
        assert "\n" not in field.json_schema_extra.get("desc", "")
    assert set(signature.input_fields) <= set(rendered)  # a frozen module renders them on its own
    spec = spec_of(signature)
    assert spec_of(build_signature(spec, RUNTIME_TYPES)).model_dump() == spec.model_dump()
