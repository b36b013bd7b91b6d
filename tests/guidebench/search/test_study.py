"""guidebench.search.study: `guidebench search` with one nested MLflow run per trial, resumed by running it
again (the Optuna study itself is tested in tests/guidebench/search/test_engine.py)."""

from __future__ import annotations

import sys

import mlflow
import optuna
import pytest

from guidebench.cli import main
from optimizer_support import make_dataset, make_planner_dataset, tracking_uri


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
    # The best trial (selected on dev) was re-scored on the whole test split, in `guidebench eval`'s files.
    import json

    summary = json.loads((tmp_path / "out" / "test" / "summary.json").read_text())
    assert summary["split"] == "test" and summary["n_records"] == 2, summary
    assert "best.test.objective" in parent.data.metrics or "best.test.objective" in mlflow.get_run(
        parent.info.run_id).data.metrics


def test_a_study_made_with_another_lm_is_refused_not_resumed(tmp_path, monkeypatch, capsys):
    import json

    from guidebench.lm.fake import FAKE_MODEL_ID

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=2)
    uri = tracking_uri(tmp_path)
    args = ["search", "--program-family", "full_auto", "--data", str(data), "--no-progress", "--trials", "1",
            "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot", "--demos", "1:2", "--no-test",
            "--tracking-uri", uri, "--out", str(tmp_path / "out")]
    assert main([*args, "--lm", "fake"]) == 0  # the plumbing run
    trials = json.loads((tmp_path / "out" / "trials.json").read_text())
    fake = {"spec": "fake", "model": FAKE_MODEL_ID, "model_sha256": None}
    assert trials["lm"] == fake and [t["lm"] for t in trials["trials"]] == [fake]
    capsys.readouterr()
    # Another LM (a LiteLLM model behind a server that is never asked: the study is refused first).
    code = main([*args, "--lm", "openai/another-model", "--api-base", "http://127.0.0.1:9/v1"])
    printed = capsys.readouterr()
    assert code == 2 and len(printed.err.strip().splitlines()) == 1 and "best" not in printed.out
    assert f"study 'full_auto-" in printed.err and f"was made with LM 'fake' ({FAKE_MODEL_ID})" in printed.err
    assert "this search uses 'openai/another-model' (openai/another-model)" in printed.err
    assert "name a new study with --study NAME or search with --lm fake" in printed.err
    assert json.loads((tmp_path / "out" / "trials.json").read_text()) == trials
    mlflow.set_tracking_uri(uri)
    assert len(mlflow.search_runs(search_all_experiments=True, output_format="list",
                                  filter_string="tags.`guidebench.run_type` = 'search'")) == 1
    # Another spec of the same model (the fake's model id) resumes the study.
    assert main([*args, "--trials", "2", "--lm", FAKE_MODEL_ID]) == 0  # the later --trials wins
    assert "ran 1 trial(s) now; 2 in the study" in capsys.readouterr().out


