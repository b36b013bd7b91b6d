"""runtime.provenance: records known by their content (not their ids), the overlap a split has with what a program
learned from, the one line that says how many and where to judge it instead, a provenance that does not hold together
(older identity, emptied hashes, `{}`, counts that disagree) unknown, and a malformed block refused."""

from __future__ import annotations

import pytest

from optimizer_support import decision_records
from runtime.provenance import HASH_CHARS, NOTHING, Provenance, check_overlap, known, read_provenance


def test_records_are_known_by_their_content_not_their_ids():
    train, dev, unseen = decision_records(12), decision_records(4, 100), decision_records(6, 200)
    learned = Provenance.of("d" * 64, {"train": train, "dev": dev, "test": []})
    assert learned.splits == {"train": 12, "dev": 4} and learned.n == 16 and learned.problem() is None
    assert learned.hashes == {"train": sorted(r.content_hash[:HASH_CHARS] for r in train),
                              "dev": sorted(r.content_hash[:HASH_CHARS] for r in dev)}
    assert learned.false_positive_rate() == pytest.approx(16 / 2 ** 64)
    assert learned.describe() == "train 12 + dev 4 of dataset dddddddddddd"
    # A re-import gives the same turns other record ids (and other splits): they are still the same records.
    renamed = [r.model_copy(update={"record_id": f"again-{i}"}) for i, r in enumerate(dev + unseen)]
    assert learned.overlap(renamed) == 4 and learned.overlap(unseen) == 0
    assert Provenance.model_validate_json(learned.model_dump_json()).overlap(renamed) == 4
    assert Provenance.of("d" * 64, {"train": []}) == NOTHING and NOTHING.overlap(train) == 0
    # The same turns under other thread and turn ids (every id renamed) are the same records.
    ids = [{"thread_id": f"t{i}", "turn_id": f"u{i}"} for i in range(len(dev))]
    other_ids = [r.model_copy(update={"summary": r.summary.model_copy(update=new), **new}) for r, new in zip(dev, ids)]
    assert all(a.content_hash == b.content_hash for a, b in zip(dev, other_ids))
    assert check_overlap(learned, other_ids, dataset_id="e" * 64, split="test").n_overlap == 4


def test_the_check_says_how_many_and_where_to_judge_instead():
    train, dev, test = decision_records(12), decision_records(4, 100), decision_records(6, 200)
    learned = Provenance.of("a" * 64, {"train": train, "dev": dev})
    on_dev = check_overlap(learned, dev, dataset_id="a" * 64, split="dev")
    assert on_dev.overlaps and on_dev.n_overlap == 4 and on_dev.params() == {"learned_from": "overlap",
                                                                           "learned_from_overlap": 4}
    assert on_dev.line() == ("4 of the 4 records of split dev of dataset aaaaaaaaaaaa are records the program learned "
                             "from (train 12 + dev 4 of dataset aaaaaaaaaaaa): its scores there are not evidence; "
                             "judge it on split test")
    elsewhere = check_overlap(learned, dev[:2] + test, dataset_id="b" * 64, split="test")
    assert elsewhere.n_overlap == 2 and elsewhere.line().endswith(
        "judge it on the test split of dataset aaaaaaaaaaaa, where it was compiled, or on logs it never saw")
    clean = check_overlap(learned, test, dataset_id="a" * 64, split="test")
    assert clean.status == "clean" and clean.line() == ("none of the 6 records of split test of dataset aaaaaaaaaaaa "
                                                        "was learned from (train 12 + dev 4 of dataset aaaaaaaaaaaa)")
    unknown = check_overlap(None, test, dataset_id="a" * 64, split="test")
    assert unknown.status == "unknown" and unknown.n_overlap is None and unknown.params()["learned_from_overlap"] == \
        "unknown" and unknown.line().startswith("provenance unknown: the program does not record which records")
    assert check_overlap(NOTHING, train, dataset_id="a" * 64, split="train").status == "clean"


def _learned():
    return Provenance.of("a" * 64, {"train": decision_records(12), "dev": decision_records(4, 100)})


def _tampered(change):
    block = _learned().model_dump(mode="json")
    change(block)
    return block


