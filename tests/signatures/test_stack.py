"""signatures.stack: the module-stack signatures chain (summarize -> select -> verify)."""

from __future__ import annotations

import typing

from signatures import FullAutoDecisionSignature, SelectNextAction, SummarizeTurnState, VerifyDecision


def _annotation(signature, name):
    return signature.fields[name].annotation


def test_module_stack_signatures_chain():
    assert {"state_summary", "progress"} <= set(SummarizeTurnState.output_fields)
    assert {"state_summary", "progress"} <= set(SelectNextAction.input_fields)
    assert list(SelectNextAction.output_fields) == list(FullAutoDecisionSignature.output_fields)
    assert {"proposed_action", "proposed_reason"} <= set(VerifyDecision.input_fields)
    assert set(typing.get_args(_annotation(VerifyDecision, "verdict"))) == {"keep", "pause", "stop"}
    for signature in (SummarizeTurnState, SelectNextAction, VerifyDecision):
        assert signature.instructions.strip()
