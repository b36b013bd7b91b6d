"""benchmarks.bench_offpolicy: the top-1 is over the loop runner's allowed families, the protocol's next to it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks import bench_offpolicy
from runtime.advisor import FAMILIES

SCHEDULE, LOADS, DEPS = FAMILIES
ALL = json.dumps(list(FAMILIES))
LOWERING = json.dumps([LOADS, DEPS])


def _results(folder, chosen: list[str]) -> None:
    """An eval's results.parquet: two records near the bound (the protocol allows the bound-lowering families only,
    the runner all three) and one where nothing rules a family out."""
    folder.mkdir()
    pd.DataFrame({
        "group_id": ["e1", "e1", "e2"], "iteration_id": [1, 2, 1], "strategy_family": chosen,
        "applied_family": chosen, "logged_family": [SCHEDULE, LOADS, DEPS],
        "allowed_families": [ALL, ALL, ALL], "compliant_families": [LOWERING, LOWERING, ALL],
        "score.cycles_improvement": [90.0, 10.0, 5.0], "observed_improvement": [80.0, 0.0, 10.0],
        "score.pivot_compliance": [float(f != SCHEDULE) if i < 2 else 1.0 for i, f in enumerate(chosen)],
    }).to_parquet(folder / "results.parquet")


TRUTH = {("e1", 1): {SCHEDULE: 100.0, LOADS: 10.0, DEPS: 5.0},  # rescheduling pays though the rule advises against it
         ("e1", 2): {SCHEDULE: 1.0, LOADS: 30.0, DEPS: 5.0},
         ("e2", 1): {SCHEDULE: 1.0, LOADS: 2.0, DEPS: 20.0}}


@pytest.fixture
def frames(tmp_path):
    truth = {key: {"expected_improvement": gains} for key, gains in TRUTH.items()}
    made = {}
    for name, chosen in (("learned", [SCHEDULE, LOADS, DEPS]), ("rules", [LOADS, DEPS, SCHEDULE]),
                         ("logged", [SCHEDULE, LOADS, DEPS])):
        _results(tmp_path / name, chosen)
        made[name] = bench_offpolicy._rows(tmp_path / name, truth)
    return made


def test_the_truly_best_family_is_the_best_the_runner_allows_and_the_protocols_is_kept_next_to_it(frames):
    learned = frames["learned"]
    assert list(learned["true_best"]) == [SCHEDULE, LOADS, DEPS]
    assert list(learned["true_best_compliant"]) == [LOADS, LOADS, DEPS]
    numbers = bench_offpolicy.acceptance(frames["learned"], frames["rules"], frames["logged"])
    assert numbers["top1_learned"] == 1.0
    assert numbers["top1_constant"] == pytest.approx({f: 1 / 3 for f in FAMILIES})
    assert numbers["top1_margin"] == pytest.approx(2 / 3)
    assert numbers["top1_compliant"]["learned"] == pytest.approx(2 / 3)  # rescheduling is not among them
    assert numbers["top1_compliant"]["margin"] == pytest.approx(0.0)  # reduce_loads is best 2 times in 3
    assert numbers["true_improvement"]["planner.learned"]["mean"] == pytest.approx(150.0 / 3)
    assert numbers["pivot_compliance_learned"] == pytest.approx(2 / 3)
    lines = bench_offpolicy.report_lines({"scenario": "bounds", "seed": 11, "episodes": 2, "entries": 3,
                                          "archive": True, "packets_archived": 3, "choose_among": "allowed",
                                          "compile_s": 1.0, "compile_cpu_s": 1.0, "load_average_at_start": [1.0],
                                          "acceptance": numbers, "offpolicy": {}})
    assert "choosing among the allowed families" in lines[0]
    assert lines[1].startswith("1. top-1 among the allowed families: learned 1.000")
    assert lines[2].strip().startswith("among the protocol's compliant families: learned 0.667, margin +0.000")


def test_an_estimate_without_an_interval_is_printed_without_one():
    estimate = {"value": 5.0, "ci_low": None, "ci_high": None, "ess": 3.0, "truth_inside": False}
    assert bench_offpolicy._estimate_text("dr", estimate) == "DR 5.0 (no interval)"
    bounded = {**estimate, "ci_low": 1.0, "ci_high": 9.0, "truth_inside": True}
    assert bench_offpolicy._estimate_text("dr", bounded) == "DR 5.0 [1.0, 9.0] (truth inside)"
