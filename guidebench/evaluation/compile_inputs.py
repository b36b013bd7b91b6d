"""The inputs of a compile: a dataset folder's three splits, their labeled train and dev records as the examples
optimizers train on, and the records' identities (`RecordKey`) a provenance reads.

A split is read one record at a time: train (and Full Auto's dev and test) keep only their records' identities, and
`CompileData.records_of` reads a split's records again when it is evaluated, so a year of records is never held
whole next to its examples. A trained planner's fit reads only its examples' record ids: there they are
`StoredExample`s, built again from the split when another field is asked for.
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from evals.data import DatasetFormatError, SplitRecords
from runtime.provenance import Provenance

from guidebench.errors import GuidebenchError
from guidebench.evaluation.inputs import DATASET_KIND_TO_PROGRAM_KIND, EvalData, load_eval_data, no_dataset_json
from guidebench.evaluation.stored_examples import StoredExample


@dataclass(frozen=True)
class RecordKey:
    """What a provenance reads of a record (`runtime.provenance.record_key`): its id and content hash."""

    record_id: str
    content_hash: str


@dataclass
class CompileData:
    """The three splits of a dataset as records, and the labeled examples optimizers train on."""

    kind: str
    dataset_id: str
    dataset_dir: Path
    splits: dict[str, EvalData]
    trainset: list[Any]
    valset: list[Any]
    unlabeled: dict[str, int]

    def records_of(self, split: str) -> list[Any]:
        """A split's records, read again from the dataset when the split holds only their identities (`RecordKey`:
        train always, Full Auto's dev and test too)."""
        held = self.splits[split].records
        if not held or not isinstance(held[0], RecordKey):
            return held
        return load_eval_data(self.dataset_dir, split).records

    def split_hashes(self) -> dict[str, str]:
        """Hash of each split."""
        return {name: data.split_hash for name, data in self.splits.items()}

    def provenance(self, record_ids: Optional[Iterable[str]] = None) -> Provenance:
        """The provenance of a program that learned from these train and dev records (None: from any of them)."""
        wanted = None if record_ids is None else set(record_ids)
        return Provenance.of(self.dataset_id, {
            name: [r for r in self.splits[name].records if wanted is None or r.record_id in wanted]
            for name in ("train", "dev")})



def load_compile_data(data_dir: Path, kind: str, *, stored_train: bool = False, featured: bool = False) -> CompileData:
    """Train, dev and test of a dataset folder; labeled train/dev records become examples. Train (and Full Auto's dev
    and test) hold their records' identities only; `CompileData.records_of` reads a split's records.

    `stored_train`: the train examples are `StoredExample`s, each read back from the split when a field other than
    its record id is first asked for (a trained planner's fit reads only the ids: `needs_only_ids`), and dev's are
    built from its records (kept for its replay) on first use.

    `featured` (Full Auto): the train and dev examples are `StoredExample`s that know their record id, thread and
    label action and carry their turn features (`programs.decision_fit_fields`), built whole from the split only
    when another field is asked for (a trained decision model's fit: `fits_on_features`)."""
    import programs

    from guidebench.outputs import check_input, written_by

    data_dir = check_input(Path(data_dir), "--data", ("data import", None), "a dataset folder")
    if not (data_dir / "dataset.json").is_file():
        if written_by(data_dir) == "data import":
            raise GuidebenchError(no_dataset_json(data_dir))
        raise GuidebenchError(f"--data {data_dir}: not a dataset folder (no dataset.json); "
                              "run `guidebench data import` first")
    from evals.data import dataset_info

    try:
        found = DATASET_KIND_TO_PROGRAM_KIND[dataset_info(data_dir)["kind"]]
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    if found != kind:
        raise GuidebenchError(f"--data {data_dir} holds {found} records but the program is a {kind} program")
    to_example = programs.decision_example if kind == "full_auto" else programs.planner_example
    # Full Auto's dev and test records are read again when evaluated (`CompileData.records_of`): until then only
    # their identities are kept, so the fit never holds them (a planner's cycles model reads test at the start).
    defer = kind == "full_auto"
    splits: dict[str, EvalData] = {}
    examples: dict[str, list[Any]] = {}
    unlabeled: dict[str, int] = {}
    for name in ("train", "dev", "test"):
        if name == "train" or defer:
            make = _making(data_dir, name, to_example, stored_train=stored_train, featured=featured)
            splits[name], examples[name], unlabeled[name] = _streamed(data_dir, name, make, kind)
        else:
            splits[name] = load_eval_data(data_dir, name)
            # dev's records stay in memory for its replay: a stored example is built from them when asked
            stored = _stored_from_record(to_example) if stored_train and name == "dev" else None
            examples[name], unlabeled[name] = _examples(splits[name].records, _kept(to_example, stored))
    if not examples["train"]:
        raise GuidebenchError(f"--data {data_dir}: the train split has no labeled record to compile on")
    return CompileData(kind=kind, dataset_id=splits["train"].dataset_id, dataset_dir=data_dir, splits=splits,
                       trainset=examples["train"], valset=examples["dev"],
                       unlabeled={name: unlabeled[name] for name in ("train", "dev")})


