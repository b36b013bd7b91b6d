"""guidebench.evaluation.compile_inputs: a dataset folder's splits as a compile's examples and records' identities."""

from __future__ import annotations

from evals.data import load_records
from guidebench.evaluation.compile_inputs import RecordKey, load_compile_data
from optimizer_support import make_dataset


def test_full_auto_compile_data_holds_identities_and_reads_a_splits_records_when_asked(tmp_path):
    data_dir = make_dataset(tmp_path / "data", train=8, dev=4, test=4)
    data = load_compile_data(data_dir, "full_auto")
    assert len(data.trainset) == 8 and len(data.valset) == 4
    for split in ("train", "dev", "test"):
        stored = load_records(data_dir, split)
        held = data.splits[split].records  # only what a provenance reads, until evaluated
        assert all(isinstance(key, RecordKey) for key in held)
        assert [(k.record_id, k.content_hash) for k in held] == [(r.record_id, r.content_hash) for r in stored]
        assert [r.model_dump() for r in data.records_of(split)] == [r.model_dump() for r in stored]
    assert data.provenance().model_dump() == load_compile_data(data_dir, "full_auto").provenance().model_dump()
