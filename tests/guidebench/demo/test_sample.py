"""guidebench.demo.sample: the subset of the sample logs a plan copies gives the planned split sizes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from guidebench import demo


@pytest.mark.parametrize("plan", [demo.QUICK, demo.FULL], ids=lambda p: p.name)
def test_subset_gives_the_planned_split_sizes(plan: demo.Plan, tmp_path: Path):
    from guidebench.data import import_logs

    sample = demo.sample_dir()
    subset = demo.choose_fullauto_subset(sample, plan)
    lines = [json.loads(line) for line in (sample / "fullauto" / "fullauto-decisions.jsonl").open() if line.strip()]
    every = {line.get("thread_id") or line["run_id"] for line in lines}
    assert len(subset.threads) == min(plan.fullauto_threads, len(every))  # the full demo takes every thread
    assert plan.dev_records[0] <= subset.expected["dev"] <= plan.dev_records[1]
    assert plan.test_records[0] <= subset.expected["test"] <= plan.test_records[1]
    copied = demo.write_fullauto_subset(sample, subset, tmp_path / "logs")
    assert copied == sum(subset.expected.values())
    report = import_logs(tmp_path / "logs", "fullauto", tmp_path / "data", seed=subset.seed, progress=False)
    assert report.splits == subset.expected and report.quarantined == 0
    # whole threads were copied, each in one split (the import groups by thread)
    from evals.data import SPLITS, load_records

    threads = {name: {r.thread_id for r in load_records(tmp_path / "data", name)} for name in SPLITS}
    assert set().union(*threads.values()) == set(subset.threads)
    assert sum(len(found) for found in threads.values()) == len(subset.threads)
    assert report.model_dump()["labeled"] == copied
    # a test split the board can separate policies on: three or more actions, none above MAX_LABEL_SHARE
    labels = Counter(r.label.action for r in load_records(tmp_path / "data", "test"))
    assert len(labels) >= 3 and max(labels.values()) <= demo.MAX_LABEL_SHARE * sum(labels.values())
