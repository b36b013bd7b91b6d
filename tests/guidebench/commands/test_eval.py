"""`guidebench eval`: metrics.json with intervals, results.parquet, MLflow run, clean errors; records the program
learned from flagged in every output."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import programs
from guidebench.simulators.experiments import write_episodes
from guidebench.cli import main
from replay_support import RaisingProgram, expected_override_rate, hand_made_lines, write_workspace

METRIC_KEYS = {"value", "ci_low", "ci_high", "n", "method", "n_resamples"}  # the interval names its method


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return write_workspace(tmp_path_factory.mktemp("ws") / "workspace")


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def read_metrics(out: Path) -> dict:
    metrics = json.loads((out / "metrics.json").read_text())
    for name, value in metrics.items():
        # a planner's improvement metrics name their estimator, and its metrics the episodes they resampled
        assert set(value) - {"estimator", "n_groups"} == METRIC_KEYS, name
        if value["method"] == "too_few_groups":  # fewer than 10 episodes: the value, no interval
            assert value["ci_low"] is None and value["ci_high"] is None and value["n_groups"] < 10, name
        else:
            assert value["ci_low"] <= value["value"] <= value["ci_high"], name
        assert value["n"] > 0, name
    return metrics


def test_eval_logged_on_a_real_format_log_reports_its_override_rate(workspace, tmp_path, tracking_uri, capsys):
    out = tmp_path / "out"
    code = main(["eval", "--program", "logged", "--data", str(workspace), "--out", str(out),
                 "--tracking-uri", tracking_uri, "--no-progress"])
    assert code == 0
    metrics = read_metrics(out)
    assert metrics["guardrail_override_rate"]["value"] == pytest.approx(expected_override_rate(hand_made_lines()))
    assert metrics["guardrail_override_rate"]["n"] == 10
    for name in ("objective", "action_accuracy", "macro_f1", "ece", "brier", "cost_weighted_error"):
        assert name in metrics
    frame = pd.read_parquet(out / "results.parquet")
    assert len(frame) == 10 and frame["record_id"].is_unique
    assert (out / "confusion_matrix.png").stat().st_size > 0 and (out / "calibration.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "guardrail_override_rate" in printed and "95% interval" in printed

    import mlflow
    summary = json.loads((out / "summary.json").read_text())
    client = mlflow.tracking.MlflowClient(tracking_uri=tracking_uri)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.data.params["program"] == "logged"
    assert run.data.params["dataset_id"] == summary["dataset_id"]
    assert run.data.params["split"] == "all" and run.data.params["split_hash"] == summary["split_hash"]
    assert run.data.params["lib.dspy"] == "3.4.1" and "git_commit" in run.data.params
    assert run.data.metrics["guardrail_override_rate"] == pytest.approx(0.5)
    assert "guardrail_override_rate_ci_low" in run.data.metrics and "objective_ci_high" in run.data.metrics
    artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
    assert {"metrics.json", "results.parquet", "confusion_matrix.png", "calibration.png"} <= artifacts
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags["guidebench.dataset_id"] == summary["dataset_id"]


def test_eval_on_a_dataset_folder_uses_the_test_split_by_default(workspace, tmp_path):
    from guidebench.data import import_logs

    import_logs(workspace, "fullauto", tmp_path / "ds", progress=False)
    info = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    assert main(["eval", "--program", "rule", "--data", str(tmp_path / "ds"), "--out", str(tmp_path / "test"),
                 "--no-track", "--no-progress"]) == 0
    summary = json.loads((tmp_path / "test" / "summary.json").read_text())
    assert summary["split"] == "test" and summary["split_hash"] == info["splits"]["test"]["hash"]
    assert summary["n_records"] == info["splits"]["test"]["n"]
    assert main(["eval", "--program", "rule", "--data", str(tmp_path / "ds"), "--split", "all",
                 "--out", str(tmp_path / "all"), "--no-track", "--no-progress"]) == 0
    assert json.loads((tmp_path / "all" / "summary.json").read_text())["n_records"] == 10


def test_a_program_that_raises_on_some_records_yields_a_complete_report(workspace, tmp_path):
    programs.register("test.raising", RaisingProgram, kind="full_auto", uses_lm=False,
                      description="raises on some records", replace=True)
    out = tmp_path / "out"
    assert main(["eval", "--program", "test.raising", "--data", str(workspace), "--out", str(out),
                 "--no-track", "--no-progress"]) == 0
    metrics = read_metrics(out)
    assert metrics["error_rate"]["value"] == pytest.approx(0.2)
    frame = pd.read_parquet(out / "results.parquet")
    assert len(frame) == 10
    failed = frame[frame["error.class"].notna()]
    assert set(failed["error.class"]) == {"RuntimeError"} and set(failed["error.stage"]) == {"program"}
    assert failed["error.stack"].str.contains("backend exploded").all()
    assert (failed["score.objective"].dropna() == 0.0).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_errors"] == 2 and summary["errors_by_class"] == {"RuntimeError": 2}


def test_eval_an_lm_program_with_the_fake_lm(workspace, tmp_path):
    out = tmp_path / "out"
    assert main(["eval", "--program", "full_auto.predict", "--lm", "fake", "--data", str(workspace),
                 "--out", str(out), "--threads", "2", "--no-track", "--no-progress"]) == 0
    metrics = read_metrics(out)
    assert metrics["lm_calls_per_decision"]["value"] >= 1.0
    assert metrics["parse_failure_rate"]["value"] == 0.0


@pytest.mark.parametrize("name, sample", [("full_auto.compact", "fullauto"), ("planner.compact", "experiments")])
def test_eval_the_compact_programs_on_the_sample_data_with_the_fake_lm(tmp_path, name, sample):
    data = Path(__file__).resolve().parents[3] / "datasets" / "sample" / sample
    out = tmp_path / "out"
    assert main(["eval", "--program", name, "--lm", "fake", "--data", str(data), "--max-records", "12",
                 "--out", str(out), "--no-track", "--no-progress"]) == 0
    metrics = read_metrics(out)
    assert metrics["lm_calls_per_decision"]["value"] == 1.0 and metrics["parse_failure_rate"]["value"] == 0.0
    assert metrics["error_rate"]["value"] == 0.0 and metrics["objective"]["n"] == 12


def test_eval_an_exported_module_folder(workspace, tmp_path):
    export = tmp_path / "export"
    assert main(["export", "--program", "full_auto.predict", "--name", "fa-predict", "--version", "1.0.0",
                 "--out", str(export)]) == 0
    out = tmp_path / "out"
    assert main(["eval", "--program", str(export), "--lm", "fake", "--data", str(workspace), "--out", str(out),
                 "--no-track", "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["program_source"] == "export" and summary["entry"] == "full_auto.predict"
    assert "fa-predict" in summary["program"]
    assert read_metrics(out)["lm_calls_per_decision"]["value"] >= 1.0


def test_an_export_whose_kind_was_edited_is_refused_not_scored_on_the_other_loops_data(tmp_path, capsys):
    """The manifest's kind changed to planner, checksums recomputed: eval loads it as load_frozen does (one path)."""
    from frozen_support import edit_json

    export = tmp_path / "export"
    assert main(["export", "--program", "full_auto.rules", "--name", "fa", "--version", "1.0.0",
                 "--out", str(export)]) == 0
    edit_json(export, "manifest.json", lambda m: m.update(kind="planner", compatible_with="AdvisorPacket@v1"))
    write_episodes(tmp_path / "logs", episodes=1, seed=5)
    capsys.readouterr()
    assert main(["eval", "--program", str(export), "--data", str(tmp_path / "logs"), "--out", str(tmp_path / "out"),
                 "--no-track", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"--program {export}: frozen module {export} refused: manifest.json " \
        "declares kind planner, but its signature FullAutoDecisionSignature answers a full_auto module's" in err
    assert not (tmp_path / "out").exists()


def test_records_the_program_learned_from_are_flagged_in_every_output(fitted, tmp_path, tracking_uri, capsys):
    from mlflow.tracking import MlflowClient

    from evals.data import dataset_info

    info = dataset_info(fitted["ds"])
    n = info["splits"]["dev"]["n"]
    out = tmp_path / "dev"
    assert main(["eval", "--program", str(fitted["ex"]), "--data", str(fitted["ds"]), "--split", "dev", "--out",
                 str(out), "--tracking-uri", tracking_uri, "--no-progress"]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning")]
    assert warnings == [f"warning: {n} of the {n} records of split dev of dataset {info['dataset_id'][:12]} are "
                        f"records the program learned from (train {info['splits']['train']['n']} + dev {n} of dataset "
                        f"{info['dataset_id'][:12]}): its scores there are not evidence; judge it on split test"]
    metrics = read_metrics(out)
    assert metrics["learned_from_overlap"]["value"] == n and metrics["learned_from_overlap"]["n"] == n
    summary = json.loads((out / "summary.json").read_text())
    assert summary["learned_from"]["status"] == "overlap" and summary["learned_from"]["n_overlap"] == n
    assert summary["provenance"]["splits"] == {"train": info["splits"]["train"]["n"], "dev": n}
    run = MlflowClient(tracking_uri=tracking_uri).get_run(summary["mlflow_run_id"])
    assert run.data.params["learned_from"] == "overlap" and run.data.params["learned_from_overlap"] == str(n)
    assert run.data.metrics["learned_from_overlap"] == n
    # its post-mortem is in-sample: postmortem.md opens with it, and the run is tagged
    line = warnings[0][len("warning: "):]
    assert json.loads((out / "postmortem.json").read_text())["in_sample"] == line
    assert (out / "postmortem.md").read_text().splitlines()[2] == (
        f"> **In-sample, not evidence: {line}. Its slices describe how it fits records it learned from; no slice is "
        "a win or a loss.**")
    assert run.data.tags["postmortem.in_sample"] == line
    # its test split: nothing to flag, and the summary says so
    assert main(["eval", "--program", str(fitted["ex"]), "--data", str(fitted["ds"]), "--out", str(tmp_path / "test"),
                 "--no-track", "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().out and "learned_from_overlap" not in read_metrics(tmp_path / "test")
    assert json.loads((tmp_path / "test" / "postmortem.json").read_text())["in_sample"] == ""
    assert "In-sample" not in (tmp_path / "test" / "postmortem.md").read_text()
    assert json.loads((tmp_path / "test" / "summary.json").read_text())["learned_from"]["n_overlap"] == 0


def test_a_program_with_labeled_demos_is_flagged_on_the_records_it_drew_them_from(tmp_path, capsys, restore_lm):
    from optimizer_support import make_dataset, tracking_uri

    data = make_dataset(tmp_path / "data", train=12, dev=6, test=6)
    assert main(["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--lm", "fake",
                 "--data", str(data), "--out", str(tmp_path / "compiled"), "--tracking-uri", tracking_uri(tmp_path),
                 "--no-progress"]) == 0
    assert main(["export", "--program", "full_auto.predict", "--state", str(tmp_path / "compiled" / "program.json"),
                 "--name", "demos", "--version", "0.1.0", "--out", str(tmp_path / "export")]) == 0
    assert "learned from train 3 of dataset " in capsys.readouterr().out  # the 3 demos drawn, nothing of dev
    for split, flagged in (("train", 3), ("dev", 0)):
        assert main(["eval", "--program", str(tmp_path / "export"), "--lm", "fake", "--data", str(data), "--split",
                     split, "--out", str(tmp_path / split), "--no-track", "--no-progress"]) == 0
        summary = json.loads((tmp_path / split / "summary.json").read_text())
        assert summary["learned_from"]["n_overlap"] == flagged
        assert ("warning: 3 of the 12 records of split train" in capsys.readouterr().out) == bool(flagged)


def test_eval_planner_on_an_experiments_log(tmp_path):
    write_episodes(tmp_path / "logs", episodes=2, seed=5)
    out = tmp_path / "out"
    assert main(["eval", "--program", "planner.rules", "--data", str(tmp_path / "logs"), "--out", str(out),
                 "--no-track", "--no-progress"]) == 0
    metrics = read_metrics(out)
    assert {"objective", "schema_validity", "pivot_compliance", "cycles_improvement",
            "effect_calibration"} <= set(metrics)
    assert metrics["schema_validity"]["value"] == 1.0
    assert (out / "calibration.png").is_file()


def test_eval_planner_on_logs_without_a_profile_estimates_with_the_learned_model(profile_free_dataset, outcome_fit,
                                                                                tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["eval", "--program", "planner.rules", "--data", str(profile_free_dataset), "--split", "test",
                 "--out", str(out), "--no-track", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "cycles model auto: 0 of" in printed and "off-policy DR" in printed
    metrics = read_metrics(out)
    assert metrics["cycles_improvement"]["estimator"] == "learned" and metrics["cycles_improvement"]["value"] > 0
    assert "estimator" not in metrics["pivot_compliance"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cycles_model"]["name"] == "learned" and "train and dev" in summary["cycles_model"]["estimator"]
    off = summary["off_policy"]
    assert set(off["estimates"]) == {"dm", "ipw", "dr"} and off["headline"] == "dr"
    assert off["models"]["fit"]["trained_on_sha256"] == outcome_fit.chosen["trained_on_sha256"]
    assert off["calibration"]["n"] > 0 and (out / "offpolicy_calibration.png").is_file()
    frame = pd.read_parquet(out / "results.parquet")
    assert set(frame["cycles_model"]) == {"learned"} and frame["observed_improvement"].notna().any()
    # each record says whether its estimate rests on the outcome model alone, with the share per family
    extra = off["extrapolation"]
    assert extra["threshold"] == 0.05 and extra["n"] == off["estimates"]["dr"]["n"] and extra["source"] == "model"
    assert sorted(frame.loc[frame["offpolicy_extrapolated"], "record_id"]) == sorted(extra["records"])
    assert extra["extrapolated"] == len(extra["records"]) == sum(s["extrapolated"] for s in extra["by_family"].values())
    assert set(extra["shares"]) == set(extra["by_family"]) and "off-policy extrapolated:" in printed
    # the outcome model's calibration per family on held-out episodes, n next to every number
    families = off["family_calibration"]["families"]
    assert families and all(row["n"] > 0 and row["episodes"] > 0 and "ratio_low" in row for row in families.values())
    assert "outcome model held out," in printed


def test_eval_with_the_simulator_on_logs_without_a_profile_leaves_the_improvement_out(profile_free_dataset,
                                                                                      tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["eval", "--program", "planner.logged", "--data", str(profile_free_dataset), "--split", "test",
                 "--cycles-model", "sim", "--out", str(out), "--no-track", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "carry no performance profile: the simulator does not apply" in printed
    assert "cycles_improvement" not in read_metrics(out)
    summary = json.loads((out / "summary.json").read_text())
    assert "cycles_improvement" in summary["omitted_metrics"] and summary["off_policy"]["on_policy"] is True
    check = summary["off_policy"]["logged_check"]["dm"]
    assert check["observed"] is not None and isinstance(check["observed_inside_interval"], bool)


def test_the_learned_cycles_model_on_too_few_attempts_is_one_line(tmp_path, capsys):
    from planner_logs_support import imported, logs_without_side_files

    dataset = imported(logs_without_side_files(tmp_path / "logs", episodes=1), tmp_path / "ds")
    code = main(["eval", "--program", "planner.rules", "--data", str(dataset), "--split", "train",
                 "--cycles-model", "learned", "--out", str(tmp_path / "out"), "--no-track", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "--cycles-model learned: cannot fit the outcome model" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--program", "logged", "--data", "/nonexistent/folder"], "no such file or folder"),
    (["--program", "no.such.program", "--data", "{ws}"], "unknown program"),
    (["--program", "planner.rules", "--data", "{ws}"], "planner program"),
    (["--program", "logged", "--data", "{ws}", "--threads", "0"],
     "guidebench eval: error: argument --threads: 0: expected a whole number at least 1"),  # refused while parsing
])
def test_user_errors_are_one_clear_line(workspace, tmp_path, capsys, argv, message):
    argv = [a.replace("{ws}", str(workspace)) for a in argv]
    code = main(["eval", *argv, "--out", str(tmp_path / "out"), "--no-track", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_an_empty_dataset_split_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "dataset.json").write_text("{not json")
    code = main(["eval", "--program", "rule", "--data", str(tmp_path / "ds"), "--out", str(tmp_path / "out"),
                 "--no-track", "--no-progress"])
    assert code == 2 and "dataset.json" in capsys.readouterr().err


def test_a_split_swapped_for_another_is_refused_not_scored_under_its_hash(workspace, tmp_path, capsys):
    from dataset_support import swapped_split
    from guidebench.data import import_logs

    import_logs(workspace, "fullauto", tmp_path / "ds", progress=False)
    swapped = swapped_split(tmp_path / "ds", tmp_path / "ds-swap", into="test", source="train")
    code = main(["eval", "--program", "rule", "--data", str(swapped), "--out", str(tmp_path / "out"),
                 "--no-track", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{swapped}: split 'test' holds" in err and "the split changed after it was frozen" in err
    assert not (tmp_path / "out").exists()


def test_a_corrupted_arrow_file_is_one_line_naming_the_file(workspace, tmp_path, capsys):
    from dataset_support import SHARD, corrupted_split
    from guidebench.data import import_logs

    import_logs(workspace, "fullauto", tmp_path / "ds", progress=False)
    damaged = corrupted_split(tmp_path / "ds", tmp_path / "ds-bad", split="test")
    code = main(["eval", "--program", "rule", "--data", str(damaged), "--out", str(tmp_path / "out"),
                 "--no-track", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "traceback" not in err
    assert f"{damaged / 'test' / SHARD}: damaged Arrow file (UnicodeDecodeError" in err


@pytest.mark.slow
def test_eval_full_auto_compact_on_the_embedded_model(workspace, tmp_path, tracking_uri):
    out = tmp_path / "out"
    # Three compact decisions keep it to about a second per call on 2 cores; the path is the full one.
    assert main(["eval", "--program", "full_auto.compact", "--lm", "local", "--data", str(workspace),
                 "--max-records", "3", "--out", str(out), "--tracking-uri", tracking_uri, "--no-progress"]) == 0
    metrics = read_metrics(out)
    assert metrics["lm_calls_per_decision"]["value"] >= 1.0 and metrics["tokens_per_decision"]["value"] > 100
    assert 0.0 <= metrics["parse_failure_rate"]["value"] <= 1.0
    frame = pd.read_parquet(out / "results.parquet")
    assert len(frame) == 3 and frame["error.class"].isna().all()
    assert set(frame["model_action"]) <= {"continue", "pause", "stop", "review"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["split"] == "all[:3]" and summary["lm_spec"] == "local"


def test_baselines_report_ranks_programs_with_intervals_and_paired_tests(workspace, tmp_path):
    write_episodes(tmp_path / "logs", episodes=2, seed=5)
    report = tmp_path / "baselines.md"
    assert main(["baselines", "--fullauto", str(workspace), "--experiments", str(tmp_path / "logs"),
                 "--split", "all", "--fullauto-programs", "logged,rule,full_auto.always_continue",
                 "--planner-programs", "planner.rules", "--planner-max-records", "20", "--no-track",
                 "--no-progress", "--out", str(report)]) == 0
    text = report.read_text()
    assert "| `logged` | " in text and "| `full_auto.always_continue` | " in text and "| `planner.rules` | " in text
    assert "Paired against `logged`" in text and "split `all[:20]`" in text
    # the comparisons name the test and interval method they used, n and a verdict
    assert "| n | p | test | verdict |" in text and "permutation test (" in text and "bootstrap (1,000 resamples)" in text
    assert "paired bootstrap" not in text and ("cannot tell apart (p = " in text or ", p " in text)
    logged_row = next(line for line in text.splitlines() if line.startswith("| `logged` |"))
    assert "0.500 [" in logged_row  # the override rate of the hand-made log, with its interval


def test_baselines_run_again_in_one_home_and_replace_their_report_only_with_force(workspace, tmp_path, home, capsys):
    import os
    import shutil

    logs = tmp_path / "workspace"
    shutil.copytree(workspace, logs)
    report = tmp_path / "baselines.md"
    argv = ["baselines", "--fullauto", str(logs), "--fullauto-programs", "logged,rule", "--planner-programs", "",
            "--split", "all", "--no-track", "--no-progress", "--out"]
    assert main([*argv, str(report)]) == 0
    assert report.read_text().splitlines()[1] == "# Baselines on the committed sample data"
    assert main([*argv, str(tmp_path / "second.md")]) == 0  # the home's working folders are replaced
    capsys.readouterr()
    assert main([*argv, str(report)]) == 2
    assert "the report of an earlier `guidebench baselines` already exists; pass --force" in capsys.readouterr().err
    os.utime(next(logs.glob("*.jsonl")))  # the logs changed: their cached import is replaced too
    written = report.stat().st_ino
    assert main([*argv, str(report), "--force"]) == 0
    assert report.stat().st_ino != written and "| `full_auto.rules` | " in report.read_text()
    assert sorted(p.name for p in tmp_path.glob("*.md")) == ["baselines.md", "second.md"]  # no staging left
    mine = tmp_path / "notes.md"
    mine.write_text("# My notes\n")
    assert main([*argv, str(mine), "--force"]) == 2
    assert "was not written by `guidebench baselines`; refusing to overwrite it" in capsys.readouterr().err
    assert mine.read_text() == "# My notes\n"


def test_raw_logs_are_told_apart(workspace, tmp_path):
    import shutil

    from guidebench.evaluation.inputs import raw_log_kind

    shutil.copytree(workspace, tmp_path / "many" / "ws-1")
    write_episodes(tmp_path / "logs", episodes=1, seed=2)
    assert raw_log_kind(workspace) == "fullauto"
    assert raw_log_kind(workspace / "fullauto-decisions.jsonl") == "fullauto"
    assert raw_log_kind(tmp_path / "many") == "fullauto"
    assert raw_log_kind(tmp_path / "logs") == "experiments"
    assert raw_log_kind(tmp_path / "logs" / "episode-0000" / "log.jsonl") == "experiments"


def test_no_cache_measures_every_lm_call_afresh(workspace, tmp_path):
    def usage(out: Path, *flags: str) -> dict:
        assert main(["eval", "--program", "full_auto.predict", "--lm", "fake", "--data", str(workspace),
                     "--max-records", "3", "--out", str(out), "--no-track", "--no-progress", *flags]) == 0
        return json.loads((out / "summary.json").read_text())["usage"]

    usage(tmp_path / "warm-up")
    cached = usage(tmp_path / "cached")
    assert cached["cache_hits"] == cached["lm_calls"] == 3
    fresh = usage(tmp_path / "fresh", "--no-cache")
    assert fresh["cache_hits"] == 0 and fresh["prompt_tokens"] > 0
    report = tmp_path / "baselines.md"
    assert main(["baselines", "--fullauto", str(workspace), "--fullauto-programs", "full_auto.predict",
                 "--planner-programs", "", "--lm", "fake", "--split", "all", "--no-cache", "--no-track",
                 "--no-progress", "--out", str(report)]) == 0
    assert "10 LM calls (0 from cache)" in report.read_text()


@pytest.mark.parametrize("command", [["eval", "--program", "full_auto.learned", "--split", "test", "--out", "OUT"],
                                     ["leaderboard", "--programs", "logged,full_auto.cascade", "--no-track",
                                      "--out", "OUT"]])
def test_a_trained_program_straight_from_the_registry_is_refused_with_how_to_fit_it(command, tmp_path, capsys):
    from optimizer_support import make_dataset

    data = make_dataset(tmp_path / "data", train=4, dev=2, test=2)
    args = [str(tmp_path / "out") if part == "OUT" else part for part in command]
    assert main([*args, "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "a trained program must be fitted first: `guidebench compile --program" in err and "\n" == err[-1:]
    assert not (tmp_path / "out").exists()


def test_a_deleted_dataset_json_is_named_with_the_import_that_restores_it(tmp_path, monkeypatch, capsys):
    # Not "the import imported nothing": its report counts what it imported, and the same logs and seed restore it.
    import shlex

    from guidebench.data.fullauto_writer import simulate_workspace

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    simulate_workspace(tmp_path / "logs", runs=6, seed=3)
    data = tmp_path / "data"
    assert main(["data", "import", str(tmp_path / "logs"), "--kind", "fullauto", "--out", str(data), "--seed", "2",
                 "--no-progress"]) == 0
    capsys.readouterr()
    first = json.loads((data / "dataset.json").read_text())
    (data / "dataset.json").unlink()
    for command in (["eval", "--program", "rule", "--out", str(tmp_path / "out"), "--no-progress"],
                    ["compile", "--program", "full_auto.learned", "--optimizer", "fit", "--dry-run"],
                    ["leaderboard", "--programs", "rule", "--no-track", "--out", str(tmp_path / "out")]):
        assert main([*command, "--data", str(data)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"guidebench: error: --data {data}: its dataset.json is missing (the import wrote it "
                              f"with {json.loads((data / 'import_report.json').read_text())['imported']:,} records; "
                              "it was deleted since): import the logs again") and len(err.splitlines()) == 1, err
    restore = shlex.split(err.split("`")[1].replace("SEED", str(first["seed"])))
    assert restore[:2] == ["guidebench", "data"] and main(restore[1:]) == 0
    assert json.loads((data / "dataset.json").read_text())["dataset_id"] == first["dataset_id"]
