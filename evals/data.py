"""The versioned dataset folder (docs/architecture.md): Hugging Face splits of pydantic records.

```
DIR/dataset.json       {"kind", "format_version", "dataset_id", "splits": {name: {"n", "hash"}}, "seed",
                        "sources", "created_at", "guidebench_version", ...}
DIR/dataset_dict.json  DIR/train/ DIR/dev/ DIR/test/   (`datasets.DatasetDict.save_to_disk`)
```
Columns (format version 2): `record_id`, `group_id` (thread or episode), then every other field of the
record as a typed Arrow column (nested structs and lists; free-form JSON as text), declared once
from the pydantic models of `runtime.records` by `evals.columns`, which stay the single source of
truth: reading a row validates it back into the same model. Format version 1 (one JSON `record`
column) is refused with a message that says how to re-import.

Hashes: a split hash is the SHA-256 of the lines `<record_id>\\t<sha256(record JSON)>\\n` sorted
by record id, where the record JSON is `model_dump_json()` (fields in model order, no whitespace,
the same text for the same record), so it does not depend on row order or on the column layout
and can be computed while streaming; the `dataset_id` is the SHA-256 of the canonical JSON of
`{split: split hash}` for the three splits. Every read checks a split against what `dataset.json`
declares (record count, streamed hash, split hashes against the dataset id), so no reader scores a
replaced or edited split under the declared split's name and hash; a damaged Arrow file is one
`DatasetFormatError` naming the file.

Writing lets `datasets` lay out the folder (`save_to_disk` of empty splits), streams the rows
with `datasets.arrow_writer.ArrowWriter` straight into each split's shard in a staging folder,
then moves the finished splits into place, `dataset.json` last: memory stays flat however many
records, and a crash leaves either the old dataset or the new one, never a mix that
`load_records` accepts. `tests/guidebench/data/test_pipeline.py` checks that `datasets.load_from_disk`
reads the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Union

from pydantic import BaseModel, ValidationError

from runtime.records import DecisionRecord, PlannerRecord, canonical_json, sha256_hex

from . import columns
from .split_files import MappedRows, plain_files, stream_batches

Record = Union[DecisionRecord, PlannerRecord]

SPLITS: tuple[str, ...] = ("train", "dev", "test")
KINDS: dict[str, type[BaseModel]] = {"fullauto": DecisionRecord, "experiments": PlannerRecord}
DEFAULT_FRACTIONS: dict[str, float] = {"train": 0.7, "dev": 0.15, "test": 0.15}
DATASET_FILE = "dataset.json"
# 1: one JSON `record` column; 2: the record's fields as typed columns (`evals.columns`).
DATASET_FORMAT_VERSION = 2
REIMPORT_HINT = "guidebench data import LOGS --out DIR"


class DatasetFormatError(ValueError):
    """A dataset folder that is missing, incomplete or holds records that do not validate."""


@dataclass(frozen=True)
class DatasetRow:
    """One record on its way into or out of a split: its canonical JSON plus its id, group and label."""

    record_id: str
    group_id: str
    label: str
    record: str

    def as_dict(self) -> dict[str, str]:
        """The row's four values by name."""
        return {"record_id": self.record_id, "group_id": self.group_id, "label": self.label, "record": self.record}


def record_json(record: BaseModel) -> str:
    """The JSON text of a record (what the hashes cover)."""
    # pydantic's serializer is deterministic for a given model and 2-3x faster than sorting keys
    return record.model_dump_json()


def group_of(record: BaseModel) -> str:
    """The split group of a record: its thread, else its run (Full Auto), or its episode (planner)."""
    if isinstance(record, DecisionRecord):
        # A pause or stop ends a run and the next run of the same thread resumes it (formats.md §1.4.1);
        # the labels read across a thread's runs, so a thread never spans two splits. Orphan decisions
        # (run "unknown") go with their thread too.
        return record.thread_id or record.run_id
    if isinstance(record, PlannerRecord):
        return record.episode_id
    raise TypeError(f"not a dataset record: {type(record).__name__}")


