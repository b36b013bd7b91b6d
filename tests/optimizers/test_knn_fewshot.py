"""optimizers.knn_fewshot: the nearest demos per input, the fields that decide (the compact programs' too), a
state that round-trips, and a demo order that lets inputs sharing demos share the prompt prefix."""

from __future__ import annotations

import json
import os

import dspy

import optimizers
import programs
from evals import metrics_fullauto
from guidebench.lm.prompt import message_text, render_prompt
from optimizer_support import decision_examples
from optimizers.knn_fewshot import NearestDemos
from program_support import recorded_requests
from runtime import FullAutoTurnSummary

TRAIN = decision_examples(12)
DEV = decision_examples(6, offset=100)


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
    assert full_auto.learned_from == sorted(ex.record_id for ex in TRAIN)  # the pool; dev is never looked at
    assert full_auto.program._fields() == ["last_turn_status", "turn_error", "pending_approvals",
                                           "pending_tool_inputs", "compaction_events", "token_usage"]
    every = recipe.with_overrides(fields=[]).compile(programs.get("full_auto.predict"), TRAIN, DEV,
                                                     metrics_fullauto.metric)
    assert "turn_plan" in every.program._fields() and "thread_id" not in every.program._fields()
    planner = NearestDemos(programs.get("planner.predict"), [], fields=recipe.settings.fields)
    assert planner._fields() == ["strategy_family_constraints", "plateau_valid_iters_since_best"]


# ----- the order of the chosen demos: a shared prompt prefix ---------------------------------------

def _example(error: str, action: str) -> dspy.Example:
    inputs = programs.decision_inputs(FullAutoTurnSummary(thread_id="t", turn_id=error, turn_error=error))
    return dspy.Example(**inputs, action=action, next_input="", reason=f"{error}.", confidence=0.8).with_inputs(*inputs)


# Pool order A, B, C, D. X is nearest to C, then A, then B; Y to D, then B, then A: they share A and B.
POOL = [_example(word, action) for word, action in
        (("alpha", "stop"), ("beta", "pause"), ("gamma", "stop"), ("delta", "pause"))]
X = programs.decision_inputs(FullAutoTurnSummary(thread_id="t", turn_id="x",
                                                 turn_error="gamma gamma gamma alpha alpha beta"))
Y = programs.decision_inputs(FullAutoTurnSummary(thread_id="t", turn_id="y",
                                                 turn_error="delta delta delta beta beta alpha"))


def _knn(order: str, nearest_last: bool = True) -> NearestDemos:
    return NearestDemos(programs.get("full_auto.predict"), POOL, k=3, fields=["turn_error"],
                        nearest_last=nearest_last, demo_order=order)


def test_pool_order_lets_inputs_sharing_demos_share_the_prompt_through_them():
    knn = _knn("pool")
    assert [d.turn_id for d in knn.nearest(X)] == ["alpha", "beta", "gamma"]  # shared demos in pool order,
    assert [d.turn_id for d in knn.nearest(Y)] == ["alpha", "beta", "delta"]  # the nearest still last
    [x], [y] = recorded_requests(knn, X), recorded_requests(knn, Y)
    shared = 2 * 2  # the two shared demos, a user and an assistant turn each
    assert x.system == y.system and x.messages[:shared] == y.messages[:shared]
    assert x.messages[shared] != y.messages[shared]
    # the engine's prompts share everything up to and including the two shared demos
    shared_demos = "\n\n".join(message_text(m).strip() for m in x.messages[:shared])
    common = os.path.commonprefix([render_prompt(x).prompt, render_prompt(y).prompt])
    assert common.startswith(x.system.strip()) and shared_demos in common
    # By similarity (the default), the same two demos come in another order: the prompts part after the
    # instructions.
    default = _knn("similarity")
    assert [d.turn_id for d in default.nearest(X)] == ["beta", "alpha", "gamma"]
    assert [d.turn_id for d in default.nearest(Y)] == ["alpha", "beta", "delta"]
    [x], [y] = recorded_requests(default, X), recorded_requests(default, Y)
    assert x.messages[0] != y.messages[0]
    # Pool order without nearest_last: the chosen demos exactly in the pool's order.
    assert [d.turn_id for d in _knn("pool", nearest_last=False).nearest(Y)] == ["alpha", "beta", "delta"]


def test_demo_order_round_trips_and_the_frozen_selection_orders_alike():
    knn = _knn("pool")
    state = json.loads(json.dumps(knn.dump_state()))
    assert state["knn"]["demo_order"] == "pool"
    loaded = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    assert [d.turn_id for d in loaded.nearest(X)] == [d.turn_id for d in knn.nearest(X)]
    selection = knn.frozen_selection()
    assert [POOL[i].turn_id for i in selection.nearest_positions(X)] == ["alpha", "beta", "gamma"]
    del state["knn"]["demo_order"]  # saved before the option existed: by similarity
    assert optimizers.load_compiled(programs.get("full_auto.predict"), state).demo_order == "similarity"
    recipe = optimizers.get("knn_fewshot")()
    assert recipe.settings.demo_order == "similarity"  # the default keeps the order by similarity
    compiled = recipe.with_overrides(demo_order="pool").compile(programs.get("full_auto.predict"), TRAIN, DEV,
                                                                metrics_fullauto.metric)
    assert compiled.program.demo_order == "pool"


def test_knn_recipe_embeds_the_compact_programs_state_fields():
    recipe = optimizers.get("knn_fewshot")()
    full_auto = recipe.compile(programs.get("full_auto.compact"), TRAIN, DEV, metrics_fullauto.metric)
    assert full_auto.program._fields() == ["status", "approvals", "tool_inputs", "compactions", "tokens"]
    planner = NearestDemos(programs.get("planner.compact"), [], fields=recipe.settings.fields)
    assert planner._fields() == ["families", "plateau"]
