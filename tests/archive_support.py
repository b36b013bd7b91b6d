"""Repositories in the loop runner's layout (`<repo>/experiments/log.jsonl` and `<repo>/.advisor/`, written by
`guidebench.simulators.advisor_archive` in the exact shapes of `tools/loop_runner.py`), and their import with the
archive's counting invariants checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals.data import load_records
from guidebench.data import import_logs
from guidebench.data.experiments import episode_packets
from guidebench.data.planner_archive import PLAN_OUTCOMES
from guidebench.simulators.experiments import simulate_episode, write_episode_archive


def make_repo(root: Path, index: int = 0, mode: str = "manual", seed: int = 3) -> tuple[Path, Any]:
    """A repository folder with the runner's log and archive of one simulated episode (current log shape)."""
    episode = simulate_episode(seed, index, iterations=10)
    (root / "experiments").mkdir(parents=True, exist_ok=True)
    (root / "experiments" / "log.jsonl").write_text(episode.log_text(), encoding="utf-8")
    write_episode_archive(root, episode, episode_packets(episode), mode)
    return root, episode


def plans(root: Path) -> dict[int, Path]:
    """Iteration id -> the archived packet file."""
    found = {}
    for file in (root / ".advisor").rglob("*packet.json"):
        name = file.parent.name if file.name == "packet.json" else file.name
        found[int(name.split("_")[1])] = file
    return found


def run(path: Path, out: Path) -> tuple[dict[str, Any], list, list[dict[str, Any]]]:
    """Import; (report as JSON, records, side quarantine lines), the counting invariants checked."""
    import_logs(path, "experiments", out)
    report = json.loads((out / "import_report.json").read_text())
    side_file = out / "quarantine-side.jsonl"
    side = [json.loads(x) for x in side_file.read_text().splitlines()] if side_file.exists() else []
    assert report["read"] == report["imported"] + report["quarantined"] + report["duplicates"]
    # every archived plan ends in exactly one outcome: joined, or quarantined with one reason
    assert report["archive_plans"] == sum(report[k] for k in PLAN_OUTCOMES)
    assert report["packets_archived"] + report["packets_rebuilt"] == report["entries"]
    assert report["packets_archived"] == report["archive_joined"]
    return report, load_records(out, "all"), side
