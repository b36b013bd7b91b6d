"""`guidebench compile`: the MLflow run holds the params, metrics and artifacts; --dry-run makes no LM
call; budgets mark the run; an interrupted compile resumes without compiling again; user errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mlflow
import pytest

from guidebench.cli import main
from optimizer_support import make_dataset, tracking_uri
from optimizers.checkpoint import Checkpoint

REQUIRED_PARAMS = {"program", "optimizer", "recipe", "seed", "dataset_id", "split_hash.train", "split_hash.dev",
                   "split_hash.test", "lm", "lm_info", "git_commit", "lib.dspy", "lib.mlflow", "lib.optuna",
                   "lib.llama-cpp-python", "budget.max_lm_calls", "recipe.max_bootstrapped_demos"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A dataset, a workbench home and an MLflow store shared by this module's compiles."""
    root = tmp_path_factory.mktemp("compile")
    old = os.environ.get("GUIDEBENCH_HOME")
    os.environ["GUIDEBENCH_HOME"] = str(root / "home")
    try:
        yield {"root": root, "data": make_dataset(root / "data", train=10, dev=4, test=4),
               "uri": tracking_uri(root)}
    finally:
        if old is None:
            os.environ.pop("GUIDEBENCH_HOME", None)
        else:
            os.environ["GUIDEBENCH_HOME"] = old


def _compile(workspace, *extra):
    return main(["compile", "--program", "full_auto.predict", "--data", str(workspace["data"]), "--lm", "fake",
                 "--tracking-uri", workspace["uri"], "--no-progress", *extra])


def _runs(workspace, filter_string=""):
    mlflow.set_tracking_uri(workspace["uri"])
    return mlflow.search_runs(search_all_experiments=True, output_format="list", filter_string=filter_string)


def _artifacts(run_id, path=None):
    client = mlflow.MlflowClient()
    found = []
    for item in client.list_artifacts(run_id, path):
        found += _artifacts(run_id, item.path) if item.is_dir else [item.path]
    return found


@pytest.fixture(scope="module")
def compiled(workspace):
    """One tracked compile with random search (it evaluates candidates)."""
    code = _compile(workspace, "--optimizer", "bootstrap_random_search", "--seed", "4")
    assert code == 0
    runs = _runs(workspace, "tags.`guidebench.optimizer` = 'bootstrap_random_search'")
    assert len(runs) == 1
    return runs[0]


def test_compile_run_has_params_metrics_and_artifacts(workspace, compiled):
    params, metrics = compiled.data.params, compiled.data.metrics
    assert compiled.info.status == "FINISHED"
    assert REQUIRED_PARAMS <= set(params), REQUIRED_PARAMS - set(params)
    assert params["seed"] == "4" and params["optimizer_class"] == "BootstrapFewShotWithRandomSearch"
    assert json.loads(params["recipe"])["num_candidate_programs"] == 2
    for split in ("dev", "test"):
        for name in ("objective", "action_accuracy", "parse_failure_rate", "brier", "ece"):
            assert {f"{split}.{name}", f"{split}.{name}_ci_low", f"{split}.{name}_ci_high"} <= set(metrics)
        assert metrics[f"{split}.usage.lm_calls"] >= 0
    for name in ("lm_calls", "prompt_tokens", "completion_tokens", "total_tokens", "cache_hits", "wall_s"):
        assert f"compile.{name}" in metrics
    assert metrics["compile.lm_calls"] > 0 and metrics["compile.stopped_by_budget"] == 0
    assert {"test.vs_baseline.objective_diff", "test.vs_baseline.objective_diff_ci_low",
            "test.vs_baseline.objective_diff_ci_high", "baseline.test.objective"} <= set(metrics)
    artifacts = set(_artifacts(compiled.info.run_id))
    for name in ("program.json", "compile.json", "candidates.json", "candidates.png", "dev/results.parquet",
                 "dev/confusion_matrix.png", "dev/calibration.png", "test/results.parquet", "test/metrics.json",
                 "test/confusion_matrix.png", "baseline/results.parquet", "test/postmortem.json",
                 "test/postmortem.md", "test/postmortem_slices.json"):
        assert name in artifacts, name
    assert "test.postmortem.n_tested.slices" in metrics  # the test split's post-mortem, as figures
    # Candidates the optimizer evaluated are nested runs.
    nested = _runs(workspace, f"tags.mlflow.parentRunId = '{compiled.info.run_id}'")
    assert nested and all("score" in run.data.metrics for run in nested)
    assert len(nested) == int(metrics["compile.n_candidates"])
    # DSPy autologging: traces of the evaluations, and the LM state of the compile (engine dump_state).
    traces = mlflow.search_traces(experiment_ids=[compiled.info.experiment_id], return_type="list")
    assert traces
    assert "lm_params" in params


