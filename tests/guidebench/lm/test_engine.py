"""guidebench.lm.engine: the local engine decodes under the output grammar when the format is missed, refuses an over-long prompt, serialises calls, and its state round-trips without loading the model."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Literal

import dspy
import numpy as np
import pytest
from dspy.lm15 import Config as RequestConfig
from dspy.lm15 import ContextLengthError, Message, Request, Response

import guidebench.lm.engine as local_lm
import programs
from evals.usage import instrument, track_calls
from guidebench.lm.engine import (
    LOCAL_MODEL_ID,
    LocalGGUFEngine,
    ModelFileError,
)
from guidebench.lm.factory import make_lm
from lm_support import adapter_request
from programs.seeds import DECISION_SEEDS


class _StubLlama:
    """Stands in for llama_cpp.Llama: records calls, answers a fixed text."""

    def __init__(self, text: str = "continue\n\n[[ ## next_input ## ]]\n\n", n_prompt: int = 100) -> None:
        self.text, self.n_prompt, self.calls, self.active = text, n_prompt, [], 0
        self.overlap = False

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(self.n_prompt))

    def create_completion(self, prompt: str, **kwargs):
        self.active += 1
        self.overlap |= self.active > 1
        self.calls.append((prompt, kwargs))
        threading.Event().wait(0.005)
        self.active -= 1
        return {"id": "cmpl-1", "choices": [{"text": self.text, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": self.n_prompt, "completion_tokens": 7, "total_tokens": self.n_prompt + 7}}


def _stub_engine(monkeypatch, stub: _StubLlama, **kwargs) -> LocalGGUFEngine:
    loaded = local_lm._LoadedModel(stub, threading.Lock())
    monkeypatch.setattr(local_lm, "_load", lambda path, n_ctx, n_threads: loaded)
    monkeypatch.setattr(local_lm, "ensure_model", lambda home=None: Path("/models/stub.gguf"))
    monkeypatch.setattr(local_lm, "grammar_compiles", lambda llama, text: True)
    return LocalGGUFEngine(**kwargs)


FORMATTED = ("continue\n\n[[ ## next_input ## ]]\nRun the tests\n\n[[ ## reason ## ]]\nopen steps\n\n"
             "[[ ## confidence ## ]]\n0.8\n\n")


def test_engine_completes_with_prefill_usage_and_sampling_settings(monkeypatch):
    stub = _StubLlama(text=FORMATTED)
    engine = _stub_engine(monkeypatch, stub, n_ctx=4096, seed=7, decode="free")
    response = engine.complete(adapter_request())
    assert isinstance(response, Response) and response.finish_reason == "stop"
    assert response.text == "[[ ## action ## ]]\n" + FORMATTED
    assert response.usage.input_tokens == 100 and response.usage.output_tokens == 7
    assert len(stub.calls) == 1  # the answer has the format: no grammar pass
    prompt, kwargs = stub.calls[0]
    assert prompt.endswith("[[ ## action ## ]]\n") and kwargs["grammar"] is None
    assert kwargs["max_tokens"] == 64 and kwargs["temperature"] == 0.2 and kwargs["seed"] == 7
    assert "[[ ## completed ## ]]" in kwargs["stop"]


def test_engine_redecodes_with_the_grammar_when_the_format_is_missed(monkeypatch):
    # The measured failure: every section written, every value empty.
    stub = _StubLlama(text="continue\n\n[[ ## next_input ## ]]\n\n[[ ## reason ## ]]\n\n[[ ## confidence ## ]]\n\n")
    engine = _stub_engine(monkeypatch, stub, decode="free")
    response = engine.complete(adapter_request())
    assert len(stub.calls) == 2 and stub.calls[0][1]["grammar"] is None
    grammar = stub.calls[1][1]["grammar"]
    assert grammar is not None and '"\\n\\n[[ ## confidence ## ]]\\n" number' in grammar._grammar
    assert response.usage.output_tokens == 14  # both passes are counted


class _FieldStub(_StubLlama):
    """Answers the value of the output field whose marker ends the prompt (field-wise decoding)."""

    VALUES = {"action": "pause", "next_input": "Wait for the approval.", "reason": "A person must approve the command.",
              "confidence": "0.85"}

    def create_completion(self, prompt: str, **kwargs):
        super().create_completion(prompt, **kwargs)
        field = prompt.rstrip("\n").rsplit("[[ ## ", 1)[1].split(" ## ]]")[0]
        return {"id": "cmpl-f", "choices": [{"text": self.VALUES[field], "finish_reason": "stop"}],
                "usage": {"prompt_tokens": self.n_prompt, "completion_tokens": 3, "total_tokens": self.n_prompt + 3}}


def test_engine_writes_the_markers_and_the_model_only_the_values(monkeypatch):
    stub = _FieldStub()
    response = _stub_engine(monkeypatch, stub).complete(adapter_request())
    names = ["action", "next_input", "reason", "confidence"]  # the signature's output order
    assert [call[0].rstrip("\n").rsplit("[[ ## ", 1)[1].split(" ## ]]")[0] for call in stub.calls] == names
    assert all("\n\n" in kwargs["stop"] and kwargs.get("grammar") is None for _, kwargs in stub.calls)
    assert stub.calls[1][0].endswith("[[ ## action ## ]]\npause\n\n[[ ## next_input ## ]]\n")
    assert response.text == ("[[ ## action ## ]]\npause\n\n[[ ## next_input ## ]]\nWait for the approval.\n\n"
                             "[[ ## reason ## ]]\n"
                             "A person must approve the command.\n\n[[ ## confidence ## ]]\n0.85\n\n")
    assert response.usage.output_tokens == 12  # every value's tokens, no marker generated
    assert [call[1]["max_tokens"] for call in stub.calls] == [64, 61, 58, 55]  # one budget for the answer
    with pytest.raises(ValueError, match="decode"):
        LocalGGUFEngine(decode="sometimes")


class _CompactStub(_FieldStub):
    """Field-wise answers to a compact request: literal values tokenize to their own ids, and a literal field's
    call runs its logits processor over a fake vocabulary, taking the best allowed token as llama.cpp would."""

    # a one-decimal number is three tokens, as the embedded model's tokenizer splits it: digit, point, digit
    VOCAB = {"continue": [11], "pause": [12], "stop": [13, 14], "review": [15],
             **{f"0.{d}": [20, 22, 30 + d] for d in range(10)}, "1.0": [21, 22, 30]}
    EOS = 2

    def __init__(self, action_scores: dict[int, float], values: dict[str, str]) -> None:
        super().__init__()
        self.action_scores, self.VALUES = action_scores, {**_FieldStub.VALUES, **values}

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return self.VOCAB.get(data.decode(), list(range(self.n_prompt)))

    def token_eos(self) -> int:
        return self.EOS

    def create_completion(self, prompt: str, **kwargs):
        processors = kwargs.get("logits_processor")
        if not processors:
            return super().create_completion(prompt, **kwargs)
        self.calls.append((prompt, kwargs))
        ids = list(range(self.n_prompt))
        written: list[int] = []
        while len(written) < kwargs["max_tokens"]:
            scores = np.zeros(48, dtype=np.float32)
            for token, score in self.action_scores.items():
                scores[token] = score
            for processor in processors:
                scores = processor(np.array(ids + written), scores)
            token = int(np.argmax(scores))
            if token == self.EOS:
                break
            written.append(token)
        text = next(value for value, seq in self.VOCAB.items() if seq == written)
        return {"id": "cmpl-l", "choices": [{"text": text, "finish_reason": "length"}],
                "usage": {"prompt_tokens": self.n_prompt, "completion_tokens": len(written),
                          "total_tokens": self.n_prompt + len(written)}}


def _compact_request() -> object:
    from dspy.adapters.chat_adapter import ChatAdapter

    from programs.seeds import compact_decision_demos
    from runtime.inputs import compact_decision_inputs
    from signatures import FullAutoCompactSignature

    inputs = compact_decision_inputs(programs.decision_inputs(DECISION_SEEDS[1].summary))
    messages = ChatAdapter().format(FullAutoCompactSignature, compact_decision_demos(), inputs)
    turns = [Message.user(m["content"]) if m["role"] == "user" else Message.assistant(m["content"])
             for m in messages[1:]]
    return Request(model=LOCAL_MODEL_ID, messages=tuple(turns), system=messages[0]["content"],
                   config=RequestConfig(max_tokens=80, temperature=0.2))


def _fields_asked(stub: _StubLlama) -> list[str]:
    return [call[0].rstrip("\n").rsplit("[[ ## ", 1)[1].split(" ## ]]")[0] for call in stub.calls]


def test_a_literal_field_is_one_of_its_values_and_the_next_input_only_follows_continue(monkeypatch):
    # "stop" is two tokens here: the mask walks it to the end, then the answer skips the next input.
    # token 40 is no value's: the mask never lets it through; the confidence is the best-scored decimal
    stub = _CompactStub({13: 5.0, 14: -9.0, 11: 1.0, 40: 99.0, 20: 1.0, 39: 2.0}, {"reason": "All done."})
    response = _stub_engine(monkeypatch, stub).complete(_compact_request())
    assert _fields_asked(stub) == ["action", "confidence", "reason"]  # no call for next_input
    action_call = stub.calls[0][1]
    assert action_call["max_tokens"] == 2 and action_call["stop"] == []  # the longest value's tokens
    confidence_call = stub.calls[1][1]  # "0.0 to 1.0, one decimal": a choice of 11 values, no stop token
    assert confidence_call["max_tokens"] == 3 and confidence_call["stop"] == []
    assert response.text == ("[[ ## action ## ]]\nstop\n\n[[ ## confidence ## ]]\n0.9\n\n[[ ## reason ## ]]\n"
                             "All done.\n\n[[ ## next_input ## ]]\n\n\n")
    assert response.usage.output_tokens == 2 + 3 + 3

    stub = _CompactStub({11: 3.0, 12: 2.0, 20: 1.0, 38: 1.0}, {"reason": "Steps remain.",
                                                                 "next_input": "Run the tests."})
    response = _stub_engine(monkeypatch, stub).complete(_compact_request())
    assert _fields_asked(stub) == ["action", "confidence", "reason", "next_input"]
    assert stub.calls[0][1]["max_tokens"] == 2 and "continue\n\n[[ ## confidence" in response.text
    assert response.text.endswith("[[ ## next_input ## ]]\nRun the tests.\n\n")
    # the word caps of the compact signature bound each text field; the answer's budget bounds the rest
    assert "[[ ## confidence ## ]]\n0.8\n\n" in response.text
    assert [kwargs["max_tokens"] for _, kwargs in stub.calls] == [2, 3, 2 * 6, 2 * 8]


def test_a_field_that_reaches_its_word_cap_ends_only_that_field(monkeypatch):
    class Capped(_CompactStub):
        def create_completion(self, prompt: str, **kwargs):
            out = super().create_completion(prompt, **kwargs)
            if prompt.endswith("[[ ## reason ## ]]\n"):
                out["choices"][0]["finish_reason"] = "length"  # the reason ran into its word cap
            return out

    stub = Capped({11: 3.0}, {"reason": "Steps remain and more words", "next_input": "Go on."})
    response = _stub_engine(monkeypatch, stub).complete(_compact_request())
    assert _fields_asked(stub)[-1] == "next_input" and response.finish_reason == "stop"


def test_the_literal_mask_allows_exactly_the_values_tokens():
    from guidebench.lm.literal import LiteralMask

    mask = LiteralMask([[5], [6, 7], [6, 8, 9]], eos=2)
    assert mask.allowed([]) == [5, 6]
    assert mask.allowed([6]) == [7, 8]
    assert mask.allowed([5]) == [2] and mask.allowed([6, 7]) == [2]  # a whole value: only the end
    assert mask.allowed([6, 8]) == [9]
    assert mask.allowed([4]) == [2]  # off every value (cannot happen under the mask): end at once
    scores = np.arange(10, dtype=np.float32)
    masked = mask(np.array([100, 101]), scores)  # the first call marks where the answer starts
    assert np.isfinite(masked).nonzero()[0].tolist() == [5, 6] and masked[6] == 6.0
    masked = mask(np.array([100, 101, 6, 8]), scores)
    assert np.isfinite(masked).nonzero()[0].tolist() == [9]


class _PauseOrStop(dspy.Signature):
    """Decide what an autonomous coding loop does after a turn."""

    status: str = dspy.InputField()
    action: Literal["pause", "stop"] = dspy.OutputField()
    reason: str = dspy.OutputField(desc="one short sentence, at most 6 words")
    next_input: str = dspy.OutputField(desc="the next instruction; empty unless action is continue")


@pytest.mark.slow
def test_real_model_chooses_a_literal_value_and_skips_the_field_it_rules_out():
    """On the embedded model: a literal field takes one of its values in one token, and a field "empty unless"
    another value is left empty without a call; the word cap bounds the reason."""
    lm = make_lm("local", cache=False)
    with dspy.context(lm=lm), track_calls() as ledger:
        out = dspy.Predict(_PauseOrStop)(status="completed; every plan step is done")
    assert out.action in ("pause", "stop") and out.next_input == ""
    call = ledger.calls[0]
    assert 0 < call.completion_tokens <= 1 + 2 * 6


@pytest.mark.slow
def test_a_process_that_loaded_the_model_exits_without_an_ignored_exception():
    """The model is closed at exit while the modules it needs are alive: no `Exception ignored in:
    <function Llama.__del__ ...>` on stderr (the garbage collector used to free it after their teardown)."""
    import subprocess
    import sys

    # atexit runs its handlers last-registered first: the one registered before any model loads runs after
    # close_models and sees what is left open (nothing: the model and the cost estimate's vocabulary are closed).
    script = ("import atexit\nfrom guidebench.lm import engine\n"
              "atexit.register(lambda: print('open at exit', len(engine._models), flush=True))\n"
              "from guidebench.lm.cost import token_counter\n"
              "engine.LocalGGUFEngine(n_threads=1).warm_up()\nassert token_counter('local')('hello') > 0\n"
              "print('loaded', len(engine._models), flush=True)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.splitlines() == ["loaded 2", "open at exit 0"], done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


def test_close_models_frees_every_loaded_model_once(monkeypatch):
    class Closing:
        closed = 0

        def close(self) -> None:
            self.closed += 1

    llamas = [Closing(), Closing()]
    monkeypatch.setattr(local_lm, "_models", {("a", 1, 1): local_lm._LoadedModel(llamas[0], threading.Lock()),
                                              ("b", 1, 1): local_lm._LoadedModel(llamas[1], threading.Lock())})
    assert local_lm.close_models() == 2 and [llama.closed for llama in llamas] == [1, 1]
    assert local_lm._models == {} and local_lm.close_models() == 0


def test_engine_constrain_modes(monkeypatch):
    stub = _StubLlama(text="garbage")
    _stub_engine(monkeypatch, stub, constrain="off", decode="free").complete(adapter_request())
    assert len(stub.calls) == 1 and stub.calls[0][1]["grammar"] is None
    _stub_engine(monkeypatch, stub, constrain="always").complete(adapter_request())
    assert len(stub.calls) == 2 and stub.calls[1][1]["grammar"] is not None
    with pytest.raises(ValueError, match="constrain"):
        LocalGGUFEngine(constrain="sometimes")


def test_engine_refuses_a_prompt_longer_than_its_context(monkeypatch):
    engine = _stub_engine(monkeypatch, _StubLlama(n_prompt=5000), n_ctx=4096)
    with pytest.raises(ContextLengthError, match="4096"):
        engine.complete(adapter_request())


def test_engine_serialises_concurrent_calls(monkeypatch):
    stub = _StubLlama(text=FORMATTED)
    engine = _stub_engine(monkeypatch, stub, decode="free")
    threads = [threading.Thread(target=engine.complete, args=(adapter_request(),)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(stub.calls) == 6 and not stub.overlap


def test_local_lm_runs_a_program_through_dspy(monkeypatch):
    stub = _StubLlama(text="pause\n\n[[ ## next_input ## ]]\n\n\n[[ ## reason ## ]]\nwaiting\n\n"
                           "[[ ## confidence ## ]]\n0.8\n\n")
    engine = _stub_engine(monkeypatch, stub, decode="free")
    lm = instrument(dspy.LM(LOCAL_MODEL_ID, engine=engine, cache=False, num_retries=0))
    with dspy.context(lm=lm), track_calls() as ledger:
        out = programs.get("full_auto.predict")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    assert (out.action, out.confidence, out.parse_errors) == ("pause", 0.8, [])
    assert ledger.totals()["lm_calls"] == 1 and ledger.totals()["prompt_tokens"] == 100


# ----------------------------------------------------------------------------- state


def test_local_lm_state_round_trips_without_loading_the_model():
    lm = make_lm("local", cache=False)
    assert lm.model == LOCAL_MODEL_ID and isinstance(lm.engine, LocalGGUFEngine)
    state = lm.dump_state()
    json.dumps(state)  # MLflow autolog records it: must be plain JSON
    assert state["engine"]["class"] == "guidebench.lm.engine:LocalGGUFEngine"
    assert state["engine"]["state"]["sha256"] == local_lm.model_sha256()
    restored = dspy.LM.load_state(state, allow_custom_lm_class=True)
    assert isinstance(restored.engine, LocalGGUFEngine) and restored.engine.prefill
    assert restored.kwargs["temperature"] == 0.2 and restored.kwargs["max_tokens"] == 512
    assert restored.engine.constrain == "fallback" and state["engine"]["state"]["n_threads"] is None


def test_engine_state_for_another_model_is_refused():
    with pytest.raises(ModelFileError, match="installed package"):
        LocalGGUFEngine.load_state({"sha256": "f" * 64})


def test_thread_count_follows_the_free_cores(monkeypatch):
    """All cores on an idle machine, fewer under load, one per pytest-xdist worker; the env var wins."""
    monkeypatch.delenv("GUIDEBENCH_LLAMA_THREADS", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(local_lm.os, "cpu_count", lambda: 4)
    for busy, threads in ((0.1, 4), (1.2, 3), (2.6, 1), (9.0, 1)):
        monkeypatch.setattr(local_lm, "_busy_cores", lambda busy=busy: busy)
        assert local_lm._default_threads() == threads, busy
    monkeypatch.setattr(local_lm, "_busy_cores", lambda: None)  # no /proc/stat: the load average decides
    monkeypatch.setattr(local_lm.os, "getloadavg", lambda: (1.2, 1.0, 1.0))
    assert local_lm._default_threads() == 3
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setattr(local_lm, "_busy_cores", lambda: 0.0)
    assert local_lm._default_threads() == 1
    monkeypatch.setenv("GUIDEBENCH_LLAMA_THREADS", "3")
    assert local_lm._default_threads() == 3


def test_busy_cores_reads_the_machine_now():
    busy = local_lm._busy_cores(0.05)
    assert busy is None or 0.0 <= busy <= (local_lm.os.cpu_count() or 1) + 1e-9
