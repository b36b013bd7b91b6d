"""evals.usage: the call ledgers count calls, tokens and cache hits, nest, see DSPy's worker threads, record
failed calls with their error, and every active ledger gets each call."""

from __future__ import annotations

import dspy
import pytest

import guidebench.lm.factory as lm_module
import programs
from evals.usage import LMCall, UsageLedger, instrument, record_call, track_calls
from guidebench.lm.factory import make_lm
from programs.seeds import DECISION_SEEDS


def test_ledger_counts_calls_tokens_and_nesting(fake_lm):
    program = programs.get("full_auto.predict")
    inputs = programs.decision_inputs(DECISION_SEEDS[1].summary)
    with track_calls() as outer:
        program(**inputs)
        with track_calls() as inner:
            program(**inputs)
    assert outer.totals()["lm_calls"] == 2 and inner.totals()["lm_calls"] == 1
    call = inner.calls[0]
    assert call.model == "fake/rules" and call.prompt_tokens > 100 and call.completion_tokens > 5
    assert call.latency_s >= 0 and not call.cache_hit and call.error is None
    totals = outer.totals()
    assert totals["total_tokens"] == totals["prompt_tokens"] + totals["completion_tokens"]
    assert set(totals) == {"lm_calls", "prompt_tokens", "completion_tokens", "total_tokens", "cache_hits",
                           "latency_s", "prompt_tokens_evaluated", "prompt_tokens_reused"}
    assert outer.by_model()["fake/rules"]["lm_calls"] == 2
    program(**inputs)  # outside every ledger: recorded nowhere
    assert outer.totals()["lm_calls"] == 2


def test_ledger_sees_cache_hits(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path))
    previous_cache, previous_dir = dspy.cache, lm_module._cache_dir
    try:
        lm = make_lm("fake", cache=True)
        assert (tmp_path / "dspy-cache").is_dir()
        program = programs.get("full_auto.predict")
        inputs = programs.decision_inputs(DECISION_SEEDS[0].summary)
        with dspy.context(lm=lm), track_calls() as ledger:
            first, second = program(**inputs), program(**inputs)
        assert first.action == second.action
        assert [call.cache_hit for call in ledger.calls] == [False, True]
        assert ledger.calls[1].prompt_tokens == 0 and ledger.totals()["cache_hits"] == 1
        assert lm.engine.calls == 1
    finally:
        dspy.cache, lm_module._cache_dir = previous_cache, previous_dir


def test_ledger_collects_calls_from_dspy_worker_threads(fake_lm):
    program = programs.get("full_auto.predict")
    examples = [dspy.Example(**programs.decision_inputs(seed.summary)).with_inputs(
        *programs.decision_inputs(seed.summary)) for seed in DECISION_SEEDS * 3]
    with track_calls() as ledger:
        dspy.Evaluate(devset=examples, metric=lambda ex, pred, trace=None: pred.action in ("continue", "pause", "stop"),
                      num_threads=3, display_progress=False)(program)
    assert ledger.totals()["lm_calls"] == 9
    assert fake_lm.engine.calls == 9


class _BrokenEngine:
    def complete(self, request):
        raise RuntimeError("backend down")

    def close(self):
        pass


def test_failed_calls_are_recorded_with_their_error():
    lm = instrument(dspy.LM("broken/model", engine=_BrokenEngine(), cache=False, num_retries=0))
    with dspy.context(lm=lm), track_calls() as ledger, pytest.raises(Exception, match="backend down"):
        lm("hello")
    assert len(ledger.calls) == 1 and "backend down" in ledger.calls[0].error
    assert ledger.errors == 1


def test_record_call_reaches_every_active_ledger():
    with track_calls() as outer, track_calls() as inner:
        record_call(LMCall(model="m", prompt_tokens=3, completion_tokens=2, latency_s=0.5))
    assert outer.calls == inner.calls and outer.calls[0].total_tokens == 5
    assert UsageLedger().totals()["lm_calls"] == 0


def test_ledger_splits_prompt_tokens_into_evaluated_and_reused():
    """An engine that reports cached prompt tokens (as the embedded one does for a reused prefix):
    DSPy passes them as `prompt_tokens_details.cached_tokens`, the ledger keeps the split."""
    from dspy.lm15 import Message, Response, TextPart, Usage

    from guidebench.lm.fake import FakeEngine

    class CachingEngine(FakeEngine):
        def complete(self, request):
            response = super().complete(request)
            usage = Usage(input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens,
                          cache_read_tokens=response.usage.input_tokens - 10)
            return Response(id=response.id, model=response.model, message=Message.assistant([TextPart(response.text)]),
                            finish_reason="stop", usage=usage)

    lm = instrument(dspy.LM("fake/rules", engine=CachingEngine(), cache=False, num_retries=0))
    program = programs.get("full_auto.predict")
    with dspy.context(lm=lm), track_calls() as ledger:
        program(**programs.decision_inputs(DECISION_SEEDS[1].summary))
    call = ledger.calls[0]
    assert call.prompt_tokens > 10 and call.prompt_tokens_reused == call.prompt_tokens - 10
    assert call.prompt_tokens_evaluated == 10
    totals = ledger.totals()
    assert totals["prompt_tokens_evaluated"] == 10
    assert totals["prompt_tokens_evaluated"] + totals["prompt_tokens_reused"] == totals["prompt_tokens"]
