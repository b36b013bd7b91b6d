"""`guidebench postmortem`: prints an eval's post-mortem from its folder or its MLflow run, recomputes an older
eval's (naming the slices it lacks), compares two evals of the same records slice by slice, prints a board's
section, and answers bad input in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from guidebench.cli import main
from guidebench.leaderboard.board import run_leaderboard
from guidebench.leaderboard.packages import from_registry
from guidebench.leaderboard.render import JSON_FILE, write_reports

from leaderboard_support import make_dataset


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    """Two tracked evals of the same 48 records (`rule`, `logged`), their run ids and the tracking URI."""
    root = tmp_path_factory.mktemp("postmortem-cmd")
    data = make_dataset(root / "data", n=60, seed=4)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(root / "home"))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        folders = {}
        for program in ("rule", "logged"):
            out = root / program
            assert main(["eval", "--program", program, "--data", str(data), "--out", str(out), "--tracking-uri", uri,
                         "--resamples", "100", "--no-progress"]) == 0
            folders[program] = out
        yield {"data": data, "uri": uri, "root": root, **folders,
               "run": json.loads((folders["rule"] / "summary.json").read_text())["mlflow_run_id"]}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["postmortem", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_eval_folder_prints_its_stored_postmortem(evals, capsys):
    code, out, _ = _run(capsys, str(evals["rule"]))
    assert code == 0 and out == (evals["rule"] / "postmortem.md").read_text()


def test_an_mlflow_run_prints_the_same_and_holds_the_slice_table(evals, capsys):
    from mlflow.tracking import MlflowClient

    code, out, _ = _run(capsys, evals["run"], "--tracking-uri", evals["uri"])
    assert code == 0 and out == (evals["rule"] / "postmortem.md").read_text()
    client = MlflowClient(tracking_uri=evals["uri"])
    artifacts = {item.path for item in client.list_artifacts(evals["run"])}
    assert {"postmortem.json", "postmortem.md", "postmortem_slices.json"} <= artifacts
    table = json.loads(Path(client.download_artifacts(evals["run"], "postmortem_slices.json",
                                                      str(evals["root"] / "dl"))).read_text())
    stored = json.loads((evals["rule"] / "postmortem.json").read_text())
    assert len(table["data"]) == len(stored["slices"]) + len(stored["pairs"]) + len(stored["groups"])
    metrics = client.get_run(evals["run"]).data.metrics
    assert metrics["postmortem.n_tested.slices"] == sum(1 for s in stored["slices"] if not s["untested"])


def test_an_eval_written_before_postmortems_is_recomputed_and_names_the_slices_it_lacks(evals, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(evals["rule"], old)
    (old / "postmortem.json").unlink()
    (old / "postmortem.md").unlink()
    frame = pd.read_parquet(old / "results.parquet")
    frame.drop(columns=[c for c in frame.columns if c.startswith("slice.")]).to_parquet(old / "results.parquet")
    code, out, _ = _run(capsys, str(old))
    assert code == 0
    assert ("note: these results carry no label_reason, last_turn_status, guardrail_rule, pending, turn_band, "
            "no_progress, run_config (written before post-mortems)") in out
    assert "| label | continue |" in out and "# Post-mortem: full_auto.rules (full_auto), 48 records" in out


def test_against_names_where_the_challenger_wins_and_loses(evals, capsys):
    code, out, _ = _run(capsys, str(evals["rule"]), "--against", str(evals["logged"]), "--min-n", "6")
    assert code == 0
    assert "## full_auto.rules vs logged, by slice" in out
    for line in ("- loses (q ≤ 0.05): ", "- wins (q ≤ 0.05): ", "- lower, not significant: "):
        assert line in out
    assert "minimum n per slice value: 6" in out  # --min-n recomputes the program's own post-mortem too
    code, out, _ = _run(capsys, str(evals["rule"]), "--against", str(evals["logged"]), "--json")
    parsed = json.loads(out)
    assert parsed["against"]["champion"] == "logged" and parsed["postmortem"]["program"] == "full_auto.rules"


def test_a_board_folder_prints_its_postmortem_section(evals, tmp_path, capsys):
    board, _ = run_leaderboard(from_registry(["logged", "rule"]), evals["data"], "test", champion="logged",
                               n_resamples=100)
    out_dir = tmp_path / "board"
    write_reports(board, out_dir)
    code, out, _ = _run(capsys, str(out_dir))
    assert code == 0 and out.startswith("## Post-mortem\n") and "### rule vs logged, by slice" in out
    data = json.loads((out_dir / JSON_FILE).read_text())
    del data["postmortem"]
    (out_dir / JSON_FILE).write_text(json.dumps(data))
    code, _, err = _run(capsys, str(out_dir))
    assert code == 2 and "written before post-mortems" in err and err.count("\n") == 1


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such folder, and not an MLflow run id"),
    ("empty", "no results.parquet, postmortem.json or leaderboard.json in it"),
    ("damaged", "results.parquet: unreadable"),
    ("other-records", "were not replayed on the same records"),
    ("bad-fdr", "guidebench postmortem: error: argument --fdr: 2: expected a number above 0 and below 1"),
    ("fdr-one", "argument --fdr: 1: expected a number above 0 and below 1"),
    ("fdr-nan", "argument --fdr: nan: expected a number above 0 and below 1"),
    ("min-n-zero", "guidebench postmortem: error: argument --min-n: 0: expected a whole number at least 1"),
    ("unknown-run", "not a run of"),
])
def test_bad_input_is_one_line(evals, tmp_path, capsys, case, expected):
    args = {"missing": [str(tmp_path / "nope")], "empty": [str(tmp_path)],
            "bad-fdr": [str(evals["rule"]), "--fdr", "2"], "fdr-one": [str(evals["rule"]), "--fdr", "1"],
            "fdr-nan": [str(evals["rule"]), "--fdr", "nan"], "min-n-zero": [str(evals["rule"]), "--min-n", "0"],
            "unknown-run": ["0" * 32, "--tracking-uri", evals["uri"]]}.get(case)
    if case == "damaged":
        shutil.copytree(evals["rule"], tmp_path / "damaged")
        (tmp_path / "damaged" / "postmortem.json").unlink()
        (tmp_path / "damaged" / "results.parquet").write_bytes(b"PAR1 not really")
        args = [str(tmp_path / "damaged")]
    if case == "other-records":
        assert main(["eval", "--program", "logged", "--data", str(evals["data"]), "--out", str(tmp_path / "few"),
                     "--no-track", "--max-records", "10", "--resamples", "50", "--no-progress"]) == 0
        args = [str(evals["rule"]), "--against", str(tmp_path / "few")]
    code, _, err = _run(capsys, *args)
    assert code == 2 and expected in err and err.count("\n") == 1, err


def test_an_eval_on_records_the_program_learned_from_is_in_sample(fitted, tmp_path, capsys):
    """`guidebench postmortem` on the fit's own dev eval (also one whose postmortem.json predates the field, and
    against another eval of the same records) says it is in-sample first and draws no win or loss."""
    summary = json.loads((fitted["fit"] / "dev" / "summary.json").read_text())
    why = f"In-sample, not evidence: {summary['learned_from']['n_overlap']} of the "
    code, out, _ = _run(capsys, str(fitted["fit"] / "dev"))
    assert code == 0 and out.startswith("# Post-mortem: ") and out.splitlines()[2].startswith(f"> **{why}")
    older = tmp_path / "older"
    shutil.copytree(fitted["fit"] / "dev", older)
    stored = json.loads((older / "postmortem.json").read_text())
    stored.pop("in_sample")
    (older / "postmortem.json").write_text(json.dumps(stored))
    code, out, _ = _run(capsys, str(older))
    assert code == 0 and out.splitlines()[2].startswith(f"> **{why}")
    assert main(["eval", "--program", "logged", "--data", str(fitted["ds"]), "--split", "dev", "--out",
                 str(tmp_path / "logged"), "--resamples", "100", "--no-progress", "--tracking-uri",
                 f"sqlite:///{tmp_path / 'mlflow.db'}"]) == 0
    capsys.readouterr()
    code, out, _ = _run(capsys, str(fitted["fit"] / "dev"), "--against", str(tmp_path / "logged"))
    comparison = out.split(" vs ", 1)[1]
    assert code == 0 and "- no wins or losses: In-sample, not evidence: " in comparison
    assert "wins (q ≤" not in comparison and "loses (q ≤" not in comparison
    code, out, _ = _run(capsys, str(tmp_path / "logged"), "--against", str(fitted["fit"] / "dev"), "--json")
    against = json.loads(out)["against"]
    assert code == 0 and against["in_sample"].startswith("full_auto.learned+fit: ") and not any(
        row["verdict"] in ("wins", "loses") for row in against["slices"])


@pytest.mark.parametrize("damage", ["results", "summary"])
def test_it_reads_an_eval_folder_as_a_board_does_and_says_the_same_line(evals, tmp_path, capsys, damage):
    # One reader of an eval folder (guidebench.leaderboard.results.read_eval_folder): what a board's --results
    # refuses, the post-mortem refuses in the same words.
    folder = tmp_path / "damaged"
    shutil.copytree(evals["rule"], folder)
    (folder / "postmortem.json").unlink()
    if damage == "results":
        (folder / "results.parquet").write_bytes(b"PAR1 not really")
    else:
        (folder / "summary.json").write_text("[1, 2]\n")
    code, _, err = _run(capsys, str(folder))
    assert code == 2 and err.count("\n") == 1, err
    board = main(["leaderboard", "--data", str(evals["data"]), "--programs", "logged", "--results", str(folder),
                  "--no-track", "--out", str(tmp_path / "board"), "--resamples", "50"])
    board_err = capsys.readouterr().err
    assert board == 2 and board_err.strip().splitlines()[-1] == err.strip(), board_err
    expected = "results.parquet: unreadable" if damage == "results" else \
        "summary.json: not the summary of a guidebench eval (not a JSON object)"
    assert expected in err
