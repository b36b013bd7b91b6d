"""guidebench.search.workers: reaping dead trials (a dead worker's trial is failed and retried, a live one is left
alone), and scale-out on the real engines (slow): workers opening a new PostgreSQL database at once all get its
schema; two worker processes share a PostgreSQL study tracked on `mlflow server`, and a killed worker leaves it
usable.

The workers' trials use the deterministic fake LM on a large dev split: what is under test there is the shared
study (PostgreSQL, heartbeats, processes), and trials must last long enough to be killed mid-way on any machine.
"""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from optuna.storages import RDBStorage, RetryFailedTrialCallback, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from guidebench.cli import main
from guidebench.search import services
from guidebench.search.workers import reap_stale_trials
from optimizer_support import make_dataset
from guidebench.search.engine import OWNER_ATTR
from kill_support import child_temp



def _study(url: str) -> optuna.Study:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = RDBStorage(url, heartbeat_interval=30, grace_period=1,
                             heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1))
    return optuna.create_study(study_name="reap", storage=storage, direction="maximize", load_if_exists=True)


def test_a_trial_killed_before_its_first_heartbeat_is_failed_and_retried(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _study(url)
    silent = study.ask()  # a worker died between ask() and its heartbeat thread's first beat
    beating = study.ask()
    time.sleep(1.5)
    study._storage.record_heartbeat(beating._trial_id)  # a live worker keeps beating

    assert reap_stale_trials(url, grace_s=1) == {"reap": [silent.number]}

    trials = {t.number: t for t in _study(url).get_trials(deepcopy=False)}
    assert trials[silent.number].state == TrialState.FAIL
    assert trials[beating.number].state == TrialState.RUNNING
    retries = [t for t in trials.values() if RetryFailedTrialCallback.retried_trial_number(t) == silent.number]
    assert len(retries) == 1 and retries[0].state == TrialState.WAITING


def test_a_trial_that_just_started_is_not_reaped(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _study(url)
    fresh = study.ask()

    assert reap_stale_trials(url, grace_s=60) == {}
    assert _study(url).trials[fresh.number].state == TrialState.RUNNING


def test_a_search_starting_again_reaps_a_trial_that_never_beat(tmp_path, monkeypatch):
    from guidebench.search import engine as search

    monkeypatch.setattr(search, "GRACE_S", 1)
    study = _study(f"sqlite:///{tmp_path / 'study.db'}")
    silent = study.ask()  # no owner recorded, no heartbeat: killed right after ask()
    time.sleep(1.5)

    assert search.reap_dead_trials(study) == [silent.number]
    assert study.trials[silent.number].state == TrialState.FAIL


# ----- scale-out: a shared PostgreSQL study (slow) ------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def search_data(tmp_path_factory):
    """A dataset whose dev split keeps a fake-LM trial busy for seconds (300 records scored per trial)."""
    return make_dataset(tmp_path_factory.mktemp("scale-search-data") / "fullauto", train=8, dev=300, test=2)


def _load_study(url: str, name: str) -> optuna.Study:
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
        return _load_study(url, name).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    except KeyError:  # the study does not exist yet
        return []


@pytest.mark.slow
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


def _kill_a_worker_in_a_shared_study(search_args: list[str], storage: str, study_name: str, env: dict,
                                     home: Path) -> tuple[str, optuna.trial.FrozenTrial, list]:
    """Start a pool of two workers, SIGKILL the one that entered its trial last; the pool's output, that trial
    and the two trials running at the kill."""
    pool = subprocess.Popen([sys.executable, "-m", "guidebench.cli", "worker", "--workers", "2", "--trials", "6",
                             *search_args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
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
    return out, victim, running


@pytest.mark.slow
def test_two_workers_share_a_postgresql_study_and_a_killed_worker_leaves_it_usable(
        home, search_data, postgres, mlflow_server, capsys):
    storage = services.create_database(postgres, "optuna")
    study_name = "scale-out"
    search_args = ["--program-family", "full_auto", "--data", str(search_data), "--lm", "fake",
                   "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot,knn_fewshot", "--demos", "1:3",
                   "--minibatch-size", "300", "--storage", storage, "--study", study_name,
                   "--tracking-uri", mlflow_server.url, "--no-progress"]
    # The killed worker cannot remove its temporary folders (an MLflow artifact's TempDir): the pool and its
    # workers write them in a folder of this test's, removed at the end.
    with child_temp() as env:
        out, victim, running = _kill_a_worker_in_a_shared_study(search_args, storage, study_name, env, home)
    study = _load_study(storage, study_name)
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
    assert len(_load_study(storage, study_name).get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))) == 7

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
