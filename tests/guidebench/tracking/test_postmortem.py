"""guidebench.tracking.postmortem: a post-mortem's table and counts in the active MLflow run."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np

from evals.postmortem import compare_slices, post_mortem
from guidebench.tracking.postmortem import log_comparison, log_postmortem, log_postmortem_file


def _rows(n: int, scores: np.ndarray) -> list[dict]:
    return [{"record_id": f"r{i}", "group_id": f"g{i % 3}", "scores": {"objective": float(scores[i])},
             "slices": {"label": "pause" if i % 4 == 0 else "continue"}, "usage": {"total_tokens": 10},
             "latency_s": 0.01} for i in range(n)]


def test_tables_and_counts_land_in_the_run(tmp_path: Path):
    rng = np.random.default_rng(0)
    champion = _rows(40, rng.choice([0.6, 1.0], size=40))
    challenger = _rows(40, np.where(np.arange(40) % 4 == 0, 0.0, 1.0))
    pm = post_mortem("full_auto", challenger, n_resamples=100)
    against = compare_slices(challenger, champion, "full_auto", n_resamples=100)
    (tmp_path / "postmortem.json").write_text(pm.model_dump_json())
    (tmp_path / "failed.json").write_text(json.dumps({"error": "post-mortem not computed: RuntimeError: boom"}))
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = mlflow.set_experiment("postmortem")  # not the experiment an earlier test made active
    with mlflow.start_run(experiment_id=experiment.experiment_id) as run:
        log_postmortem(pm)
        log_comparison(against, prefix="test.")
        log_postmortem_file(tmp_path / "failed.json", prefix="dev.")  # a failed post-mortem logs nothing
        log_postmortem_file(None)
    client = mlflow.MlflowClient()
    local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl")))
    table = json.loads((local / "postmortem_slices.json").read_text())
    assert len(table["data"]) == len(pm.table()) and "objective.ci_low" in table["columns"]
    versus = json.loads((local / "test" / "postmortem_vs_champion.json").read_text())
    assert {"diff", "ci_low", "ci_high", "p_value", "q_value", "verdict"} <= set(versus["columns"])
    metrics = client.get_run(run.info.run_id).data.metrics
    assert metrics["postmortem.n_below.slices"] == sum(s.outlier for s in pm.slices) >= 1  # label = pause
    assert metrics["test.postmortem.vs_champion.n_loses"] == len(against.verdicts("loses"))
    assert not any(key.startswith("dev.") for key in metrics)


def test_an_in_sample_postmortem_is_tagged_and_counts_no_win(tmp_path: Path):
    rng = np.random.default_rng(1)
    champion = _rows(40, rng.choice([0.0, 1.0], size=40))
    challenger = _rows(40, np.ones(40))
    why = "40 of the 40 records of split dev of dataset aaaaaaaaaaaa are records the program learned from"
    pm = post_mortem("full_auto", challenger, n_resamples=100, in_sample=why)
    against = compare_slices(challenger, champion, "full_auto", n_resamples=100, in_sample=f"p: {why}")
    assert compare_slices(challenger, champion, "full_auto", n_resamples=100).verdicts("wins")  # out of sample
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = mlflow.set_experiment("postmortem-in-sample")
    with mlflow.start_run(experiment_id=experiment.experiment_id) as run:
        log_postmortem(pm, prefix="dev.")
        log_comparison(against, prefix="dev.")
    data = mlflow.MlflowClient().get_run(run.info.run_id).data
    assert data.tags["dev.postmortem.in_sample"] == why
    assert data.tags["dev.vs_champion.postmortem.in_sample"] == f"p: {why}"
    assert data.metrics["dev.postmortem.vs_champion.n_wins"] == 0
