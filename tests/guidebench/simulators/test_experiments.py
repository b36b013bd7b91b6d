"""The seeded episode generator: exact log shape, determinism, figures in range, varying compliance."""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from pathlib import Path

import pytest

from guidebench.simulators.experiments import (
    OLD_SHAPE_KEYS,
    SIDE_FILE_SUFFIX,
    TIMESTAMP_FORMAT,
    simulate_episode,
    write_episodes,
)
from evals.sim_kernel import state_from_profile
from runtime import pivot
from runtime.advisor import FAMILIES, ExperimentLogEntry

NEW_SHAPE_KEYS = {
    "base_branch", "base_sha", "best_before", "branch", "change_summary", "correctness_pass", "cycles",
    "delta_vs_best", "files_changed", "head_sha", "hypothesis", "iteration_id", "merged_to_main", "new_best",
    "result_summary", "scope_disallowed_files", "scope_forbidden_files", "scope_ok", "strategy_tags",
    "tests_diff_empty", "threshold_met", "timestamp_utc", "valid",
}
NEWER_ONLY = {"scope_ok", "scope_disallowed_files", "scope_forbidden_files", "correctness_pass", "best_before",
              "new_best", "threshold_met"}


@pytest.fixture(scope="module")
def episodes():
    return [simulate_episode(21, index) for index in range(40)]


def test_lines_have_exactly_the_loop_runner_shape(episodes):
    for episode in episodes:
        for line in episode.log_text().splitlines():
            obj = json.loads(line)
            assert list(obj) == sorted(obj), "keys sorted"
            assert set(obj) - {"notes"} == NEW_SHAPE_KEYS
            datetime.strptime(obj["timestamp_utc"], TIMESTAMP_FORMAT)
            ExperimentLogEntry.model_validate(obj)
            assert obj["valid"] == (obj["correctness_pass"] is True and obj["tests_diff_empty"]
                                    and obj["scope_ok"])
            if obj["cycles"] is None:
                assert obj["delta_vs_best"] is None
            else:
                assert obj["delta_vs_best"] == obj["cycles"] - obj["best_before"]
            assert obj["new_best"] == (obj["valid"] and obj["cycles"] is not None
                                       and obj["cycles"] < obj["best_before"])
            assert 1 <= len(obj["strategy_tags"]) <= 4 and obj["strategy_tags"][0] in FAMILIES
            assert obj["scope_ok"] == (not obj["scope_disallowed_files"] and not obj["scope_forbidden_files"])


RESULT_SUMMARY = re.compile(r"^(?:PASS correctness; cycles=(?P<pass>\d+)(?: \(above target (?P<target>\d+)\))?"
                            r"|FAIL correctness; cycles(?:=\d+| unavailable)|SKIP benchmark; (?P<skip>.+))$")


def test_lines_are_what_the_real_runners_record_writes(episodes):
    # tools/loop_runner.py `record`: iter/NNNN-slug branches, merged_to_main false, notes (the directive's
    # objective) on every line, its result_summary wording, json.dumps(entry, sort_keys=True)
    for episode in episodes:
        for line, obj, side in zip(episode.log_text().splitlines(), episode.entries, episode.side["iterations"]):
            target = side["threshold_target"]
            assert line == json.dumps(obj, sort_keys=True) and line.isascii()
            assert re.fullmatch(r"iter/(\d{4})-[a-z0-9-]+", obj["branch"])
            assert int(obj["branch"][5:9]) == obj["iteration_id"]
            assert obj["merged_to_main"] is False and obj["notes"].endswith(")") and "Reach" in obj["notes"]
            match = RESULT_SUMMARY.match(obj["result_summary"])
            assert match, obj["result_summary"]
            if match["skip"]:  # the runner measures nothing when tests changed or the scope was violated
                assert obj["cycles"] is None and obj["correctness_pass"] is None and not obj["valid"]
                reasons = [r for r, bad in (("tests changed", not obj["tests_diff_empty"]),
                                            ("scope violation", not obj["scope_ok"])) if bad]
                assert match["skip"] == ", ".join(reasons)
            elif match["pass"]:
                assert obj["valid"] and int(match["pass"]) == obj["cycles"]
                above = target is not None and obj["cycles"] > target
                assert (match["target"] is not None) is above and (not above or int(match["target"]) == target)
                assert obj["threshold_met"] is (target is not None and not above)
            else:
                assert obj["correctness_pass"] is False
    old = simulate_episode(21, 3, old_shape=True)
    assert all(re.fullmatch(r"iter/\d{4}-[a-z0-9-]+", e["branch"]) and e["merged_to_main"] is False
               and "notes" not in e and RESULT_SUMMARY.match(e["result_summary"]) for e in old.entries)


def test_best_before_follows_the_log_and_timestamps_increase(episodes):
    for episode in episodes:
        best = episode.side["start_cycles"]
        stamps = []
        for index, entry in enumerate(episode.entries, start=1):
            assert entry["iteration_id"] == index
            assert entry["best_before"] == best
            if entry["new_best"]:
                best = entry["cycles"]
            stamps.append(entry["timestamp_utc"])
        assert stamps == sorted(stamps)
        assert best == episode.best_cycles


