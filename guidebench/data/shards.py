"""Import work in shards: kept beside the output, so an interrupted import resumes, and run by `datasets`' processes.

An importer that splits its input into independent units (the experiments importer: one episode log, or the logs
that share one `.advisor/` archive) hands each unit to `run_shards`. A unit's work goes to its own shard folder
under `.<out name>.import-shards/` beside the dataset folder: its spooled records (`records.jsonl` plus the offsets
of each group), its lines for `quarantine.jsonl` and `quarantine-side.jsonl`, its counts (`report.json`), its
redactions by kind, and, apart, what the importer does once every unit has been read (`final-report.json`,
`final-side.jsonl`: the archive plans no log line joined). `shard.json` is written last: a shard without it is
redone. Its name carries the unit's fingerprint (the files it reads: size and modification time, the kind's options,
the guidebench version), so a changed log is read again and an unchanged one is not.

The shards are then merged in unit order into the import's own counts, quarantines and record spool: the dataset,
`import_report.json` and the quarantines are byte for byte what one pass over the units gives
(`tests/guidebench/data/test_shards.py` checks it, also after a child killed mid-import). The shard folder is
removed once the dataset is in place.

Units run through `datasets.Dataset.map` (`num_proc` processes; one runs them in this process): what takes over
past one core (docs/scaling.md), with `datasets`' progress bar and its ETA over the units. With a cluster
(`--cluster`, `guidebench.cluster`) each unit is one of its tasks, writing its shard into the same folder, which
every worker must read and write (a shared disk): a cluster lost mid-import leaves the finished shards to resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from guidebench import __version__
from guidebench.data.ingest import ImportReport, Quarantine
from guidebench.data.redaction import PatternRedactor
from guidebench.data.registry import ImportContext
from guidebench.data.spool import GroupedSpool
from guidebench.data.worker_exit import children_die_with_this_process, die_with_parent

SHARD_FORMAT = 1
DONE_FILE = "shard.json"
FILES = {"records": "records.jsonl", "index": "records-index.json", "quarantine": "quarantine.jsonl",
         "side": "quarantine-side.jsonl", "report": "report.json", "final_report": "final-report.json",
         "final_side": "final-side.jsonl"}
OPTIONS_OF_NOTE = ("planner_repository", "shadow_module", "label_rules", "ignore_side_labels")


def shards_folder(out: Path) -> Path:
    """Where an import into `out` keeps its shards: a hidden sibling (the output itself is written aside)."""
    out = Path(out).absolute()
    return out.with_name(f".{out.name}.import-shards")


@dataclass(frozen=True)
class Unit:
    """Files read together (one shard): `files` are imported, `reads` are everything their import reads (their
    size and modification time go into the fingerprint); `stamps` are (file, digest of what it holds) the importer
    computed itself, for files behind links that `reads`' folders do not follow (a planner archive's)."""

    index: int
    files: tuple[Path, ...]
    reads: tuple[Path, ...]
    stamps: tuple[tuple[str, str], ...] = ()


def _stat_lines(path: str, out: list[str]) -> None:
    """`path size mtime_ns` of a file, or of every file under a folder (sorted, links not followed); `path -`
    when it cannot be read."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            with os.scandir(path) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _stat_lines(entry.path, out)
                else:
                    info = entry.stat(follow_symlinks=False)
                    out.append(f"{entry.path} {info.st_size} {info.st_mtime_ns}")
            return
        info = os.stat(path)
    except OSError:
        out.append(f"{path} -")
        return
    out.append(f"{path} {info.st_size} {info.st_mtime_ns}")


def fingerprint(ctx: ImportContext, unit: Unit, kind: str) -> str:
    """What a unit's shard depends on: its files as they are now, the import's options, this guidebench."""
    digest = hashlib.sha256()
    options = {key: str(ctx.options.get(key)) for key in OPTIONS_OF_NOTE if ctx.options.get(key) is not None}
    head = [f"format {SHARD_FORMAT}", f"guidebench {__version__}", f"kind {kind}", f"path {ctx.path.absolute()}",
            f"max_line_bytes {ctx.max_line_bytes}", json.dumps(options, sort_keys=True),
            *(f"file {file.absolute()}" for file in unit.files), *(f"stamp {f} {held}" for f, held in unit.stamps)]
    for line in head:
        digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    lines: list[str] = []
    for read in unit.reads:  # os.path: a Full Auto shard names a few thousand run files
        _stat_lines(os.path.abspath(read), lines)
    digest.update("\n".join(lines).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:20]


