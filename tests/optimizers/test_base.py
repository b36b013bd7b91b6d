"""optimizers.base: every recipe compiles behind `Recipe.compile` with a fake LM; a budget stop keeps the best
program; compile-level retries with backoff ride out transient LM failures without repeating finished calls."""

from __future__ import annotations

import json

import dspy
import pytest

import optimizers
import optimizers.base as optimizers_base
import programs
from evals import metrics_fullauto
from lm_fault_support import FaultEngine, fault_lm
from optimizer_support import decision_examples, fussy_metric
from optimizers.demos import with_labeled_demos
from optimizers.budget import Budget
from optimizers.checkpoint import Checkpoint
from reliability_ledger import record as ledger

TRAIN = decision_examples(12)
DEV = decision_examples(6, offset=100)
# Recipes that make no LM call while compiling.
NO_CALL = {"labeled_fewshot", "knn_fewshot"}
# Recipes of DSPy optimizers (`fit` fits a trained model instead: tests/optimizers/test_fit.py).
LM_RECIPES = [name for name in optimizers.names() if optimizers.get(name).compiles_lm]


def _small(name: str) -> optimizers.Recipe:
    recipe = optimizers.get(name)()
    if name == "gepa":
        return recipe.with_overrides(max_metric_calls=16)
    if name == "simba":
        return recipe.with_overrides(bsize=4, max_steps=1, num_candidates=2)
    return recipe


@pytest.mark.parametrize("name", LM_RECIPES)
def test_every_recipe_compiles_with_a_fake_lm(fake_lm, name):
    result = _small(name).compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric,
                                  seed=3, feedback_metric=metrics_fullauto.gepa_metric)
    assert result.recipe == name and result.kept == "optimizer" and not result.stopped_by_budget
    assert (result.usage["lm_calls"] == 0) == (name in NO_CALL)
    # The meter sees every LM call; COPRO asks for n proposals in one call, which the engine answers n times.
    if name == "copro":
        assert 0 < result.usage["lm_calls"] < fake_lm.engine.calls
    else:
        assert result.usage["lm_calls"] == fake_lm.engine.calls
    # The compiled program answers in format, and its saved state loads back into a fresh program.
    example = DEV[1]
    prediction = result.program(**example.inputs())
    assert prediction.parse_errors == [] and prediction.action in {"continue", "pause", "stop", "review"}
    state = json.loads(json.dumps(result.program.dump_state()))
    reloaded = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    assert reloaded(**example.inputs()).action == prediction.action
    if name not in NO_CALL:
        assert sum(len(p.demos) for p in result.program.predictors()) > 0


@pytest.mark.parametrize("name", LM_RECIPES)
def test_every_recipe_compiles_a_rule_gated_program_on_the_turns_its_lm_decides(fake_lm, name):
    from runtime.rules import gated_decision

    student = programs.get("full_auto.hybrid")
    student.set_rules(["turn_failed", "pending_input"])
    result = _small(name).compile(student, TRAIN, DEV, metrics_fullauto.metric, seed=3,
                                  feedback_metric=metrics_fullauto.gepa_metric)
    compiled = getattr(result.program, "program", result.program)  # knn_fewshot wraps it
    assert compiled.rules == ["turn_failed", "pending_input"]
    # The optimizer learned from the turns the LM decides (`lm_examples`): no demo, no KNN pool entry, of a gated one.
    learned = [*(demo for p in result.program.predictors() for demo in p.demos), *getattr(result.program, "_pool", [])]
    assert all(gated_decision(dict(ex.items()), compiled.rules) is None for ex in learned
               if "last_turn_status" in ex), learned
    state = json.loads(json.dumps(result.program.dump_state()))
    reloaded = optimizers.load_compiled(programs.get("full_auto.hybrid"), state)
    assert getattr(reloaded, "program", reloaded).rules == compiled.rules
    assert [reloaded(**ex.inputs()).decided_by for ex in DEV[:2]] == ["turn_failed", "pending_input"]


def test_recipes_cap_the_train_and_dev_examples_with_a_seeded_sample(fake_lm, monkeypatch):
    recipe = optimizers.get("labeled_fewshot")().with_overrides(max_train_examples=5, max_val_examples=3)
    seen: list[tuple[list, list]] = []
    original = recipe._optimize
    monkeypatch.setattr(recipe, "_optimize", lambda program, train, val, ctx: seen.append((train, val))
                        or original(program, train, val, ctx))
    for _ in range(2):
        recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=3)
    (train, val), again = seen
    assert len(train) == 5 and len(val) == 3 and all(ex in TRAIN for ex in train) and all(ex in DEV for ex in val)
    assert again == (train, val)  # seeded: the same sample every time
    # The dry run plans on the same capped sets: COPRO scores depth x breadth candidates on each dev example.
    copro = optimizers.get("copro")().with_overrides(max_val_examples=3, breadth=2, depth=1)
    stages = {stage.name: stage.calls for stage in copro.estimate(programs.get("full_auto.predict"), TRAIN, DEV,
                                                                    count_tokens=len).stages}
    assert stages["score candidates"] == 2 * 3
    uncapped = optimizers.get("labeled_fewshot")()
    assert uncapped.settings.subsets(TRAIN, DEV, 3) == (list(TRAIN), list(DEV))


def test_the_sized_recipes_keep_selection_on_a_small_dev_sample():
    """Every recipe that scores candidates selects on a capped dev sample by default (sized for 2 cores)."""
    for name in ("bootstrap_random_search", "miprov2", "copro", "gepa"):
        assert 0 < optimizers.get(name)().settings.max_val_examples <= 24, name
    for name in ("bootstrap_fewshot", "miprov2", "simba", "gepa"):
        assert 0 < optimizers.get(name)().settings.max_train_examples <= 40, name


