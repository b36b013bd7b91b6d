"""programs.full_auto: the LM programs of the Full Auto decision return validated decisions (fake LM); the
compact program decides as full_auto.predict parses and guardrails, from a shorter prompt and a capped
answer; the compact state program also sends the turn counters and the clipped last message; the compact
chain of thought reasons in one sentence first, under its own cap; the original Predict and the compact
program answer in format on the embedded model (slow)."""

from __future__ import annotations

import time
from pathlib import Path

import dspy
import pytest

import programs
from evals.usage import track_calls
from guidebench.lm.prompt import message_text, render_prompt
from program_support import LM_FULL_AUTO, UNSEEN, record, recorded_requests
from programs.full_auto import COMPACT_COT_MAX_TOKENS, COMPACT_DECISION_MAX_TOKENS
from programs.seeds import DECISION_SEEDS, STALLED_SEED
from runtime import ACTIONS, GuardrailConfig, GuardrailContext, GuidanceDecision, apply_guardrails
from runtime.inputs import COMPACT_STATE_NAMES, COMPACT_SUMMARY_NAMES


@pytest.mark.parametrize("name", LM_FULL_AUTO)
def test_full_auto_lm_programs_return_validated_decisions(fake_lm, name):
    program = programs.get(name)
    for seed in DECISION_SEEDS:
        out = program(**programs.decision_inputs(seed.summary))
        assert isinstance(out.decision, GuidanceDecision) and out.parse_errors == []
        assert (out.action, out.confidence, out.reason, out.next_input) == (
            out.decision.action, out.decision.confidence, out.decision.reason, out.decision.next_input)
        assert out.action == seed.action  # the fake LM answers like the rule policy


# ----------------------------------------------------------------------------- full_auto.compact

ANSWERS = (  # raw answers, each given to both programs
    "[[ ## action ## ]]\ncontinue\n\n[[ ## confidence ## ]]\n0.82\n\n[[ ## reason ## ]]\nSteps remain.\n\n"
    "[[ ## next_input ## ]]\nRun the tests.\n\n[[ ## completed ## ]]",
    "[[ ## action ## ]]\nStop\n\n[[ ## confidence ## ]]\n0.4\n\n[[ ## reason ## ]]\nDone.\n\n[[ ## next_input ## ]]\n",
    "[[ ## action ## ]]\nrestart\n\n[[ ## confidence ## ]]\n0.9\n\n[[ ## reason ## ]]\nx\n\n[[ ## next_input ## ]]\n",
    "[[ ## action ## ]]\ncontinue\n\n[[ ## confidence ## ]]\nhigh\n\n[[ ## reason ## ]]\nx\n\n[[ ## next_input ## ]]\n",
    "I would keep going.",
)


@pytest.mark.parametrize("raw", ANSWERS)
def test_compact_decisions_are_parsed_and_guardrailed_as_full_auto_predict(scripted_lm, raw):
    scripted_lm([raw, raw])
    inputs = programs.decision_inputs(record())
    compact = programs.get("full_auto.compact")(**inputs)
    original = programs.get("full_auto.predict")(**inputs)
    fields = ("action", "confidence", "reason", "next_input")
    assert [getattr(compact.decision, f) for f in fields] == [getattr(original.decision, f) for f in fields]
    assert bool(compact.parse_errors) == bool(original.parse_errors)
    context = GuardrailContext.from_summary(record().summary)
    config = GuardrailConfig(min_confidence=0.5)
    (compact_enforced, compact_audit), (enforced, audit) = (apply_guardrails(out.decision, context, config)
                                                            for out in (compact, original))
    assert compact_audit == audit
    # (the typed action adds the adapter's complaint to an unknown action's parse errors; the decision is the same)
    assert compact_enforced.model_dump(exclude={"parse_errors"}) == enforced.model_dump(exclude={"parse_errors"})


def test_compact_program_reads_only_the_compact_fields_and_caps_its_answer(fake_lm):
    inputs = programs.decision_inputs(UNSEEN)
    [request] = recorded_requests("full_auto.compact", inputs)
    assert request.config.max_tokens == COMPACT_DECISION_MAX_TOKENS  # from the predictor's config
    record_text = message_text(request.messages[-1])
    for name in COMPACT_SUMMARY_NAMES:
        assert f"[[ ## {name} ## ]]\n{inputs[name]}\n" in record_text
    assert UNSEEN.thread_id not in record_text and "totalTokens" not in record_text
    # Inputs built from the summary fields alone give the very same prompt.
    summary_only = {name: value for name, value in inputs.items() if name not in COMPACT_SUMMARY_NAMES}
    [again] = recorded_requests("full_auto.compact", summary_only)
    assert render_prompt(again).prompt == render_prompt(request).prompt


@pytest.mark.parametrize("given", [DECISION_SEEDS[1].summary, UNSEEN, record()], ids=["seed", "unseen", "record"])
def test_compact_prompt_is_shorter_than_full_auto_predicts(given):
    inputs = programs.decision_inputs(given)
    sizes = {}
    for name in ("full_auto.predict", "full_auto.compact"):
        with track_calls() as ledger:
            [request] = recorded_requests(name, inputs)
        sizes[name] = (ledger.calls[0].prompt_tokens, len(render_prompt(request).prompt),
                       len(message_text(request.messages[-1])))
    # fake LM tokens (words), characters of the whole prompt, characters of the per-record part
    assert all(c < p for c, p in zip(sizes["full_auto.compact"], sizes["full_auto.predict"])), sizes