class KeptSpool(GroupedSpool):
    """A shard's record spool: kept on close, its group offsets saved beside it."""

    def save_index(self, path: Path) -> None:
        """Write {group: [offsets]} (groups in first-seen order)."""
        path.write_text(json.dumps({group: offsets.tolist() for group, offsets in self._offsets.items()}),
                        encoding="utf-8")

    def close(self) -> None:
        """Close the file, keep it."""
        if not self._handle.closed:
            self._handle.close()


def _report_of(path: Path) -> ImportReport:
    return ImportReport.model_validate_json(path.read_text(encoding="utf-8"))


def merge_report(into: ImportReport, part: ImportReport) -> None:
    """Add a shard's counts, distributions, sources and notes to the import's, in the order one pass gives."""
    for name in ("read", "imported", "quarantined", "duplicates", "blank_lines", "side_quarantined"):
        into.add(name, getattr(part, name))
    extra = into.__pydantic_extra__
    for key, value in (part.model_extra or {}).items():
        if isinstance(value, int) and not isinstance(value, bool):
            into.add(key, value)
        elif isinstance(value, dict):  # {field: {count: n}} tables (archive_agreement)
            table = extra.setdefault(key, {})
            for row, counts in value.items():
                mine = table.setdefault(row, {name: 0 for name in counts})
                for name, count in counts.items():
                    mine[name] = mine.get(name, 0) + count
        else:
            raise TypeError(f"cannot merge the report field {key!r} of a shard ({type(value).__name__})")
    for distribution, bucket in part.distributions.items():
        for key, count in bucket.items():
            into.tally(distribution, key, count)
    into.sources.extend(part.sources)
    for note in part.notes:
        into.note(note)


def _append_quarantine(quarantine: Quarantine, path: Path) -> None:
    """Append a shard's quarantine lines (already redacted and counted where they were written)."""
    if path.is_file():
        quarantine.extend(path)


def adopt_records(spool: GroupedSpool, folder: Path) -> None:
    """Append a shard's records to the import's spool, group by group in the shard's order (read in place)."""
    spool.adopt(folder / FILES["records"], json.loads((folder / FILES["index"]).read_text(encoding="utf-8")))