def test_compiled_state_json_loads_back(workspace, compiled, tmp_path):
    import optimizers
    import programs

    # dst_path: without it MLflow downloads into a new folder of the system temp directory, left behind
    path = Path(mlflow.artifacts.download_artifacts(run_id=compiled.info.run_id, artifact_path="program.json",
                                                    dst_path=str(tmp_path)))
    state = json.loads(path.read_text())
    assert "metadata" in state and state["decide"]["demos"]
    program = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    summary = json.loads(Path(mlflow.artifacts.download_artifacts(run_id=compiled.info.run_id,
                                                                   artifact_path="compile.json",
                                                                   dst_path=str(tmp_path))).read_text())
    assert summary["compile"]["demo_count"] == sum(len(p.demos) for p in program.predictors())
    assert summary["test_vs_baseline"]["objective"]["n"] == 4


def test_compile_prints_its_run_id_as_the_export_command(workspace, tmp_path, capsys):
    import shlex

    assert _compile(workspace, "--optimizer", "knn_fewshot", "--eval-limit", "2") == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("MLflow run ") and "; export it with: guidebench export " in last, last
    command = shlex.split(last.split("; export it with: ", 1)[1])
    run_id = last.split()[2].rstrip(";")
    assert command[:3] == ["guidebench", "export", run_id] and command[command.index("--tracking-uri") + 1] == \
        workspace["uri"]
    # As printed, with a name and a folder filled in, it exports the compiled program.
    filled = {"NAME": "fa", "DIR": str(tmp_path / "fa")}
    assert main([filled.get(arg, arg) for arg in command[1:]]) == 0
    manifest = json.loads((tmp_path / "fa" / "manifest.json").read_text())
    assert manifest["mlflow_run_id"] == run_id and manifest["optimizer"] == "KNNFewShot"


def test_dry_run_answers_without_an_lm_call_or_a_run(workspace, monkeypatch, capsys):
    import guidebench.lm.factory as lm_module

    def no_lm(*args, **kwargs):
        raise AssertionError("a dry run must not set up an LM")

    monkeypatch.setattr(lm_module, "configure_lm", no_lm)
    monkeypatch.setattr(lm_module, "make_lm", no_lm)
    before = len(_runs(workspace))
    assert _compile(workspace, "--optimizer", "miprov2", "--dry-run") == 0
    text = capsys.readouterr().out
    assert "no LM call was made" in text and "propose instructions" in text and "total" in text
    assert _compile(workspace, "--optimizer", "bootstrap_fewshot", "--dry-run", "--json") == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["lm_calls"] > 0 and estimate["prompt_tokens"] > estimate["lm_calls"] * 100
    assert {s["name"] for s in estimate["stages"]} >= {"bootstrap traces", "evaluate dev", "evaluate test"}
    assert len(_runs(workspace)) == before


