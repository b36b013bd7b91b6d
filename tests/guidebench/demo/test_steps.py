"""guidebench.demo.steps: the whole story end to end with the embedded model (slow: one quick demo, shared by the
tests that read it), a demo folder that holds other files, and a failed step (fast, fake LM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guidebench import demo
from guidebench.demo import steps
from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.release.gates import GatesConfig

REPO = Path(__file__).resolve().parents[3]
GUIDEBENCH = Path(sys.executable).with_name("guidebench")


def run_demo_cli(out: Path, *extra: str, timeout: float) -> tuple[dict, str]:
    """Run `guidebench demo --quick` as a user would (a subprocess from the repository root): (summary, stdout)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GUIDEBENCH_HOME", "MLFLOW_TRACKING_URI")}
    proc = subprocess.run([str(GUIDEBENCH), "demo", "--quick", "--out", str(out), *extra], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "Traceback" not in proc.stderr
    return json.loads((out / demo.SUMMARY_FILE).read_text()), proc.stdout


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    """`guidebench demo --quick` with the embedded model, run once for every test below: (summary, stdout, OUT).

    Session-scoped: a module fixture would be torn down and run again whenever pytest-xdist gives its
    worker a test of another module between two of these."""
    out = tmp_path_factory.mktemp("quick-demo") / "demo"
    summary, stdout = run_demo_cli(out, "--no-progress", timeout=3600)
    return summary, stdout, out


def row(board: dict, name: str) -> dict:
    """A board row by variant name."""
    return next(r for r in board["rows"] if r["name"] == name)


# One quick demo per test run: the tests below share its session fixture and, under pytest-xdist, one worker
# (`make test` distributes with --dist loadgroup).
@pytest.mark.slow
@pytest.mark.xdist_group("quick_demo")
class TestQuickDemo:
    """What a quick demo with the embedded model produced."""

    def test_runs_every_step_with_the_embedded_model(self, quick_demo):
        summary, stdout, out = quick_demo
        assert summary["status"] == "ok" and summary["mode"] == "quick" and summary["lm"] == "local"
        assert len(summary["steps"]) == 14 and all(step["status"] == "ok" for step in summary["steps"])
        assert set(summary["timings_s"]) == {step["name"] for step in summary["steps"]}
        assert all(seconds >= 0 for seconds in summary["timings_s"].values())
        assert str(out / "export" / demo.PACKAGE_NAME) in stdout  # the exported module is printed
        assert summary["mlflow"]["ui_command"] in stdout
        assert summary["mlflow"]["tracking_uri"].startswith("sqlite:///")
        assert Path(summary["mlflow"]["tracking_uri"][len("sqlite:///"):]).is_file()
        assert (out / "reports" / "baselines.md").is_file()
        assert [(c["program"], c["optimizer"]) for c in summary["compiles"]] == list(demo.COMPILES)

    def test_boards_show_quality_lm_share_and_cost(self, quick_demo):
        summary, stdout, _ = quick_demo
        fullauto, planner = summary["leaderboards"]["full_auto"], summary["leaderboards"]["planner"]
        names = {r["name"] for r in fullauto["rows"]}
        assert {*demo.FULLAUTO_BASELINES, "full_auto.learned+fit", "full_auto.cascade+labeled_fewshot"} <= names
        assert fullauto["n_records"] == summary["datasets"]["fullauto"]["splits"]["test"] >= 20  # the whole split
        assert all(r["objective"] is not None and r["ci_low"] <= r["objective"] <= r["ci_high"] for r in fullauto["rows"])
        assert {"planner.rules", "planner.compact+labeled_fewshot"} <= {r["name"] for r in planner["rows"]}
        # the share of decisions sent to the LM and the cost per 1,000 decisions, next to quality
        learned, cascade = row(fullauto, "full_auto.learned+fit"), row(fullauto, "full_auto.cascade+labeled_fewshot")
        assert learned["lm_share"] == 0.0 and learned["lm_calls_per_1k"] == 0.0 and learned["tokens_per_1k"] == 0.0
        compiled = {c["program"]: c for c in summary["compiles"]}
        assert cascade["lm_share"] == pytest.approx(compiled["full_auto.cascade"]["test_lm_share"])
        assert cascade["lm_decisions_per_1k"] == pytest.approx(1000 * cascade["lm_share"])
        compact = row(planner, "planner.compact+labeled_fewshot")
        assert compact["lm_share"] == 1.0 and compact["tokens_per_1k"] > 0  # the embedded model answered
        for board in (fullauto, planner):
            folder = Path(board["dir"])
            for name in ("leaderboard.json", "leaderboard.md", "leaderboard.html"):
                assert (folder / name).is_file(), name
            assert list(folder.glob("*.png"))
            assert all("comparison" in r for r in json.loads((folder / "leaderboard.json").read_text())["rows"])
        exported = summary["export"]["board_row"]
        assert f"{exported['name']}: objective " in stdout and "of its decisions sent to the LM; per 1,000 decisions" in stdout

    def test_search_tunes_the_cascade_on_dev(self, quick_demo):
        search = quick_demo[0]["search"]
        assert search["trials"] and search["dev_records"] <= demo.QUICK.lm_dev_limit
        assert {"threshold", "lm_program"} <= set(search["best_params"])
        assert search["best_params"]["program"] == demo.CASCADE

    def test_promotion_judges_on_enough_records(self, quick_demo):
        summary = quick_demo[0]
        promotion, needed = summary["promotion"], GatesConfig().min_records  # the demo keeps the default gates
        records = next(c for c in promotion["checks"] if c["gate"] == "records")
        assert records["passed"] is True  # the quick demo's test split is big enough for the gates to judge
        assert promotion["promoted"] == all(c["passed"] for c in promotion["checks"])
        assert promotion["outcome"] == ("promoted" if promotion["promoted"] else "rejected")
        assert summary["leaderboards"]["full_auto"]["n_records"] >= needed

    def test_export_loads_with_the_runtime_and_drives_the_loop(self, quick_demo):
        """The exported module loads with the runtime alone and decides a held-out turn; its loop's logs import back."""
        import dspy

        from evals.data import load_records
        from guidebench.lm.factory import make_lm
        from runtime import load_frozen
        from runtime.fullauto import GuidanceDecision

        summary = quick_demo[0]
        export_dir = Path(summary["export_dir"])
        assert (export_dir / "manifest.json").is_file()
        assert summary["export"]["leaderboard_rank"] == min(
            r["rank"] for r in summary["leaderboards"]["full_auto"]["rows"]
            if r["name"] in {f"{p}+{o}" for p, o in demo.COMPILES})  # the best compiled variant on the board
        module = load_frozen(export_dir)
        record = load_records(summary["datasets"]["fullauto"]["dir"], "test")[0]
        # The fake LM keeps this check fast; the module's state is what is under test here.
        with dspy.context(lm=make_lm("fake", cache=False)):
            enforced, audit, decision_record = module(record.summary, record.config)
        assert isinstance(enforced, GuidanceDecision) and enforced.action in ("continue", "pause", "stop")
        assert decision_record.package_version == summary["export"]["package"]
        assert summary["runtime"]["record_id"] == record.record_id
        assert summary["run_loop"]["decisions"] >= 1
        assert summary["run_loop"]["reimported_records"] == summary["run_loop"]["decisions"]

    def test_a_shadowed_candidate_reaches_a_verdict(self, quick_demo):
        """The candidate decides beside the deployed policy in simulated runs; the sequential gate rejects it."""
        summary, stdout, _ = quick_demo
        shadow = summary["shadow"]
        assert shadow["verdict"] == "reject" and shadow["ledger"] == "rolled_back"
        assert shadow["decided_at"] <= shadow["n"] and shadow["cs"][1] < 0
        assert Path(shadow["plot"]).is_file() and f"shadow gate:     reject after {shadow['decided_at']}" in stdout


# ----- fast: the demo's own pieces ------------------------------------------------------------------


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

    monkeypatch.setattr(steps, "choose_fullauto_subset", broken)
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

    monkeypatch.setattr(steps, "choose_fullauto_subset", broken)
    out = tmp_path / "demo"
    code = main(["demo", "--quick", "--lm", "fake", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["guidebench: error: demo step 'prepare the sample logs' failed: the sample logs are unreadable"]
    summary = json.loads((out / demo.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["steps"][-1]["status"] == "failed"
    assert os.environ["GUIDEBENCH_HOME"] == str(tmp_path / "home")  # the demo restored the environment
