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


def test_archives_leave_the_logs_and_the_truth_unchanged(tmp_path):
    from benchmarks import planner_scenarios

    for scenario in ("bounds", "simearly"):
        plain = planner_scenarios.write(scenario, 1, 5, tmp_path / scenario / "plain")
        kept = planner_scenarios.write(scenario, 1, 5, tmp_path / scenario / "kept", archive=True)
        assert plain["archived_plans"] == 0 and kept["archived_plans"] >= kept["entries"] - 6
        for rel in ("logs/episode-0000/log.jsonl", "truth.jsonl"):
            assert (tmp_path / scenario / "plain" / rel).read_bytes() == (tmp_path / scenario / "kept" / rel).read_bytes()
        advisor = tmp_path / scenario / "kept" / "logs" / "episode-0000" / ".advisor"
        packets = list(advisor.rglob("*packet.json"))
        assert len(packets) == kept["archived_plans"]
        profile = json.loads(packets[0].read_text())["performance_profile"]
        assert profile["tight_lb_cycles"] == max(profile["resource_lb_cycles"], profile["cp_lb_cycles"])
