"""Experiment logs in the real runner's shape with no side file (no performance profile), as a user's own logs
arrive, and the planner records and datasets the outcome-model tests share; plus small hand-made attempts for
the bad-input cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from guidebench.data import import_logs
from guidebench.simulators.experiments import SIDE_FILE_SUFFIX, write_episodes
from runtime.advisor import AdvisorPacket, ExperimentLogEntry
from runtime.records import PlannerRecord

from evals.data import load_records


def logs_without_side_files(out: Path, episodes: int = 10, seed: int = 3) -> Path:
    """Simulated episodes in the runner's full shape (no older short ones) with their side files removed."""
    write_episodes(out, episodes, seed, old_shape_fraction=0.0)
    for side in out.rglob(f"*{SIDE_FILE_SUFFIX}"):
        side.unlink()
    return out


def imported(logs: Path, out: Path) -> Path:
    """The experiments dataset of a log folder."""
    import_logs(logs, "experiments", out, progress=False)
    return out


def records_of(dataset: Path, split: str) -> list[PlannerRecord]:
    """One split's planner records."""
    return load_records(dataset, split)


def entry(iteration: int, family: Optional[str], *, valid: bool = True, cycles: Optional[int] = None,
          best_before: int = 1000, tags: Optional[list[str]] = None) -> dict[str, Any]:
    """One log line of the runner's full shape (only what the records and features read is varied)."""
    return {
        "base_branch": "opt/best", "base_sha": "a" * 40, "best_before": best_before,
        "branch": f"iter/{iteration:04d}-auto", "change_summary": ["change"], "correctness_pass": valid,
        "cycles": cycles, "delta_vs_best": None if cycles is None else cycles - best_before,
        "files_changed": ["perf_takehome.py"], "head_sha": "b" * 40, "hypothesis": "h", "iteration_id": iteration,
        "merged_to_main": False, "new_best": bool(valid and cycles is not None and cycles < best_before),
        "notes": "n", "result_summary": "PASS correctness" if valid else "FAIL correctness; cycles unavailable",
        "scope_disallowed_files": [], "scope_forbidden_files": [], "scope_ok": True,
        "strategy_tags": tags if tags is not None else ([family] if family else ["legacy"]),
        "tests_diff_empty": True, "threshold_met": False, "timestamp_utc": "2025-03-03T08:00:00Z", "valid": valid,
    }


def record(episode: str, iteration: int, history: list[dict[str, Any]], outcome: dict[str, Any],
           best: Optional[int] = None) -> PlannerRecord:
    """A planner record: a packet whose tail is `history` (best given or the outcome's best_before)."""
    packet = AdvisorPacket(best_cycles=best if best is not None else outcome.get("best_before"),
                           experiment_log_tail=[json.dumps(e, sort_keys=True) for e in history[-20:]])
    return PlannerRecord(record_id=f"{episode}-{iteration}", episode_id=episode, iteration_id=iteration,
                         packet=packet, outcome=ExperimentLogEntry.model_validate(outcome))