def label_of(record: BaseModel) -> str:
    """The record's label for counts: the outcome label's action, the outcome entry's family, or ""."""
    if isinstance(record, DecisionRecord):
        return record.label.action if record.label else ""
    if isinstance(record, PlannerRecord):
        return (record.outcome.family or "") if record.outcome else ""
    raise TypeError(f"not a dataset record: {type(record).__name__}")


def row_of(record: BaseModel) -> DatasetRow:
    """The dataset row of a record."""
    return DatasetRow(record.record_id, group_of(record), label_of(record), record_json(record))


class SplitHasher:
    """Streaming split hash: keeps one compact (record id, digest) key per record, not the records."""

    def __init__(self) -> None:
        # b"<record id>\t<32-byte digest>": sorts like (record id, digest) because UTF-8 keeps
        # code-point order and the tab sorts below every character an id holds in practice
        self._keys: list[bytes] = []

    def add(self, record_id: str, record_text: str) -> None:
        """Account for one record."""
        self._keys.append(record_id.encode("utf-8") + b"\t" + hashlib.sha256(record_text.encode("utf-8")).digest())

    def __len__(self) -> int:
        return len(self._keys)

    def hexdigest(self) -> str:
        """The split hash: SHA-256 of the lines `<record_id>\\t<sha256 hex of record JSON>\\n`, sorted."""
        digest = hashlib.sha256()
        for key in sorted(self._keys):
            record_id, record_digest = key[:-33], key[-32:]
            digest.update(record_id + b"\t" + record_digest.hex().encode("ascii") + b"\n")
        return digest.hexdigest()


def split_hash(records: Iterable[BaseModel | DatasetRow]) -> str:
    """The hash of one split (independent of record order)."""
    hasher = SplitHasher()
    for item in records:
        row = item if isinstance(item, DatasetRow) else row_of(item)
        hasher.add(row.record_id, row.record)
    return hasher.hexdigest()


def dataset_id_of(split_hashes: Mapping[str, str]) -> str:
    """The dataset id: SHA-256 of the canonical JSON of all split hashes."""
    return sha256_hex(canonical_json(dict(split_hashes)))


def _normalized_fractions(fractions: Optional[Mapping[str, float]]) -> dict[str, float]:
    fractions = dict(DEFAULT_FRACTIONS if fractions is None else fractions)
    unknown = set(fractions) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; splits are {list(SPLITS)}")
    if any(value < 0 for value in fractions.values()) or sum(fractions.values()) <= 0:
        raise ValueError(f"split fractions must be >= 0 with a positive sum, got {fractions}")
    total = sum(fractions.values())
    return {name: fractions.get(name, 0.0) / total for name in SPLITS}


