"""benchmarks.planner_choice_dr: each choice set's held-out doubly robust value on train + dev, never test."""

from __future__ import annotations

import math

from benchmarks import planner_choice_dr
from planner_logs_support import records_of
from programs.planner_learned import CHOICE_SETS


def test_it_values_both_sets_on_train_and_dev_and_picks_the_higher(profile_free_dataset):
    result = planner_choice_dr.held_out_values(profile_free_dataset)
    usable = [a for _, a in planner_choice_dr._attempts(profile_free_dataset)]
    test_ids = {r.record_id for r in records_of(profile_free_dataset, "test")}
    assert result["attempts"] == len(usable) and not test_ids & {a.record_id for a in usable}
    for name in CHOICE_SETS:
        assert math.isfinite(result[name]["dr_share"]) and result[name]["true_share"] is None
    assert result["picks"] == max(CHOICE_SETS, key=lambda name: result[name]["dr_share"])
