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



def load_compile_data(data_dir: Path, kind: str, *, stored_train: bool = False,
                      models_seed: Optional[int] = None) -> CompileData:
    """Train, dev and test of a dataset folder; labeled train/dev records become examples. Train (and Full Auto's dev
    and test) hold their records' identities only; `CompileData.records_of` reads a split's records.

    `stored_train`: the train examples are `StoredExample`s, each read back from the split when a field other than
    its record id is first asked for (a trained planner's fit reads only the ids: `needs_only_ids`), and dev's are
    built from its records (kept for its replay) on first use.

    `models_seed` (a planner compile): the dataset's outcome models (`outcome_models.models_for`, with this seed)
    are fit on the train records as they are read for the examples, and on dev's held records: train is read once
    for both, and the compile's cycles model takes the models fit here."""
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
    # The held splits first: dev's records are what the outcome models' fit reads of dev while train streams.
    for name in sorted(("train", "dev", "test"), key=lambda name: name == "train" or defer):
        if name == "train" or defer:
            stored = _stored_from_split(data_dir, name, to_example) if stored_train and name == "train" else None
            fit = _models_fit(data_dir, models_seed, splits["dev"].records) \
                if name == "train" and models_seed is not None and not defer else None
            splits[name], examples[name], unlabeled[name] = _streamed(data_dir, name, to_example, kind, stored, fit)
        else:
            splits[name] = load_eval_data(data_dir, name)
            # dev's records stay in memory for its replay: a stored example is built from them when asked
            stored = _stored_from_record(to_example) if stored_train and name == "dev" else None
            examples[name], unlabeled[name] = _examples(splits[name].records, to_example, stored)
    splits = {name: splits[name] for name in ("train", "dev", "test")}
    if not examples["train"]:
        raise GuidebenchError(f"--data {data_dir}: the train split has no labeled record to compile on")
    return CompileData(kind=kind, dataset_id=splits["train"].dataset_id, dataset_dir=data_dir, splits=splits,
                       trainset=examples["train"], valset=examples["dev"],
                       unlabeled={name: unlabeled[name] for name in ("train", "dev")})


# How a labeled record's example is kept: (its index in the split, the record) -> the example held
Keep = Callable[[int, Any], Any]


def _examples(records: Iterable[Any], to_example: Any, keep: Optional[Keep] = None) -> tuple[list[Any], int]:
    """(the labeled records as examples, the count of unlabeled ones); `keep` holds an example in another form (a
    `StoredExample`) once the record has proved labeled."""
    examples: list[Any] = []
    unlabeled = [0]
    for _ in _labeled(records, to_example, keep, examples, unlabeled):
        pass
    return examples, unlabeled[0]


def _labeled(records: Iterable[Any], to_example: Any, keep: Optional[Keep], examples: list[Any],
             unlabeled: list[int]) -> Iterator[Any]:
    """The records, each passed on once its example is in `examples` (or counted in `unlabeled[0]`)."""
    for index, record in enumerate(records):
        try:
            example = to_example(record)
        except ValueError:  # no outcome label: cannot teach or select with it
            unlabeled[0] += 1
        else:
            examples.append(example if keep is None else keep(index, record))
        yield record


# What else reads a split's records as they stream: it may stop early (the rest is read without it)
Reader = Callable[[Iterator[Any]], None]


def _models_fit(data_dir: Path, seed: int, dev: list[Any]) -> Reader:
    """The outcome models' fit on the streamed train records and dev's held ones (`outcome_models.models_for`; the
    compile's cycles model takes them). Logs they cannot teach are left to the cycles model to report."""
    from optimizers.outcome_fitting import OutcomeFitError

    from guidebench.evaluation.outcome_models import models_for

    def fit(train: Iterator[Any]) -> None:
        with contextlib.suppress(OutcomeFitError):
            models_for(data_dir, seed=seed, records={"train": train, "dev": dev})
    return fit


def _stored_from_split(data_dir: Path, name: str, to_example: Any) -> Keep:
    """Examples read back from the split's memory-mapped file when a field other than the record id is asked for."""
    try:
        records = SplitRecords(data_dir, name)
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    return lambda index, record: StoredExample(record.record_id, partial(_example_at, records, index, to_example))


def _stored_from_record(to_example: Any) -> Keep:
    """Examples built again from their records (held for a replay) when a field other than the record id is asked."""
    return lambda index, record: StoredExample(record.record_id, partial(to_example, record))


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


def _streamed(data_dir: Path, split: str, to_example: Any, kind: str, keep: Optional[Keep] = None,
              reader: Optional[Reader] = None) -> tuple[EvalData, list[Any], int]:
    """(the split with its records as identities, its examples, its unlabeled count), its records read one at a
    time: an example is what the optimizers need, an identity what a provenance reads (a year of records whole,
    next to their examples, was most of a compile's memory). `reader` reads the same stream (one read serves
    both)."""
    from evals.data import dataset_info, iter_records

    keys: list[RecordKey] = []

    def identified(records: Iterable[Any]) -> Iterable[Any]:
        for record in records:
            keys.append(RecordKey(record.record_id, record.content_hash))
            yield record

    def without_cycle_collection(records: Iterable[Any]) -> Iterator[Any]:
        with _no_cycle_collection():  # while the records are read, not while a reader works on them after
            yield from records

    examples: list[Any] = []
    unlabeled = [0]
    # iter_records checks the record count first and the hash at the end
    stream = _labeled(identified(without_cycle_collection(iter_records(data_dir, split))), to_example, keep,
                      examples, unlabeled)
    try:
        info = dataset_info(data_dir)
        if reader is not None:
            reader(stream)
        for _ in stream:  # what the reader left unread (all of it without one)
            pass
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    finally:
        stream.close()  # a reader that failed half-way leaves no collection switched off
    data = EvalData(kind=kind, records=keys, dataset_id=str(info.get("dataset_id", "")), split=split,
                    split_hash=info["splits"][split]["hash"], source="dataset", dataset_dir=data_dir)
    return data, examples, unlabeled[0]
