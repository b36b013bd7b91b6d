"""The inputs of a compile: a dataset folder's three splits, their labeled train and dev records as the examples
optimizers train on, and the records' identities (`RecordKey`) a provenance reads.

A split is read one record at a time: train (and the dev and test of Full Auto and of a planner compile) keep only
their records' identities, and `CompileData.records_of` reads a split's records again when it is evaluated, so a
year of records is never held whole next to its examples. A planner compile's train and dev streams are also what
the dataset's outcome models are fit on (one read serves both). A trained planner's fit reads only its examples'
record ids: there they are `StoredExample`s, built again from the split when another field is asked for.
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
    fit_sample: Optional[dict[str, Any]] = None  # how the train examples were sampled (`Reservoir.summary`)

    def records_of(self, split: str) -> list[Any]:
        """A split's records, read again from the dataset when the split holds only their identities (`RecordKey`:
        train always, Full Auto's dev and test too)."""
        held = self.splits[split].records
        if not held or not isinstance(held[0], RecordKey):
            return held
        return load_eval_data(self.dataset_dir, split).records

    def chunks_of(self, split: str, keep: Optional[set[int]] = None) -> Iterator[list[Any]]:
        """A split's records (those at the indices in `keep`; None: all) read again from the dataset, in chunks a
        streamed replay takes (`evals.replay_tasks.replay_chunks`): one chunk is held at a time, not the split."""
        from evals.data import iter_records
        from evals.replay_tasks import TASK_RECORDS

        chunk: list[Any] = []
        for index, record in enumerate(iter_records(self.dataset_dir, split)):
            if keep is None or index in keep:
                chunk.append(record)
                if len(chunk) == TASK_RECORDS:
                    yield chunk
                    chunk = []
        if chunk:
            yield chunk

    def split_hashes(self) -> dict[str, str]:
        """Hash of each split."""
        return {name: data.split_hash for name, data in self.splits.items()}

    def provenance(self, record_ids: Optional[Iterable[str]] = None) -> Provenance:
        """The provenance of a program that learned from these train and dev records (None: from any of them)."""
        wanted = None if record_ids is None else set(record_ids)
        return Provenance.of(self.dataset_id, {
            name: [r for r in self.splits[name].records if wanted is None or r.record_id in wanted]
            for name in ("train", "dev")})



def load_compile_data(data_dir: Path, kind: str, *, stored_train: bool = False, featured: bool = False,
                      models_seed: Optional[int] = None, fit_limit: Optional[int] = None,
                      fit_seed: int = 0) -> CompileData:
    """Train, dev and test of a dataset folder; labeled train/dev records become examples. Train (and Full Auto's dev
    and test) hold their records' identities only; `CompileData.records_of` reads a split's records.

    `stored_train`: the train examples are `StoredExample`s, each read back from the split when a field other than
    its record id is first asked for (a trained planner's fit reads only the ids: `needs_only_ids`), and dev's are
    built from its records (kept for its replay) on first use.

    `featured` (Full Auto): the train and dev examples are `StoredExample`s that know their record id, thread and
    label action and carry their turn features (`programs.decision_fit_fields`), built whole from the split only
    when another field is asked for (a trained decision model's fit: `fits_on_features`).

    `models_seed` (a planner compile): the dataset's outcome models (`outcome_models.models_for`, with this seed)
    are fit on the train records as they are read for the examples, and on dev's held records: train is read once
    for both, and the compile's cycles model takes the models fit here.

    `fit_limit`: at most this many labeled train examples are kept, a uniform sample of them drawn as the split
    streams (`Reservoir`, seeded by `fit_seed`): a trained program's fit then holds a bounded set however large
    the split (`CompileData.fit_sample` says how many were seen and kept)."""
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
    # Full Auto's dev and test records, and a compiled planner's, are read again when evaluated
    # (`CompileData.records_of`): until then only their identities are kept, so the fit never holds them.
    defer = kind == "full_auto" or models_seed is not None
    splits: dict[str, EvalData] = {}
    examples: dict[str, list[Any]] = {}
    unlabeled: dict[str, int] = {}
    reservoir = Reservoir(fit_limit, fit_seed) if fit_limit is not None else None
    if defer:
        streams = {name: _Stream(data_dir, name, kind, _making(data_dir, name, to_example, stored_train=stored_train,
                                                               featured=featured),
                                 reservoir if name == "train" else None)
                   for name in ("train", "dev", "test")}
        try:
            if models_seed is not None:  # one read of train and dev serves their examples and the models' fit
                _fit_models(data_dir, models_seed, streams["train"].records, streams["dev"].records)
            for name, stream in streams.items():
                splits[name], examples[name], unlabeled[name] = stream.finish()
        finally:
            for stream in streams.values():
                stream.close()
    else:
        make = _making(data_dir, "train", to_example, stored_train=stored_train, featured=featured)
        splits["train"], examples["train"], unlabeled["train"] = _Stream(data_dir, "train", kind, make,
                                                                         reservoir).finish()
        for name in ("dev", "test"):
            splits[name] = load_eval_data(data_dir, name)
            # dev's records stay in memory for its replay: a stored example is built from them when asked
            if stored_train and name == "dev":
                make = _kept(programs.planner_labeled, _stored_from_record(to_example))
            else:
                make = _kept(to_example)
            examples[name], unlabeled[name] = _examples(splits[name].records, make)
    splits = {name: splits[name] for name in ("train", "dev", "test")}
    if not examples["train"]:
        raise GuidebenchError(f"--data {data_dir}: the train split has no labeled record to compile on")
    return CompileData(kind=kind, dataset_id=splits["train"].dataset_id, dataset_dir=data_dir, splits=splits,
                       trainset=examples["train"], valset=examples["dev"],
                       unlabeled={name: unlabeled[name] for name in ("train", "dev")},
                       fit_sample=reservoir.summary() if reservoir is not None else None)


