"""Splits that stay put as the logs grow: a thread (Full Auto) or an episode (planner) keeps its split when other
groups come, because its split is a hash of its own id with the seed (`evals.data.assign_splits`)."""

from __future__ import annotations

import json
import random
import shutil
import uuid
from pathlib import Path

import pytest

from evals.data import SPLITS, assign_splits, group_of, load_records, split_point
from guidebench.cli import main
from runtime.records import ID_PATTERN

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "datasets" / "sample"


def _split_of_groups(dataset: Path) -> dict[str, str]:
    return {group_of(record): split for split in SPLITS for record in load_records(dataset, split)}


def _with_more_threads(source: Path, target: Path, n_threads: int, seed: int = 0) -> set[str]:
    """A copy of a Full Auto workspace log plus `n_threads` new threads: copies of some of its threads with every
    UUID (thread, turn, run) mapped to a fresh seeded one, their lines appended and their run files added."""
    shutil.copytree(source, target)
    text = (source / "fullauto-decisions.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    threads = sorted({line["thread_id"] for line in lines})
    chosen = set(random.Random(seed).sample(threads, n_threads))
    runs = {line["run_id"] for line in lines if line["thread_id"] in chosen and line["run_id"] != "unknown"}
    rng, fresh = random.Random(seed + 1), {}
    rename = lambda text: ID_PATTERN.sub(  # noqa: E731
        lambda m: fresh.setdefault(m.group(0), str(uuid.UUID(int=rng.getrandbits(128), version=4))), text)
    mine = lambda line: any(run in line for run in runs)  # noqa: E731 (a line of a chosen thread names its run)
    for name in ("fullauto-decisions.jsonl", "fullauto-decisions-raw.jsonl", "labels.jsonl"):
        added = [rename(line) for line in (source / name).read_text(encoding="utf-8").splitlines() if mine(line)]
        with (target / name).open("a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in added))
    for path in sorted((source / "runs").iterdir()):
        if mine(path.name):
            (target / "runs" / rename(path.name)).write_text(rename(path.read_text(encoding="utf-8")),
                                                            encoding="utf-8")
    return {fresh[thread] for thread in chosen}


def test_no_thread_of_the_sample_moves_when_60_threads_are_added(tmp_path: Path):
    """The sample's 155 threads imported, then again with 60 more threads: every thread of the first import is in
    the same split in the second (a shuffle of the current set moved most of them)."""
    new_threads = _with_more_threads(SAMPLE / "fullauto", tmp_path / "grown", 60)
    for logs, out in ((SAMPLE / "fullauto", "before"), (tmp_path / "grown", "after")):
        assert main(["data", "import", str(logs), "--kind", "fullauto", "--out", str(tmp_path / out),
                     "--no-progress"]) == 0
    before, after = _split_of_groups(tmp_path / "before"), _split_of_groups(tmp_path / "after")
    assert len(before) == 155 and set(after) == set(before) | new_threads and len(new_threads) == 60
    assert {thread: (split, after[thread]) for thread, split in before.items() if after[thread] != split} == {}
    assert {after[thread] for thread in new_threads} == set(SPLITS)  # the new threads go everywhere


def test_a_group_keeps_its_split_whatever_else_is_assigned_with_it():
    """At the assignment itself: growing a set of ids a hundredfold, shuffled, leaves every id where it was (once
    each split holds a group of its own); the shares are the fractions up to chance."""
    ids = [f"episode-{i:04d}" for i in range(2000)]
    first = assign_splits(ids[:20], seed=3)
    everything = assign_splits(random.Random(5).sample(ids, len(ids)), seed=3)
    assert all(everything[group] == split for group, split in first.items())
    sizes = {name: sum(1 for split in everything.values() if split == name) for name in SPLITS}
    assert abs(sizes["test"] - 300) < 5 * (2000 * 0.15 * 0.85) ** 0.5 and abs(sizes["dev"] - 300) < 80
    assert {group: split_point(group, 3) for group in ids[:3]} == {group: split_point(group, 3) for group in ids[:3]}
    assert assign_splits(ids[:20], seed=4) != first  # the seed draws other splits


@pytest.mark.slow
def test_an_episode_keeps_its_split_as_the_planner_logs_grow(tmp_path: Path):
    """Planner logs: 12 simulated episodes, then with 8 more episodes beside them: no episode moves."""
    for episodes, seed, out in ((12, 4, "logs"), (8, 9, "more")):
        assert main(["data", "simulate", "experiments", "--episodes", str(episodes), "--seed", str(seed),
                     "--archive-episodes", "0", "--out", str(tmp_path / out)]) == 0
    shutil.copytree(tmp_path / "logs", tmp_path / "grown")
    for episode in sorted(p for p in (tmp_path / "more").iterdir() if p.is_dir()):
        shutil.copytree(episode, tmp_path / "grown" / f"more-{episode.name}")
    for logs, out in (("logs", "before"), ("grown", "after")):
        assert main(["data", "import", str(tmp_path / logs), "--kind", "experiments", "--out", str(tmp_path / out),
                     "--no-progress"]) == 0
    before, after = _split_of_groups(tmp_path / "before"), _split_of_groups(tmp_path / "after")
    assert len(before) == 12 and len(after) == 20
    assert {episode: split for episode, split in before.items() if after[episode] != split} == {}
