"""runtime.provenance: records known by their inputs (not their ids), the overlap a split has with what a program
learned from, the one line that says how many and where to judge it instead, and a malformed block refused."""

from __future__ import annotations

import pytest

from optimizer_support import decision_records
from runtime.provenance import HASH_CHARS, NOTHING, Provenance, check_overlap, read_provenance


def test_records_are_known_by_their_inputs_not_their_ids():
    train, dev, unseen = decision_records(12), decision_records(4, 100), decision_records(6, 200)
    learned = Provenance.of("d" * 64, {"train": train, "dev": dev, "test": []})
    assert learned.splits == {"train": 12, "dev": 4} and learned.n == 16
    assert learned.hashes == sorted(r.inputs_hash[:HASH_CHARS] for r in train + dev)
    assert learned.false_positive_rate() == pytest.approx(16 / 2 ** 64)
    assert learned.describe() == "train 12 + dev 4 of dataset dddddddddddd"
    # A re-import gives the same turns other record ids (and other splits): they are still the same records.
    renamed = [r.model_copy(update={"record_id": f"again-{i}"}) for i, r in enumerate(dev + unseen)]
    assert learned.overlap(renamed) == 4 and learned.overlap(unseen) == 0
    assert Provenance.model_validate_json(learned.model_dump_json()).overlap(renamed) == 4
    assert Provenance.of("d" * 64, {"train": []}) == NOTHING and NOTHING.overlap(train) == 0


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


@pytest.mark.parametrize("block, message", [
    ({"hashes": ["b" * 16, "a" * 16]}, "field provenance: Value error, hashes must be sorted and distinct"),
    ({"hashes": ["xyz"]}, "field provenance: Value error, hash 'xyz' is not 16 lowercase hex digits"),
    ({"splits": {"train": "many"}}, "field provenance.splits.train: Input should be a valid integer"),
])
def test_a_malformed_provenance_is_one_line(block, message):
    with pytest.raises(ValueError) as caught:
        read_provenance({"provenance": block})
    assert str(caught.value).startswith(message)
    assert read_provenance({"decide": {}}) is None  # absent: unknown, not an error