def split_point(group_id: str, seed: int = 0) -> float:
    """Where a group falls in [0, 1) under a seed: the first 8 bytes of SHA-256 of `guidebench-split:<seed>:<id>`,
    as a fraction. It depends on that group's id and the seed alone, so no other group moves it."""
    digest = hashlib.sha256(f"guidebench-split:{seed}:{group_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def _ranges(share: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Each split's range of `split_point`s: test first, then dev, then train (an empty range for a zero share)."""
    ranges, low = {}, 0.0
    for name in ("test", "dev", "train"):
        ranges[name] = (low, 1.0 if name == "train" else low + share[name])
        low = ranges[name][1]
    return ranges


def assign_splits(
    group_ids: Iterable[str], seed: int = 0, fractions: Optional[Mapping[str, float]] = None,
) -> dict[str, str]:
    """Seeded assignment of whole groups to splits, stable as logs grow: {group_id: split}.

    A group's split is the range its `split_point` falls in (test, dev, train by their shares), so a thread or an
    episode keeps its split when other groups come or go; the sizes are the shares up to the binomial spread.
    Small logs: every split with a positive share gets at least one group when there are enough groups (>= 3 for
    the default train/dev/test; with 2 groups, train and test get one each): the group nearest an empty split's
    range is lent to it, and may go back once the logs hold a group of that split's own.
    """
    share = _normalized_fractions(fractions)
    ranges = _ranges(share)
    point = {group: split_point(group, seed) for group in sorted(set(group_ids))}
    assignment = {group: next((name for name in ("test", "dev") if ranges[name][0] <= at < ranges[name][1]),
                              "train" if share["train"] > 0 else ("dev" if share["dev"] > 0 else "test"))
                  for group, at in point.items()}
    _lend_to_empty_splits(assignment, point, ranges, share)
    return assignment


def _lend_to_empty_splits(assignment: dict[str, str], point: Mapping[str, float],
                          ranges: Mapping[str, tuple[float, float]], share: Mapping[str, float]) -> None:
    """Fill the splits that need a group (train, then test, then dev, while groups last) from a split that can
    spare one: the group whose point is nearest the empty split's range moves."""
    needed = [name for name in ("train", "test", "dev") if share[name] > 0][:len(assignment)]
    for name in needed:
        sizes = {split: sum(1 for s in assignment.values() if s == split) for split in SPLITS}
        if sizes[name]:
            continue
        low, high = ranges[name]
        donors = [g for g, s in assignment.items() if s != name and (s not in needed or sizes[s] > 1)]
        if donors:
            nearest = min(donors, key=lambda g: (max(low - point[g], point[g] - high, 0.0), g))
            assignment[nearest] = name


def split_by_group(
    records: Iterable[Record],
    group_key: str | Callable[[Any], str] = group_of,
    seed: int = 0,
    fractions: Optional[Mapping[str, float]] = None,
) -> dict[str, list[Record]]:
    """Seeded split of records by group (thread or episode): no group spans two splits; order is kept."""
    key = (lambda record: str(getattr(record, group_key))) if isinstance(group_key, str) else group_key
    items = list(records)
    assignment = assign_splits((key(record) for record in items), seed, fractions)
    splits: dict[str, list[Record]] = {name: [] for name in SPLITS}
    for record in items:
        splits[assignment[key(record)]].append(record)
    return splits


def _features(kind: str) -> Any:
    """The `datasets.Features` of a split of `kind` (`datasets` is imported lazily: it is slow to import)."""
    return columns.features(KINDS[kind])


def _guidebench_version() -> str:
    try:
        from importlib.metadata import version

        return version("guidebench")
    except Exception:  # not installed (running from a source tree): the version is unknown, not an error
        return "unknown"


def _lay_out_empty_splits(staging: Path, features: Any) -> None:
    """Let `datasets` write the folder layout (dataset_dict.json, state.json, dataset_info.json) for empty splits."""
    from datasets import Dataset, DatasetDict, NamedSplit

    empty = {name: Dataset.from_dict({c: [] for c in features}, features=features, split=NamedSplit(name))
             for name in SPLITS}
    # One shard per split: HF writes no shard at all for an empty split, which it then cannot reload.
    DatasetDict(empty).save_to_disk(str(staging), num_shards={name: 1 for name in SPLITS})


def _stream_split(split_dir: Path, rows: Iterable[DatasetRow], features: Any,
                  model: type[BaseModel]) -> tuple[str, int]:
    """Write a split's rows, as typed columns, straight into its shard file; returns (split hash, rows)."""
    from datasets.arrow_writer import ArrowWriter

    (shard,) = [item["filename"] for item in json.loads((split_dir / "state.json").read_text())["_data_files"]]
    hasher = SplitHasher()
    pending = split_dir / f".{shard}.tmp"
    with ArrowWriter(features=features, path=str(pending)) as writer:
        for index, row in enumerate(rows):
            hasher.add(row.record_id, row.record)
            try:
                typed = columns.encode(model, json.loads(row.record), row.group_id)
                if typed["record_id"] != row.record_id:  # the hash names the row's id, the column the record's
                    raise ValueError(f"the record's own id is {typed['record_id']!r}")
            except (ValueError, KeyError) as exc:  # ColumnTypeError, bad JSON, a record without an id
                raise DatasetFormatError(f"split {split_dir.name!r} row {index} (record {row.record_id}): "
                                         f"{exc}") from exc
            writer.write(typed)
        writer.finalize()
    digest = hasher.hexdigest()
    if len(hasher):  # an empty Arrow stream does not load back: keep the empty shard HF wrote
        os.replace(pending, split_dir / shard)
        state = json.loads((split_dir / "state.json").read_text())
        state["_fingerprint"] = digest[:16]  # HF keys its caches by fingerprint: make it follow the content
        (split_dir / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    else:
        pending.unlink()
    return digest, len(hasher)


def write_dataset(
    directory: str | os.PathLike,
    kind: str,
    rows: Mapping[str, Iterable[DatasetRow]],
    meta: Optional[Mapping[str, Any]] = None,
) -> str:
    """Stream rows into the dataset folder (splits missing from `rows` are empty); returns the dataset id."""
    import datasets

    if kind not in KINDS:
        raise ValueError(f"unknown dataset kind {kind!r}; kinds are {sorted(KINDS)}")
    unknown = set(rows) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; splits are {list(SPLITS)}")
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    features = _features(kind)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target))
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # our callers show their own progress; HF's bars are noise here
    try:
        # Rows go straight from the caller's iterators into the shard files: no copy through
        # a memory map (which `save_to_disk` would make), so memory stays flat.
        _lay_out_empty_splits(staging / "dd", features)
        hashes: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for name in SPLITS:
            try:
                hashes[name], sizes[name] = _stream_split(staging / "dd" / name, rows.get(name, ()), features,
                                                          KINDS[kind])
            except DatasetFormatError as exc:
                raise DatasetFormatError(f"{target}: {exc}") from exc.__cause__
        dataset_id = dataset_id_of(hashes)
        info = {
            "kind": kind,
            "format_version": DATASET_FORMAT_VERSION,
            "dataset_id": dataset_id,
            "splits": {name: {"n": sizes[name], "hash": hashes[name]} for name in SPLITS},
            "seed": None,
            "sources": [],
            "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "guidebench_version": _guidebench_version(),
        }
        for key, value in (meta or {}).items():
            if key not in ("kind", "format_version", "dataset_id", "splits"):
                info[key] = value
        (target / DATASET_FILE).unlink(missing_ok=True)  # an interrupted swap must not look complete
        for name in (*SPLITS, "dataset_dict.json"):
            destination = target / name
            if destination.is_dir():
                shutil.rmtree(destination)
            elif destination.exists():
                destination.unlink()
            os.replace(staging / "dd" / name, destination)
        pending = target / f".{DATASET_FILE}.tmp"
        pending.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(pending, target / DATASET_FILE)
        return dataset_id
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if bars_were_on:
            datasets.enable_progress_bars()