# How a record's example is made: (its index in the split, the record) -> the example held; ValueError: unlabeled
Make = Callable[[int, Any], Any]


def _kept(to_example: Any, keep: Optional[Make] = None) -> Make:
    """`to_example` of the record (its ValueError: unlabeled); `keep` holds the example in another form (a
    `StoredExample`) once the record has proved labeled."""
    if keep is None:
        return lambda index, record: to_example(record)
    return lambda index, record: (to_example(record), keep(index, record))[1]


def _making(data_dir: Path, name: str, to_example: Any, *, stored_train: bool, featured: bool) -> Make:
    """How a streamed split's examples are made (see `load_compile_data`): Full Auto's test examples are not made at
    all (no optimizer reads them)."""
    if name == "test":
        return lambda index, record: None
    if featured:
        return _featured(_split_records(data_dir, name), to_example)
    if stored_train and name == "train":
        records = _split_records(data_dir, name)
        return _kept(to_example, lambda index, record: StoredExample(
            record.record_id, partial(_example_at, records, index, to_example)))
    return _kept(to_example)


def _examples(records: Iterable[Any], make: Make) -> tuple[list[Any], int]:
    """(the labeled records' examples, the count of unlabeled ones)."""
    examples, unlabeled = [], 0
    for index, record in enumerate(records):
        try:
            example = make(index, record)
        except ValueError:  # no outcome label: cannot teach or select with it
            unlabeled += 1
            continue
        examples.append(example)
    return examples, unlabeled


def _split_records(data_dir: Path, name: str) -> SplitRecords:
    try:
        return SplitRecords(data_dir, name)
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc


def _stored_from_record(to_example: Any) -> Make:
    """Examples built again from their records (held for a replay) when a field other than the record id is asked."""
    return lambda index, record: StoredExample(record.record_id, partial(to_example, record))


def _featured(records: SplitRecords, to_example: Any) -> Make:
    """Full Auto examples that know what a decision model's fit reads (`programs.decision_fit_fields`), built whole
    from the split's memory-mapped file when anything else is asked for."""
    import programs

    def make(index: int, record: Any) -> StoredExample:
        known, features = programs.decision_fit_fields(record)
        return StoredExample(known.pop("record_id"), partial(_example_at, records, index, to_example), known,
                             features)
    return make


def _example_at(records: Any, index: int, to_example: Any) -> Any:
    return to_example(records[index])


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """No cyclic garbage collection while a split is read: each full collection walks every example read so far
    (a tenth of the read's time at 26,000 records). A record dropped is freed at once by its reference count; any
    cycle left behind is collected by the first collection after the read."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _streamed(data_dir: Path, split: str, make: Make, kind: str) -> tuple[EvalData, list[Any], int]:
    """(the split with its records as identities, its examples, its unlabeled count), its records read one at a
    time: an example is what the optimizers need, an identity what a provenance reads (a year of records whole,
    next to their examples, was most of a compile's memory)."""
    from evals.data import dataset_info, iter_records

    keys: list[RecordKey] = []

    def identified(records: Iterable[Any]) -> Iterable[Any]:
        for record in records:
            keys.append(RecordKey(record.record_id, record.content_hash))
            yield record

    try:
        info = dataset_info(data_dir)
        # iter_records checks the record count first and the hash at the end
        with _no_cycle_collection():
            examples, unlabeled = _examples(identified(iter_records(data_dir, split)), make)
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    data = EvalData(kind=kind, records=keys, dataset_id=str(info.get("dataset_id", "")), split=split,
                    split_hash=info["splits"][split]["hash"], source="dataset", dataset_dir=data_dir)
    return data, examples, unlabeled
