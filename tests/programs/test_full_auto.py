"""programs.full_auto: the LM programs of the Full Auto decision return validated decisions (fake LM), and
the original Predict gives a valid decision on the embedded model (slow)."""

from __future__ import annotations

import time

import dspy
import pytest

import programs
from evals.usage import track_calls
from program_support import LM_FULL_AUTO, UNSEEN
from programs.seeds import DECISION_SEEDS
from runtime import ACTIONS, GuidanceDecision


@pytest.mark.parametrize("name", LM_FULL_AUTO)
def test_full_auto_lm_programs_return_validated_decisions(fake_lm, name):
    program = programs.get(name)
    for seed in DECISION_SEEDS:
        out = program(**programs.decision_inputs(seed.summary))
        assert isinstance(out.decision, GuidanceDecision) and out.parse_errors == []
        assert (out.action, out.confidence, out.reason, out.next_input) == (
            out.decision.action, out.decision.confidence, out.decision.reason, out.decision.next_input)
        assert out.action == seed.action  # the fake LM answers like the rule policy


# ----------------------------------------------------------------------------- the real embedded model


@pytest.mark.slow
def test_real_model_full_auto_predict_gives_a_valid_decision(real_lm, capsys):
    started = time.perf_counter()
    with dspy.context(lm=real_lm), track_calls() as ledger:
        out = programs.get("full_auto.predict")(**programs.decision_inputs(UNSEEN))
    elapsed = time.perf_counter() - started
    decision = GuidanceDecision.model_validate(out.decision.model_dump())
    assert decision.action in ACTIONS and 0.0 <= decision.confidence <= 1.0
    assert out.parse_errors == [], out.raw_output  # seed demos + marker prefill: the format holds
    call = ledger.calls[0]
    assert len(ledger.calls) == 1 and call.prompt_tokens > 1000 and call.completion_tokens > 0
    with capsys.disabled():
        print(f"\nfull_auto.predict on the embedded model: {elapsed:.2f}s, {call.prompt_tokens} prompt + "
              f"{call.completion_tokens} completion tokens -> {decision.action} ({decision.confidence})")
