"""Write simulated Full Auto runs in the real workspace log layout (formats.md §1.4), and the
`guidebench data simulate fullauto` command.

```
DIR/fullauto-decisions.jsonl       one DecisionLogLine per decision (compact JSON)
DIR/fullauto-decisions-raw.jsonl   one RawDecisionLogLine per decision
DIR/runs/<run_id>.json             RunFile (guardrail config in force)
DIR/runs/<run_id>_events.jsonl     RunEvent lines
DIR/labels.jsonl                   our side file of true labels (source `simulator`)
```
Runs are written one at a time as they are simulated, so memory does not grow with `--runs`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from pydantic import BaseModel
from tqdm import tqdm

from guidebench.data.simulators.fullauto import FullAutoSimulator, SimRun

from guidebench.errors import GuidebenchError
from guidebench.data.fullauto import DECISIONS_FILE, LABELS_FILE, RAW_FILE, RUNS_DIR
from guidebench.data.registry import SimulatorSpec, register_simulator


def _line(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":")) + "\n"


@dataclass
class WorkspaceCounts:
    """What a workspace write produced."""

    runs: int = 0
    decisions: int = 0
    events: int = 0
    labels: int = 0


def write_workspace(out: str | Path, runs: Iterable[SimRun], with_labels: bool = True,
                    total: Optional[int] = None, progress: Optional[bool] = None) -> WorkspaceCounts:
    """Write runs into the workspace folder `out` (files of the layout are replaced)."""
    root = Path(out)
    runs_dir = root / RUNS_DIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    counts = WorkspaceCounts()
    label_path = root / LABELS_FILE
    with open(root / DECISIONS_FILE, "w", encoding="utf-8", newline="\n") as decisions, \
            open(root / RAW_FILE, "w", encoding="utf-8", newline="\n") as raw, \
            open(label_path, "w", encoding="utf-8", newline="\n") as labels, \
            tqdm(total=total, desc="simulate runs", unit="run", disable=None if progress is None else not progress,
                 leave=False) as bar:
        for run in runs:
            (runs_dir / f"{run.run_file.run_id}.json").write_text(
                json.dumps(run.run_file.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n",
                encoding="utf-8")
            with open(runs_dir / f"{run.run_file.run_id}_events.jsonl", "w", encoding="utf-8", newline="\n") as ev:
                ev.writelines(_line(event) for event in run.events)
            decisions.writelines(_line(line) for line in run.decisions)
            raw.writelines(_line(line) for line in run.raw)
            if with_labels:
                labels.writelines(json.dumps(item.as_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
                                  for item in run.labels)
            counts.runs += 1
            counts.decisions += len(run.decisions)
            counts.events += len(run.events)
            counts.labels += len(run.labels) if with_labels else 0
            bar.update(1)
    if not with_labels:
        label_path.unlink()
    return counts


def simulate_workspace(out: str | Path, runs: int, seed: int = 0, with_labels: bool = True,
                       progress: Optional[bool] = None) -> WorkspaceCounts:
    """Simulate `runs` runs with the noisy deployed policy and write them as a workspace."""
    simulator = FullAutoSimulator(seed)
    return write_workspace(out, simulator.runs(runs), with_labels=with_labels, total=runs, progress=progress)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=40, help="number of runs (default 40)")
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
    print(f"wrote {counts.runs} runs, {counts.decisions} decisions, {counts.events} events to {root}"
          f" (seed {args.seed})")
    print(f"import them with: guidebench data import {root} --kind fullauto --out DATASET_DIR")
    return 0


register_simulator(SimulatorSpec(kind="fullauto", help="seeded coding-agent runs in the Full Auto log layout",
                                 add_arguments=_arguments, run=_run))
