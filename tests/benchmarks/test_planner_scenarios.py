"""benchmarks.planner_scenarios' simearly: the project's simulator earlier in the kernel's optimization, written
as the runner writes its log (no side file), with each family's expected improvement kept outside the log."""

from __future__ import annotations

import json

from benchmarks import planner_scenarios
from evals import sim_kernel
from runtime.advisor import FAMILIES, ExperimentLogEntry


def test_an_early_state_keeps_the_kernels_floors_and_starts_in_the_early_range():
    import random

    for k in range(20):
        state = planner_scenarios.early_state(random.Random(k))
        assert 20_000 <= state.cycles <= 114_000 * 1.3  # the slack comes on top of the scaled bounds
        assert state.tight_lb_cycles > 10 * sim_kernel.CP_FLOOR_CYCLES and state.slack_cycles >= 0


def test_simearly_writes_runner_lines_and_a_truth_per_logged_iteration():
    entries, truth = planner_scenarios.simearly_episode(3, 0, rollouts=4)
    assert len(entries) == len(truth) >= 24
    for entry, known in zip(entries, truth):
        ExperimentLogEntry.model_validate(entry)  # the runner's shape, no profile anywhere
        assert "performance_profile" not in json.dumps(entry)
        assert known["iteration_id"] == entry["iteration_id"] and known["best_before"] == entry["best_before"]
        assert set(known["expected_improvement"]) == set(FAMILIES)
        assert all(v >= 0 for v in known["expected_improvement"].values())
    assert 20_000 <= entries[0]["best_before"] <= 114_000 * 1.3