@dataclass
class UnitJob:
    """What a process needs to import one unit into its shard (pickled to `datasets`' worker processes)."""

    kind: str
    path: Path
    out: Path
    seed: int
    options: dict[str, Any]
    max_line_bytes: int
    units: Sequence[Unit]
    folders: Sequence[str]
    work: Callable[[ImportContext, Unit], None]
    finish: Optional[Callable[[ImportContext], None]]
    start: Callable[[ImportContext], None]
    parent_pid: int = field(default_factory=os.getpid)  # the import's process: its workers die with it

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        die_with_parent(self.parent_pid)
        position = row["position"]
        self.run(self.units[position], Path(self.folders[position]))
        return {"position": position}

    def run_position(self, position: int) -> int:
        """Import the unit at `position` into its shard (one cluster task)."""
        self.run(self.units[position], Path(self.folders[position]))
        return position

    def context(self, folder: Path, report: ImportReport, redactor: PatternRedactor, quarantine: Quarantine,
                side: Quarantine, records: GroupedSpool) -> ImportContext:
        """A context whose counts, quarantines and records go to the shard."""
        return ImportContext(path=self.path, out=self.out, seed=self.seed, report=report, redactor=redactor,
                             quarantine=quarantine, side_quarantine=side, records=records, workdir=folder,
                             options=dict(self.options), progress=False, max_line_bytes=self.max_line_bytes)

    def run(self, unit: Unit, folder: Path) -> None:
        """Import one unit into `folder` (written aside, renamed into place once complete)."""
        pending = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(pending, ignore_errors=True)
        pending.mkdir(parents=True)
        report = ImportReport(kind=self.kind, path=str(self.path), out=str(self.out))
        redactor = PatternRedactor()
        with Quarantine(pending / FILES["quarantine"], redactor) as quarantine, \
                Quarantine(pending / FILES["side"], redactor) as side, \
                KeptSpool(pending / FILES["records"]) as records:
            ctx = self.context(pending, report, redactor, quarantine, side, records)
            self.start(ctx)
            self.work(ctx, unit)
            records.save_index(pending / FILES["index"])
            if self.finish is not None:  # what one pass does after every unit: its counts and lines kept apart
                final = ImportReport(kind=self.kind, path=str(self.path), out=str(self.out))
                with Quarantine(pending / FILES["final_side"], redactor) as final_side:
                    ctx.report, ctx.side_quarantine = final, final_side
                    self.finish(ctx)
                (pending / FILES["final_report"]).write_text(final.model_dump_json(), encoding="utf-8")
        (pending / FILES["report"]).write_text(report.model_dump_json(), encoding="utf-8")
        (pending / DONE_FILE).write_text(json.dumps({"format": SHARD_FORMAT, "files": [str(f) for f in unit.files],
                                                     "redactions": list(redactor.counts.items())}),
                                         encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(pending, folder)


def _map_units(job: UnitJob, positions: list[int], num_proc: int, progress: Optional[bool]) -> None:
    """Run the units at `positions` through `datasets.Dataset.map` (in `num_proc` processes when more than one)."""
    import sys

    import datasets

    shown = progress if progress is not None else sys.stderr.isatty()
    were_on = datasets.is_progress_bar_enabled()
    (datasets.enable_progress_bars if shown else datasets.disable_progress_bars)()
    try:
        table = datasets.Dataset.from_dict({"position": positions})
        # the shards are the cache: `datasets` need not hash the job to name one of its own
        fingerprint = hashlib.sha256("\n".join(job.folders[p] for p in positions).encode()).hexdigest()[:16]
        with children_die_with_this_process():  # its workers and manager: none outlives a killed import
            table.map(job, num_proc=num_proc if num_proc > 1 and len(positions) > 1 else None, keep_in_memory=True,
                      load_from_cache_file=False, new_fingerprint=fingerprint,
                      desc=f"import {job.kind} ({len(positions)} of {len(job.units)} shards)")
    finally:
        (datasets.enable_progress_bars if were_on else datasets.disable_progress_bars)()


def run_shards(ctx: ImportContext, kind: str, units: Sequence[Unit], *, start: Callable[[ImportContext], None],
               work: Callable[[ImportContext, Unit], None], finish: Optional[Callable[[ImportContext], None]] = None,
               num_proc: int = 1, scope: str = "") -> None:
    """Import every unit into its shard (reusing finished ones), then merge them into `ctx` in unit order.

    An import that runs shards more than once (one call per Full Auto workspace) names each call's `scope`: a
    call keeps and removes only the shards of its own scope."""
    root = shards_folder(ctx.out)
    root.mkdir(parents=True, exist_ok=True)
    folders = [str(root / f"{scope}{unit.index:06d}-{fingerprint(ctx, unit, kind)}") for unit in units]
    options = {key: value for key, value in ctx.options.items() if not key.startswith("_")}
    job = UnitJob(kind=kind, path=ctx.path, out=ctx.out, seed=ctx.seed, options=options,
                  max_line_bytes=ctx.max_line_bytes, units=list(units), folders=folders, work=work, finish=finish,
                  start=start)
    todo = [position for position, folder in enumerate(folders) if not (Path(folder) / DONE_FILE).is_file()]
    kept = len(units) - len(todo)
    if kept:  # said on stderr, not in the report: a resumed import's report is the uninterrupted one's
        import sys

        print(f"resuming: {kept} of {len(units)} shard(s) were finished by an earlier, interrupted import of the "
              f"same files ({root})", file=sys.stderr)
    _stale(root, {Path(folder).name for folder in folders}, scope)
    if todo:
        from evals.tasks import distributed, task_map

        if distributed():  # a cluster's tasks (`guidebench.cluster`): each worker writes its shard where all read
            task_map(job.run_position, todo)
        else:
            _map_units(job, todo, num_proc, ctx.progress)
    finals: list[Path] = []
    redactions: Counter[str] = Counter()
    for folder in map(Path, folders):
        merge_report(ctx.report, _report_of(folder / FILES["report"]))
        _append_quarantine(ctx.quarantine, folder / FILES["quarantine"])
        _append_quarantine(ctx.side_quarantine, folder / FILES["side"])
        adopt_records(ctx.records, folder)
        for name, count in json.loads((folder / DONE_FILE).read_text(encoding="utf-8"))["redactions"]:
            redactions[name] += count
        finals.append(folder)
    for folder in finals:
        if (folder / FILES["final_report"]).is_file():
            merge_report(ctx.report, _report_of(folder / FILES["final_report"]))
            _append_quarantine(ctx.side_quarantine, folder / FILES["final_side"])
    ctx.redactor.counts.update(redactions)


def _stale(root: Path, wanted: set[str], scope: str = "") -> None:
    """Remove shards of files that changed since (another fingerprint) and half-written ones (of this scope)."""
    for child in root.iterdir():
        if child.name.startswith(scope) and child.name not in wanted:
            shutil.rmtree(child, ignore_errors=True)


def remove_shards(out: Path) -> None:
    """Once the dataset is in place its shards are no longer needed."""
    shutil.rmtree(shards_folder(out), ignore_errors=True)


__all__ = ["KeptSpool", "Unit", "UnitJob", "adopt_records", "fingerprint", "merge_report", "remove_shards",
           "run_shards", "shards_folder"]
