"""Write simulated Full Auto sessions in the real workspace log layout (formats.md §1.4), and the
`guidebench data simulate fullauto` command.

```
DIR/fullauto-decisions.jsonl       one decision line per decision
DIR/fullauto-decisions-raw.jsonl   one raw line per decision ({data, lm_usage} and the diagnostics struct)
DIR/runs/<run_id>.json             the run metadata (guardrail config in force), one per run
DIR/runs/<run_id>_events.jsonl     run_started, decision, run_paused, run_disabled
DIR/runs/unknown_events.jsonl      the events of orphan decisions (run id "unknown"), when there are any
DIR/labels.jsonl                   our side file of true labels (source `simulator`)
```
Every file is written in the original writer's exact serde shapes
(`guidebench.simulators.fullauto_logs`). A session is one thread: every pause or stop ends a
run and a resume starts the next, so a session writes one or more runs. Sessions are written one at
a time as they are simulated, so memory does not grow with `--runs`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from tqdm import tqdm

from runtime.fullauto import ORPHAN_RUN

from guidebench.simulators import fullauto_logs as logs
from guidebench.simulators.fullauto import FullAutoSimulator, SimRun

from guidebench.errors import GuidebenchError
from guidebench.data.fullauto import DECISIONS_FILE, LABELS_FILE, RAW_FILE, RUNS_DIR
from guidebench.data.registry import SimulatorSpec, register_simulator


@dataclass
class WorkspaceCounts:
    """What a workspace write produced: `runs` simulated sessions (one thread each) holding `run_ids` runs."""

    runs: int = 0
    decisions: int = 0
    events: int = 0
    labels: int = 0
    run_ids: int = 0
    orphans: int = 0


def _write_events(runs_dir: Path, run: SimRun, opened: set[str]) -> int:
    """Each run's file and events of one session; an orphan's events are appended to `unknown_events.jsonl`."""
    for run_file in run.run_files():
        (runs_dir / f"{run_file.run_id}.json").write_text(logs.run_file_text(run_file), encoding="utf-8")
    by_run: dict[str, list[str]] = {}
    for event in run.events:
        index = getattr(event, "decision_index", None)
        # a decision event's data is its decision line as a value, rendered from the line as written
        data = logs.decision_event_data(run.decisions[index]) if index is not None else None
        by_run.setdefault(getattr(event, "run_id", run.run_file.run_id), []).append(
            logs.line_text(logs.event_line(event, data)))
    for run_id, lines in by_run.items():
        with open(runs_dir / f"{run_id}_events.jsonl", "a" if run_id in opened else "w", encoding="utf-8",
                  newline="\n") as handle:
            handle.writelines(lines)
        opened.add(run_id)
    return sum(len(lines) for lines in by_run.values())


def write_workspace(out: str | Path, runs: Iterable[SimRun], with_labels: bool = True,
                    total: Optional[int] = None, progress: Optional[bool] = None) -> WorkspaceCounts:
    """Write sessions into the workspace folder `out` (files of the layout are replaced)."""
    root = Path(out)
    runs_dir = root / RUNS_DIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    counts = WorkspaceCounts()
    opened: set[str] = set()
    label_path = root / LABELS_FILE
    with open(root / DECISIONS_FILE, "w", encoding="utf-8", newline="\n") as decisions, \
            open(root / RAW_FILE, "w", encoding="utf-8", newline="\n") as raw, \
            open(label_path, "w", encoding="utf-8", newline="\n") as labels, \
            tqdm(total=total, desc="simulate sessions", unit="session",
                 disable=None if progress is None else not progress, leave=False) as bar:
        for run in runs:
            counts.events += _write_events(runs_dir, run, opened)
            decisions.writelines(logs.line_text(logs.decision_line(line)) for line in run.decisions)
            raw.writelines(logs.line_text(logs.raw_line(line)) for line in run.raw)
            if with_labels:
                labels.writelines(json.dumps(item.as_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
                                  for item in run.labels)
            counts.runs += 1
            counts.run_ids += len(run.run_files())
            counts.decisions += len(run.decisions)
            counts.orphans += sum(line.run_id == ORPHAN_RUN for line in run.decisions)
            counts.labels += len(run.labels) if with_labels else 0
            bar.update(1)
    if not with_labels:
        label_path.unlink()
    return counts


def simulate_workspace(out: str | Path, runs: int, seed: int = 0, with_labels: bool = True,
                       progress: Optional[bool] = None) -> WorkspaceCounts:
    """Simulate `runs` sessions (threads) with the noisy deployed policy and write them as a workspace."""
    simulator = FullAutoSimulator(seed)
    return write_workspace(out, simulator.runs(runs), with_labels=with_labels, total=runs, progress=progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=40,
                        help="number of sessions, one thread each (default 40); every pause or stop ends a run "
                             "and a resume starts the next, so a session writes one or more runs")
    parser.add_argument("--seed", type=int, default=0, help="seed (same seed, same bytes)")
    parser.add_argument("--out", required=True, help="workspace folder to write")
    parser.add_argument("--no-labels", action="store_true", help="do not write the labels.jsonl side file")
    parser.add_argument("--force", action="store_true", help="replace --out when it holds an earlier simulation")


def _run(args: argparse.Namespace) -> int:
    if args.runs < 1:
        raise GuidebenchError(f"--runs must be at least 1, got {args.runs}")
    from guidebench.outputs import claim_output

    root = Path(args.out)
    output = claim_output(root, "data simulate fullauto", force=args.force)
    with output.writing() as staging:
        counts = simulate_workspace(staging, args.runs, args.seed, with_labels=not args.no_labels)
    print(f"wrote {counts.runs} sessions ({counts.run_ids} runs), {counts.decisions} decisions, {counts.events} "
          f"events to {root} (seed {args.seed})")
    print(f"import them with: guidebench data import {root} --kind fullauto --out DATASET_DIR")
    return 0


register_simulator(SimulatorSpec(kind="fullauto", help="seeded coding-agent sessions in the real Full Auto log layout",
                                 add_arguments=_arguments, run=_run))