def test_budget_stop_keeps_the_best_candidate_so_far(fake_lm):
    recipe = optimizers.get("bootstrap_random_search")().with_overrides(num_candidate_programs=4, stop_at_score=1.0)
    # Each candidate costs len(DEV) calls to score and up to 3 to bootstrap: 10 calls stop the search
    # after the labeled-only candidate was scored and before the search finished.
    recipe = recipe.with_overrides(stop_at_score=1.0)
    full = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, fussy_metric, seed=0)
    assert not full.stopped_by_budget and len(full.candidates) >= 3
    stopped = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, fussy_metric, Budget(max_lm_calls=10),
                             seed=0)
    assert stopped.stopped_by_budget and "LM-call budget" in stopped.stop_reason
    assert stopped.kept == "best_candidate"
    assert stopped.usage["paid_calls"] <= 10
    best = max(stopped.candidates, key=lambda c: (c.n_examples, c.score, -c.index))
    assert json.loads(json.dumps(stopped.program.dump_state())) == best.state


def test_instruction_optimizers_start_from_labeled_demos():
    program = with_labeled_demos(programs.get("full_auto.zeroshot"), TRAIN, 3, seed=1)
    demos = program.predictors()[0].demos
    assert len(demos) == 3 and all(d.get("reason") and d.get("confidence") for d in demos)


# ----- LM faults: compile-level retries ------------------------------------------------------------

FAULT_TRAIN = decision_examples(8)
FAULT_DEV = decision_examples(4, offset=100)


def _bootstrap() -> optimizers.Recipe:
    return optimizers.get("bootstrap_fewshot")().with_overrides(max_bootstrapped_demos=3, max_labeled_demos=3)


def test_compile_retries_transient_failures_with_backoff_and_repeats_no_finished_call(tmp_path, monkeypatch):
    clean_engine = FaultEngine()
    with dspy.context(lm=fault_lm(clean_engine, cache=True)):
        clean = _bootstrap().compile(programs.get("full_auto.predict"), FAULT_TRAIN, FAULT_DEV, metrics_fullauto.metric,
                                     seed=0, checkpoint=Checkpoint(tmp_path / "clean"))
    # The same compile while the provider rate-limits, times out and drops the connection for a while.
    outage = {2: "rate_limit", 3: "timeout", 5: "connection", 6: "server"}
    engine = FaultEngine(lambda index, inputs: outage.get(index))
    sleeps: list[float] = []
    monkeypatch.setattr(optimizers_base.time, "sleep", lambda s: sleeps.append(s))
    with dspy.context(lm=fault_lm(engine, cache=True)):
        result = _bootstrap().compile(programs.get("full_auto.predict"), FAULT_TRAIN, FAULT_DEV,
                                      metrics_fullauto.metric, seed=0, checkpoint=Checkpoint(tmp_path / "faulty"),
                                      backoff_s=0.5)
    # Swallowed by DSPy's bootstrap, the failures would have cost demos: the retries make the result whole.
    # The outage outlasts the first retry (calls 5 and 6 fail during it): backoff doubles each time.
    assert result.retries == 2 and result.transient_lm_errors == len(outage)
    assert sleeps == [0.5, 1.0]
    assert result.program.dump_state() == clean.program.dump_state()
    assert result.summary()["retries"] == 2 and result.summary()["transient_lm_errors"] == len(outage)
    # Progress kept: no answered request reached the LM twice (the cache answered it); only failed ones ran again.
    assert len(engine.answered) == len(set(engine.answered))
    assert engine.calls == len(engine.answered) + len(outage)
    ledger("faults", scenario="compile, transient outage", injected=dict(engine.faults), retries=result.retries,
           backoff_s=sleeps, repeated_lm_calls=len(engine.answered) - len(set(engine.answered)),
           differs_from_fault_free=int(result.program.dump_state() != clean.program.dump_state()))


def test_backoff_grows_and_honours_retry_after(tmp_path, monkeypatch):
    engine = FaultEngine(lambda index, inputs: "rate_limit" if index < 30 else None)
    sleeps: list[float] = []
    monkeypatch.setattr(optimizers_base.time, "sleep", lambda s: sleeps.append(s))
    with dspy.context(lm=fault_lm(engine, cache=True)):
        result = _bootstrap().compile(programs.get("full_auto.predict"), FAULT_TRAIN, FAULT_DEV,
                                      metrics_fullauto.metric, seed=0, checkpoint=Checkpoint(tmp_path / "ckpt"),
                                      backoff_s=0.01, retries=5)
    assert result.retries >= 3 and sleeps[:3] == [0.02, 0.02, 0.04] and sleeps == sorted(sleeps)
    assert result.transient_lm_errors == 30 and len(engine.answered) == len(set(engine.answered))
    ledger("faults", scenario="compile, rate limited", injected=dict(engine.faults), retries=result.retries,
           backoff_s=sleeps, repeated_lm_calls=len(engine.answered) - len(set(engine.answered)))


def test_a_non_transient_failure_is_not_retried(tmp_path, monkeypatch):
    engine = FaultEngine(lambda index, inputs: "auth")
    sleeps: list[float] = []
    monkeypatch.setattr(optimizers_base.time, "sleep", lambda s: sleeps.append(s))
    with dspy.context(lm=fault_lm(engine, cache=True)), pytest.raises(Exception) as info:
        _bootstrap().compile(programs.get("full_auto.predict"), FAULT_TRAIN, FAULT_DEV, metrics_fullauto.metric,
                             seed=0, checkpoint=Checkpoint(tmp_path / "ckpt"))
    assert "invalid API key" in str(info.value) and sleeps == []
    ledger("faults", scenario="compile, bad API key", injected=dict(engine.faults), retries=0,
           failed_loudly=1, silently_degraded=0)
