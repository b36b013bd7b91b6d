"""Leaderboard: one frozen split, ranking with intervals, paired comparisons, cost, Pareto, diffs, reports; a
variant that learned from the board's records is flagged and never its champion."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dspy
import pytest

import programs
from evals.paired import mcnemar
from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.leaderboard.board import (
    SplitMismatchError,
    build_leaderboard,
    load_split,
    run_leaderboard,
    score_variant,
)
from guidebench.leaderboard.render import HTML_FILE, JSON_FILE, MARKDOWN_FILE
from guidebench.leaderboard.packages import (
    PackageManifest,
    SplitRef,
    from_mlflow_experiment,
    from_path,
    from_registry,
    resolve_variants,
    write_package,
)
from guidebench.leaderboard.pareto import pareto_front

from leaderboard_support import make_dataset, make_records, register_test_programs

BASELINES = ["logged", "rule", "full_auto.always_continue", "test.oracle", "test.flaky"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    register_test_programs()
    return make_dataset(tmp_path_factory.mktemp("lb") / "data", n=72, seed=3)


@pytest.fixture(scope="module")
def board_and_scored(dataset):
    return run_leaderboard(from_registry(BASELINES), dataset, "test", n_resamples=300)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    register_test_programs()


def test_rows_are_ranked_by_objective_and_every_metric_has_an_interval(board_and_scored):
    board, _ = board_and_scored
    objectives = [row.metrics["objective"].value for row in board.rows]
    assert objectives == sorted(objectives, reverse=True)
    assert [row.rank for row in board.rows] == list(range(1, len(BASELINES) + 1))
    assert board.rows[0].name == "test.oracle" and board.rows[0].champion and board.champion == "test.oracle"
    assert board.n_records == 60 and board.split == "test"
    for row in board.rows:
        assert row.n == 60
        for name, metric in row.metrics.items():
            if metric.value is not None:
                assert metric.ci_low <= metric.value <= metric.ci_high, (row.name, name)
        assert row.metrics["objective"].n == 60  # every toy record is labeled


def test_each_row_is_compared_with_the_champion_on_the_same_records(board_and_scored):
    board, scored = board_and_scored
    champion = board.row(board.champion)
    assert champion.comparison.diff == 0.0 and champion.comparison.p_value == 1.0
    by_label = {item.variant.label: item for item in scored}
    champion_rows = {r["record_id"]: r for r in by_label[board.champion].result.rows}
    for row in board.rows:
        if row.champion:
            continue
        comparison = row.comparison
        assert comparison.against == board.champion and comparison.metric == "objective"
        expected = row.metrics["objective"].value - champion.metrics["objective"].value
        assert comparison.diff == pytest.approx(expected, abs=1e-12)
        assert comparison.ci_low <= comparison.diff <= comparison.ci_high
        assert 0.0 < comparison.p_value <= 1.0
        # Accuracy is tested with McNemar's exact test on the paired per-record correctness.
        mine = by_label[row.name].result.rows
        test = mcnemar([r["scores"]["action_accuracy"] == 1.0 for r in mine],
                       [champion_rows[r["record_id"]]["scores"]["action_accuracy"] == 1.0 for r in mine])
        accuracy = row.comparisons["action_accuracy"]
        assert accuracy.method == "mcnemar_exact" and accuracy.p_value == pytest.approx(test.p_exact)
    # A clearly worse policy is significantly worse than the oracle.
    assert board.row("test.flaky").comparison.p_value < 0.05


def test_a_program_that_raises_is_scored_as_failures_not_a_crash(board_and_scored, dataset):
    board, _ = board_and_scored
    records = load_split(dataset, "test").records
    raising = sum(1 for r in records if int(r.turn_id.split("-")[-1]) % 3 == 0)
    flaky = board.row("test.flaky")
    assert flaky.errors == raising > 0
    assert flaky.metrics["error_rate"].value == pytest.approx(raising / len(records))
    assert any("raised" in note for note in flaky.notes)


def test_per_record_diff_lists_changed_outcomes_with_inputs_and_both_decisions(board_and_scored):
    board, scored = board_and_scored
    by_label = {item.variant.label: item for item in scored}
    diff = next(d for d in board.diffs if d.challenger == "logged")
    champ = {r["record_id"]: r["scores"]["objective"] for r in by_label[board.champion].result.rows}
    mine = {r["record_id"]: r["scores"]["objective"] for r in by_label["logged"].result.rows}
    assert diff.fixed == sum(1 for k in champ if mine[k] > champ[k])
    assert diff.broken == sum(1 for k in champ if mine[k] < champ[k]) > 0
    broken = [d for d in diff.records if d.change == "broken"]
    assert len(broken) == diff.broken
    for item in broken:
        assert item.challenger.score < item.champion.score
        assert item.inputs["last_turn_status"] in ("completed", "failed", "interrupted")
        assert item.champion.action and item.challenger.action and item.label
    assert {d.challenger for d in board.diffs} == set(BASELINES) - {board.champion}


def test_results_from_another_split_are_refused(dataset):
    test_split = load_split(dataset, "test")
    dev_split = load_split(dataset, "dev")
    logged, rule = from_registry(["logged", "rule"])
    on_test = score_variant(logged, test_split, n_resamples=50)
    on_dev = score_variant(rule, dev_split, n_resamples=50)
    with pytest.raises(SplitMismatchError, match="never mixed") as caught:
        build_leaderboard([on_test, on_dev], test_split, n_resamples=50)
    assert "'rule'" in str(caught.value) and "dev" in str(caught.value)
    # Same split identity but other records (a partial result) is refused too.
    on_test_2 = score_variant(rule, test_split, n_resamples=50)
    on_test_2.result.rows = on_test_2.result.rows[:-1]
    with pytest.raises(SplitMismatchError, match="other records"):
        build_leaderboard([on_test, on_test_2], test_split, n_resamples=50)


def test_a_split_changed_after_freezing_is_refused(dataset, tmp_path):
    from dataset_support import swapped_split

    copy = swapped_split(dataset, tmp_path / "data", into="test", source="dev")
    with pytest.raises(GuidebenchError, match="split 'test' .* the split changed after it was frozen"):
        load_split(copy, "test")


def test_cost_per_1000_decisions_and_pareto_front_with_a_fake_lm(dataset):
    from guidebench.lm.factory import configure_lm

    configure_lm("fake", cache=False)
    board, _ = run_leaderboard(from_registry(["rule", "full_auto.predict", "test.oracle"]), dataset, "test",
                               n_resamples=100)
    predict = board.row("full_auto.predict")
    assert predict.cost.lm_calls == pytest.approx(1000.0)
    assert predict.cost.total_tokens == pytest.approx(predict.cost.prompt_tokens + predict.cost.completion_tokens)
    assert predict.cost.total_tokens > 0 and predict.cost.seconds > 0
    assert board.row("rule").cost.lm_calls == 0 and board.row("rule").cost.total_tokens == 0
    points = [(row.metrics["objective"].value, row.cost.total_tokens) for row in board.rows]
    assert board.pareto == [board.rows[i].name for i in pareto_front(points)]
    assert "test.oracle" in board.pareto and "full_auto.predict" not in board.pareto


def test_pareto_front_keeps_only_undominated_points():
    points = [(0.9, 10.0), (0.8, 0.0), (0.7, 5.0), (0.9, 20.0), (None, 0.0), (0.95, 100.0)]
    assert pareto_front(points) == [0, 1, 5]


def test_cli_writes_json_markdown_html_and_plots(dataset, tmp_path, capsys):
    out = tmp_path / "board"
    code = main(["leaderboard", "--data", str(dataset), "--programs", "logged,rule", "--out", str(out),
                 "--no-track", "--resamples", "200"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "logged" in printed and "rule" in printed and "objective" in printed
    board = json.loads((out / JSON_FILE).read_text())
    assert [row["name"] for row in board["rows"]] and {r["name"] for r in board["rows"]} == {"logged", "rule"}
    for row in board["rows"]:
        for metric in row["metrics"].values():
            assert set(metric) == {"value", "ci_low", "ci_high", "n", "method", "n_resamples"}
        assert {"diff", "ci_low", "ci_high", "p_value"} <= set(row["comparison"])
        assert {"lm_calls", "total_tokens", "seconds"} <= set(row["cost"])
    challenger = next(r for r in board["rows"] if not r["champion"])
    assert challenger["comparison"]["diff"] is not None and challenger["comparison"]["p_value"] is not None
    markdown = (out / MARKDOWN_FILE).read_text()
    assert "| # | variant | objective |" in markdown and "Regenerate with" in markdown
    # every board names its test and interval method, n, and a verdict per row
    assert "paired permutation" in markdown and "BCa bootstrap (200 resamples)" in markdown
    assert "| verdict |" in markdown and ("cannot tell apart" in markdown or ", p = " in markdown)
    page = (out / HTML_FILE).read_text()
    assert page.count("data:image/png;base64,") == 2 and 'id="leaderboard-table"' in page
    assert "http://" not in page and "https://" not in page and "<script" not in page and "<link" not in page
    for png in ("leaderboard_metrics.png", "leaderboard_quality_vs_cost.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_user_errors_are_one_clear_line(dataset, tmp_path, capsys):
    code = main(["leaderboard", "--data", str(dataset), "--programs", "logged,nope", "--out", str(tmp_path / "o"),
                 "--no-track"])
    assert code == 2 and "unknown program 'nope'" in capsys.readouterr().err
    code = main(["leaderboard", "--data", str(tmp_path / "missing"), "--programs", "logged",
                 "--out", str(tmp_path / "o"), "--no-track"])
    assert code == 2 and "no such file" in capsys.readouterr().err
    code = main(["leaderboard", "--data", str(dataset), "--programs", "logged", "--champion", "rule",
                 "--out", str(tmp_path / "o"), "--no-track"])
    assert code == 2 and "--champion 'rule' is not on the board" in capsys.readouterr().err
    code = main(["leaderboard", "--data", str(dataset), "--programs", "planner.rules", "--out",
                 str(tmp_path / "o"), "--no-track"])
    assert code == 2 and "planner program" in capsys.readouterr().err


def _predict_with_demos(records) -> dspy.Module:
    program = programs.get("full_auto.predict")
    program.decide.demos = [programs.decision_example(record) for record in records]
    return program


def test_package_folder_loads_its_state_and_claims_from_other_splits_are_not_mixed(dataset, tmp_path):
    train = make_records(4, seed=11)
    other_split = SplitRef(dataset_id="f" * 64, split="test", split_hash="e" * 64)
    manifest = PackageManifest(name="fa-demos", version="1.2.0", entry="full_auto.predict", tags=["candidate"],
                               expected_metrics={"objective": 0.99}, expected_on=other_split,
                               evals=["full_auto"])
    folder = write_package(tmp_path / "pkgs" / "fa-demos", manifest, program=_predict_with_demos(train[:2]))
    (variant,) = from_path(tmp_path / "pkgs")
    assert variant.label == "fa-demos@1.2.0" and variant.manifest.compatible_with == "GuidanceInputs@v1"
    built = variant.build()
    assert [dict(demo)["turn_id"] for demo in built.decide.demos] == [r.turn_id for r in train[:2]]

    from guidebench.lm.factory import configure_lm

    configure_lm("fake", cache=False)
    board, _ = run_leaderboard([variant, *from_registry(["rule"])], dataset, "test", n_resamples=100,
                               champion="rule")
    row = board.row("fa-demos@1.2.0")
    assert row.version == "1.2.0" and row.source == f"package:{folder}"
    assert row.expected == {} and any("never mixed" in note for note in row.notes)


def test_package_champion_tag_and_manifest_errors(dataset, tmp_path):
    manifest = PackageManifest(name="deployed", version="2.0.0", entry="rule", tags=["champion"])
    write_package(tmp_path / "deployed", manifest)
    variants = resolve_variants(["logged", "test.oracle"], [tmp_path / "deployed"])
    board, _ = run_leaderboard(variants, dataset, "test", n_resamples=50)
    assert board.champion == "deployed@2.0.0" and board.row("deployed@2.0.0").champion
    assert "tagged champion" in board.champion_rule
    assert board.row("test.oracle").comparison.against == "deployed@2.0.0"

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "package.json").write_text(json.dumps({"name": "x", "version": "one", "entry": "rule"}))
    with pytest.raises(GuidebenchError, match=r"package\.json: field version"):
        from_path(bad)
    (bad / "package.json").write_text(json.dumps({"name": "x", "version": "1.0.0", "entry": "rule",
                                                  "state": "program.pkl"}))
    with pytest.raises(GuidebenchError, match="pickles are never loaded"):
        from_path(bad)
    with pytest.raises(GuidebenchError, match="listed twice"):
        resolve_variants(["rule"], [tmp_path / "deployed", tmp_path / "deployed"])


def test_mlflow_runs_are_variants_and_the_board_is_tracked(dataset, tmp_path, capsys):
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment("compiles", artifact_location=(tmp_path / "artifacts").as_uri())
    state = tmp_path / "state" / "program.json"
    state.parent.mkdir()
    _predict_with_demos(make_records(3, seed=5)).save(str(state))
    # What a compile logs: the state, and its own replay of the test split (here with the fake LM).
    from guidebench.evaluation.run import write_outputs
    from guidebench.lm.factory import configure_lm
    from guidebench.leaderboard.packages import load_state_file
    from evals.replay import replay

    configure_lm("fake", cache=False)
    split = load_split(dataset, "test")
    compiled = load_state_file(programs.get("full_auto.predict"), state, "compiled")
    logged_result = replay(compiled, split.records, progress=False, name="full_auto.predict+LabeledFewShot")
    write_outputs(logged_result, tmp_path / "compile-test", {
        "dataset_id": split.ref.dataset_id, "split": "test", "split_hash": split.ref.split_hash, "lm_spec": "fake"})
    with mlflow.start_run(experiment_id=experiment, run_name="predict+labeled") as run:
        mlflow.log_params({"program": "full_auto.predict", "optimizer": "LabeledFewShot",
                           "dataset_id": split.ref.dataset_id, "split_hash.test": split.ref.split_hash})
        mlflow.log_metrics({"test.objective": logged_result.metrics["objective"].value, "test.usage.lm_calls": 60})
        mlflow.log_artifact(str(state))
        mlflow.log_artifacts(str(tmp_path / "compile-test"), artifact_path="test")
    with mlflow.start_run(experiment_id=experiment, run_name="eval only"):
        mlflow.log_params({"program": "rule"})  # no state artifact: not a variant

    variants = from_mlflow_experiment("compiles", tracking_uri=uri, cache_dir=tmp_path / "cache")
    assert [v.origin for v in variants] == [f"mlflow:{run.info.run_id}"]
    assert len(variants[0].build().decide.demos) == 3
    assert variants[0].details["result_artifacts"] == {"test": "test"}

    # The same run on a board of another split is replayed, its logged test results left out.
    board_dev, _ = run_leaderboard(variants, dataset, "dev", lm="fake", n_resamples=50)
    assert any(note.startswith("replayed here: no logged results") for note in board_dev.rows[0].notes)
    assert capsys.readouterr().out.startswith("LM fake (deterministic")  # that replay called the LM, and said so

    out = tmp_path / "board"
    code = main(["leaderboard", "--data", str(dataset), "--programs", "rule", "--from-mlflow", "compiles",
                 "--lm", "fake", "--no-cache", "--tracking-uri", uri, "--out", str(out), "--resamples", "100"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    # Its logged results stand in for a replay, and `rule` calls no LM: no LM line, no cost announced.
    assert not [line for line in printed.out.splitlines() if line.startswith("LM ")], printed.out
    board = json.loads((out / JSON_FILE).read_text())
    assert {row["name"] for row in board["rows"]} == {"rule", f"predict+labeled#{run.info.run_id[:8]}"}
    compiled_row = next(row for row in board["rows"] if row["source"].startswith("mlflow:"))
    assert any("not replayed here" in note for note in compiled_row["notes"])
    for name, value in logged_result.metrics.items():  # same rows; intervals redrawn with the board's resamples
        if name != "latency_s_per_decision":
            assert compiled_row["metrics"][name]["value"] == value.value and compiled_row["metrics"][name]["n"] == value.n
    assert compiled_row["cost"]["lm_calls"] == pytest.approx(1000.0)
    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(board["mlflow_run_id"])
    assert parent.data.tags["guidebench.run_type"] == "leaderboard"
    assert parent.data.params["split_hash"] == board["split_hash"]
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "leaderboard")}
    assert {f"leaderboard/{name}" for name in (JSON_FILE, MARKDOWN_FILE, HTML_FILE)} <= logged
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert len(children) == 2
    for child in children:
        row = next(r for r in board["rows"] if r["name"] == child.data.tags["guidebench.variant"])
        assert child.data.metrics["objective"] == pytest.approx(row["metrics"]["objective"]["value"])
        assert math.isclose(child.data.metrics["cost_per_1k.lm_calls"], row["cost"]["lm_calls"])
    # The board's own runs are never picked up as variants of a later board.
    # Frozen into a package folder, the run's own test figures become claims the board checks.
    from guidebench.leaderboard.packages import package_from_run

    folder = package_from_run(run.info.run_id, tmp_path / "pkgs" / "compiled", version="0.2.0", tracking_uri=uri)
    (package,) = from_path(folder)
    assert package.manifest.expected_on == split.ref and package.manifest.expected_metrics == {
        "objective": logged_result.metrics["objective"].value}
    board_pkg, _ = run_leaderboard([package], dataset, "test", lm="fake", n_resamples=100)
    row = board_pkg.rows[0]
    assert row.version == "0.2.0" and row.expected == {"objective": logged_result.metrics["objective"].value}
    assert not any("outside the measured interval" in note for note in row.notes)
    with pytest.raises(GuidebenchError, match="no finished run with a program"):
        from_mlflow_experiment(parent.info.experiment_id, tracking_uri=uri, cache_dir=tmp_path / "cache2")


def test_a_split_without_labels_still_gives_a_board(tmp_path):
    records = [r.model_copy(update={"label": None}) for r in make_records(24, seed=4)]
    from evals.data import save_dataset

    save_dataset(tmp_path / "data", "fullauto", {"train": records[:4], "dev": records[4:8], "test": records[8:]})
    board, _ = run_leaderboard(from_registry(["rule", "logged"]), tmp_path / "data", "test", n_resamples=50)
    assert [row.name for row in board.rows] == ["rule", "logged"]  # no objective: the order given
    assert board.rows[1].comparison.diff is None and "no objective" in board.champion_rule
    assert any("No record of this split has an outcome label" in note for note in board.notes)
    override = board.rows[1].comparisons["guardrail_override_rate"]
    assert override.diff is not None and override.p_value is not None


def test_logged_and_rule_on_an_imported_real_format_log(tmp_path, capsys):
    from guidebench.data import import_logs
    from replay_support import expected_override_rate, hand_made_lines, write_workspace

    lines = hand_made_lines()
    workspace = write_workspace(tmp_path / "workspace", lines)
    import_logs(workspace, kind="fullauto", out=tmp_path / "data")
    out = tmp_path / "board"
    code = main(["leaderboard", "--data", str(tmp_path / "data"), "--split", "all", "--programs", "logged,rule",
                 "--out", str(out), "--no-track", "--resamples", "200"])
    assert code == 0, capsys.readouterr().err
    board = json.loads((out / JSON_FILE).read_text())
    assert board["n_records"] == len(lines) and board["split"] == "all"
    logged = next(row for row in board["rows"] if row["name"] == "logged")
    assert logged["metrics"]["guardrail_override_rate"]["value"] == pytest.approx(expected_override_rate(lines))
    challenger = next(row for row in board["rows"] if not row["champion"])
    assert {"diff", "ci_low", "ci_high", "p_value"} <= set(challenger["comparison"])
    assert (out / MARKDOWN_FILE).is_file() and (out / HTML_FILE).is_file()


def test_earlier_eval_results_join_only_a_board_of_their_own_split(dataset, tmp_path, capsys):
    from guidebench.evaluation.run import evaluate

    evaluate("test.flaky", dataset, split="test", out_dir=tmp_path / "flaky-test", track=False, progress=False)
    evaluate("rule", dataset, split="dev", out_dir=tmp_path / "rule-dev", track=False, progress=False)
    out = tmp_path / "board"
    code = main(["leaderboard", "--data", str(dataset), "--programs", "logged,test.flaky", "--results",
                 str(tmp_path / "flaky-test"), "--out", str(out), "--no-track", "--resamples", "200"])
    assert code == 0, capsys.readouterr().err
    rows = {row["name"]: row for row in json.loads((out / JSON_FILE).read_text())["rows"]}
    replayed, admitted = rows["test.flaky"], rows["test.flaky [results]"]
    assert admitted["source"] == f"results:{tmp_path / 'flaky-test'}"
    # The stored rows give exactly the numbers of a replay on the spot, errors included (latency aside).
    quality = [name for name in replayed["metrics"] if name != "latency_s_per_decision"]
    assert {m: admitted["metrics"][m] for m in quality} == {m: replayed["metrics"][m] for m in quality}
    assert admitted["errors"] == replayed["errors"] > 0

    code = main(["leaderboard", "--data", str(dataset), "--programs", "logged", "--results",
                 str(tmp_path / "rule-dev"), "--out", str(tmp_path / "refused"), "--no-track"])
    err = capsys.readouterr().err
    assert code == 2 and "refusing 'full_auto.rules'" in err and "/dev" in err and "never mixed" in err
    assert not (tmp_path / "refused").exists()


def test_a_result_without_split_hash_is_pinned_by_the_dataset_id(dataset, tmp_path):
    from guidebench.evaluation.run import evaluate

    folder = tmp_path / "rule-test"
    evaluate("rule", dataset, split="test", out_dir=folder, track=False, progress=False)
    summary = json.loads((folder / "summary.json").read_text())
    summary.pop("split_hash")
    (folder / "summary.json").write_text(json.dumps(summary))
    board, _ = run_leaderboard(from_registry(["logged"]), dataset, "test", results=[folder], n_resamples=50)
    assert any("identified by the dataset id" in note for note in board.row("full_auto.rules").notes)
    summary["dataset_id"] = "0" * 64
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(GuidebenchError, match="missing split_hash"):
        run_leaderboard(from_registry(["logged"]), dataset, "test", results=[folder], n_resamples=50)


def test_a_board_on_the_compile_eval_subset_admits_only_results_on_that_subset(dataset, tmp_path):
    from evals.replay import replay
    from guidebench.evaluation.run import evaluate, write_outputs
    from guidebench.leaderboard.split import limit_split

    full = load_split(dataset, "test")
    subset = limit_split(full, 10)
    assert len(subset.records) == 10 and subset.ref == full.ref
    assert limit_split(full, 10).record_ids == subset.record_ids  # seeded: always the same records
    result = replay("test.flaky", subset.records, progress=False, name="test.flaky")
    write_outputs(result, tmp_path / "flaky-subset", {"dataset_id": full.ref.dataset_id, "split": "test",
                                                      "split_hash": full.ref.split_hash})
    board, _ = run_leaderboard(from_registry(["logged"]), dataset, "test", eval_limit=10, n_resamples=50,
                               results=[tmp_path / "flaky-subset"])
    assert board.n_records == 10 and "10 of 60 records" in board.subset
    assert board.row("test.flaky").n == 10
    # Without --eval-limit the refusal says what to pass (it used to say only "50 missing").
    with pytest.raises(SplitMismatchError) as refused:
        run_leaderboard(from_registry(["logged"]), dataset, "test", n_resamples=50, results=[tmp_path / "flaky-subset"])
    assert str(refused.value).endswith("(50 missing, 0 extra); results are never mixed: it was scored on the seeded "
                                       "subset of 10 records that `guidebench compile --eval-limit 10` evaluates; "
                                       "add --eval-limit 10 to rank on those records"), str(refused.value)

    evaluate("test.flaky", dataset, split="test", out_dir=tmp_path / "flaky-full", track=False, progress=False)
    with pytest.raises(SplitMismatchError, match="50 extra"):
        run_leaderboard(from_registry(["logged"]), dataset, "test", eval_limit=10, n_resamples=50,
                        results=[tmp_path / "flaky-full"])


# ----- no champion from records it learned from ----------------------------------------------------

def test_a_variant_is_never_champion_on_records_it_learned_from(fitted):
    variants = [*from_registry(["logged", "full_auto.rules"]), *from_path(fitted["ex"])]
    # On its own test split the fit, tagged champion, is the champion: it learned from none of these records.
    clean, _ = run_leaderboard(variants, fitted["ds"], "test", n_resamples=50)
    assert clean.champion == "learned@0.1.0" and clean.row("learned@0.1.0").learned_from.n_overlap == 0
    # The same logs imported with another seed: their test split holds records it was fit on.
    board, _ = run_leaderboard(variants, fitted["ds1"], "test", n_resamples=50)
    row, n = board.row("learned@0.1.0"), board.row("learned@0.1.0").learned_from.n_overlap
    assert n > 0 and not row.champion and board.champion in ("logged", "full_auto.rules")
    assert board.champion_rule.endswith("; 1 variant(s) learned from records of this split and cannot be champion: "
                                        "learned@0.1.0")
    assert row.notes[0].startswith(f"cannot be champion: {n} of the {board.n_records} records of split test of "
                                   "dataset ") and row.verdict() == f"learned from {n} of {board.n_records}: no evidence"
    assert board.row("logged").learned_from.status == "clean"  # the deployed policy learned from nothing
    with pytest.raises(GuidebenchError, match=rf"^--champion 'learned@0.1.0' refused: {n} of the "):
        run_leaderboard(variants, fitted["ds1"], "test", n_resamples=50, champion="learned@0.1.0")


def test_a_compile_s_dev_results_never_make_it_champion_of_a_dev_board(fitted, tmp_path, capsys):
    import mlflow

    from guidebench.leaderboard.tracking import VARIANT_RUN_TYPE
    from optimizer_support import tracking_uri

    uri = tracking_uri(tmp_path)
    args = ["leaderboard", "--data", str(fitted["ds"]), "--split", "dev", "--results", str(fitted["fit"] / "dev"),
            "--resamples", "100"]
    assert main([*args, "--programs", "logged", "--out", str(tmp_path / "board"), "--tracking-uri", uri]) == 0
    board = json.loads((tmp_path / "board" / JSON_FILE).read_text())
    rows = {row["name"]: row for row in board["rows"]}
    fit = rows["full_auto.learned+fit"]
    assert board["champion"] == "logged" and not fit["champion"]
    assert fit["learned_from"]["n_overlap"] == fit["n"] == board["n_records"]  # the fit chose and refit on all of dev
    assert f"full_auto.learned+fit: cannot be champion: {fit['n']} of the {fit['n']} records of split dev" in \
        (tmp_path / "board" / MARKDOWN_FILE).read_text()
    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = {run.data.tags["guidebench.variant"]: run for run in client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string=f"tags.`guidebench.run_type` = '{VARIANT_RUN_TYPE}'")}
    assert runs["full_auto.learned+fit"].data.params["learned_from"] == "overlap"
    assert runs["full_auto.learned+fit"].data.params["learned_from_overlap"] == str(fit["n"])
    # alone on the board, nothing can be champion: refused in one line
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "alone"), "--no-track"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no variant can be champion: each learned from records of this split" in err
    assert not (tmp_path / "alone").exists()


def test_verdicts_in_plain_words():
    from guidebench.leaderboard.models import Comparison

    def comparison(metric, diff, p):
        return Comparison(against="c", metric=metric, diff=diff, ci_low=None, ci_high=None, p_value=p, n=40,
                          method="permutation_monte_carlo")

    assert comparison("objective", 0.1, 0.012).verdict() == "better, p = 0.012"
    assert comparison("objective", -0.1, 0.03).verdict() == "worse, p = 0.030"
    assert comparison("parse_failure_rate", -0.1, 0.03).verdict() == "better, p = 0.030"  # lower is better
    assert comparison("objective", 0.3, 0.25).verdict() == "cannot tell apart (p = 0.250, n = 40)"


def test_a_planner_board_shows_each_rows_off_policy_estimate_and_defaults_to_the_deployed_planner(
        profile_free_dataset, outcome_fit, tmp_path, monkeypatch):
    from guidebench.leaderboard.render import render_markdown

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    board, _ = run_leaderboard(from_registry(["planner.rules", "planner.logged"]), profile_free_dataset, "test",
                               n_resamples=200)
    assert board.champion == "planner.logged" and "deployed planner" in board.champion_rule
    assert board.cycles_model.startswith("learned")
    logged, rules = board.row("planner.logged"), board.row("planner.rules")
    assert logged.off_policy.ess == logged.off_policy.n and "on-policy" in logged.off_policy.note
    assert rules.off_policy.estimator == "dr" and set(rules.off_policy.all) == {"dm", "ipw", "dr"}
    cell = rules.off_policy
    if cell.value is not None and cell.ci_low is None:  # the test split's few episodes: no 95% interval
        assert "too few episodes" in cell.note and "too few episodes" in cell.text()
    else:
        assert cell.value is None or cell.ci_low <= cell.value <= cell.ci_high
    text = render_markdown(board)
    assert "improvement, off-policy [95% CI]" in text and "**Cycles model**: learned" in text
    # the share of each family's records that rest on the outcome model alone, per row
    shares = rules.off_policy.extrapolated
    assert shares and 0 < sum(s.n for s in shares.values()) <= cell.n  # no-change records need no estimate
    assert "extrapolated (propensity < 0.05)" in text and rules.off_policy.extrapolated_text() in text
    assert not any(s.extrapolated for s in logged.off_policy.extrapolated.values())  # on-policy: never


def test_verdicts_never_contradict_their_interval_and_too_few_episodes_give_none():
    from guidebench.leaderboard.models import Comparison

    def comparison(diff, p, low, high, **more):
        return Comparison(against="c", metric="objective", diff=diff, ci_low=low, ci_high=high, p_value=p, n=83,
                          method="permutation_monte_carlo", **more)

    # the case measured on main: p = 0.048 beside an interval holding 0 was called "better"
    assert comparison(0.072, 0.048, -0.004, 0.155).verdict() == (
        "cannot tell apart (p = 0.048, but the 95% interval [-0.004, 0.155] includes 0; n = 83)")
    assert comparison(0.072, 0.03, 0.01, 0.155).verdict() == "better, p = 0.030"
    assert comparison(0.05, 0.07, 0.001, 0.1).verdict() == (
        "cannot tell apart (p = 0.070, though the 95% interval excludes 0; n = 83)")
    few = Comparison(against="c", metric="objective", diff=0.2, ci_low=None, ci_high=None, p_value=None, n=141,
                     method="too_few_groups", n_groups=4)
    assert few.verdict() == "too few episodes (4 < 10): no verdict"
    assert few.test() == "no test: too few episodes (4 < 10)" and few.interval() == "no interval: too few episodes (4 < 10)"


def _planner_evals(dataset: Path, tmp_path: Path) -> dict[str, Path]:
    from guidebench.evaluation.run import evaluate

    folders = {"rules-sim": ("planner.rules", "sim"), "logged-learned": ("planner.logged", "learned"),
               "rules-learned": ("planner.rules", "learned")}
    for folder, (program, model) in folders.items():
        evaluate(program, dataset, split="test", out_dir=tmp_path / folder, track=False, progress=False,
                 cycles_model=model, n_resamples=100)
    return {folder: tmp_path / folder for folder in folders}


def test_a_planner_board_refuses_results_scored_with_another_cycles_model(profile_free_dataset, tmp_path,
                                                                          capsys):
    """The measured case: rules scored by the simulator on profile-less logs (no estimate anywhere) beside the
    deployed planner scored by the learned model; the board said "Cycles model: learned" and rated rules better."""
    folders = _planner_evals(profile_free_dataset, tmp_path)
    sim_summary = json.loads((folders["rules-sim"] / "summary.json").read_text())
    n = sim_summary["n_records"]
    # no estimate: no objective (it was 1.000 [1.000, 1.000], compliance alone), and every record counted
    assert "objective" in sim_summary["omitted_metrics"] and sim_summary["cycles_model"]["unscored"] == n
    assert sim_summary["cycles_model"]["left_out"] == {"model_does_not_apply": n}
    assert any(note.startswith(f"{n} of {n} records left out of objective") for note in sim_summary["notes"])
    both = [folders["rules-sim"], folders["logged-learned"]]
    with pytest.raises(GuidebenchError) as refused:
        run_leaderboard([], profile_free_dataset, "test", results=both, n_resamples=50)
    line = str(refused.value)
    assert "\n" not in line and "cycles model sim" in line and "this board uses learned" in line
    assert "planner.rules" in line and "--cycles-model learned" in line
    # the reverse mix, through the command: a board on the simulator refuses the learned result, naming both
    code = main(["leaderboard", "--data", str(profile_free_dataset), "--programs", "planner.rules", "--results",
                 str(folders["logged-learned"]), "--cycles-model", "sim", "--out", str(tmp_path / "board"),
                 "--no-track"])
    err = capsys.readouterr().err
    assert code == 2 and "cycles model learned, this board uses sim" in err and not (tmp_path / "board").exists()
    # the same model fit differently (another seed, settings or data) is another context: refused too
    summary = json.loads((folders["rules-learned"] / "summary.json").read_text())
    summary["cycles_model"]["fit_key"] = "0" * 20
    (folders["rules-learned"] / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(GuidebenchError, match="model fit 00000000000000000000, this board's is fit"):
        run_leaderboard([], profile_free_dataset, "test", results=[folders["rules-learned"],
                                                                      folders["logged-learned"]], n_resamples=50)
    summary["cycles_model"]["fit_key"] = json.loads(
        (folders["logged-learned"] / "summary.json").read_text())["cycles_model"]["fit_key"]
    (folders["rules-learned"] / "summary.json").write_text(json.dumps(summary))
    board, _ = run_leaderboard([], profile_free_dataset, "test", results=[folders["rules-learned"],
                                                                          folders["logged-learned"]], n_resamples=50)
    assert board.cycles_model.startswith("learned") and len(board.rows) == 2


def test_a_planner_board_without_any_estimate_ranks_no_compliance_as_objective(profile_free_dataset, tmp_path):
    board, _ = run_leaderboard(from_registry(["planner.rules", "planner.logged"]), profile_free_dataset, "test",
                               n_resamples=50, cycles_model="sim")
    assert all(row.metrics["objective"].value is None for row in board.rows)
    assert all(row.metrics["pivot_compliance"].value is not None for row in board.rows)
    assert any("No record of this split has an improvement estimate by the sim cycles model" in note
               for note in board.notes)
    rules = board.row("planner.rules")
    assert rules.verdict() == "not compared" and any("left out of objective" in note for note in rules.notes)


def test_a_planner_board_compares_episodes_and_says_so_when_there_are_too_few(profile_free_dataset, tmp_path):
    from evals.stats import MIN_GROUPS
    from guidebench.leaderboard.render import render_markdown

    board, _ = run_leaderboard(from_registry(["planner.rules", "planner.logged"]), profile_free_dataset, "test",
                               n_resamples=50)
    rules = board.row("planner.rules")
    episodes = rules.comparison.n_groups
    assert episodes is not None and episodes < MIN_GROUPS  # the fixture's test split holds a few episodes
    objective = rules.metrics["objective"]
    assert objective.ci_low is None and objective.n_groups == episodes and objective.method == "too_few_groups"
    assert rules.comparison.p_value is None and rules.verdict() == f"too few episodes ({episodes} < 10): no verdict"
    text = render_markdown(board)
    assert f"too few episodes ({episodes} < 10)" in text and f"on the same {board.n_records} records" not in text
    assert f"of {board.n_records} records in {episodes} episodes (the unit)" in text