def test_budget_stop_is_marked_on_the_run(workspace, capsys):
    assert _compile(workspace, "--optimizer", "bootstrap_fewshot", "--max-lm-calls", "2", "--eval-limit", "3") == 0
    out = capsys.readouterr().out
    assert "stopped by budget" in out and "test (3 of 4 records)" in out
    run = _runs(workspace, "tags.`guidebench.optimizer` = 'bootstrap_fewshot'")[0]
    assert run.data.tags["guidebench.stopped_by_budget"] == "true"
    assert run.data.tags["guidebench.kept"] == "salvaged"
    assert run.data.metrics["compile.stopped_by_budget"] == 1 and run.data.metrics["compile.lm_calls"] <= 2
    assert run.data.params["budget.max_lm_calls"] == "2" and run.data.tags["guidebench.eval_limit"] == "3"
    assert run.data.metrics["test.objective_ci_low"] <= run.data.metrics["test.objective"]


def test_an_interrupted_compile_resumes_without_compiling_again(workspace, tmp_path, monkeypatch, capsys):
    import evals.replay as replay_module  # every scored replay of a compile looks it up there when it runs

    real_replay = replay_module.replay

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "out"
    monkeypatch.setattr(replay_module, "replay", interrupted)
    assert _compile(workspace, "--optimizer", "labeled_fewshot", "--seed", "9", "--out", str(out)) == 130
    seed9 = "tags.`guidebench.optimizer` = 'labeled_fewshot' and params.seed = '9'"  # other tests compile too
    run = _runs(workspace, seed9)[0]
    assert run.info.status == "KILLED" and not out.exists()
    checkpoint = Checkpoint.for_run(Path(os.environ["GUIDEBENCH_HOME"]) / "checkpoints", run.info.run_id)
    assert checkpoint.status()["stage"] == "compiled" and checkpoint.program_path.is_file()

    monkeypatch.setattr(replay_module, "replay", real_replay)
    # Meanwhile another compile finished in the same folder: the resume does not replace it without --force.
    assert _compile(workspace, "--optimizer", "knn_fewshot", "--eval-limit", "2", "--out", str(out)) == 0
    other = json.loads((out / "compile.json").read_text())["mlflow_run_id"]
    capsys.readouterr()
    assert main(["compile", "--resume", run.info.run_id, "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"guidebench: error: --out {out}: the output of an earlier `guidebench compile` (mlflow_run_id {other}) "
        f"already exists, not of this one (mlflow_run_id {run.info.run_id}); pass --force to replace it\n")
    assert json.loads((out / "compile.json").read_text())["mlflow_run_id"] == other

    assert main(["compile", "--resume", run.info.run_id, "--no-progress", "--force"]) == 0
    assert "finished before; loaded the compiled program" in capsys.readouterr().out
    resumed = _runs(workspace, seed9)
    assert len(resumed) == 1 and resumed[0].info.run_id == run.info.run_id
    assert resumed[0].info.status == "FINISHED" and "test.objective" in resumed[0].data.metrics
    assert checkpoint.status()["stage"] == "done"
    assert json.loads((out / "compile.json").read_text())["mlflow_run_id"] == run.info.run_id
    # A resume of the run that wrote the folder takes it without --force.
    assert main(["compile", "--resume", run.info.run_id, "--no-progress"]) == 0


def test_user_errors_are_one_clear_line(workspace, tmp_path, capsys):
    assert _compile(workspace, "--optimizer", "adamw") == 2
    assert "unknown optimizer 'adamw'" in capsys.readouterr().err
    assert main(["compile", "--program", "full_auto.rules", "--optimizer", "knn_fewshot", "--data",
                 str(workspace["data"]), "--dry-run"]) == 2
    assert "nothing to compile" in capsys.readouterr().err
    assert main(["compile", "--optimizer", "knn_fewshot"]) == 2
    assert "--program" in capsys.readouterr().err
    bad = tmp_path / "r.toml"
    bad.write_text('optimizer = "knn_fewshot"\n[settings]\nk = "many"\n')
    assert _compile(workspace, "--optimizer", "knn_fewshot", "--recipe", str(bad), "--dry-run") == 2
    assert "r.toml" in capsys.readouterr().err
    assert main(["compile", "--resume", "no-such-run"]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert _compile(workspace, "--optimizer", "knn_fewshot", "--rules", "done", "--dry-run") == 2
    assert capsys.readouterr().err == ("guidebench: error: --rules done: full_auto.predict has no rule gate "
                                       "(full_auto.hybrid has one)\n")
    assert main(["compile", "--program", "full_auto.hybrid", "--optimizer", "knn_fewshot", "--data",
                 str(workspace["data"]), "--rules", "done+finished", "--dry-run"]) == 2
    assert "--rules done+finished: unknown rule 'finished'" in capsys.readouterr().err
    assert _compile(workspace, "--optimizer", "knn_fewshot", "--temperature", "3", "--dry-run") == 2
    assert "--temperature 3.0: must be between 0 and 2" in capsys.readouterr().err


def test_a_split_swapped_for_another_is_refused_before_any_run(workspace, tmp_path, capsys):
    from dataset_support import swapped_split

    swapped = swapped_split(workspace["data"], tmp_path / "swap", into="test", source="dev")  # both hold 4
    before = len(_runs(workspace))
    code = main(["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data",
                 str(swapped), "--lm", "fake", "--tracking-uri", workspace["uri"], "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{swapped}: split 'test' hashes to" in err and "the split changed after it was frozen" in err
    assert len(_runs(workspace)) == before


def test_optimizers_command_lists_every_recipe(capsys):
    import optimizers

    assert main(["optimizers"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in optimizers.names())
    assert main(["optimizers", "--show", "GEPA"]) == 0
    assert capsys.readouterr().out == optimizers.recipe_file("gepa").read_text()


@pytest.mark.slow
def test_compile_with_the_embedded_model_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=4, dev=1, test=2)
    uri = tracking_uri(tmp_path)
    # the compact program: every call at the embedded model's token rate (the compile path is what is under test)
    code = main(["compile", "--program", "full_auto.compact", "--optimizer", "bootstrap_fewshot", "--data", str(data),
                 "--lm", "local", "--max-lm-calls", "2", "--tracking-uri", uri, "--no-progress"])
    assert code == 0
    mlflow.set_tracking_uri(uri)
    run = mlflow.search_runs(search_all_experiments=True, output_format="list",
                             filter_string="tags.`guidebench.run_type` = 'compile'")[0]
    assert run.info.status == "FINISHED"
    # The custom local engine's state reached MLflow through DSPy autologging (dump_state works).
    assert "gemma-3-270m" in run.data.params["lm_params"] and "LocalGGUFEngine" in run.data.params["lm_info"]
    assert 0 < run.data.metrics["compile.lm_calls"] <= 2
    assert run.data.metrics["test.usage.lm_calls"] >= 2 and "test.objective" in run.data.metrics


def test_dev_limit_scores_dev_on_a_subset_and_the_optimizers_table_reads_the_compile(workspace, tmp_path):
    from benchmarks import optimizers_table

    out = tmp_path / "compile"
    assert _compile(workspace, "--optimizer", "labeled_fewshot", "--dev-limit", "2", "--out", str(out)) == 0
    assert json.loads((out / "dev" / "summary.json").read_text())["n_records"] == 2
    assert json.loads((out / "test" / "summary.json").read_text())["n_records"] == 4
    report = tmp_path / "optimizers.md"
    report.write_text("# Optimizers\n\nintro kept\n", encoding="utf-8")
    assert optimizers_table.main([str(out), str(tmp_path / "missing"), "--report", str(report)]) == 0
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Optimizers\n\nintro kept\n") and "<!-- optimizers-table -->" in text
    row = next(line for line in text.splitlines() if line.startswith("| labeled_fewshot |"))
    summary = json.loads((out / "compile.json").read_text())
    assert f"`{summary['mlflow_run_id'][:8]}`" in row and "n = 4 test records" in text
    assert f"Not finished: {tmp_path / 'missing'}" in text
    # full_auto.predict routes no turn: its LM half is all 4 test turns; one of them is labeled pause
    assert "| recall " in row and "(of 4 LM turns)" in row and "/1, precision" in row


def test_a_trained_program_compiles_with_fit_against_the_logged_policy_without_an_lm(workspace, tmp_path, monkeypatch,
                                                                                     capsys):
    from evals.data import save_dataset
    from frozen_support import decision_records
    from guidebench.lm import factory

    records = decision_records(96, seed=5, logged_wrong=0.4)
    data = tmp_path / "logged-data"
    save_dataset(data, "fullauto", {"train": records[:48], "dev": records[48:72], "test": records[72:]})
    monkeypatch.setattr(factory, "configure_lm", lambda *a, **k: pytest.fail("no LM is needed to fit or replay"))
    out = tmp_path / "learned"
    assert main(["compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", str(data),
                 "--baseline", "logged", "--tracking-uri", workspace["uri"], "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "compile.json").read_text())
    assert summary["baseline"]["program"] == "logged" and summary["compile"]["usage"]["lm_calls"] == 0
    assert summary["compile"]["details"]["fit"]["refit"] == "train+dev"
    assert summary["test"]["objective"]["value"] > summary["baseline"]["test"]["objective"]["value"]
    assert "trained_model" in json.loads((out / "program.json").read_text())
    run = mlflow.MlflowClient(tracking_uri=workspace["uri"]).get_run(summary["mlflow_run_id"])
    assert run.data.params["lm"] == "none" and run.data.params["baseline"] == "logged"


def test_planner_learned_compiles_with_fit_on_logs_without_a_profile(profile_free_dataset, outcome_fit, workspace,
                                                                   tmp_path, monkeypatch, capsys):
    from guidebench.lm import factory

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(factory, "configure_lm", lambda *a, **k: pytest.fail("no LM is needed to fit or replay"))
    out = tmp_path / "learned"
    assert main(["compile", "--program", "planner.learned", "--optimizer", "fit", "--data", str(profile_free_dataset),
                 "--tracking-uri", workspace["uri"], "--no-progress", "--out", str(out)]) == 0
    assert "cycles model auto: 0 of" in capsys.readouterr().out
    summary = json.loads((out / "compile.json").read_text())
    assert summary["baseline"]["program"] == "planner.logged" and summary["compile"]["usage"]["lm_calls"] == 0
    assert 0.0 <= summary["test"]["pivot_compliance"]["value"] <= 1.0  # scored: it chooses among the allowed families
    assert summary["test"]["cycles_improvement"]["estimator"] == "learned"
    state = json.loads((out / "program.json").read_text())
    assert state["outcome_model"]["choose_among"] == "allowed"
    assert state["outcome_model"]["model"]["fit"] == outcome_fit.chosen  # the one fit on train + dev
    test = json.loads((out / "test" / "summary.json").read_text())
    assert set(test["off_policy"]["estimates"]) == {"dm", "ipw", "dr"}
    assert (out / "test" / "offpolicy_calibration.png").is_file()
    run = mlflow.MlflowClient(tracking_uri=workspace["uri"]).get_run(summary["mlflow_run_id"])
    assert run.data.params["cycles_model"] == "learned" and run.data.params["baseline"] == "planner.logged"
    used = {"max_train_examples": 0, "max_val_examples": 0, "folds": 3, "refit_on_dev": True,  # the fit's own folds
            "choose_among": "allowed"}
    assert summary["settings"] == summary["compile"]["settings"] == used
    assert json.loads(run.data.params["recipe"]) == used


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["compile", "dry-run"])
def test_a_recipe_setting_planner_learned_would_ignore_is_refused_in_one_line(profile_free_dataset, workspace,
                                                                              tmp_path, dry_run, capsys):
    recipe = tmp_path / "fit.toml"
    recipe.write_text('optimizer = "fit"\n[settings]\nC = [1.0]\nrefit_on_dev = false\n', encoding="utf-8")
    assert main(["compile", "--program", "planner.learned", "--optimizer", "fit", "--recipe", str(recipe), "--data",
                 str(profile_free_dataset), "--tracking-uri", workspace["uri"], "--no-progress", *dry_run]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fit: setting C = [1.0] does not apply to planner.learned" in err


@pytest.mark.parametrize("args, message", [
    (["--program", "full_auto.rules", "--optimizer", "fit"], "is a rule policy without an LM: there is nothing to compile"),
    (["--program", "full_auto.learned", "--optimizer", "fit", "--baseline", "full_auto.cascade"],
     "must be fitted before it can run"),
    (["--program", "full_auto.learned", "--optimizer", "fit", "--baseline", "planner.rules"], "is a planner program"),
    (["--program", "full_auto.learned", "--optimizer", "labeled_fewshot"],
     "--program full_auto.learned makes no LM call: labeled_fewshot has no prompt of it to compile; fit its model "
     "with --optimizer fit"),
])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["compile", "dry-run"])
def test_what_cannot_be_compiled_or_compared_is_one_line(workspace, args, message, dry_run, capsys):
    assert main(["compile", *args, "--data", str(workspace["data"]), "--tracking-uri", workspace["uri"],
                 "--no-progress", *dry_run]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("dev", [0, 3], ids=["no dev", "dev"])
def test_a_dataset_without_test_records_is_refused_before_anything_is_written(workspace, tmp_path, dev, capsys):
    # The compile reports on test and selects on dev: with no test record it would evaluate nothing and exit 0.
    data = make_dataset(tmp_path / "data", train=12, dev=dev, test=0)
    before = len(_runs(workspace))
    for extra in ([], ["--dry-run"]):
        out = tmp_path / "out"
        assert main(["compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", str(data),
                     "--tracking-uri", workspace["uri"], "--no-progress", "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"guidebench: error: --data {data}: its test split holds no record (") \
            and "import logs of three or more into it again" in err and len(err.strip().splitlines()) == 1, err
        assert ("dev is empty too" if not dev else f"dev holds {dev}") in err
        assert not out.exists()
    assert len(_runs(workspace)) == before


def test_a_full_disk_is_one_line_that_blames_neither_the_input_nor_the_format(workspace, tmp_path, monkeypatch,
                                                                                capsys):
    # The disk is what failed: not the input, and no other format (DSPy's own save advised a pickle) would cure it.
    import errno

    from optimizers import checkpoint

    write_text = checkpoint.atomic_write_text

    def full(path, text):
        if path.name == "program.json" and "checkpoints" not in path.parts:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return write_text(path, text)

    monkeypatch.setattr(checkpoint, "atomic_write_text", full)
    out = tmp_path / "out"
    assert _compile(workspace, "--optimizer", "labeled_fewshot", "--out", str(out)) == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert line.startswith("guidebench: error: cannot write ") and "program.json: the disk is full" in line, err
    assert "pkl" not in err and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("value", ["-1.0", "0.0", "nan", "inf"])
def test_a_fit_strength_out_of_range_is_one_line_naming_setting_value_and_range(workspace, tmp_path, value, capsys):
    recipe = tmp_path / "fit.toml"
    recipe.write_text(f'optimizer = "fit"\n[settings]\nC = [0.5, {value}]\n', encoding="utf-8")
    assert main(["compile", "--program", "full_auto.learned", "--optimizer", "fit", "--recipe", str(recipe),
                 "--data", str(workspace["data"]), "--tracking-uri", workspace["uri"], "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (f"guidebench: error: {recipe}: invalid settings for recipe 'fit': field 'C' = [0.5, {value}]: "
                   f"{value} is out of range: each strength is a finite number above 0 (such as [0.5, 2.0, 8.0, "
                   "32.0])\n")


def test_a_dataset_with_a_single_label_class_is_one_line_and_writes_nothing(workspace, tmp_path, capsys):
    from evals.data import save_dataset
    from optimizer_support import decision_records

    stops = [r for r in decision_records(40) if r.label.action == "stop"]
    data = tmp_path / "single"
    save_dataset(data, "fullauto", {"train": stops[:12], "dev": stops[12:16], "test": stops[16:20]})
    out = tmp_path / "out"
    assert main(["compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", str(data),
                 "--tracking-uri", workspace["uri"], "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "every labeled train example is 'stop': a decision model needs two or more label classes" in err
    assert "traceback" not in err and not out.exists()