# How a record's example is made: (its index in the split, the record) -> the example held; ValueError: unlabeled
Make = Callable[[int, Any], Any]


def _kept(check: Any, keep: Optional[Make] = None) -> Make:
    """`check(record)`: the example, or its ValueError for an unlabeled record (`to_example` itself, or a cheaper
    test that raises the same); `keep` holds the example in another form (a `StoredExample`) once the record has
    proved labeled."""
    if keep is None:
        return lambda index, record: check(record)
    return lambda index, record: (check(record), keep(index, record))[1]


def _making(data_dir: Path, name: str, to_example: Any, *, stored_train: bool, featured: bool) -> Optional[Make]:
    """How a streamed split's examples are made (see `load_compile_data`); None for test, whose examples no
    optimizer reads."""
    if name == "test":
        return None
    if featured:
        return _featured(_split_records(data_dir, name), to_example)
    if stored_train:  # (a planner's) no example is built to learn that the record is labeled
        import programs

        records = _split_records(data_dir, name)
        return _kept(programs.planner_labeled, lambda index, record: StoredExample(
            record.record_id, partial(_example_at, records, index, to_example)))
    return _kept(to_example)


def _examples(records: Iterable[Any], make: Make) -> tuple[list[Any], int]:
    """(the labeled records' examples, the count of unlabeled ones)."""
    examples: list[Any] = []
    unlabeled = [0]
    for _ in _labeled(records, make, examples, unlabeled):
        pass
    return examples, unlabeled[0]


def _labeled(records: Iterable[Any], make: Optional[Make], examples: list[Any],
             unlabeled: list[int]) -> Iterator[Any]:
    """The records, each passed on once its example is in `examples` (or counted in `unlabeled[0]`)."""
    for index, record in enumerate(records):
        if make is not None:
            try:
                example = make(index, record)
            except ValueError:  # no outcome label: cannot teach or select with it
                unlabeled[0] += 1
            else:
                examples.append(example)
        yield record


def _fit_models(data_dir: Path, seed: int, train: Iterator[Any], dev: Iterator[Any]) -> None:
    """The outcome models' fit on the train and dev records as they stream (`outcome_models.models_for`; the
    compile's cycles model takes them). Logs they cannot teach are left to the cycles model to report."""
    from optimizers.outcome_fitting import OutcomeFitError

    from guidebench.evaluation.outcome_models import models_for

    with contextlib.suppress(OutcomeFitError):
        models_for(data_dir, seed=seed, records={"train": train, "dev": dev})


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


