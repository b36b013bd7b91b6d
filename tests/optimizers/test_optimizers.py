"""Optimizer recipes: each compiles with a fake LM, budgets stop cleanly and keep the best program,
dry runs make no LM call, checkpoints resume without repeating LM work, recipe files are the defaults."""

from __future__ import annotations

import json

import dspy
import pytest

import optimizers
import programs
from evals import metrics_fullauto
from guidebench.lm.factory import make_lm
from optimizer_support import decision_examples
from optimizers.base import RecipeError, with_labeled_demos
from optimizers.budget import Budget, BudgetExceeded, BudgetGuard
from optimizers.candidates import Candidate, CandidateTracker
from optimizers.checkpoint import Checkpoint
from optimizers.knn_fewshot import NearestDemos

TRAIN = decision_examples(12)
DEV = decision_examples(6, offset=100)
# Recipes that make no LM call while compiling.
NO_CALL = {"labeled_fewshot", "knn_fewshot"}


@pytest.fixture
def fake():
    """The deterministic fake LM as DSPy's LM for the test (uncached, so calls are counted)."""
    lm = make_lm("fake", cache=False)
    with dspy.context(lm=lm):
        yield lm


def _small(name: str) -> optimizers.Recipe:
    recipe = optimizers.get(name)()
    if name == "gepa":
        return recipe.with_overrides(max_metric_calls=16)
    if name == "simba":
        return recipe.with_overrides(bsize=4, max_steps=1, num_candidates=2)
    return recipe


@pytest.mark.parametrize("name", optimizers.names())
def test_every_recipe_compiles_with_a_fake_lm(fake, name):
    result = _small(name).compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric,
                                  seed=3, feedback_metric=metrics_fullauto.gepa_metric)
    assert result.recipe == name and result.kept == "optimizer" and not result.stopped_by_budget
    assert (result.usage["lm_calls"] == 0) == (name in NO_CALL)
    # The meter sees every LM call; COPRO asks for n proposals in one call, which the engine answers n times.
    if name == "copro":
        assert 0 < result.usage["lm_calls"] < fake.engine.calls
    else:
        assert result.usage["lm_calls"] == fake.engine.calls
    # The compiled program answers in format, and its saved state loads back into a fresh program.
    example = DEV[1]
    prediction = result.program(**example.inputs())
    assert prediction.parse_errors == [] and prediction.action in {"continue", "pause", "stop", "review"}
    state = json.loads(json.dumps(result.program.dump_state()))
    reloaded = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    assert reloaded(**example.inputs()).action == prediction.action
    if name not in NO_CALL:
        assert sum(len(p.demos) for p in result.program.predictors()) > 0


def test_recipe_files_are_the_documented_defaults():
    for name in optimizers.names():
        path = optimizers.recipe_file(name)
        recipe = optimizers.load(path=path)
        assert type(recipe) is optimizers.get(name)
        assert recipe.settings.model_dump() == recipe.defaults()
        assert path.read_text(encoding="utf-8") == recipe.render_toml(), f"{path} is stale: re-render it"


def test_recipe_file_yaml_overrides_and_errors(tmp_path):
    good = tmp_path / "knn.yaml"
    good.write_text("optimizer: KNNFewShot\nsettings:\n  k: 5\n  vectorizer: hashing\n")
    recipe = optimizers.load(path=good)
    assert recipe.name == "knn_fewshot" and recipe.settings.k == 5 and recipe.settings.vectorizer == "hashing"
    bad = tmp_path / "bad.toml"
    bad.write_text('optimizer = "bootstrap_fewshot"\n[settings]\nmax_demos = 3\n')
    with pytest.raises(RecipeError, match=r"bad\.toml.*'max_demos'"):
        optimizers.load(path=bad)
    with pytest.raises(RecipeError, match="recipe is for"):
        optimizers.load(name="copro", path=good)
    with pytest.raises(RecipeError, match="unknown optimizer"):
        optimizers.get("adamw")


def test_budget_stop_keeps_the_best_candidate_so_far(fake):
    recipe = optimizers.get("bootstrap_random_search")().with_overrides(num_candidate_programs=4, stop_at_score=1.0)
    # Each candidate costs len(DEV) calls to score and up to 3 to bootstrap: 10 calls stop the search
    # after the labeled-only candidate was scored and before the search finished.
    recipe = recipe.with_overrides(stop_at_score=1.0)
    full = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, _fussy_metric, seed=0)
    assert not full.stopped_by_budget and len(full.candidates) >= 3
    stopped = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, _fussy_metric, Budget(max_lm_calls=10),
                             seed=0)
    assert stopped.stopped_by_budget and "LM-call budget" in stopped.stop_reason
    assert stopped.kept == "best_candidate"
    assert stopped.usage["paid_calls"] <= 10
    best = max(stopped.candidates, key=lambda c: (c.n_examples, c.score, -c.index))
    assert json.loads(json.dumps(stopped.program.dump_state())) == best.state


def _fussy_metric(example, pred, trace=None):
    # The fake LM always decides right; scoring its reasons by length makes candidates differ.
    value = metrics_fullauto.metric(example, pred, trace)
    return value if trace is not None else value * (0.5 + 0.5 * (len(pred.reason) % 2))


