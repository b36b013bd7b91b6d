"""optimizers.bootstrap_fewshot: a budget stop during bootstrapping keeps the traces found (salvaged)."""

from __future__ import annotations

import optimizers
import programs
from evals import metrics_fullauto
from optimizer_support import decision_examples
from optimizers.budget import Budget

TRAIN = decision_examples(12)
DEV = decision_examples(6, offset=100)


def test_budget_stop_during_bootstrap_keeps_the_traces_found(fake_lm):
    recipe = optimizers.get("bootstrap_fewshot")().with_overrides(max_bootstrapped_demos=3, max_labeled_demos=3)
    result = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric,
                            Budget(max_lm_calls=2), seed=0)
    assert result.stopped_by_budget and result.kept == "salvaged"
    demos = result.program.predictors()[0].demos
    assert len(demos) == 3 and sum(1 for d in demos if d.get("augmented")) == 2
