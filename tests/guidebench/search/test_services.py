"""Scale-out on the real engines: a PostgreSQL cluster (Debian's binaries), `mlflow server` with a
PostgreSQL backend store, llama-cpp-python's own OpenAI-compatible server, and search workers in
separate processes. The set-up installs what is missing (tests/setup/*.sh), starts everything on
127.0.0.1 and tears it down.

The workers' trials use the deterministic fake LM on a large dev split: what is under test there is
the shared study (PostgreSQL, heartbeats, processes), and trials must last long enough to be killed
mid-way on any machine. The embedded model is exercised through the LM server tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dspy
import optuna
import pytest
import sqlalchemy
from optuna.storages import RetryFailedTrialCallback
from optuna.trial import TrialState

import programs
from guidebench.lm import server as lm_server
from guidebench.search import services
from guidebench.cli import main
from guidebench.lm.factory import make_lm
from optimizer_support import decision_records, make_dataset
from optimizers.search import OWNER_ATTR

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SETUP = ROOT / "tests" / "setup"


def _setup_script(name: str, *args: str) -> str:
    result = subprocess.run(["bash", str(SETUP / name), *args], capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"{name} failed:\n{result.stderr[-2000:]}"
    return result.stdout.strip()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One workbench home for the module: the model is assembled once and shared by every process."""
    folder = tmp_path_factory.mktemp("scale-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(folder))
        yield folder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small labeled Full Auto dataset (train 8, dev 4, test 4)."""
    return make_dataset(tmp_path_factory.mktemp("scale-data") / "fullauto", train=8, dev=4, test=4)


@pytest.fixture(scope="module")
def search_data(tmp_path_factory):
    """A dataset whose dev split keeps a fake-LM trial busy for seconds (300 records scored per trial)."""
    return make_dataset(tmp_path_factory.mktemp("scale-search-data") / "fullauto", train=8, dev=300, test=2)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    """A throwaway PostgreSQL cluster on 127.0.0.1 (installed from Debian's packages when missing)."""
    _setup_script("ensure_postgres.sh")
    _setup_script("ensure_python_extras.sh", sys.executable)
    cluster = services.start_postgres(tmp_path_factory.mktemp("postgres"))
    yield cluster
    services.stop_postgres(cluster)


@pytest.fixture(scope="module")
def mlflow_server(postgres, tmp_path_factory):
    """`mlflow server` on 127.0.0.1 with the PostgreSQL backend store and a local artifact root."""
    folder = tmp_path_factory.mktemp("mlflow")
    server = services.start_mlflow_server(services.create_database(postgres, "mlflow"), folder / "artifacts",
                                          log=folder / "server.log")
    yield server
    services.stop_mlflow_server(server)


@pytest.fixture(scope="module")
def lm_service(home):
    """`guidebench lm serve --background` on a free port (the in-process thread count); stopped at the end."""
    port = services.free_port()
    assert main(["lm", "serve", "--background", "--port", str(port)]) == 0
    record = next(r for r in lm_server.running() if r.port == port)
    yield record
    if lm_server.is_alive(record):
        lm_server.stop(port)


def _study(url: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=url)


def _wait_for(check, timeout: float, what: str, process: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if process is not None and process.poll() is not None:
            out, _ = process.communicate()
            pytest.fail(f"the worker pool exited ({process.returncode}) before {what}:\n{out[-4000:]}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def _owned_pair(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    """Two RUNNING trials that both recorded their owner process, else []."""
    running = _running(url, name)
    return running if len(running) == 2 and all(OWNER_ATTR in t.user_attrs for t in running) else []


def _running(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    try:
        return _study(url, name).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    except KeyError:  # the study does not exist yet
        return []


def test_workers_opening_a_new_postgresql_database_at_once_all_get_its_schema(postgres):
    # Machines started together race to create Optuna's tables and types; the losers must open the
    # schema the winner made instead of failing (seen: "duplicate key value violates unique constraint
    # pg_type_typname_nsp_index").
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from guidebench.search.workers import finished_trials

    url = services.create_database(postgres, "optuna_race")
    start = Barrier(4)

    def open_storage(_: int) -> int:
        start.wait()
        return finished_trials(url, "none-yet")

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(open_storage, range(4))) == [0, 0, 0, 0]
    assert optuna.get_all_study_summaries(url) == []


def test_two_workers_share_a_postgresql_study_and_a_killed_worker_leaves_it_usable(
        home, search_data, postgres, mlflow_server, capsys):
    storage = services.create_database(postgres, "optuna")
    study_name = "scale-out"
    search_args = ["--program-family", "full_auto", "--data", str(search_data), "--lm", "fake",
                   "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot,knn_fewshot", "--demos", "1:3",
                   "--minibatch-size", "300", "--storage", storage, "--study", study_name,
                   "--tracking-uri", mlflow_server.url, "--no-progress"]
    pool = subprocess.Popen([sys.executable, "-m", "guidebench.cli", "worker", "--workers", "2", "--trials", "6",
                             *search_args], cwd=ROOT, env=os.environ.copy(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        status = home / "workers" / f"{pool.pid}.json"
        workers = _wait_for(lambda: status.is_file() and len(json.loads(status.read_text())["workers"]) == 2 and
                            json.loads(status.read_text())["workers"], 600, "both workers started", pool)
        # Both workers inside a trial of the same study at the same time: one study, two processes. The
        # trial that started last is killed (through the owner it recorded): a trial lasts seconds, and the
        # older one may end between this poll and the kill.
        running = _wait_for(lambda: _owned_pair(storage, study_name), 600, "two trials running at once", pool)
        victim = max(running, key=lambda t: t.datetime_start)
        victim_pid = int(victim.user_attrs[OWNER_ATTR].rsplit(":", 2)[1])
        assert victim_pid in {w["pid"] for w in workers}
        os.kill(victim_pid, signal.SIGKILL)
        out, _ = pool.communicate(timeout=600)
    finally:
        if pool.poll() is None:
            pool.kill()
            pool.communicate()
    assert pool.returncode == 0, out[-4000:]
    assert "ended with code -9" in out and "marked failed" in out

    study = _study(storage, study_name)
    failed = study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
    states = {t.number: (t.state.name, sorted(t.system_attrs)) for t in study.trials}
    assert len(failed) == 1 and failed[0].number == victim.number, (
        f"running when killed: {[t.number for t in running]}; trials now: {states}\n{out[-3000:]}")
    retries = [t for t in study.trials if RetryFailedTrialCallback.retried_trial_number(t) == failed[0].number]
    assert len(retries) == 1, "the failed-trial callback queues the killed trial again"
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert len(finished) == 6

    # The study stays usable: the same search resumes it and runs exactly the missing trial.
    capsys.readouterr()
    assert main(["search", "--trials", "7", *search_args]) == 0
    assert "ran 1 trial(s) now" in capsys.readouterr().out
    assert len(_study(storage, study_name).get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))) == 7

    # Every trial was tracked on the MLflow server, whose store is the PostgreSQL database.
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=mlflow_server.url)
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents = client.search_runs(experiments, "tags.`guidebench.run_type` = 'search'")
    assert len(parents) == 1
    trials = client.search_runs(experiments, f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    # 7 finished, plus the killed one when it had opened its run before the SIGKILL (its run never ended);
    # the kill can land between the trial's start in Optuna and its run in MLflow (seen once in CI)
    finished_runs = [run for run in trials if run.info.status == "FINISHED"]
    assert len(finished_runs) == 7 and len(trials) in (7, 8)
    with sqlalchemy.create_engine(postgres.url("mlflow")).connect() as connection:
        assert connection.execute(sqlalchemy.text("select count(*) from runs")).scalar() == len(trials) + 1


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
