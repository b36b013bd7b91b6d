"""guidebench.lm.engine: the model file is assembled and verified; the local engine renders the adapter's prompt
(prefilled first output marker, stops at input markers), decodes under the output grammar when the format is
missed, refuses an over-long prompt, serialises calls, and its state round-trips without loading the model."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from types import SimpleNamespace

import dspy
import pytest
from dspy.lm15 import ContextLengthError, Response

import guidebench.lm.engine as local_lm
import programs
from evals.usage import instrument, track_calls
from guidebench.lm.engine import (
    LOCAL_MODEL_ID,
    LocalGGUFEngine,
    ModelFileError,
    ensure_model,
    first_output_marker,
    input_markers,
    render_prompt,
)
from guidebench.lm.factory import make_lm
from lm_support import adapter_request
from programs.seeds import DECISION_SEEDS


# ----------------------------------------------------------------------------- model file


def _fake_package(tmp_path: Path, chunks: list[bytes], expected: str | None = None) -> SimpleNamespace:
    paths = []
    for index, data in enumerate(chunks):
        path = tmp_path / "pkg" / f"model.gguf.part{index:02d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    digest = expected or hashlib.sha256(b"".join(chunks)).hexdigest()
    return SimpleNamespace(MODEL_NAME="model.gguf", EXPECTED_SHA256=digest, chunk_paths=lambda: paths)


def test_ensure_model_assembles_verifies_and_reuses(tmp_path, monkeypatch):
    package = _fake_package(tmp_path, [b"GGUF" + b"a" * 1000, b"b" * 500, b"c" * 7])
    monkeypatch.setattr(local_lm, "_package", lambda: package)
    home = tmp_path / "home"
    path = ensure_model(home)
    assert path == home / "models" / "model.gguf"
    assert path.read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 500 + b"c" * 7
    assert (home / "models" / "model.gguf.sha256").read_text().startswith(package.EXPECTED_SHA256)
    # A second call trusts the stamp (same size and mtime) and does not rebuild the file.
    mtime = path.stat().st_mtime_ns
    assert ensure_model(home) == path and path.stat().st_mtime_ns == mtime
    assert not list((home / "models").glob("*.partial-*"))


def test_ensure_model_rebuilds_a_corrupted_file(tmp_path, monkeypatch):
    package = _fake_package(tmp_path, [b"x" * 64, b"y" * 64])
    monkeypatch.setattr(local_lm, "_package", lambda: package)
    path = ensure_model(tmp_path / "home")
    path.write_bytes(b"corrupted")
    assert ensure_model(tmp_path / "home").read_bytes() == b"x" * 64 + b"y" * 64


def test_ensure_model_refuses_chunks_with_the_wrong_hash(tmp_path, monkeypatch):
    package = _fake_package(tmp_path, [b"x" * 64], expected="0" * 64)
    monkeypatch.setattr(local_lm, "_package", lambda: package)
    with pytest.raises(ModelFileError, match="SHA-256"):
        ensure_model(tmp_path / "home")
    assert not (tmp_path / "home" / "models" / "model.gguf").exists()


def test_ensure_model_names_missing_chunks(tmp_path, monkeypatch):
    missing = tmp_path / "gone.part00"
    package = SimpleNamespace(MODEL_NAME="m.gguf", EXPECTED_SHA256="0" * 64, chunk_paths=lambda: [missing])
    monkeypatch.setattr(local_lm, "_package", lambda: package)
    with pytest.raises(ModelFileError, match="gone.part00"):
        ensure_model(tmp_path / "home")


# ----------------------------------------------------------------------------- prompt rendering


def test_render_prompt_prefills_the_first_output_marker_and_stops_at_inputs():
    request = adapter_request(demos=1, stop=("<custom>",))
    rendered = render_prompt(request)
    assert rendered.prefill == "[[ ## action ## ]]\n"
    assert rendered.prompt.endswith("\n\n[[ ## action ## ]]\n")
    assert rendered.prompt.startswith("Your input fields are:")
    # The demo's answer is in the prompt, before the final question.
    assert rendered.prompt.index("[[ ## completed ## ]]") < rendered.prompt.rindex("[[ ## thread_id ## ]]")
    assert "[[ ## completed ## ]]" in rendered.stops and "<custom>" in rendered.stops
    assert "\n[[ ## thread_id ## ]]" in rendered.stops and "\n[[ ## compaction_events ## ]]" in rendered.stops
    assert "\n[[ ## action ## ]]" not in rendered.stops  # an output marker must not stop the answer
    assert render_prompt(request, prefill=False).prefill == ""


def test_markers_are_read_from_the_adapter_text():
    text = "[[ ## goal ## ]]\nx\n\nRespond with the corresponding output fields, starting with the field " \
           "`[[ ## objective ## ]]`, then `[[ ## risk ## ]]`."
    assert first_output_marker(text) == "[[ ## objective ## ]]"
    assert input_markers(text) == ["[[ ## goal ## ]]"]
    assert first_output_marker("no instruction here") is None


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


def test_the_closing_instruction_joins_the_constant_prefix():
    rendered = render_prompt(adapter_request(demos=1))
    closing = rendered.prompt.index("Respond with the corresponding output fields")
    # right after the system text, before the demos
    assert closing == len(rendered.system.strip()) + 2
    assert rendered.prompt.count("Respond with the corresponding output fields") == 1
    assert rendered.prefix and rendered.prompt.startswith(rendered.prefix) and closing < len(rendered.prefix)
    record = rendered.prompt[len(rendered.prefix):]
    assert record.startswith("[[ ## thread_id ## ]]") and record.endswith("\n\n[[ ## action ## ]]\n")


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
