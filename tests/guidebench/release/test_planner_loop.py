"""guidebench.release.planner_loop: a frozen planner drives simulated episodes; the import reads the logs back with
every sidecar line joined, and the same seed writes the same logs."""

from __future__ import annotations

from pathlib import Path

from guidebench.data import import_logs
from guidebench.release.planner_loop import run_planner_loop
from planner_sidecar_support import all_records, exploring_rules, report_of


def test_the_loop_writes_logs_the_import_joins_to_every_sidecar_line(tmp_path: Path):
    deployed = exploring_rules(tmp_path)
    summary = run_planner_loop(deployed, tmp_path / "a", episodes=2, seed=4, iterations=15)
    again = run_planner_loop(deployed, tmp_path / "b", episodes=2, seed=4, iterations=15)
    assert (summary.episodes, summary.iterations, summary.sidecar_errors) == (2, 30, [])
    assert 0 < summary.explored < 30 and summary.explored == again.explored
    for name in ("episode-0000/log.jsonl", "episode-0001/log.sim.jsonl"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    report = import_logs(tmp_path / "a", "experiments", tmp_path / "d", progress=False)
    counts = report_of(tmp_path / "d")
    assert report.balanced and report.imported == 30 and counts["planner_joined"] == counts["planner_lines"] == 30
    records = all_records(tmp_path / "d")
    assert all(r.planner_log.family == r.outcome.family for r in records)
    assert sum(r.planner_log.probabilities[r.planner_log.family] < 1 for r in records) == 30  # epsilon 0.3 everywhere
