"""optimizers.knn_fewshot: the nearest demos per input, the fields that decide, and a state that round-trips."""

from __future__ import annotations

import json

import optimizers
import programs
from evals import metrics_fullauto
from optimizer_support import decision_examples
from optimizers.knn_fewshot import NearestDemos

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
    assert full_auto.program._fields() == ["last_turn_status", "turn_error", "pending_approvals",
                                           "pending_tool_inputs", "compaction_events", "token_usage"]
    every = recipe.with_overrides(fields=[]).compile(programs.get("full_auto.predict"), TRAIN, DEV,
                                                     metrics_fullauto.metric)
    assert "turn_plan" in every.program._fields() and "thread_id" not in every.program._fields()
    planner = NearestDemos(programs.get("planner.predict"), [], fields=recipe.settings.fields)
    assert planner._fields() == ["strategy_family_constraints", "plateau_valid_iters_since_best"]
