"""The dataset folder of docs/architecture.md: HF splits of pydantic records, hashes, group splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.data import (
    DATASET_FORMAT_VERSION,
    SPLITS,
    DatasetFormatError,
    assign_splits,
    dataset_id_of,
    dataset_info,
    load_records,
    row_of,
    save_dataset,
    split_by_group,
    split_hash,
)
from runtime.advisor import AdvisorPacket, ExperimentLogEntry
from runtime.fullauto import FullAutoTurnSummary, GuardrailConfig
from runtime.records import DecisionRecord, OutcomeLabel, PlannerRecord, canonical_json, sha256_hex


def decision_record(run: str, turn: int, action: str = "continue", **summary: object) -> DecisionRecord:
    fields = {"thread_id": f"thread-{run}", "turn_id": f"{run}-t{turn}", "turn_count": turn,
              "turn_plan": f"step {turn}", "last_agent_message": "naïve ünïcode ✓", **summary}
    label = OutcomeLabel(action=action, source="simulator", reason="because", confidence=1.0)
    return DecisionRecord.build(FullAutoTurnSummary(**fields), GuardrailConfig(min_confidence=0.6), run_id=run,
                                sequence_id=turn, timestamp=f"2025-06-02T09:0{turn % 10}:00Z", label=label)


def planner_record(episode: str, iteration: int) -> PlannerRecord:
    outcome = ExperimentLogEntry(
        iteration_id=iteration, timestamp_utc="2025-03-03T08:00:00Z", branch=f"exp/{iteration}", base_branch="main",
        base_sha="a" * 40, head_sha="b" * 40, files_changed=["kernel.py"], tests_diff_empty=True, valid=True,
        cycles=1500 - iteration, delta_vs_best=-1, strategy_tags=["family:schedule", "unroll"],
        hypothesis="unrolling hides load latency", change_summary=["unroll by 2"], result_summary="1 cycle less")
    return PlannerRecord(record_id=f"{episode}-{iteration}", episode_id=episode, iteration_id=iteration,
                         packet=AdvisorPacket(best_cycles=1501), outcome=outcome)


def records(runs: int = 6, per_run: int = 3) -> list[DecisionRecord]:
    return [decision_record(f"fullauto-run{r}", t, "pause" if t == per_run else "continue")
            for r in range(runs) for t in range(1, per_run + 1)]


def test_decision_records_round_trip_through_the_folder(tmp_path: Path) -> None:
    data = records()
    splits = split_by_group(data, "run_id", seed=3)
    dataset_id = save_dataset(tmp_path, "fullauto", splits, {"seed": 3, "sources": [{"file": "x.jsonl"}]})
    for name in SPLITS:
        assert load_records(tmp_path, name) == splits[name]
    assert sorted(r.record_id for r in load_records(tmp_path, "all")) == sorted(r.record_id for r in data)
    info = dataset_info(tmp_path)
    assert info["dataset_id"] == dataset_id
    assert info["kind"] == "fullauto" and info["seed"] == 3 and info["sources"] == [{"file": "x.jsonl"}]
    assert {"created_at", "guidebench_version"} <= set(info)
    assert {name: info["splits"][name]["n"] for name in SPLITS} == {name: len(splits[name]) for name in SPLITS}


def test_planner_records_round_trip(tmp_path: Path) -> None:
    data = [planner_record(f"episode-{e}", i) for e in range(4) for i in range(1, 4)]
    save_dataset(tmp_path, "experiments", split_by_group(data, "episode_id", seed=0))
    loaded = load_records(tmp_path, "all")
    assert sorted(loaded, key=lambda r: r.record_id) == sorted(data, key=lambda r: r.record_id)
    assert {row_of(r).label for r in data} == {"family:schedule"}


def test_folder_is_a_plain_hugging_face_dataset_dict(tmp_path: Path) -> None:
    import datasets

    splits = split_by_group(records(), "run_id", seed=1)
    save_dataset(tmp_path, "fullauto", splits)
    loaded = datasets.load_from_disk(str(tmp_path))
    assert set(loaded) == set(SPLITS)
    fields = [name for name in DecisionRecord.model_fields if name != "record_id"]
    assert loaded["train"].column_names == ["record_id", "group_id", *fields]
    row = loaded["test"][0]
    record = next(r for r in splits["test"] if r.record_id == row["record_id"])
    assert row["group_id"] == record.thread_id  # the split group of a decision is its thread
    assert row["summary"]["turn_count"] == record.summary.turn_count
    assert row["label"] == record.label.model_dump()
    assert dataset_info(tmp_path)["format_version"] == DATASET_FORMAT_VERSION


def test_empty_splits_are_saved_and_loaded(tmp_path: Path) -> None:
    data = records(runs=1)
    splits = split_by_group(data, "run_id", seed=0)
    assert [len(splits[name]) for name in SPLITS] == [3, 0, 0]
    save_dataset(tmp_path, "fullauto", splits)
    assert load_records(tmp_path, "dev") == [] and load_records(tmp_path, "test") == []
    assert load_records(tmp_path, "train") == data


def test_hashes_follow_content_not_order(tmp_path: Path) -> None:
    data = records()
    assert split_hash(data) == split_hash(list(reversed(data)))
    changed = data[:-1] + [decision_record("fullauto-run5", 3, "stop")]
    assert split_hash(changed) != split_hash(data)
    splits = split_by_group(data, "run_id", seed=0)
    dataset_id = save_dataset(tmp_path / "a", "fullauto", splits)
    assert dataset_id == dataset_id_of({name: split_hash(splits[name]) for name in SPLITS})
    assert dataset_id == sha256_hex(canonical_json({name: split_hash(splits[name]) for name in SPLITS}))
    assert save_dataset(tmp_path / "b", "fullauto", {name: list(reversed(v)) for name, v in splits.items()}) \
        == dataset_id
    moved = {"train": splits["train"] + splits["dev"], "dev": [], "test": splits["test"]}
    assert save_dataset(tmp_path / "c", "fullauto", moved) != dataset_id


def test_saving_again_replaces_the_dataset(tmp_path: Path) -> None:
    first = save_dataset(tmp_path, "fullauto", split_by_group(records(runs=6), "run_id", seed=0))
    second_splits = split_by_group(records(runs=3), "run_id", seed=0)
    second = save_dataset(tmp_path, "fullauto", second_splits)
    assert first != second
    assert dataset_info(tmp_path)["dataset_id"] == second
    assert len(load_records(tmp_path, "all")) == 9
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".staging")]


@settings(max_examples=60, deadline=None)
@given(n_groups=st.integers(min_value=0, max_value=80), seed=st.integers(min_value=0, max_value=10_000))
def test_group_split_keeps_groups_whole_and_fills_every_split(n_groups: int, seed: int) -> None:
    groups = [f"run-{i}" for i in range(n_groups)]
    assignment = assign_splits(groups, seed)
    assert set(assignment) == set(groups)
    sizes = {name: sum(1 for split in assignment.values() if split == name) for name in SPLITS}
    if n_groups >= 3:
        assert all(sizes[name] >= 1 for name in SPLITS), sizes
    if n_groups >= 20:  # fractions 0.7 / 0.15 / 0.15, up to the binomial spread (each group is placed alone)
        assert abs(sizes["test"] - 0.15 * n_groups) <= 1 + 5 * (n_groups * 0.15 * 0.85) ** 0.5
    assert assign_splits(list(reversed(groups)), seed) == assignment  # seeded, order-free


def test_split_by_group_never_splits_a_run() -> None:
    data = records(runs=12, per_run=4)
    splits = split_by_group(data, lambda record: record.run_id, seed=9)
    seen: dict[str, str] = {}
    for name, items in splits.items():
        for record in items:
            assert seen.setdefault(record.run_id, name) == name
    assert sum(len(items) for items in splits.values()) == len(data)
    assert split_by_group(data, "run_id", seed=9) == splits
    assert any(split_by_group(data, "run_id", seed=s) != splits for s in range(10, 15))


def test_fractions_are_validated_and_zero_fraction_splits_stay_empty() -> None:
    assignment = assign_splits([f"g{i}" for i in range(10)], 0, {"train": 0.8, "test": 0.2})
    assert set(assignment.values()) == {"train", "test"}
    with pytest.raises(ValueError, match="unknown split"):
        assign_splits(["a"], 0, {"validation": 1.0})
    with pytest.raises(ValueError, match="positive sum"):
        assign_splits(["a"], 0, {"train": 0.0})


def test_bad_folders_and_splits_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match="not a dataset folder"):
        load_records(tmp_path / "missing")
    save_dataset(tmp_path, "fullauto", split_by_group(records(), "run_id", seed=0))
    with pytest.raises(DatasetFormatError, match="unknown split 'validation'"):
        load_records(tmp_path, "validation")
    with pytest.raises(ValueError, match="unknown dataset kind"):
        save_dataset(tmp_path / "x", "chat", {})


def test_a_record_that_no_longer_validates_is_named_by_row_and_field(tmp_path: Path) -> None:
    from evals.data import DatasetRow, write_dataset

    good = row_of(records(runs=1)[0])
    broken = json.loads(good.record)
    broken["summary"]["turn_count"] = -3  # fits the int64 column, fails the model's ge=0
    broken["record_id"] = "bad-1"
    rows = {"test": [good, DatasetRow("bad-1", good.group_id, "", canonical_json(broken))]}
    write_dataset(tmp_path, "fullauto", rows)
    with pytest.raises(DatasetFormatError, match=r"row 1 \(record bad-1\): summary.turn_count"):
        load_records(tmp_path, "test")


def test_a_value_that_does_not_fit_its_column_is_refused_when_writing(tmp_path: Path) -> None:
    from evals.data import DatasetRow, write_dataset

    good = row_of(records(runs=1)[0])
    broken = json.loads(good.record)
    broken["summary"]["turn_count"] = "three"
    rows = {"test": [good, DatasetRow("bad-1", good.group_id, "", canonical_json(broken))]}
    with pytest.raises(DatasetFormatError, match=r"split 'test' row 1 \(record bad-1\): summary.turn_count: "
                                                 r"expected int64"):
        write_dataset(tmp_path / "out", "fullauto", rows)
    assert not (tmp_path / "out" / "dataset.json").exists()


def test_an_old_format_folder_is_refused_with_how_to_reimport(tmp_path: Path) -> None:
    save_dataset(tmp_path, "fullauto", split_by_group(records(), "run_id", seed=0))
    info = json.loads((tmp_path / "dataset.json").read_text())
    del info["format_version"]  # what format 1 (one JSON `record` column) wrote
    (tmp_path / "dataset.json").write_text(json.dumps(info))
    with pytest.raises(DatasetFormatError) as caught:
        load_records(tmp_path, "test")
    message = str(caught.value)
    assert "\n" not in message and "format version 1" in message
    assert f"guidebench data import LOGS --out {tmp_path} --kind fullauto --force" in message


# ----- a split is checked against dataset.json whenever it is read ---------------------------------

def _two_equal_splits(folder: Path) -> Path:
    data = records(runs=4)
    save_dataset(folder, "fullauto", {"train": data[:6], "dev": data[:3], "test": data[6:12]})
    return folder


def test_a_split_file_replaced_by_another_splits_is_refused_by_its_count(tmp_path: Path) -> None:
    from dataset_support import swapped_split

    folder = swapped_split(_two_equal_splits(tmp_path / "ds"), tmp_path / "swap", into="test", source="dev")
    with pytest.raises(DatasetFormatError) as caught:
        load_records(folder, "test")
    message = str(caught.value)
    assert "\n" not in message and "split 'test' holds 3 records but dataset.json declares 6" in message
    assert "re-import" in message
    with pytest.raises(DatasetFormatError, match="split 'test' holds 3"):
        load_records(folder, "all")
    assert len(load_records(folder, "dev")) == 3  # the untouched splits still read


def test_a_split_with_the_declared_count_but_other_records_is_refused_by_its_hash(tmp_path: Path) -> None:
    from dataset_support import swapped_split
    from evals.data import iter_rows

    folder = swapped_split(_two_equal_splits(tmp_path / "ds"), tmp_path / "swap", into="test", source="train")
    info = dataset_info(folder)
    with pytest.raises(DatasetFormatError, match=rf"split 'test' hashes to \w+ but dataset.json declares "
                                                 rf"{info['splits']['test']['hash'][:12]}: the split changed"):
        load_records(folder, "test")
    with pytest.raises(DatasetFormatError, match="split 'test' hashes to"):  # a stream is refused at its end
        list(iter_rows(folder, "test"))


def test_a_dataset_json_whose_hashes_do_not_give_its_id_is_refused(tmp_path: Path) -> None:
    folder = _two_equal_splits(tmp_path / "ds")
    info = json.loads((folder / "dataset.json").read_text())
    info["splits"]["test"]["hash"] = split_hash(load_records(folder, "train"))  # claims the swapped content
    (folder / "dataset.json").write_text(json.dumps(info))
    with pytest.raises(DatasetFormatError, match="split hashes do not give its dataset_id"):
        load_records(folder, "dev")


def test_a_corrupted_arrow_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    from dataset_support import SHARD, corrupted_split

    folder = corrupted_split(_two_equal_splits(tmp_path / "ds"), tmp_path / "bad", split="test")
    with pytest.raises(DatasetFormatError) as caught:
        load_records(folder, "test")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{folder / 'test' / SHARD}: damaged Arrow file")
    assert "UnicodeDecodeError" in message and "re-import" in message
    (folder / "test" / SHARD).write_bytes(b"not arrow at all")
    with pytest.raises(DatasetFormatError, match=rf"^{folder / 'test' / SHARD}: split 'test' cannot be loaded"):
        load_records(folder, "test")


def _features_row(record: DecisionRecord) -> dict:
    # module level: `map_split` pickles it to its processes
    from programs import decision_inputs
    from runtime.trained import turn_features

    text, numbers = turn_features(decision_inputs(record))
    return {"record_id": record.record_id, "text": text, "numbers": numbers}


def test_a_split_maps_over_two_processes_to_what_one_loop_gives_and_writes_nothing_beside_it(tmp_path: Path) -> None:
    from evals.data import map_split

    splits = split_by_group(records(runs=12), "run_id", seed=3)
    save_dataset(tmp_path, "fullauto", splits, {"seed": 3})
    before = sorted(p.name for p in (tmp_path / "train").iterdir())
    mapped = map_split(tmp_path, "train", _features_row, num_proc=2)  # datasets' own multiprocessing
    assert mapped.to_list() == [_features_row(record) for record in splits["train"]]
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == before  # no cache file beside the dataset
    assert map_split(tmp_path, "train", _features_row).to_list() == mapped.to_list()