def save_dataset(
    directory: str | os.PathLike,
    kind: str,
    splits: Mapping[str, Iterable[Record]],
    meta: Optional[Mapping[str, Any]] = None,
) -> str:
    """Save records as the dataset folder (`splits` maps train/dev/test to records); returns the dataset id."""
    return write_dataset(directory, kind, {name: (row_of(r) for r in records) for name, records in splits.items()},
                         meta)


def dataset_info(directory: str | os.PathLike) -> dict[str, Any]:
    """The `dataset.json` of a dataset folder."""
    path = Path(directory) / DATASET_FILE
    if not path.is_file():
        raise DatasetFormatError(f"{directory}: not a dataset folder (no {DATASET_FILE})")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetFormatError(f"{path}: unreadable: {exc}") from exc
    if not isinstance(info, dict) or info.get("kind") not in KINDS or not isinstance(info.get("splits"), dict):
        raise DatasetFormatError(f"{path}: needs `kind` (one of {sorted(KINDS)}) and `splits`")
    version = info.get("format_version", 1)
    if version != DATASET_FORMAT_VERSION:
        layout = "one JSON `record` column" if version == 1 else "not a format this guidebench knows"
        hint = _reimport(Path(directory), info["kind"])
        raise DatasetFormatError(f"{directory}: dataset format version {version} ({layout}) is not read by this "
                                 f"guidebench (it reads version {DATASET_FORMAT_VERSION}: typed columns); "
                                 f"re-import the logs: {hint}")
    return info


def _split_names(split: str) -> tuple[str, ...]:
    if split == "all":
        return SPLITS
    if split not in SPLITS:
        raise DatasetFormatError(f"unknown split {split!r}; use one of {[*SPLITS, 'all']}")
    return (split,)