def test_search_dev_limit_scores_trials_on_a_seeded_dev_subset_and_its_test_rescore_ranks(tmp_path, monkeypatch,
                                                                                        capsys):
    import json

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=8, dev=6, test=3)
    uri = tracking_uri(tmp_path)
    assert main(["search", "--program-family", "full_auto", "--data", str(data), "--lm", "fake", "--no-progress",
                 "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot", "--demos", "1:2",
                 "--trials", "1", "--dev-limit", "2", "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 0
    mlflow.set_tracking_uri(uri)
    trial = mlflow.search_runs(search_all_experiments=True, output_format="list",
                               filter_string="tags.`guidebench.run_type` = 'search_trial'")[0]
    assert trial.data.params["trial.optimizer"] == "labeled_fewshot"
    from guidebench.errors import GuidebenchError
    from guidebench.leaderboard.packages import from_mlflow_experiment

    with pytest.raises(GuidebenchError, match="no finished run"):  # trials and the search are not board variants
        from_mlflow_experiment(trial.info.experiment_id, uri)
    trials = json.loads((tmp_path / "out" / "trials.json").read_text())
    assert trials["best_trial"] == 0
    capsys.readouterr()
    assert main(["leaderboard", "--data", str(data), "--programs", "rule", "--results", str(tmp_path / "out" / "test"),
                 "--lm", "fake", "--no-track", "--out", str(tmp_path / "board")]) == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert len(board["rows"]) == 2 and all(row["n"] == 3 for row in board["rows"]), board["rows"]


def test_the_best_trial_compiles_again_from_the_saved_files_rule_gate_included(tmp_path, monkeypatch, capsys):
    # A search of the rule-gated hybrid draws its gate as a trial parameter; recipe.toml holds only the optimizer's
    # settings, so the saved files name the whole compile: program, gate, recipe, seed, temperature and LM.
    import json

    from programs.hybrid import parse_rule_set

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=2)
    uri, out = tracking_uri(tmp_path), tmp_path / "out"
    assert main(["search", "--program-family", "full_auto", "--data", str(data), "--lm", "fake", "--no-progress",
                 "--programs", "full_auto.hybrid", "--optimizers", "bootstrap_random_search", "--demos", "1:2",
                 "--candidates", "2:2", "--dev-limit", "2", "--trials", "2", "--seed", "3", "--tracking-uri", uri,
                 "--out", str(out)]) == 0
    trials = json.loads((out / "trials.json").read_text())
    best, argv = trials["best_params"], trials["best_compile"]
    assert "rules" in best and argv[argv.index("--rules") + 1] == best["rules"]
    assert argv[argv.index("--seed") + 1] == str(3 + trials["best_trial"])
    assert argv[argv.index("--temperature") + 1] == str(best["temperature"])
    assert "its program again, from the saved files: guidebench compile --program full_auto.hybrid" in \
        capsys.readouterr().out
    assert (out / "recipe.toml").read_text().splitlines()[1] == "# " + " ".join(argv)
    # Run as saved, in the search's folder: the same program state, rule gate included.
    monkeypatch.chdir(out)
    assert main([*argv[1:], "--tracking-uri", uri, "--out", str(tmp_path / "again"), "--eval-limit", "1",
                 "--no-progress"]) == 0
    searched, again = (json.loads(path.read_text()) for path in (out / "program.json", tmp_path / "again" /
                                                                   "program.json"))
    for state in (searched, again):
        state.pop("metadata", None)
    assert again == searched and again["rule_gate"]["rules"] == parse_rule_set(best["rules"])


def test_a_planner_search_draws_planner_hybrid_among_the_planners(tmp_path, monkeypatch):
    import json

    from guidebench.search.study import family_programs

    assert "planner.hybrid" in family_programs("planner") and "planner.rules" not in family_programs("planner")
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_planner_dataset(tmp_path / "data")
    assert main(["search", "--program-family", "planner", "--data", str(data), "--lm", "fake", "--no-progress",
                 "--programs", "planner.hybrid", "--optimizers", "labeled_fewshot,bootstrap_fewshot", "--demos", "1:2",
                 "--trials", "2", "--dev-limit", "4", "--tracking-uri", tracking_uri(tmp_path),
                 "--out", str(tmp_path / "out")]) == 0
    trials = json.loads((tmp_path / "out" / "trials.json").read_text())
    assert [trial["state"] for trial in trials["trials"]] == ["COMPLETE", "COMPLETE"], trials
    # the best trial re-scored on test: the rules chose every family
    summary = json.loads((tmp_path / "out" / "test" / "summary.json").read_text())
    metrics = json.loads((tmp_path / "out" / "test" / "metrics.json").read_text())
    assert summary["program"] == "planner.hybrid" and metrics["pivot_compliance"]["value"] == 1.0
    # what the best trial learned from: its demos' train records and the 4 dev records the trials were judged on;
    # the test re-score holds none of them
    from runtime.provenance import read_provenance

    learned = read_provenance(json.loads((tmp_path / "out" / "program.json").read_text()))
    assert learned.splits["dev"] == 4 and learned.splits["train"] >= 1
    assert summary["learned_from"]["status"] == "clean" and summary["learned_from"]["n_records"] == \
        summary["n_records"] and read_provenance(summary) == learned

@pytest.mark.slow
def test_search_runs_one_trial_with_the_embedded_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=6, dev=2, test=1)
    # the compact program: the embedded model at its token rate (the search path is what is under test)
    code = main(["search", "--program-family", "full_auto", "--data", str(data), "--trials", "1", "--lm", "local",
                 "--programs", "full_auto.compact", "--optimizers", "knn_fewshot", "--demos", "2:2",
                 "--temperature", "0.2:0.2", "--no-progress", "--tracking-uri", tracking_uri(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "ran 1 trial(s) now" in out and "best: trial 0" in out
    print(out, file=sys.stderr)
    import json

    from guidebench.lm.engine import LOCAL_MODEL_ID, model_sha256

    (trials,) = [json.loads(path.read_text()) for path in (tmp_path / "home" / "searches").glob("*/trials.json")]
    local = {"spec": "local", "model": LOCAL_MODEL_ID, "model_sha256": model_sha256()}
    assert trials["lm"] == local and [trial["lm"] for trial in trials["trials"]] == [local]


def _dashboard_get(app, path: str):
    """GET `path` from a WSGI app in process (no server, no port): (status, JSON body)."""
    import json
    from wsgiref.util import setup_testing_defaults

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path}
    setup_testing_defaults(environ)
    statuses = []
    body = b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    return statuses[0], json.loads(body)


def test_optuna_dashboard_reads_the_study_a_search_wrote(tmp_path, monkeypatch):
    from optuna_dashboard import wsgi

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=2)
    uri = tracking_uri(tmp_path)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    assert main(["search", "--program-family", "full_auto", "--data", str(data), "--lm", "fake", "--no-progress",
                 "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot,knn_fewshot", "--demos", "1:3",
                 "--trials", "2", "--storage", storage, "--study", "dash", "--tracking-uri", uri,
                 "--out", str(tmp_path / "out")]) == 0
    app = wsgi(storage)  # what `optuna-dashboard sqlite:///...` serves
    status, listing = _dashboard_get(app, "/api/studies")
    assert status.startswith("200")
    (summary,) = [s for s in listing["study_summaries"] if s["study_name"] == "dash"]
    status, study = _dashboard_get(app, f"/api/studies/{summary['study_id']}")
    assert status.startswith("200") and study["name"] == "dash"
    trials = study["trials"]
    assert len(trials) == 2 and all(t["state"] == "Complete" for t in trials)
    assert all({"program", "optimizer", "demos", "temperature"} <= {p["name"] for p in t["params"]} for t in trials)
    # Each trial names its MLflow run, so the dashboard leads to the run's metrics and program state.
    mlflow.set_tracking_uri(uri)
    for trial in trials:
        attrs = {a["key"]: a["value"] for a in trial["user_attrs"]}
        run = mlflow.get_run(attrs["mlflow_run_id"])
        assert run.data.tags["optuna.trial"] == str(trial["number"])
        assert run.data.metrics["dev.objective"] == pytest.approx(trial["values"][0])
