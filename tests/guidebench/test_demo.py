"""`guidebench demo`: the whole story end to end (slow), and the demo's own pieces (fast)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guidebench import demo
from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.release.gates import GatesConfig

REPO = Path(__file__).resolve().parents[2]
GUIDEBENCH = Path(sys.executable).with_name("guidebench")


def run_demo_cli(out: Path, *extra: str, timeout: float) -> dict:
    """Run `guidebench demo --quick` as a user would (a subprocess from the repository root)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GUIDEBENCH_HOME", "MLFLOW_TRACKING_URI")}
    proc = subprocess.run([str(GUIDEBENCH), "demo", "--quick", "--out", str(out), *extra], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "Traceback" not in proc.stderr
    summary = json.loads((out / demo.SUMMARY_FILE).read_text())
    assert str(out / "export" / demo.PACKAGE_NAME) in proc.stdout  # the exported module is printed
    assert summary["mlflow"]["ui_command"] in proc.stdout
    return summary


def check_summary(summary: dict, out: Path) -> None:
    """What a finished demo must have produced, whatever the LM."""
    assert summary["status"] == "ok" and summary["mode"] == "quick"
    assert len(summary["steps"]) == 14 and all(step["status"] == "ok" for step in summary["steps"])
    assert set(summary["timings_s"]) == {step["name"] for step in summary["steps"]}
    assert all(seconds >= 0 for seconds in summary["timings_s"].values())

    fullauto = summary["leaderboards"]["full_auto"]
    names = {row["name"] for row in fullauto["rows"]}
    assert {"logged", "rule", "full_auto.always_continue", "full_auto.predict"} <= names
    assert {"full_auto.predict+labeled_fewshot", "full_auto.predict+knn_fewshot"} <= names
    assert all(row["objective"] is not None and row["ci_low"] <= row["objective"] <= row["ci_high"]
               for row in fullauto["rows"])
    planner = summary["leaderboards"]["planner"]
    assert {"planner.rules", "planner.predict", "planner.predict+labeled_fewshot",
            "planner.predict+knn_fewshot"} <= {row["name"] for row in planner["rows"]}
    for board in (fullauto, planner):
        folder = Path(board["dir"])
        for name in ("leaderboard.json", "leaderboard.md", "leaderboard.html"):
            assert (folder / name).is_file(), name
        assert list(folder.glob("*.png"))
        rows = json.loads((folder / "leaderboard.json").read_text())["rows"]
        assert all("comparison" in row for row in rows)
    assert (out / "reports" / "baselines.md").is_file()
    assert len([c for c in summary["compiles"] if c["family"] == "full_auto"]) >= 2
    assert len([c for c in summary["compiles"] if c["family"] == "planner"]) >= 2
    assert summary["search"]["trials"] and summary["search"]["best_params"]
    # the quick demo's test split (3 records) cannot show a difference: no promotion, and it says why
    test_records = summary["leaderboards"]["full_auto"]["n_records"]
    assert test_records == 3
    assert summary["promotion"]["outcome"] == "rejected" and summary["promotion"]["promoted"] is False
    needed = GatesConfig().min_records  # the demo keeps the default gates
    records = next(c for c in summary["promotion"]["checks"] if c["gate"] == "records")
    assert records["passed"] is False
    assert records["reason"] == f"not enough evidence to promote (n = {test_records}; at least {needed} needed)"
    assert summary["run_loop"]["decisions"] >= 1
    assert summary["run_loop"]["reimported_records"] == summary["run_loop"]["decisions"]
    assert summary["mlflow"]["tracking_uri"].startswith("sqlite:///")
    assert Path(summary["mlflow"]["tracking_uri"][len("sqlite:///"):]).is_file()


def check_export_loads(summary: dict) -> None:
    """The exported module loads with the runtime alone and decides a held-out turn."""
    import dspy

    from evals.data import load_records
    from guidebench.lm.factory import make_lm
    from runtime import load_frozen
    from runtime.fullauto import GuidanceDecision

    export_dir = Path(summary["export_dir"])
    assert export_dir.is_dir() and (export_dir / "manifest.json").is_file()
    module = load_frozen(export_dir)
    record = load_records(summary["datasets"]["fullauto"]["dir"], "test")[0]
    # The fake LM keeps this check fast; the module's state (demos) is what is under test here.
    with dspy.context(lm=make_lm("fake", cache=False)):
        enforced, audit, decision_record = module(record.summary, record.config)
    assert isinstance(enforced, GuidanceDecision) and enforced.action in ("continue", "pause", "stop")
    assert decision_record.package_version == summary["export"]["package"]


@pytest.mark.slow
def test_demo_quick_end_to_end_with_the_embedded_model(tmp_path: Path):
    out = tmp_path / "demo"
    summary = run_demo_cli(out, "--no-progress", timeout=3600)
    check_summary(summary, out)
    assert summary["lm"] == "local"
    check_export_loads(summary)


@pytest.mark.slow
def test_demo_quick_plumbing_with_the_fake_lm(tmp_path: Path):
    out = tmp_path / "demo"
    summary = run_demo_cli(out, "--lm", "fake", timeout=1200)
    check_summary(summary, out)
    check_export_loads(summary)


# ----- fast: the demo's own pieces ------------------------------------------------------------------

@pytest.mark.parametrize("plan", [demo.QUICK, demo.FULL], ids=lambda p: p.name)
def test_subset_gives_the_planned_split_sizes(plan: demo.Plan, tmp_path: Path):
    from guidebench.data import import_logs

    sample = demo.sample_dir()
    subset = demo.choose_fullauto_subset(sample, plan)
    assert len(subset.threads) == plan.fullauto_threads
    assert plan.dev_records[0] <= subset.expected["dev"] <= plan.dev_records[1]
    assert plan.test_records[0] <= subset.expected["test"] <= plan.test_records[1]
    copied = demo.write_fullauto_subset(sample, subset, tmp_path / "logs")
    assert copied == sum(subset.expected.values())
    report = import_logs(tmp_path / "logs", "fullauto", tmp_path / "data", seed=subset.seed, progress=False)
    assert report.splits == subset.expected and report.quarantined == 0
    # whole threads were copied, each in one split (the import groups by thread)
    from evals.data import SPLITS, load_records

    threads = {name: {r.thread_id for r in load_records(tmp_path / "data", name)} for name in SPLITS}
    assert set().union(*threads.values()) == set(subset.threads)
    assert sum(len(found) for found in threads.values()) == len(subset.threads)
    assert report.model_dump()["labeled"] == copied


def test_gates_and_recipes_written_by_the_demo_load(tmp_path: Path):
    import optimizers
    from guidebench.release.gates import load_gates

    gates_file = tmp_path / "gates.toml"
    gates_file.write_text(demo.gates_text(4))
    gates = load_gates(gates_file)
    assert gates.min_records == 20 and gates.max_p_value == 0.05 and gates.max_increase["parse_failure_rate"] == 0.0
    for optimizer in demo.OPTIMIZERS:
        recipe_file = tmp_path / f"{optimizer}.toml"
        recipe_file.write_text(demo.recipe_text(optimizer, 2))
        recipe = optimizers.load(name=optimizer, path=str(recipe_file))
        assert recipe.settings.k == 2


def test_board_summary_prints_n_test_and_verdict_next_to_the_numbers():
    from evals.stats import bootstrap_mean, paired_mean_difference

    champion = [1.0, 0.0, 0.5]

    def row(rank: int, name: str, values: list[float]) -> dict:
        paired = paired_mean_difference(values, champion, n_resamples=200)
        return {"rank": rank, "name": name, "champion": values is champion, "cost": {"total_tokens": 0.0},
                "metrics": {"objective": bootstrap_mean(values, n_resamples=200).to_dict()},
                "comparison": {"against": "logged", "metric": "objective", **paired.to_dict()}}

    rows = demo.board_rows({"rows": [row(1, "candidate", [1.0, 1.0, 1.0]), row(2, "logged", champion)]})
    header, candidate, logged = demo.format_rows(rows)
    assert " n " in header and "test vs champion" in header and "verdict" in header
    assert rows[0]["n_compared"] == 3 and rows[0]["test"] == "exact permutation test"
    assert rows[0]["test_detail"] == "exact permutation test (8 assignments)"
    assert rows[0]["verdict"].startswith("cannot tell apart (p = ") and rows[0]["verdict"].endswith("n = 3)")
    assert " 3  exact permutation test " in candidate and rows[0]["verdict"] in candidate
    assert rows[1]["verdict"] == "champion" and "champion" in logged


def test_out_holding_other_files_is_refused(tmp_path: Path, monkeypatch, capsys):
    from guidebench.outputs import read_marker

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    argv = ["demo", "--quick", "--lm", "fake", "--no-progress", "--out"]
    assert main([*argv, str(notes), "--force"]) == 2
    assert "holds other files" in capsys.readouterr().err
    assert (notes / "notes.txt").read_text() == "mine"

    def broken(*_args, **_kwargs):  # the demo stops at its first step: enough to own the folder
        raise GuidebenchError("stop here")

    monkeypatch.setattr(demo, "choose_fullauto_subset", broken)
    earlier = tmp_path / "earlier"
    assert main([*argv, str(earlier)]) == 2
    assert read_marker(earlier)["command"] == "demo"
    assert demo.SUMMARY_FILE in read_marker(earlier)["files"]  # what it wrote before it stopped is listed
    capsys.readouterr()
    assert main([*argv, str(earlier)]) == 2  # an earlier demo is replaced only with --force
    assert "pass --force to replace it" in capsys.readouterr().err
    (earlier / "old.txt").write_text("yours, put in the demo's folder")
    assert main([*argv, str(earlier), "--force"]) == 2  # and never with a file of yours in it
    assert "holds old.txt, which `guidebench demo` did not write" in capsys.readouterr().err
    assert (earlier / "old.txt").exists()
    (earlier / "old.txt").unlink()
    first = read_marker(earlier)["at"]
    assert main([*argv, str(earlier), "--force"]) == 2
    assert read_marker(earlier)["state"] == "failed" and (earlier / demo.SUMMARY_FILE).is_file()
    assert "stop here" in read_marker(earlier)["error"] and read_marker(earlier)["at"] >= first


def test_a_failed_step_ends_the_demo_with_one_line_naming_it(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))

    def broken(*_args, **_kwargs):
        raise GuidebenchError("the sample logs are unreadable")

    monkeypatch.setattr(demo, "choose_fullauto_subset", broken)
    out = tmp_path / "demo"
    code = main(["demo", "--quick", "--lm", "fake", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["guidebench: error: demo step 'prepare the sample logs' failed: the sample logs are unreadable"]
    summary = json.loads((out / demo.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["steps"][-1]["status"] == "failed"
    assert os.environ["GUIDEBENCH_HOME"] == str(tmp_path / "home")  # the demo restored the environment
