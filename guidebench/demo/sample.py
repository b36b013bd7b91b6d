"""The sample logs the demo runs on: where they are, and the subset of them a plan copies.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from runtime.fullauto import ORPHAN_RUN

from guidebench.demo.plan import Plan
from guidebench.errors import GuidebenchError


def sample_dir() -> Path:
    """The committed sample logs: `datasets/sample` of the clone this package runs from, else of the cwd."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        folder = root / "datasets" / "sample"
        if (folder / "fullauto" / "fullauto-decisions.jsonl").is_file() and (folder / "experiments").is_dir():
            return folder
    raise GuidebenchError("the committed sample logs (datasets/sample/) were not found: run the demo from a clone "
                          "of the repository")


def jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


@dataclass
class FullAutoSubset:
    """Which sample threads the demo imports (with their runs), and the split seed that gives its sizes."""

    threads: list[str]
    runs: list[str]  # every run of those threads (orphan decisions of run "unknown" come with their thread)
    seed: int
    expected: dict[str, int]  # records per split, as the import will assign them


def _label_key(line: dict[str, Any]) -> tuple[Any, Any, Any]:
    # (run, sequence, turn): orphan decisions all have run "unknown" and sequence 0, their turns differ
    return line.get("run_id"), line.get("sequence_id"), line.get("turn_id")


# A test split the board can separate policies on: at least three labeled actions, none above this share (the
# whole sample's test split: continue 0.67). On a split of continues, always-continue ties every good policy.
MAX_LABEL_SHARE = 0.7


def _mixed(labels: Counter) -> bool:
    total = sum(labels.values())
    return len(labels) >= 3 and max(labels.values()) <= MAX_LABEL_SHARE * total


def choose_fullauto_subset(sample: Path, plan: Plan) -> FullAutoSubset:
    """Whole threads and an import seed whose dev/test splits have the plan's sizes, the test labels mixed.

    The import splits by thread (a thread's runs and its labels belong together, `evals.data.group_of`), so
    the demo copies whole threads, those with the shortest turn summaries first: short summaries make short
    prompts for the LM steps.
    """
    from evals.data import SPLITS, assign_splits

    counts: Counter = Counter()
    chars: Counter = Counter()
    runs: dict[str, set[str]] = {}
    thread_of: dict[tuple[Any, Any, Any], str] = {}
    with (sample / "fullauto" / "fullauto-decisions.jsonl").open(encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            line = json.loads(text)
            thread = line.get("thread_id") or line["run_id"]  # the import's group
            counts[thread] += 1
            chars[thread] += len(text)
            runs.setdefault(thread, set()).add(line["run_id"])
            thread_of[_label_key(line)] = thread
    labels: dict[str, Counter] = {}
    labels_file = sample / "fullauto" / "labels.jsonl"
    if labels_file.is_file():
        for line in jsonl(labels_file):
            thread = thread_of.get(_label_key(line))
            if thread is not None:
                labels.setdefault(thread, Counter())[str((line.get("label") or {}).get("action"))] += 1
    threads = sorted(counts, key=lambda thread: (chars[thread] / counts[thread], thread))
    size = min(plan.fullauto_threads, len(threads))
    # Deterministic search: windows of the threads by summary length, then import seeds; the first fit wins.
    for offset in range(len(threads) - size + 1):
        subset = threads[offset:offset + size]
        for seed in range(64):
            assignment = assign_splits(subset, seed)
            per_split = {name: sum(counts[t] for t in subset if assignment[t] == name) for name in SPLITS}
            test_labels = sum((labels.get(t, Counter()) for t in subset if assignment[t] == "test"), Counter())
            if (plan.dev_records[0] <= per_split["dev"] <= plan.dev_records[1]
                    and plan.test_records[0] <= per_split["test"] <= plan.test_records[1]
                    and (not labels or _mixed(test_labels))):
                return FullAutoSubset(threads=sorted(subset), runs=sorted(set().union(*(runs[t] for t in subset))),
                                      seed=seed, expected=per_split)
    raise GuidebenchError(f"no {size} sample threads give a dev split of {plan.dev_records} and a test split of "
                          f"{plan.test_records} records; the sample logs changed?")


def write_fullauto_subset(sample: Path, subset: FullAutoSubset, out: Path) -> int:
    """Copy the chosen threads of the sample workspace log (same layout); returns the decisions copied."""
    source = sample / "fullauto"
    threads = set(subset.threads)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    kept: set[tuple[Any, Any, Any]] = set()
    copied = 0
    with (source / "fullauto-decisions.jsonl").open(encoding="utf-8") as src, \
            (out / "fullauto-decisions.jsonl").open("w", encoding="utf-8") as dst:
        for line in src:
            item = json.loads(line) if line.strip() else None
            if item is not None and (item.get("thread_id") or item.get("run_id")) in threads:
                dst.write(line)
                kept.add(_label_key(item))
                copied += 1
    # Raw lines and labels of a run go with it (unmatched ones too, as in the sample); the orphan run
    # "unknown" holds decisions of every thread, so its lines go with their decision only.
    whole_runs = set(subset.runs) - {ORPHAN_RUN}
    for name in ("fullauto-decisions-raw.jsonl", "labels.jsonl"):
        if not (source / name).is_file():
            continue
        with (source / name).open(encoding="utf-8") as src, (out / name).open("w", encoding="utf-8") as dst:
            for line in src:
                item = json.loads(line) if line.strip() else None
                if item is not None and (item.get("run_id") in whole_runs or _label_key(item) in kept):
                    dst.write(line)
    for run_id in subset.runs:
        for suffix in (".json", "_events.jsonl"):
            path = source / "runs" / f"{run_id}{suffix}"
            if path.is_file():
                shutil.copy2(path, out / "runs" / path.name)
    return copied


def write_experiment_subset(sample: Path, episodes: int, out: Path, iterations: Optional[int] = None) -> int:
    """Copy the first episodes of the sample experiment logs (optionally their first iterations only)."""
    folders = sorted(p for p in (sample / "experiments").iterdir() if (p / "log.jsonl").is_file())[:episodes]
    for folder in folders:
        target = out / folder.name
        if iterations is None:
            shutil.copytree(folder, target)
            continue
        # An episode cut after N iterations is the log as it stood then: every packet is rebuilt from
        # the entries before it, so the kept records are exactly those of the whole episode.
        target.mkdir(parents=True)
        lines = (folder / "log.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if line.strip()][:iterations]
        (target / "log.jsonl").write_text("".join(kept), encoding="utf-8")
        ids = {json.loads(line).get("iteration_id") for line in kept}
        for side in sorted(folder.glob("*.jsonl")):
            if side.name == "log.jsonl":
                continue
            with side.open(encoding="utf-8") as src, (target / side.name).open("w", encoding="utf-8") as dst:
                for line in src:
                    item = json.loads(line) if line.strip() else None
                    if item is not None and ("iteration_id" not in item or item["iteration_id"] in ids):
                        dst.write(line)  # header lines (no iteration id) and the kept iterations
    return len(folders)
