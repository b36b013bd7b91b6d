"""optimizers.estimate: a dry run makes no LM call and bounds the real compile."""

from __future__ import annotations

import optimizers
import programs
from evals import metrics_fullauto
from optimizer_support import decision_examples

TRAIN = decision_examples(12)
DEV = decision_examples(6, offset=100)


def test_dry_run_estimate_makes_no_lm_call_and_bounds_the_real_compile(fake_lm):
    for name in ("bootstrap_fewshot", "bootstrap_random_search", "knn_fewshot"):
        recipe = optimizers.get(name)()
        before = fake_lm.engine.calls
        cost = recipe.estimate(programs.get("full_auto.predict"), TRAIN, DEV)
        assert fake_lm.engine.calls == before
        assert cost.sizes.base_prompt_tokens > 100 and cost.sizes.demo_tokens > 20 and cost.sizes.output_tokens > 5
        actual = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=0)
        assert actual.usage["lm_calls"] <= cost.lm_calls, name
        if name == "knn_fewshot":
            assert cost.lm_calls == 0
        else:
            assert cost.prompt_tokens > cost.lm_calls * cost.sizes.base_prompt_tokens * 0.9
        assert "total" in cost.render() and cost.to_dict()["lm_calls"] == cost.lm_calls