def _reimport(directory: Path, kind: str) -> str:
    return REIMPORT_HINT.replace("DIR", f"{directory} --kind {kind} --force")


def _declared(directory: Path, info: Mapping[str, Any], name: str, hint: str) -> tuple[int, str]:
    """(records, hash) that dataset.json declares for a split, checked against its dataset id."""
    hashes = {part: (info["splits"].get(part) or {}).get("hash") for part in SPLITS}
    declared = info["splits"].get(name) or {}
    if not isinstance(declared.get("n"), int) or not isinstance(declared.get("hash"), str):
        raise DatasetFormatError(f"{directory / DATASET_FILE}: declares no `n` and `hash` for split {name!r}; "
                                 f"re-import the logs: {hint}")
    if dataset_id_of(hashes) != info.get("dataset_id"):
        raise DatasetFormatError(f"{directory / DATASET_FILE}: its split hashes do not give its dataset_id: the file "
                                 f"was edited; re-import the logs: {hint}")
    return declared["n"], declared["hash"]


def _shard_names(directory: Path, name: str) -> str:
    """The Arrow file(s) of a split, for error messages (the split folder when its state.json is unreadable)."""
    try:
        files = [item["filename"] for item in json.loads((directory / name / "state.json").read_text())["_data_files"]]
        return ", ".join(str(directory / name / file) for file in files)
    except (OSError, ValueError, KeyError, TypeError):
        return str(directory / name)


def _open_split(directory: Path, name: str, hint: str) -> Any:
    from datasets import Dataset

    try:
        return Dataset.load_from_disk(str(directory / name))
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise DatasetFormatError(f"{_shard_names(directory, name)}: split {name!r} cannot be loaded "
                                 f"({' '.join(str(exc).split())[:200]}); re-import the logs: {hint}") from exc


def _batches(directory: Path, name: str, part: Any, batch_size: int, hint: str) -> Iterator[dict[str, list[Any]]]:
    """The split's rows in batches; a damaged Arrow file is one error naming the file, not a decoder's traceback."""
    import pyarrow

    files = plain_files(part)  # read by plain reads, not through the mapping (`evals.split_files`)
    batches = stream_batches(files) if files is not None else part.iter(batch_size=batch_size)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        # Damaged bytes surface as Arrow errors, or as UnicodeDecodeError (a ValueError) in a text column.
        except (ValueError, OSError, TypeError, pyarrow.ArrowException) as exc:
            raise DatasetFormatError(f"{_shard_names(directory, name)}: damaged Arrow file "
                                     f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); re-import the "
                                     f"logs: {hint}") from exc
        yield batch


def _validated(directory: Path, name: str, model: type[BaseModel], row: dict[str, Any], index: int) -> BaseModel:
    try:
        return model.model_validate(columns.decode(model, row))
    except (ValidationError, ValueError, KeyError) as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) + f": {first['msg']}"
        else:
            where = f"{type(exc).__name__}: {exc}"
        raise DatasetFormatError(f"{directory}: split {name!r} row {index} "
                                 f"(record {row.get('record_id')}): {where}") from exc


def _iter_validated(directory: Path, split: str, batch_size: int = 1000) -> Iterator[tuple[str, BaseModel, str]]:
    """(group id, validated record, record JSON) of each row of a split, in stored order.

    Each split is checked against what dataset.json declares for it: its record count before the first
    row, its hash (streamed) after the last, so a split replaced or edited after it was written is
    refused (`load_records` before it returns; a consumer of the stream at its end).
    """
    info = dataset_info(directory)
    model, hint = KINDS[info["kind"]], _reimport(directory, info["kind"])
    for name in _split_names(split):
        n, digest = _declared(directory, info, name, hint)
        part = _open_split(directory, name, hint)
        if len(part) != n:
            raise DatasetFormatError(f"{directory}: split {name!r} holds {len(part)} records but {DATASET_FILE} "
                                     f"declares {n}: the split changed after it was frozen; re-import the logs: {hint}")
        hasher = SplitHasher()
        index = 0
        for batch in _batches(directory, name, part, batch_size, hint):
            names = list(batch)
            for values in zip(*(batch[column] for column in names)):
                row = dict(zip(names, values))
                record = _validated(directory, name, model, row, index)
                text = record_json(record)
                hasher.add(record.record_id, text)
                yield row["group_id"], record, text
                index += 1
        if hasher.hexdigest() != digest:
            raise DatasetFormatError(f"{directory}: split {name!r} hashes to {hasher.hexdigest()[:12]} but "
                                     f"{DATASET_FILE} declares {digest[:12]}: the split changed after it was "
                                     f"frozen; re-import the logs: {hint}")


