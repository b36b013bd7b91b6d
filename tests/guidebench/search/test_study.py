"""guidebench.search.study: `guidebench search` with one nested MLflow run per trial, resumed by running it
again (the Optuna study itself is tested in tests/optimizers/test_search.py)."""

from __future__ import annotations

import sys

import mlflow
import optuna
import pytest

from guidebench.cli import main
from optimizer_support import make_dataset, tracking_uri


def test_search_cli_logs_a_nested_mlflow_run_per_trial_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=2)
    uri = tracking_uri(tmp_path)
    args = ["search", "--program-family", "full_auto", "--data", str(data), "--lm", "fake", "--no-progress",
            "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot,knn_fewshot", "--demos", "1:3",
            "--tracking-uri", uri, "--out", str(tmp_path / "out")]
    assert main([*args, "--trials", "2"]) == 0
    assert main([*args, "--trials", "3"]) == 0
    out = capsys.readouterr().out
    assert "ran 1 trial(s) now; 3 in the study" in out
    mlflow.set_tracking_uri(uri)
    parents = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                 filter_string="tags.`guidebench.run_type` = 'search'")
    assert len(parents) == 1 and parents[0].data.params["lib.optuna"] == optuna.__version__
    parent = parents[0]
    assert parent.data.metrics["trials.finished"] == 3 and "best.optimizer" in parent.data.tags
    trials = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(r.info.run_name for r in trials) == ["trial 0", "trial 1", "trial 2"]
    for run in trials:
        assert {"trial.program", "trial.optimizer", "trial.demos", "trial.temperature"} <= set(run.data.params)
        assert "dev.objective" in run.data.metrics and run.data.tags["optuna.state"] == "COMPLETE"
    for name in ("trials.json", "trials.png", "program.json", "recipe.toml"):
        assert (tmp_path / "out" / name).is_file(), name
    assert 'optimizer = "' in (tmp_path / "out" / "recipe.toml").read_text()


@pytest.mark.slow
def test_search_runs_one_trial_with_the_embedded_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=6, dev=2, test=1)
    code = main(["search", "--program-family", "full_auto", "--data", str(data), "--trials", "1", "--lm", "local",
                 "--programs", "full_auto.predict", "--optimizers", "knn_fewshot", "--demos", "2:2",
                 "--temperature", "0.2:0.2", "--no-progress", "--tracking-uri", tracking_uri(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "ran 1 trial(s) now" in out and "best: trial 0" in out
    print(out, file=sys.stderr)