def test_side_file_profiles_rebuild_the_state_of_each_iteration(episodes):
    for episode in episodes:
        for entry, side in zip(episode.entries, episode.side["iterations"]):
            assert side["iteration_id"] == entry["iteration_id"]
            assert state_from_profile(side["performance_profile"]).cycles == entry["best_before"]
            assert (side["goal"] == "threshold") == (side["threshold_target"] is not None)


def test_figures_are_in_the_published_range(episodes):
    starts = [e.side["start_cycles"] for e in episodes]
    bests = [e.best_cycles for e in episodes]
    assert all(1450 <= s <= 1900 for s in starts)
    assert 1330 <= statistics.median(bests) <= 1420
    assert sum(1300 <= b <= 1440 for b in bests) >= 0.75 * len(bests)
    assert all(b >= 1290 for b in bests)


def test_invalid_attempts_and_all_families_occur(episodes):
    entries = [entry for episode in episodes for entry in episode.entries]
    invalid = sum(not e["valid"] for e in entries) / len(entries)
    assert 0.1 < invalid < 0.4
    assert {e["strategy_tags"][0] for e in entries} == set(FAMILIES)
    assert any(e["correctness_pass"] is None for e in entries)
    assert any(e["scope_forbidden_files"] for e in entries) and any(e["scope_disallowed_files"] for e in entries)


def test_pivot_compliance_varies_within_and_across_episodes(episodes):
    per_episode = []
    for episode in episodes:
        obeyed = required = 0
        history: list[dict] = []
        for entry, side in zip(episode.entries, episode.side["iterations"]):
            must, _ = pivot.pivot_required(history, side["performance_profile"], side["threshold_target"])
            if must:
                constraints = pivot.family_constraints(history)
                required += 1
                obeyed += entry["strategy_tags"][0] != constraints.current_family
            history.append(entry)
        if required:
            per_episode.append(obeyed / required)
    assert min(per_episode) < 0.8 and max(per_episode) == 1.0
    assert 0.5 < statistics.mean(per_episode) < 0.95


def test_same_seed_same_bytes_and_episodes_do_not_depend_on_the_count(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_episodes(a, 4, seed=3, old_shape_fraction=0.5)
    write_episodes(b, 4, seed=3, old_shape_fraction=0.5)
    write_episodes(c, 2, seed=3, old_shape_fraction=0.5)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len(files) == 8
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
        if (c / rel).exists():
            assert (a / rel).read_bytes() == (c / rel).read_bytes()
    assert simulate_episode(4, 0).entries != simulate_episode(5, 0).entries


def test_old_shape_episodes_drop_the_newer_fields():
    episode = simulate_episode(21, 3, old_shape=True)
    for entry in episode.entries:
        assert set(entry) <= set(OLD_SHAPE_KEYS)
        assert not NEWER_ONLY & set(entry)
        assert entry["strategy_tags"][0] not in FAMILIES
        parsed = ExperimentLogEntry.model_validate(entry)
        assert not parsed.is_full_shape and parsed.family is None


def test_write_episodes_layout_and_summary(tmp_path):
    summary = write_episodes(tmp_path, 3, seed=8, old_shape_fraction=1.0)
    assert summary.episodes == 3 and summary.old_shape_episodes == 3
    assert summary.files == [f"episode-{i:04d}/log.jsonl" for i in range(3)]
    lines = sum(len((tmp_path / f).read_text().splitlines()) for f in summary.files)
    assert lines == summary.entries
    side_file = tmp_path / "episode-0001" / f"log{SIDE_FILE_SUFFIX}"
    side = [json.loads(line) for line in side_file.read_text().splitlines()]
    assert side[0]["episode_id"] == "sim-8-0001" and side[0]["old_shape"] is True
    assert [item["iteration_id"] for item in side[1:]] == list(range(1, len(side)))
    with pytest.raises(ValueError):
        write_episodes(tmp_path, 0, seed=1)


def test_committed_sample_is_what_the_documented_command_writes(tmp_path):
    sample = Path(__file__).resolve().parents[3] / "datasets" / "sample" / "experiments"
    from guidebench.data.experiments import episode_packets

    # datasets/sample/README.md: --episodes 24 --seed 0 --archive-episodes 3
    summary = write_episodes(tmp_path, 24, seed=0, archive_packets=episode_packets, archive_episodes=3)
    committed = sorted(p.relative_to(sample).as_posix() for p in sample.rglob("*") if p.is_file())
    assert committed == sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    for rel in committed:
        assert (sample / rel).read_bytes() == (tmp_path / rel).read_bytes(), f"regenerate the sample: {rel} differs"
    assert (summary.entries, summary.old_shape_episodes, summary.archived_plans) == (879, 8, 112)