def iter_rows(directory: str | os.PathLike, split: str = "test", batch_size: int = 1000) -> Iterator[DatasetRow]:
    """Stream the rows of a split ("train", "dev", "test" or "all") without loading it whole."""
    for group_id, record, text in _iter_validated(Path(directory), split, batch_size):
        yield DatasetRow(record.record_id, group_id, label_of(record), text)


def iter_records(directory: str | os.PathLike, split: str = "test") -> Iterator[Record]:
    """Stream the validated records of a split ("train", "dev", "test" or "all")."""
    for _group_id, record, _text in _iter_validated(Path(directory), split):
        yield record  # type: ignore[misc]


class _Mapped:
    """What `map_split` runs in each process: a row validated back into its record, then the caller's function."""

    def __init__(self, model: type[BaseModel], fn: Callable[[Any], Mapping[str, Any]]) -> None:
        self.model, self.fn = model, fn

    def __call__(self, row: dict[str, Any]) -> Mapping[str, Any]:
        return self.fn(self.model.model_validate(columns.decode(self.model, row)))


def map_split(directory: str | os.PathLike, split: str, fn: Callable[[Any], Mapping[str, Any]], *,
              num_proc: int = 1) -> Any:
    """`fn(record)` of every record of one split as a `datasets.Dataset` of its outputs (one row per record, stored
    order), by `datasets.Dataset.map` over `num_proc` processes.

    The split's Arrow file is memory-mapped, and each process reads, validates and maps its own shard: per-record
    work (features, scores) on more cores than one, with nothing written next to the dataset (the result stays in
    memory). What takes over past one core (docs/scaling.md). `fn` is pickled to the processes: a module-level
    function. The split's record count is checked against dataset.json first.
    """
    directory = Path(directory)
    info = dataset_info(directory)
    model, hint = KINDS[info["kind"]], _reimport(directory, info["kind"])
    n, _ = _declared(directory, info, split, hint)
    part = _open_split(directory, split, hint)
    if len(part) != n:
        raise DatasetFormatError(f"{directory}: split {split!r} holds {len(part)} records but {DATASET_FILE} "
                                 f"declares {n}: the split changed after it was frozen; re-import the logs: {hint}")
    return part.map(_Mapped(model, fn), num_proc=num_proc if num_proc > 1 else None, keep_in_memory=True,
                    remove_columns=part.column_names, desc=f"map {split}")


class SplitRecords:
    """One split's records by row index, each read and validated from the memory-mapped Arrow file when asked for
    (nothing is held in memory, nor its pages once read: `evals.split_files.MappedRows`): for a caller that
    streamed the split once (`iter_records` checked its count and hash) and comes back for a few records later."""

    def __init__(self, directory: str | os.PathLike, split: str) -> None:
        self.directory, self.split = Path(directory), split
        info = dataset_info(self.directory)
        self.model = KINDS[info["kind"]]
        part = _open_split(self.directory, split, _reimport(self.directory, info["kind"]))
        files = plain_files(part)  # rows whose pages are let go once read (`evals.split_files`)
        self._rows = MappedRows(files) if files is not None else part

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: int) -> Record:
        row = self._rows[index]
        return _validated(self.directory, self.split, self.model, row, index)  # type: ignore[return-value]


def load_records(directory: str | os.PathLike, split: str = "test") -> list[Record]:
    """The validated records of a split ("train", "dev", "test" or "all"), in stored order."""
    return list(iter_records(directory, split))