@pytest.mark.parametrize("block, why", [
    (_tampered(lambda b: b.update(hashes={})), "its counts name splits ['dev', 'train'] and its hashes splits []"),
    (_tampered(lambda b: b["hashes"].update(train=[])), "it claims 12 records of split train and lists 0 hashes"),
    (_tampered(lambda b: b["hashes"].pop("dev")), "its counts name splits ['dev', 'train'] and its hashes splits"),
    (_tampered(lambda b: b["splits"].update(train=20)), "it claims 20 records of split train and lists 12 hashes"),
    ({}, "it names no record identity (None, not 'content_hash_v2')"),
    (_tampered(lambda b: b.update(identity="inputs_hash", hashes=sorted(h for v in b["hashes"].values() for h in v))),
     "it knows records by their inputs hash, which includes their ids"),
    (_tampered(lambda b: b["hashes"]["dev"].reverse()), "the hashes of split dev are not sorted and distinct"),
    (_tampered(lambda b: b["hashes"]["dev"].__setitem__(0, "xyz")), "hash 'xyz' of split dev is not 16 lowercase hex"),
    (_tampered(lambda b: b.update(dataset_id=None)), "it holds hashes of records of no dataset"),
])
def test_a_provenance_that_does_not_hold_together_is_unknown(block, why):
    provenance = read_provenance({"provenance": block})
    assert provenance is not None and provenance.problem().startswith(why)
    dev = decision_records(4, 100)  # records it did learn from, if its claim were to be believed
    check = check_overlap(provenance, dev, dataset_id="a" * 64, split="dev")
    assert check.status == "unknown" and check.n_overlap is None and check.params()["learned_from"] == "unknown"
    assert check.line().startswith(f"provenance unknown: its provenance does not hold together: {why}")
    assert check.line().endswith("recompile it and export or evaluate it again (its program.json then records "
                                 "content hashes)")
    assert provenance.describe().startswith("unknown (") and known(provenance) is None


@pytest.mark.parametrize("block, message", [
    ({"splits": {"train": "many"}}, "field provenance.splits.train: Input should be a valid integer"),
    ({"hashes": "abc"}, "field provenance.hashes"),
    ({"hash_chars": 4}, "field provenance.hash_chars: Input should be greater than or equal to 8"),
    ({"stolen": 1}, "field provenance.stolen: Extra inputs are not permitted"),
])
def test_a_malformed_provenance_is_one_line(block, message):
    with pytest.raises(ValueError) as caught:
        read_provenance({"provenance": block})
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert read_provenance({"decide": {}}) is None  # absent: unknown, not an error


@pytest.mark.parametrize("block, why", [
    (_tampered(lambda b: b.update(identity="content_hash")), "it knows records by the first content hashes"),
    (_tampered(lambda b: b.update(identity="inputs_hash")), "it knows records by their inputs hash"),
])
def test_a_provenance_of_an_earlier_identity_scheme_is_unknown(block, why):
    """Hashes of an earlier scheme match no record as hashed now: believed, they would read every record as never
    learned from; unknown instead, with why."""
    provenance = read_provenance({"provenance": block})
    assert provenance.problem().startswith(why) and known(provenance) is None


@pytest.mark.parametrize("forged", [
    {"identity": "content_hash_v2"},  # "learned from no record"
    {"identity": "content_hash_v2", "splits": {}, "hashes": {}},
    _tampered(lambda b: (b["splits"].pop("train"), b["hashes"].pop("train"))),  # dev only, the fit counts train
])
def test_a_fitted_model_cannot_have_learned_from_no_record(forged):
    """A provenance that lists no record of a split the state's own fitted model counts (`fit.n_train`, `n_dev`) is
    unknown, whoever wrote it; the same provenance beside a state with no fitted model is believed."""
    from runtime.provenance import cross_checked, fit_counts, read_program_provenance

    fit = {"trained_model": {"model": {"kind": "linear", "fit": {"n_train": 12, "n_dev": 4}}}}
    assert fit_counts(fit) == {"train": 12, "dev": 4}
    assert fit_counts({"outcome_model": {"model": {"fit": {"n_train": 30, "n_dev": 0}}}}) == {"train": 30}
    assert fit_counts({"decide": {"demos": []}}) == {} and fit_counts({"trained_model": {"model": None}}) == {}
    provenance = read_program_provenance({**fit, "provenance": forged})
    assert known(provenance) is None and "a fitted model cannot have learned from no record" in provenance.problem()
    assert "(`n_train` of its fit in program.json)" in provenance.problem()
    check = check_overlap(provenance, decision_records(4, 100), dataset_id="a" * 64, split="dev")
    assert check.status == "unknown" and check.line().startswith("provenance unknown: its provenance does not hold "
                                                                 "together: it lists no record of split train")
    assert read_provenance({"provenance": forged}).problem() is None  # alone it holds together...
    assert cross_checked(read_provenance({"provenance": forged}), {"decide": {}}).problem() is None  # ...and rules
    honest = read_program_provenance({**fit, "provenance": _learned().model_dump(mode="json")})
    assert honest.problem() is None and known(honest) is honest
