"""guidebench.lm.server: llama-cpp-python's own OpenAI-compatible server, started by `guidebench lm serve
--background` on 127.0.0.1, answers exactly what the in-process engine does, serves an eval with two threads
(tracked on `mlflow server` with a PostgreSQL store), and `guidebench lm stop` ends it. Real engines, slow."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import dspy
import pytest
from llama_cpp import Llama

import programs
from guidebench.cli import main
from guidebench.lm import server as lm_server
from guidebench.lm.factory import make_lm
from guidebench.search import services
from kill_support import child_temp, started_with
from optimizer_support import decision_records, make_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small labeled Full Auto dataset (train 8, dev 4, test 4)."""
    return make_dataset(tmp_path_factory.mktemp("scale-data") / "fullauto", train=8, dev=4, test=4)


@pytest.fixture(scope="module")
def lm_service(home):
    """`guidebench lm serve --background` on a free port (the in-process thread count); stopped at the end."""
    port = services.free_port()
    with child_temp() as env:  # stopped with SIGTERM (SIGKILL when slow): its temp folders go to one of ours
        with started_with(env["TMPDIR"]):
            assert main(["lm", "serve", "--background", "--port", str(port)]) == 0
        record = next(r for r in lm_server.running() if r.port == port)
        yield record
        if lm_server.is_alive(record):
            lm_server.stop(port)


def test_the_server_engine_sends_the_in_process_prompt(home, lm_service, monkeypatch):
    """The server gets exactly the in-process prompt, stops, sampler settings and seed, and both answers parse.

    The generated texts are not compared: two llama.cpp evaluation paths (a prefix state reused in-process,
    the whole prompt on the server, other batch splits) are not bit-identical on every CPU.
    """
    from guidebench.lm import engine as lm_engine

    record = decision_records(1, offset=300)[0]
    in_process, served = [], []
    generate = lm_engine._generate
    post = lm_server.LlamaServerEngine._post

    def spy_generate(llama, prompt, sampling, **overrides):
        in_process.append((prompt, dict(sampling)))
        return generate(llama, prompt, sampling, **overrides)

    def spy_post(self, path, body):
        served.append(dict(body))
        return post(self, path, body)

    monkeypatch.setattr(lm_engine, "_generate", spy_generate)
    monkeypatch.setattr(lm_server.LlamaServerEngine, "_post", spy_post)
    predictions = []
    for lm in (make_lm("local", cache=False), make_lm(lm_service.lm_spec, api_base=lm_service.api_base, cache=False)):
        assert lm_service.lm_spec != "local"
        with dspy.context(lm=lm):
            predictions.append(programs.get("full_auto.compact")(**programs.decision_inputs(record)))
    assert isinstance(make_lm(lm_service.lm_spec, api_base=lm_service.api_base).engine, lm_server.LlamaServerEngine)
    prompt, sampling = in_process[0]
    body = served[0]
    # The in-process engine's first completion reads the whole prompt up to the prefilled first marker.
    assert body["prompt"] == prompt and prompt.rstrip().endswith("[[ ## action ## ]]")
    assert body["stop"] == sampling["stop"] and body["seed"] == sampling["seed"]
    for key in ("max_tokens", "temperature", "top_p", "top_k"):
        assert body[key] == sampling[key], key
    # The server's sampler settings the in-process call leaves at llama-cpp-python's defaults.
    defaults = inspect.signature(Llama.create_completion).parameters
    assert body["min_p"] == defaults["min_p"].default and body["repeat_penalty"] == defaults["repeat_penalty"].default
    for prediction in predictions:  # the adapter read every field (an unknown action word is the runtime's pause)
        assert not prediction.adapter_errors and prediction.raw_output is None, prediction
        assert prediction.action in {"continue", "pause", "stop", "review"}
        assert all("confidence" not in error for error in prediction.parse_errors), prediction.parse_errors


def test_eval_against_the_lm_server_with_two_threads(home, data, lm_service, mlflow_server, tmp_path, capsys):
    log = Path(lm_service.log)
    before = log.read_text().count("POST /v1/completions")
    out = tmp_path / "eval"
    assert main(["eval", "--program", "full_auto.compact", "--data", str(data), "--split", "test",
                 "--lm", lm_service.lm_spec, "--api-base", lm_service.api_base, "--threads", "2", "--no-cache",
                 "--tracking-uri", mlflow_server.url, "--no-progress", "--resamples", "200", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_records"] == 4 and summary["threads"] == 2 and summary["n_errors"] == 0
    calls = summary["usage"]["lm_calls"]
    assert calls >= 4
    # Every call went to the completion endpoint (the base model has no chat template); a call whose
    # answer missed the format was decoded once more under the output grammar, as in-process.
    text = log.read_text()
    assert calls <= text.count("POST /v1/completions") - before <= 2 * calls
    assert "/v1/chat/completions" not in text
    import mlflow

    run = mlflow.MlflowClient(tracking_uri=mlflow_server.url).get_run(summary["mlflow_run_id"])
    assert run.data.params["lm"] == lm_service.lm_spec and run.data.params["threads"] == "2"


def test_lm_stop_ends_the_server_it_started(home, capsys):
    """A server of its own: the module's other tests keep theirs, whichever order they run in."""
    port = services.free_port()
    with child_temp() as env:  # the server's temp folders go to one of this test's
        with started_with(env["TMPDIR"]):
            assert main(["lm", "serve", "--background", "--port", str(port)]) == 0
        _stop_the_server_it_started(port, capsys)


def _stop_the_server_it_started(port: int, capsys) -> None:
    record = next(r for r in lm_server.running() if r.port == port)
    try:
        assert main(["lm", "status"]) == 0
        assert f"port {port}" in capsys.readouterr().out
        assert main(["lm", "stop", "--port", str(port)]) == 0
        assert not lm_server.is_alive(record) and not services.port_in_use(port)
        assert main(["lm", "stop", "--port", str(port)]) == 2
        assert "no LM server started by guidebench runs on port" in capsys.readouterr().err
    finally:
        if lm_server.is_alive(record):
            lm_server.stop(port)