class Reservoir:
    """A uniform sample of at most `limit` items of a stream of unknown length, in one pass (Vitter's Algorithm R:
    J. S. Vitter, "Random sampling with a reservoir", ACM TOMS 11(1), 1985): the first `limit` items fill it, then
    the i-th item (0-based) replaces a random slot with probability limit / (i + 1). Seeded, so a compile's sample
    is the same on every run; `kept()` gives the sample in stream order. It has a list's `append`, so it stands
    where the examples list does."""

    def __init__(self, limit: int, seed: int = 0) -> None:
        import random

        if limit < 1:
            raise GuidebenchError(f"--fit-limit {limit}: must be at least 1")
        self.limit, self.seed, self.seen = limit, seed, 0
        self._rng = random.Random(seed)
        self._slots: list[tuple[int, Any]] = []

    def append(self, item: Any) -> None:
        """Offer the next item of the stream."""
        if len(self._slots) < self.limit:
            self._slots.append((self.seen, item))
        else:
            slot = self._rng.randrange(self.seen + 1)
            if slot < self.limit:
                self._slots[slot] = (self.seen, item)
        self.seen += 1

    def kept(self) -> list[Any]:
        """The sample, in the order the stream gave its items."""
        return [item for _, item in sorted(self._slots, key=lambda pair: pair[0])]

    def summary(self) -> dict[str, Any]:
        """What compile.json records: the limit, how many labeled examples were seen and kept, how, the seed."""
        return {"limit": self.limit, "seen": self.seen, "kept": min(self.seen, self.limit),
                "method": "reservoir sample (Vitter's Algorithm R)", "seed": self.seed,
                "sampled": self.seen > self.limit}


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


class _Stream:
    """One split's records read one at a time (`records`): each leaves its identity (`RecordKey`) and, when labeled,
    its example behind, so another reader (the outcome models' fit) can read the same stream; `finish` reads what
    is left and gives (the split with its records as identities, its examples, its unlabeled count). An example is
    what the optimizers need, an identity what a provenance reads (a year of records whole, next to their
    examples, was most of a compile's memory)."""

    def __init__(self, data_dir: Path, split: str, kind: str, make: Optional[Make],
                 reservoir: Optional["Reservoir"] = None) -> None:
        from evals.data import iter_records

        self.data_dir, self.split, self.kind = data_dir, split, kind
        self.keys: list[RecordKey] = []
        self.examples: Any = reservoir if reservoir is not None else []
        self.unlabeled = [0]
        # iter_records checks the record count first and the hash at the end
        self.records = _labeled(self._identified(_without_cycle_collection(iter_records(data_dir, split))),
                                make, self.examples, self.unlabeled)

    def _identified(self, records: Iterable[Any]) -> Iterator[Any]:
        for record in records:
            self.keys.append(RecordKey(record.record_id, record.content_hash))
            yield record

    def finish(self) -> tuple[EvalData, list[Any], int]:
        """Read the rest of the split (all of it when no other reader did); GuidebenchError when it cannot be read."""
        from evals.data import dataset_info

        try:
            info = dataset_info(self.data_dir)
            for _ in self.records:
                pass
        except DatasetFormatError as exc:
            raise GuidebenchError(str(exc)) from exc
        finally:
            self.close()
        data = EvalData(kind=self.kind, records=self.keys, dataset_id=str(info.get("dataset_id", "")),
                        split=self.split, split_hash=info["splits"][self.split]["hash"], source="dataset",
                        dataset_dir=self.data_dir)
        examples = self.examples.kept() if isinstance(self.examples, Reservoir) else self.examples
        return data, examples, self.unlabeled[0]

    def close(self) -> None:
        """Stop reading (a reader that failed half-way leaves no collection switched off)."""
        self.records.close()


def _without_cycle_collection(records: Iterable[Any]) -> Iterator[Any]:
    with _no_cycle_collection():  # while the records are read, not while a reader works on them after
        yield from records