# ----------------------------------------------------------------------------- full_auto.compact_state, compact_cot

COMPACT_VARIANTS = ("full_auto.compact_state", "full_auto.compact_cot")


def _as_variant(name: str, raw: str) -> str:
    """A compact answer as the variant gives it: the chain of thought writes its reasoning first."""
    return f"[[ ## reasoning ## ]]\nSteps remain.\n\n{raw}" if name.endswith("_cot") and "[[" in raw else raw


@pytest.mark.parametrize("name", COMPACT_VARIANTS)
@pytest.mark.parametrize("raw", ANSWERS)
def test_compact_variants_decide_as_the_compact_program_parses(scripted_lm, name, raw):
    scripted_lm([raw, _as_variant(name, raw)])
    inputs = programs.decision_inputs(record())
    compact = programs.get("full_auto.compact")(**inputs)
    variant = programs.get(name)(**inputs)
    fields = ("action", "confidence", "reason", "next_input")
    assert [getattr(variant.decision, f) for f in fields] == [getattr(compact.decision, f) for f in fields]
    assert bool(variant.parse_errors) == bool(compact.parse_errors)
    if name.endswith("_cot") and "[[" in raw:
        assert variant.reasoning == "Steps remain."


def test_compact_state_sends_the_counters_and_the_clipped_message_and_caps_its_answer(fake_lm):
    inputs = programs.decision_inputs(UNSEEN.model_copy(update={"no_progress_count": 1,
                                                                "last_agent_message": "word " * 100}))
    [request] = recorded_requests("full_auto.compact_state", inputs)
    assert request.config.max_tokens == COMPACT_DECISION_MAX_TOKENS
    record_text = message_text(request.messages[-1])
    for name in (*COMPACT_SUMMARY_NAMES, *COMPACT_STATE_NAMES):
        assert f"[[ ## {name} ## ]]\n{inputs[name]}\n" in record_text
    assert "[[ ## no_progress_count ## ]]\n1\n" in record_text and inputs["last_agent_message"] not in record_text
    assert UNSEEN.thread_id not in record_text
    summary_only = {name: value for name, value in inputs.items() if name not in (*COMPACT_SUMMARY_NAMES, "message")}
    [again] = recorded_requests("full_auto.compact_state", summary_only)
    assert render_prompt(again).prompt == render_prompt(request).prompt


def test_only_the_compact_state_program_tells_a_stalled_turn(fake_lm):
    # The fake LM reads the counters it is shown like the rule policy: the compact prompt has none.
    inputs = programs.decision_inputs(STALLED_SEED.summary)
    assert programs.get("full_auto.compact")(**inputs).action == "continue"
    assert programs.get("full_auto.compact_state")(**inputs).action == "pause"


def test_compact_cot_reasons_first_and_caps_its_answer(fake_lm):
    inputs = programs.decision_inputs(UNSEEN)
    [request] = recorded_requests("full_auto.compact_cot", inputs)
    assert request.config.max_tokens == COMPACT_COT_MAX_TOKENS > COMPACT_DECISION_MAX_TOKENS
    assert request.system.index("`reasoning`") < request.system.index("`action`")
    assert "one short sentence" in request.system
    for name in COMPACT_SUMMARY_NAMES:
        assert f"[[ ## {name} ## ]]\n{inputs[name]}\n" in message_text(request.messages[-1])
    out = programs.get("full_auto.compact_cot")(**inputs)
    assert out.reasoning and out.parse_errors == [] and out.action in ACTIONS


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


@pytest.mark.slow
def test_real_model_full_auto_compact_answers_parse(real_lm, tmp_path, capsys):
    from guidebench.data import import_logs
    from evals.data import load_records

    import_logs(Path(__file__).resolve().parents[2] / "datasets" / "sample" / "fullauto", "fullauto",
                tmp_path / "fa", progress=False)
    records = load_records(tmp_path / "fa", "test")[:3]
    program = programs.get("full_auto.compact")
    lines = []
    for item in records:
        started = time.perf_counter()
        with dspy.context(lm=real_lm), track_calls() as ledger:
            out = program(**programs.decision_inputs(item))
        call = ledger.calls[0]
        assert out.parse_errors == [], out.raw_output  # compact demos + marker prefill: the format holds
        assert out.action in ACTIONS and call.completion_tokens <= COMPACT_DECISION_MAX_TOKENS
        assert out.next_input == "" or out.action == "continue"  # the engine does not decode it after another action
        lines.append(f"{time.perf_counter() - started:.2f}s, {call.prompt_tokens} prompt "
                     f"({call.prompt_tokens_reused} reused) + {call.completion_tokens} completion tokens -> "
                     f"{out.action} ({out.confidence}), label {item.label.action}")
    with capsys.disabled():
        print("\nfull_auto.compact on the embedded model:\n  " + "\n  ".join(lines))
