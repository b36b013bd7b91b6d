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


def test_featured_examples_know_what_a_decision_fit_reads_and_build_the_rest_from_the_split(tmp_path):
    import programs
    from guidebench.evaluation.stored_examples import StoredExample
    from runtime.trained import turn_features

    data_dir = make_dataset(tmp_path / "data", train=8, dev=4, test=4)
    eager = load_compile_data(data_dir, "full_auto")
    featured = load_compile_data(data_dir, "full_auto", featured=True)
    assert featured.unlabeled == eager.unlabeled
    assert featured.splits["train"].records == eager.splits["train"].records
    for stored, whole in ((featured.trainset, eager.trainset), (featured.valset, eager.valset)):
        assert len(stored) == len(whole) and all(isinstance(ex, StoredExample) for ex in stored)
        for field in ("record_id", "thread_id", "action"):
            assert [ex.get(field) for ex in stored] == [ex.get(field) for ex in whole]
            assert [getattr(ex, field) for ex in stored] == [ex[field] for ex in whole]
        text, numbers = programs.example_features(stored[0])
        assert (text, list(numbers)) == turn_features(whole[0].inputs().toDict())
        assert not any(ex.loaded for ex in stored)  # ids, threads, labels and features: nothing read back
        assert [ex.toDict() for ex in stored] == [ex.toDict() for ex in whole]  # the rest: the same examples
        assert stored[0].inputs() == whole[0].inputs() and all(ex.loaded for ex in stored)
    assert programs.example_features(eager.trainset[0]) == turn_features(eager.trainset[0].inputs().toDict())


def test_a_planner_compile_reads_train_once_for_its_examples_and_its_outcome_models(profile_free_dataset, tmp_path,
                                                                                   monkeypatch):
    import evals.data
    from guidebench.evaluation.outcome_models import models_for
    from optimizers.outcome_fitting import fit_outcome_models

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    reads: list[str] = []
    stream = evals.data.iter_records

    def counted(directory, split="test"):
        reads.append(split)
        return stream(directory, split)

    monkeypatch.setattr(evals.data, "iter_records", counted)
    data = load_compile_data(profile_free_dataset, "planner", stored_train=True, models_seed=0)
    assert sorted(reads) == ["dev", "test", "train"]  # one stream of each: the fit read train's and dev's
    assert all(isinstance(key, RecordKey) for split in ("dev", "test") for key in data.splits[split].records)
    assert [r.record_id for r in data.records_of("test")] == [r.record_id for r in load_records(profile_free_dataset)]
    handed = models_for(profile_free_dataset, seed=0)  # what the compile's cycles model asks for next
    assert sorted(reads) == ["dev", "test", "test", "test", "train"]  # no read but the two of test above
    assert not handed.from_cache
    monkeypatch.setattr(evals.data, "iter_records", stream)
    alone = fit_outcome_models(load_records(profile_free_dataset, "train"), load_records(profile_free_dataset, "dev"))
    assert handed.outcome.to_state() == alone.outcome.to_state()
    assert handed.propensity.to_state() == alone.propensity.to_state()
    again = models_for(profile_free_dataset, seed=0)  # handed once; then the cache, as before
    assert again.from_cache and again.outcome.to_state() == alone.outcome.to_state()
    plain = load_compile_data(profile_free_dataset, "planner", stored_train=True)  # dev and test held whole
    assert [e.record_id for e in data.trainset] == [e.record_id for e in plain.trainset]
    assert [e.record_id for e in data.valset] == [e.record_id for e in plain.valset]
    assert data.valset[0].toDict() == plain.valset[0].toDict()  # a dev example read back from the split
    assert data.unlabeled == plain.unlabeled and list(data.splits) == ["train", "dev", "test"]
    assert data.provenance().model_dump() == plain.provenance().model_dump()
