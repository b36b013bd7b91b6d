"""Simulated experiment logs with a planner decision sidecar written by `runtime.planner_shadow.PlannerShadow`, as
the import and the planner gate tests share them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Optional

import programs
from frozen_support import export_program
from guidebench.data import import_logs
from guidebench.simulators.experiments import write_episodes
from runtime import load_frozen
from runtime.exploration import ExplorationSettings
from runtime.planner_log import PLANNER_FILE
from runtime.planner_shadow import PlannerShadow
from runtime.records import PlannerRecord

from evals.data import SPLITS, load_records

EXPLORING = ExplorationSettings(policy="epsilon", epsilon=0.3, floor=0.05, seed=1)


def all_records(dataset: Path) -> list[PlannerRecord]:
    """Every split's records, in (episode, iteration) order."""
    found = [r for split in SPLITS if (dataset / split).exists() for r in load_records(dataset, split)]
    return sorted(found, key=lambda r: (r.episode_id, r.iteration_id, r.source.line if r.source else 0))


def exploring_rules(root: Path, settings: ExplorationSettings = EXPLORING, name: str = "deployed") -> Any:
    """A loaded planner.rules export that explores with `settings`."""
    folder = export_program("planner.rules", root / name, name=name, exploration=settings).path
    return load_frozen(folder, program=programs.get("planner.rules"))


def logs_with_sidecars(root: Path, *, episodes: int = 2, seed: int = 5, candidate: Any = None,
                       repository: str = "repo-a", iterations: Optional[int] = None) -> tuple[Path, list[PlannerRecord]]:
    """An exploring planner.rules drives simulated episodes (`run_planner_loop`): logs, side files and sidecars;
    and the records the import makes of the logs without their sidecars."""
    from guidebench.release.planner_loop import run_planner_loop

    logs = root / "logs"
    run_planner_loop(exploring_rules(root), logs, episodes=episodes, seed=seed, candidate=candidate,
                     repository=repository, iterations=iterations)
    plain_logs = copy_logs(logs, root / "plain-logs")
    for sidecar in plain_logs.rglob(PLANNER_FILE):
        sidecar.unlink()
    plain = root / "plain"
    import_logs(plain_logs, "experiments", plain, progress=False)
    return logs, all_records(plain)


def sidecar_lines(logs: Path) -> list[tuple[Path, list[dict[str, Any]]]]:
    """Each sidecar under a log folder with its lines."""
    return [(p, [json.loads(t) for t in p.read_text().splitlines() if t.strip()])
            for p in sorted(logs.rglob(PLANNER_FILE))]


def rewrite(path: Path, lines: list[Any]) -> None:
    """Write a sidecar's lines (dicts as JSON, strings as they are)."""
    path.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines), encoding="utf-8")


def copy_logs(logs: Path, to: Path) -> Path:
    """A copy of a log folder to edit."""
    shutil.copytree(logs, to)
    return to


def report_of(dataset: Path) -> dict[str, Any]:
    """The import report."""
    return json.loads((dataset / "import_report.json").read_text())


def side_quarantine(dataset: Path) -> list[dict[str, Any]]:
    """The side quarantine's entries."""
    path = dataset / "quarantine-side.jsonl"
    return [json.loads(t) for t in path.read_text().splitlines()] if path.exists() else []


def first(path: Optional[Path]) -> Path:
    """The path (asserted present)."""
    assert path is not None
    return path
