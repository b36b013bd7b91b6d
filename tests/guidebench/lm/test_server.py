"""guidebench.lm.server: llama-cpp-python's own OpenAI-compatible server, started by `guidebench lm serve
--background` on 127.0.0.1, answers exactly what the in-process engine does, serves an eval with two threads
(tracked on `mlflow server` with a PostgreSQL store), and `guidebench lm stop` ends it. Real engines, slow."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest

import programs
from guidebench.cli import main
from guidebench.lm import server as lm_server
from guidebench.lm.factory import make_lm
from guidebench.search import services
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
    assert main(["lm", "serve", "--background", "--port", str(port)]) == 0
    record = next(r for r in lm_server.running() if r.port == port)
    yield record
    if lm_server.is_alive(record):
        lm_server.stop(port)


def test_the_server_engine_sends_the_in_process_prompt(home, lm_service):
    record = decision_records(1, offset=300)[0]
    answers = []
    for lm in (make_lm("local", cache=False), make_lm(lm_service.lm_spec, api_base=lm_service.api_base, cache=False)):
        with dspy.context(lm=lm):
            programs.get("full_auto.predict")(**programs.decision_inputs(record))
        answers.append(lm.history[-1]["outputs"])
    assert isinstance(make_lm(lm_service.lm_spec, api_base=lm_service.api_base).engine, lm_server.LlamaServerEngine)
    # Same prompt, stops, sampler and seed: the server answers exactly what the in-process model does.
    assert answers[0] == answers[1]


def test_eval_against_the_lm_server_with_two_threads(home, data, lm_service, mlflow_server, tmp_path, capsys):
    log = Path(lm_service.log)
    before = log.read_text().count("POST /v1/completions")
    out = tmp_path / "eval"
    assert main(["eval", "--program", "full_auto.predict", "--data", str(data), "--split", "test",
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


def test_lm_stop_ends_the_server_it_started(home, lm_service, capsys):
    assert main(["lm", "status"]) == 0
    assert f"port {lm_service.port}" in capsys.readouterr().out
    assert main(["lm", "stop", "--port", str(lm_service.port)]) == 0
    assert not lm_server.is_alive(lm_service) and not services.port_in_use(lm_service.port)
    assert main(["lm", "stop", "--port", str(lm_service.port)]) == 2
    assert "no LM server started by guidebench runs on port" in capsys.readouterr().err
