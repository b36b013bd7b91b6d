"""guidebench.tracking.runs under concurrency: two compiles (and two searches) at the same time on one SQLite
MLflow store and one Optuna storage.

Both processes start together on fresh stores, so they race for everything that is created once: the
MLflow schema, the dataset's experiment, the Optuna schema and the study. Both must finish, and
neither store may be corrupted or lose a write: SQLite's own integrity check passes, every run is
FINISHED with its params and metrics, every trial is finished exactly once, trial numbers are unique.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import mlflow
import optuna
import pytest

from optimizer_support import make_dataset
from reliability_ledger import record as ledger


def _together(argvs: list[list[str]], cwd: Path, env: dict[str, str], timeout: float = 600.0) -> list[str]:
    """Start the commands at once and wait for all; returns their outputs (each must exit 0)."""
    processes = [subprocess.Popen([sys.executable, "-m", "guidebench.cli", *argv], cwd=cwd, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for argv in argvs]
    outputs = []
    for process in processes:
        out, _ = process.communicate(timeout=timeout)
        outputs.append(out)
    for process, out in zip(processes, outputs):
        assert process.returncode == 0, out[-4000:]
    return outputs


def _integrity(path: Path) -> None:
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "GUIDEBENCH_HOME": str(tmp_path / "home"), "PYTHONWARNINGS": "ignore"}


@pytest.mark.slow
def test_two_compiles_share_one_mlflow_store(tmp_path: Path, env: dict[str, str]) -> None:
    data = make_dataset(tmp_path / "data", train=10, dev=4, test=4)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('optimizer = "bootstrap_random_search"\n[settings]\nnum_candidate_programs = 2\n'
                      "max_bootstrapped_demos = 2\nmax_labeled_demos = 2\n", encoding="utf-8")
    argvs = [["compile", "--program", "full_auto.predict", "--optimizer", "bootstrap_random_search", "--recipe",
              str(recipe), "--data", str(data), "--lm", "fake", "--seed", str(seed), "--tracking-uri", uri,
              "--no-progress", "--out", str(tmp_path / f"out{seed}")] for seed in (1, 2)]
    _together(argvs, tmp_path, env)
    _integrity(tmp_path / "mlflow.db")
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiments = [e for e in client.search_experiments() if e.name.startswith("guidebench-")]
    assert len(experiments) == 1  # both found (or made) the same experiment of the dataset
    runs = client.search_runs([experiments[0].experiment_id], "tags.`guidebench.run_type` = 'compile'")
    assert sorted(r.data.params["seed"] for r in runs) == ["1", "2"]
    for run in runs:
        assert run.info.status == "FINISHED"
        assert {"test.objective", "dev.objective", "compile.lm_calls"} <= set(run.data.metrics)
        children = client.search_runs([experiments[0].experiment_id],
                                      f"tags.mlflow.parentRunId = '{run.info.run_id}'")
        assert len(children) == int(run.data.metrics["compile.n_candidates"])
        assert all(child.info.status == "FINISHED" for child in children)
        summary = json.loads((tmp_path / f"out{run.data.params['seed']}" / "compile.json").read_text())
        assert summary["mlflow_run_id"] == run.info.run_id
    ledger("concurrency", scenario="two compiles, one MLflow SQLite store", processes=2, failed_processes=0,
           runs_expected=2, runs_lost=2 - len(runs), integrity="ok")


@pytest.mark.slow
def test_two_searches_share_one_study_and_one_mlflow_store(tmp_path: Path, env: dict[str, str]) -> None:
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=2)
    uri, storage = f"sqlite:///{tmp_path / 'mlflow.db'}", f"sqlite:///{tmp_path / 'optuna.db'}"
    argvs = [["search", "--program-family", "full_auto", "--data", str(data), "--trials", "6", "--lm", "fake",
              "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot,knn_fewshot,bootstrap_fewshot",
              "--demos", "1:3", "--storage", storage, "--study", "shared", "--tracking-uri", uri, "--no-progress",
              "--minibatch-size", "2", "--out", str(tmp_path / f"search{worker}")] for worker in (1, 2)]
    _together(argvs, tmp_path, env)
    _integrity(tmp_path / "optuna.db")
    _integrity(tmp_path / "mlflow.db")
    study = optuna.load_study(study_name="shared", storage=storage)
    numbers = [t.number for t in study.trials]
    assert numbers == list(range(len(numbers)))  # unique, gap-free
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert len(finished) >= 6 and not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert all(t.state != optuna.trial.TrialState.FAIL for t in study.trials)
    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              "tags.`guidebench.run_type` = 'search_trial'")
    assert sorted(int(r.data.tags["optuna.trial"]) for r in runs) == numbers  # one nested run per trial, no loss
    assert all(r.info.status == "FINISHED" for r in runs)
    ledger("concurrency", scenario="two searches, one Optuna study and one MLflow store", processes=2,
           failed_processes=0, trials=len(numbers), trials_lost=len(numbers) - len(runs), integrity="ok")


_OPEN_STORES = """
import sys, time, warnings, logging
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
from guidebench.tracking import runs as tracking
from guidebench.search.engine import SearchConfig, open_study
mlflow_db, optuna_db, go = sys.argv[1], sys.argv[2], float(sys.argv[3])
while time.time() < go:
    time.sleep(0.001)
experiment = tracking.ensure_experiment("0123456789ab", "fullauto", f"sqlite:///{mlflow_db}")
study = open_study(SearchConfig(study_name="race", trials=1, storage=f"sqlite:///{optuna_db}"))
print(experiment, study.study_name)
"""


@pytest.mark.slow
def test_commands_starting_together_on_new_stores_all_open_them(tmp_path: Path, env: dict[str, str]) -> None:
    """The first open of a new store creates its schema: several processes doing it at the same instant
    (what two compiles or searches started together do) must all succeed and agree."""
    import time

    go = time.time() + 15  # every process waits for this instant, after its imports
    processes = [subprocess.Popen([sys.executable, "-c", _OPEN_STORES, str(tmp_path / "mlflow.db"),
                                   str(tmp_path / "optuna.db"), str(go)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(3)]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert len({out.strip().splitlines()[-1] for out in outputs}) == 1  # one experiment, one study
    _integrity(tmp_path / "mlflow.db")
    _integrity(tmp_path / "optuna.db")
    ledger("concurrency", scenario="three processes opening new stores at the same instant", processes=3,
           failed_processes=0, integrity="ok")
