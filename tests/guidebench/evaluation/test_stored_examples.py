"""Train examples read back from the split on first use: the same examples, and a trained planner's fit reads only
their record ids (nothing of the split is held)."""

from __future__ import annotations

import optimizers
import programs
from evals.data import SplitRecords, load_records
from guidebench.compile import needs_only_ids
from guidebench.evaluation.compile_inputs import load_compile_data
from guidebench.evaluation.stored_examples import StoredExample


def test_stored_examples_are_the_examples_and_read_nothing_for_their_ids(profile_free_dataset):
    eager = load_compile_data(profile_free_dataset, "planner")
    stored = load_compile_data(profile_free_dataset, "planner", stored_train=True)
    assert len(stored.trainset) == len(eager.trainset) and stored.unlabeled == eager.unlabeled
    assert all(isinstance(ex, StoredExample) for ex in stored.trainset)
    assert [ex.get("record_id") for ex in stored.trainset] == [ex.get("record_id") for ex in eager.trainset]
    assert [ex["record_id"] for ex in stored.trainset] == [ex.record_id for ex in eager.trainset]
    assert not any(ex.loaded for ex in stored.trainset)  # the ids came without reading a record back
    assert stored.splits["train"].records == eager.splits["train"].records  # provenance keys, in stored order
    first, again = stored.trainset[0], eager.trainset[0]
    assert first.inputs() == again.inputs() and first.labels() == again.labels() and first.loaded
    assert first.toDict() == again.toDict() and first == again and first.packet == again.packet
    assert first.copy(extra=1).toDict() == {**again.toDict(), "extra": 1}
    # dev's records are kept for its replay: its examples are built from them on first use
    assert [ex.get("record_id") for ex in stored.valset] == [ex.get("record_id") for ex in eager.valset]
    assert not any(ex.loaded for ex in stored.valset)
    assert [ex.toDict() for ex in stored.valset] == [ex.toDict() for ex in eager.valset]


def test_split_records_reads_a_row_back_as_the_stream_gave_it(profile_free_dataset):
    records = load_records(profile_free_dataset, "train")
    rows = SplitRecords(profile_free_dataset, "train")
    assert len(rows) == len(records)
    assert rows[len(records) - 1] == records[-1] and rows[0] == records[0]
    assert programs.planner_example(rows[3]) == programs.planner_example(records[3])


def test_only_a_trained_planners_fit_reads_ids_alone():
    fit, lm = optimizers.get("fit"), optimizers.get("bootstrap_fewshot")
    assert needs_only_ids(programs.spec("planner.learned"), fit)
    assert not needs_only_ids(programs.spec("planner.learned"), lm)
    assert not needs_only_ids(programs.spec("full_auto.learned"), fit)
    assert not needs_only_ids(programs.spec("planner.rules"), fit)


def test_only_a_trained_full_auto_fit_reads_featured_examples():
    from guidebench.compile import fits_on_features

    fit, lm = optimizers.get("fit"), optimizers.get("bootstrap_fewshot")
    assert fits_on_features(programs.spec("full_auto.learned"), fit)
    assert not fits_on_features(programs.spec("full_auto.learned"), lm)
    assert not fits_on_features(programs.spec("planner.learned"), fit)
    assert not fits_on_features(programs.spec("full_auto.rules"), fit)


def test_a_splits_files_read_as_datasets_reads_them(profile_free_dataset):
    import pytest
    from datasets import Dataset

    from evals.split_files import MappedRows, plain_files, stream_batches

    part = Dataset.load_from_disk(str(profile_free_dataset / "train"))
    files = plain_files(part)
    assert files and plain_files(part.select([1, 0])) is None  # an indices mapping is left to datasets
    rows = [dict(zip(batch, values)) for batch in stream_batches(files) for values in zip(*batch.values())]
    assert rows == list(part)
    mapped = MappedRows(files)
    assert len(mapped) == len(part) and [mapped[i] for i in (len(part) - 1, 0, 3)] == [part[-1], part[0], part[3]]
    with pytest.raises(IndexError):
        mapped[len(part)]
