"""optimizers.checkpoint: a compile resumed from its checkpoint repeats no LM work."""

from __future__ import annotations

import dspy

import optimizers
import programs
from guidebench.lm.factory import make_lm
from optimizer_support import decision_examples, fussy_metric
from optimizers.budget import Budget
from optimizers.checkpoint import Checkpoint

TRAIN = decision_examples(12)
DEV = decision_examples(6, offset=100)


def test_checkpoint_resume_repeats_no_lm_work(tmp_path):
    lm = make_lm("fake", cache=True)
    checkpoint = Checkpoint(tmp_path / "ckpt")
    recipe = optimizers.get("bootstrap_random_search")().with_overrides(num_candidate_programs=2, stop_at_score=1.0)
    with dspy.context(lm=lm):
        first = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, fussy_metric, Budget(max_lm_calls=9),
                               seed=0, checkpoint=checkpoint)
        assert first.stopped_by_budget
        done_before = lm.engine.calls
        second = recipe.compile(programs.get("full_auto.predict"), TRAIN, DEV, fussy_metric, seed=0,
                                checkpoint=checkpoint)
    assert not second.stopped_by_budget
    # The finished calls of the first attempt come back from the compile's disk cache.
    assert second.usage["cache_hits"] >= done_before
    assert lm.engine.calls - done_before == second.usage["lm_calls"] - second.usage["cache_hits"]
    assert (tmp_path / "ckpt" / "cache").is_dir() and checkpoint.history_path.is_file()
