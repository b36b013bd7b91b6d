"""kill -9 during compile, search and export (real processes, real SIGKILL), then the next command.

MLflow has no hook for a process killed outright, so the workbench marks what a dead process left
RUNNING when the next command starts: every run it starts carries its owner (host, pid, process
start time) and the first tracking call of the next command ends the runs of dead owners KILLED
(`guidebench.tracking.runs.reap_stale_runs`); a search marks its dead trials FAIL and queues their retry
(`guidebench.search.engine.reap_dead_trials`, the heartbeat's job done at once). An export is written in a
staging folder and renamed into place, so the target is never half-written; the next export tidies
what a killed one left. `compile --resume RUN_ID` and running the same search or export again finish
the work, without repeating finished LM calls.

The commands run in subprocesses through `tests/crash_driver.py`, which pauses them at a chosen point
(the N-th LM call, between the steps of an export) so the kill lands where it hurts; each with a temp
folder of its own, removed after the kill (`tests/kill_support.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import dspy
import mlflow
import optuna
import pytest

from guidebench.cli import main
from kill_support import child_temp, guidebench_env, kill_at
from optimizer_support import make_dataset
from optimizers.checkpoint import Checkpoint
from reliability_ledger import record as ledger
from runtime.frozen.loader import verify_frozen


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """A workbench home, a dataset, an MLflow store; the environment for the subprocesses."""
    home = tmp_path / "home"
    monkeypatch.setenv("GUIDEBENCH_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    previous = dspy.settings.lm
    env = guidebench_env(home)
    yield {"home": home, "data": make_dataset(tmp_path / "data", train=10, dev=4, test=4),
           "uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "env": env}
    dspy.configure(lm=previous)


def _runs(uri: str, filter_string: str = "") -> list:
    client = mlflow.MlflowClient(tracking_uri=uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()], filter_string)


@pytest.mark.slow
def test_kill_during_compile_then_the_run_is_marked_killed_and_resume_finishes(bench, tmp_path, capsys):
    uri = bench["uri"]
    argv = ["compile", "--program", "full_auto.predict", "--optimizer", "bootstrap_random_search", "--data",
            str(bench["data"]), "--lm", "fake", "--tracking-uri", uri, "--no-progress", "--recipe",
            str(_recipe(tmp_path))]
    pid = kill_at("lm:6", argv, tmp_path, bench["env"])
    (run,) = _runs(uri)
    assert run.info.status == "RUNNING"  # what MLflow alone leaves behind
    assert run.data.tags["guidebench.owner"].split(":")[1] == str(pid)
    checkpoint = Checkpoint.for_run(bench["home"] / "checkpoints", run.info.run_id)
    assert checkpoint.status()["stage"] == "started" and checkpoint.cache_dir.is_dir()
    # The next command (any command that tracks) ends the dead process's run.
    assert main(["eval", "--program", "full_auto.rules", "--data", str(bench["data"]), "--tracking-uri", uri,
                 "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    killed = mlflow.MlflowClient(tracking_uri=uri).get_run(run.info.run_id)
    assert killed.info.status == "KILLED" and f"process {run.data.tags['guidebench.owner']} died" in \
        killed.data.tags["guidebench.reaped"]
    # --resume finishes the work; the LM calls finished before the kill come back from the cache.
    assert main(["compile", "--resume", run.info.run_id, "--no-progress"]) == 0
    out = capsys.readouterr().out
    done = mlflow.MlflowClient(tracking_uri=uri).get_run(run.info.run_id)
    assert done.info.status == "FINISHED" and "compile.lm_calls" in done.data.metrics
    summary = json.loads((bench["home"] / "compiles" / run.info.run_id / "compile.json").read_text())
    assert summary["compile"]["usage"]["cache_hits"] >= 5, summary["compile"]["usage"]
    assert Checkpoint.for_run(bench["home"] / "checkpoints", run.info.run_id).status()["stage"] == "done"
    assert f"MLflow run {run.info.run_id}" in out
    # And the compiled program exports.
    assert main(["export", run.info.run_id, "--name", "resumed", "--version", "1.0.0", "--out",
                 str(tmp_path / "export"), "--tracking-uri", uri]) == 0
    verify_frozen(tmp_path / "export")
    ledger("crashes", command="compile", killed_at="6th LM call of the optimizer", kills=1, runs_left_running=0,
           marked="KILLED", resumed_to_finished=1,
           lm_calls_repeated=max(0, 5 - summary["compile"]["usage"]["cache_hits"]))


def _recipe(tmp_path: Path) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text('optimizer = "bootstrap_random_search"\n[settings]\nnum_candidate_programs = 2\n'
                    "max_bootstrapped_demos = 2\nmax_labeled_demos = 2\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_kill_during_search_then_the_trial_fails_and_the_search_finishes(bench, tmp_path, capsys):
    uri, storage = bench["uri"], f"sqlite:///{tmp_path / 'optuna.db'}"
    argv = ["search", "--program-family", "full_auto", "--data", str(bench["data"]), "--trials", "3", "--lm", "fake",
            "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot,knn_fewshot", "--demos", "1:3",
            "--storage", storage, "--study", "crash", "--tracking-uri", uri, "--no-progress", "--minibatch-size", "2",
            "--out", str(tmp_path / "search")]
    # The dev split has 4 records: calls 1-4 score trial 0, call 6 is inside trial 1.
    kill_at("lm:6", argv, tmp_path, bench["env"])
    study = optuna.load_study(study_name="crash", storage=storage)
    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING]
    trial_runs = _runs(uri, "tags.`guidebench.run_type` = 'search_trial'")
    assert sorted(r.info.status for r in trial_runs) == ["FINISHED", "RUNNING"]
    # Running the same search again: the dead trial is failed at once, retried, and the study completes.
    assert main(argv) == 0
    capsys.readouterr()
    study = optuna.load_study(study_name="crash", storage=storage)
    by_state = {s: [t.number for t in study.trials if t.state == s] for s in optuna.trial.TrialState}
    assert by_state[optuna.trial.TrialState.FAIL] == [1] and not by_state[optuna.trial.TrialState.RUNNING]
    assert len(by_state[optuna.trial.TrialState.COMPLETE]) + len(by_state[optuna.trial.TrialState.PRUNED]) == 3
    retried = [t for t in study.trials if t.system_attrs.get("failed_trial") == 1]
    assert len(retried) == 1 and retried[0].params == study.trials[1].params
    client = mlflow.MlflowClient(tracking_uri=uri)
    statuses = {r.data.tags["optuna.trial"]: r.info.status
                for r in _runs(uri, "tags.`guidebench.run_type` = 'search_trial'")}
    assert statuses["1"] == "KILLED" and all(v == "FINISHED" for k, v in statuses.items() if k != "1")
    (parent,) = _runs(uri, "tags.`guidebench.run_type` = 'search'")
    assert parent.info.status == "FINISHED" and "guidebench.reaped" in parent.data.tags
    assert client.get_run(parent.info.run_id).data.metrics["trials.failed"] == 1
    assert (tmp_path / "search" / "program.json").is_file()
    ledger("crashes", command="search", killed_at="trial 1 (6th LM call)", kills=1, trials_left_running=0,
           trial_marked="FAIL", trial_run_marked=statuses["1"], retried=len(retried),
           finished_trials=len(by_state[optuna.trial.TrialState.COMPLETE]) + len(by_state[optuna.trial.TrialState.PRUNED]),
           runs_left_running=0)


def _export_argv(out: Path, *extra: str) -> list[str]:
    return ["export", "--program", "full_auto.predict", "--name", "crash", "--version", "0.1.0", "--out", str(out),
            *extra]


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


def test_kill_during_export_leaves_no_half_written_folder_and_the_rerun_finishes(bench, tmp_path, capsys):
    out = tmp_path / "exports" / "mod"
    kill_at("export:staged", _export_argv(out), tmp_path, bench["env"])
    assert not out.exists()  # never half-written: the target appears only whole
    assert [name.split("-")[0] for name in _hidden(out)] == [".mod.export"]  # the staging folder it left
    assert main(_export_argv(out)) == 0
    verify_frozen(out)
    assert _hidden(out) == []  # the next export tidied up
    ledger("crashes", command="export", killed_at="written, before the rename", kills=1, half_written_folders=0,
           leftovers_after_next_export=0, rerun_finished=1)


def test_kill_between_the_two_renames_of_a_forced_export_keeps_a_whole_export(bench, tmp_path, capsys):
    out = tmp_path / "exports" / "mod"
    assert main(_export_argv(out)) == 0
    first = (out / "manifest.json").read_bytes()
    kill_at("export:swap", _export_argv(out, "--force", "--tag", "second"), tmp_path, bench["env"])
    assert not out.exists()
    names = _hidden(out)
    assert sorted(n.split("-")[0] for n in names) == [".mod.export", ".mod.old"]
    old = out.parent / next(n for n in names if n.startswith(".mod.old"))
    verify_frozen(old)  # the previous export is whole, only moved aside
    # The next command restores it before doing its own work: here the same forced export, which finishes.
    assert main(_export_argv(out, "--force", "--tag", "second")) == 0
    manifest = verify_frozen(out)
    assert manifest.tags == ["second"] and (out / "manifest.json").read_bytes() != first
    assert _hidden(out) == []
    ledger("crashes", command="export --force", killed_at="between the two renames", kills=1,
           half_written_folders=0, previous_export_lost=0, leftovers_after_next_export=0, rerun_finished=1)


def test_a_killed_childs_temp_folders_stay_out_of_the_sessions_and_are_removed(tmp_path):
    # What a library's TemporaryDirectory leaves when its process is killed goes to the test's own folder, which
    # is removed with it: the session's temp root (the footprint check of tests/conftest.py) never sees it.
    import os
    import signal
    import subprocess
    import sys
    import tempfile

    session = Path(tempfile.gettempdir())
    child = ("import sys, tempfile, time\nfolder = tempfile.TemporaryDirectory()\n"
             "print(folder.name, flush=True)\ntime.sleep(600)\n")
    with child_temp() as env:
        process = subprocess.Popen([sys.executable, "-c", child], env=env, stdout=subprocess.PIPE, text=True)
        left = Path(process.stdout.readline().strip())
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        process.stdout.close()
        assert process.returncode == -signal.SIGKILL and left.is_dir()  # the kill left it behind
        assert left.parent == Path(env["TMPDIR"]) and session not in left.parents
    assert not left.exists() and not Path(env["TMPDIR"]).exists()
