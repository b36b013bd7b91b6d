"""guidebench.leaderboard.tracking: a tracked board links each row to its own MLflow run, in the JSON and in
the Markdown and HTML reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guidebench.cli import main
from guidebench.leaderboard.render import HTML_FILE, JSON_FILE, MARKDOWN_FILE
from guidebench.leaderboard.tracking import run_url

from leaderboard_support import make_dataset, register_test_programs


def test_run_url_points_at_the_ui_and_never_copies_credentials() -> None:
    assert run_url("sqlite:////tmp/mlflow.db", "abc") == "http://127.0.0.1:5000/#/runs/abc"
    assert run_url("https://user:secret@mlflow.example.com:8443/base/", "abc") == \
        "https://mlflow.example.com:8443/base/#/runs/abc"
    assert run_url("http://127.0.0.1:5001", "abc") == "http://127.0.0.1:5001/#/runs/abc"


def test_each_row_links_to_its_mlflow_run(tmp_path: Path, monkeypatch, capsys) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    register_test_programs()
    data = make_dataset(tmp_path / "data", n=24, seed=1)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "board"
    code = main(["leaderboard", "--data", str(data), "--programs", "rule,full_auto.always_continue",
                 "--tracking-uri", uri, "--out", str(out), "--resamples", "50"])
    assert code == 0, capsys.readouterr().err
    board = json.loads((out / JSON_FILE).read_text())
    client = MlflowClient(tracking_uri=uri)
    markdown = (out / MARKDOWN_FILE).read_text()
    page = (out / HTML_FILE).read_text()
    for row in board["rows"]:
        run = client.get_run(row["mlflow_run_id"])
        assert run.data.tags["mlflow.parentRunId"] == board["mlflow_run_id"]
        assert run.data.tags["guidebench.variant"] == row["name"]
        assert run.data.metrics["objective"] == pytest.approx(row["metrics"]["objective"]["value"])
        assert row["mlflow_url"] == f"http://127.0.0.1:5000/#/runs/{run.info.run_id}"
        assert f"- {row['name']}: [{run.info.run_id}]({row['mlflow_url']})" in markdown
        assert f'<a href="{row["mlflow_url"]}">{run.info.run_id}</a>' in page
        artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
        assert "postmortem_slices.json" in artifacts  # the row's post-mortem, as a table
        assert ("postmortem_vs_champion.json" in artifacts) == (row["name"] != board["champion"])
        assert "postmortem.n_tested.slices" in run.data.metrics