def test_budget_stop_during_bootstrap_keeps_the_traces_found(fake):
    recipe = optimizers.get("bootstrap_fewshot")().with_overrides(max_bootstrapped_demos=3, max_labeled_demos=3)
    result = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric,
                            Budget(max_lm_calls=2), seed=0)
    assert result.stopped_by_budget and result.kept == "salvaged"
    demos = result.program.predictors()[0].demos
    assert len(demos) == 3 and sum(1 for d in demos if d.get("augmented")) == 2


def test_token_budget_and_guard_accounting(fake):
    guard = BudgetGuard(Budget(max_tokens=1))
    with guard.active():
        programs.get("full_auto.predict")(**DEV[0].inputs())
        with pytest.raises(BudgetExceeded, match="token budget"):
            programs.get("full_auto.predict")(**DEV[1].inputs())
    usage = guard.usage()
    assert usage["lm_calls"] == 1 and usage["total_tokens"] > 1 and guard.tripped
    with pytest.raises(ValueError):
        Budget(max_lm_calls=-1)


def test_dry_run_estimate_makes_no_lm_call_and_bounds_the_real_compile(fake):
    for name in ("bootstrap_fewshot", "bootstrap_random_search", "knn_fewshot"):
        recipe = optimizers.get(name)()
        before = fake.engine.calls
        cost = recipe.estimate(programs.get("full_auto.predict"), TRAIN, DEV)
        assert fake.engine.calls == before
        assert cost.sizes.base_prompt_tokens > 100 and cost.sizes.demo_tokens > 20 and cost.sizes.output_tokens > 5
        actual = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=0)
        assert actual.usage["lm_calls"] <= cost.lm_calls, name
        if name == "knn_fewshot":
            assert cost.lm_calls == 0
        else:
            assert cost.prompt_tokens > cost.lm_calls * cost.sizes.base_prompt_tokens * 0.9
        assert "total" in cost.render() and cost.to_dict()["lm_calls"] == cost.lm_calls


def test_knn_picks_the_nearest_examples_and_round_trips():
    wrapped = NearestDemos(programs.get("full_auto.predict"), TRAIN, k=2, vectorizer="tfidf")
    query = DEV[0].inputs()  # a failed turn
    nearest = wrapped.nearest(dict(query))
    assert len(nearest) == 2 and all(d.action == "stop" and d.last_turn_status == "failed" for d in nearest)
    state = json.loads(json.dumps(wrapped.dump_state()))
    loaded = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    assert isinstance(loaded, NearestDemos)
    assert [d.record_id for d in loaded.nearest(dict(query))] == [d.record_id for d in nearest]
    hashing = NearestDemos(programs.get("full_auto.predict"), TRAIN, k=1, vectorizer="hashing")
    assert hashing.nearest(dict(DEV[1].inputs()))[0].action == "pause"


def test_knn_recipe_embeds_the_fields_that_decide():
    recipe = optimizers.get("knn_fewshot")()
    full_auto = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric)
    assert full_auto.program._fields() == ["last_turn_status", "turn_error", "pending_approvals",
                                           "pending_tool_inputs", "compaction_events", "token_usage"]
    every = recipe.with_overrides(fields=[]).compile(programs.get("full_auto.predict"), TRAIN, DEV,
                                                     metrics_fullauto.metric)
    assert "turn_plan" in every.program._fields() and "thread_id" not in every.program._fields()
    planner = NearestDemos(programs.get("planner.predict"), [], fields=recipe.settings.fields)
    assert planner._fields() == ["strategy_family_constraints", "plateau_valid_iters_since_best"]


def test_candidate_tracker_prefers_full_evaluations():
    tracker = CandidateTracker()
    for score, n in ((0.9, 3), (0.6, 10), (0.7, 10), (0.7, 10)):
        tracker.add(Candidate(index=-1, score=score, n_examples=n, n_demos=1, instructions_hash="x", state={}))
    best = tracker.best()
    assert (best.index, best.score, best.n_examples) == (2, 0.7, 10)


def test_checkpoint_resume_repeats_no_lm_work(tmp_path):
    lm = make_lm("fake", cache=True)
    checkpoint = Checkpoint(tmp_path / "ckpt")
    recipe = optimizers.get("bootstrap_random_search")().with_overrides(num_candidate_programs=2, stop_at_score=1.0)
    with dspy.context(lm=lm):
        first = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, _fussy_metric, Budget(max_lm_calls=9),
                               seed=0, checkpoint=checkpoint)
        assert first.stopped_by_budget
        done_before = lm.engine.calls
        second = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, _fussy_metric, seed=0,
                                checkpoint=checkpoint)
    assert not second.stopped_by_budget
    # The finished calls of the first attempt come back from the compile's disk cache.
    assert second.usage["cache_hits"] >= done_before
    assert lm.engine.calls - done_before == second.usage["lm_calls"] - second.usage["cache_hits"]
    assert (tmp_path / "ckpt" / "cache").is_dir() and checkpoint.history_path.is_file()


def test_instruction_optimizers_start_from_labeled_demos():
    program = with_labeled_demos(programs.get("full_auto.zeroshot"), TRAIN, 3, seed=1)
    demos = program.predictors()[0].demos
    assert len(demos) == 3 and all(d.get("reason") and d.get("confidence") for d in demos)
