"""`import_logs`: run a kind's importer, then write the dataset, report, quarantine and card."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from evals.data import SPLITS, DatasetRow, assign_splits, write_dataset

from guidebench import __version__
from guidebench.errors import GuidebenchError, refused_write, write_refused_line
from guidebench.data.card import write_card
from guidebench.data.ingest import DEFAULT_MAX_LINE_BYTES, ImportReport, Quarantine
from guidebench.data.redaction import PatternRedactor
from guidebench.data.registry import IMPORTERS, ImportContext, parse_row_line
from guidebench.data.shards import remove_shards
from guidebench.data.spool import GroupedSpool

REPORT_FILE = "import_report.json"
QUARANTINE_FILE = "quarantine.jsonl"
SIDE_QUARANTINE_FILE = "quarantine-side.jsonl"


class NothingImportedError(GuidebenchError):
    """No line of the input could be imported (the report and quarantine are still written)."""

    def __init__(self, message: str, report: ImportReport) -> None:
        super().__init__(message)
        self.report = report


def _rows(spool: GroupedSpool, groups: list[str], labels: Counter) -> Iterator[DatasetRow]:
    for group in groups:
        for line in spool.read_group(group):
            record_id, group_id, label, record = parse_row_line(line)
            labels[label or "(none)"] += 1
            yield DatasetRow(record_id, group_id, label, record)


def _counted(rows: Iterator[DatasetRow], bar: Any) -> Iterator[DatasetRow]:
    for row in rows:
        yield row
        bar.update(1)


def write_report(out: Path, report: ImportReport) -> Path:
    """Write `import_report.json` atomically."""
    path = out / REPORT_FILE
    pending = out / f".{REPORT_FILE}.tmp"
    pending.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(pending, path)
    return path


def import_logs(
    path: str | os.PathLike,
    kind: str,
    out: str | os.PathLike,
    seed: int = 0,
    *,
    fractions: Optional[Mapping[str, float]] = None,
    progress: Optional[bool] = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    force: bool = False,
    num_proc: int = 1,
    **options: Any,
) -> ImportReport:
    """Import logs of `kind` from `path` into the dataset folder `out`; returns the report.

    `out` follows `guidebench.outputs`: a new or empty folder, or an earlier import with `force`; it
    is written aside and renamed into place. Raises GuidebenchError for a missing path, an unknown
    kind or a refused `out`, and NothingImportedError (after writing the report and quarantine)
    when no line could be imported.

    An importer that works in shards (experiments) keeps them beside `out` until the dataset is in place: an
    interrupted import run again reads only the files no finished shard holds (`guidebench.data.shards`), and
    `num_proc` runs the shards in that many processes. Either way the dataset and report are the same.
    """
    from guidebench.outputs import check_input, claim_output, interrupted

    if kind not in IMPORTERS:
        raise GuidebenchError(f"unknown log kind {kind!r}; known kinds: {', '.join(sorted(IMPORTERS)) or 'none'}")
    if not Path(path).exists() and interrupted(Path(path)) is None:
        raise GuidebenchError(f"{Path(path)}: no such file or directory")
    source = check_input(Path(path), "", (None, "data simulate fullauto", "data simulate experiments", "run-loop",
                                          "plan-loop"),
                         "a log folder or file: give the logs it was made from")
    output = claim_output(Path(out), "data import", force=force, inputs=[source])
    final = Path(out)
    with output.writing() as target:
        try:
            report = _import_into(target, final, source, kind, seed, fractions, progress, max_line_bytes, num_proc,
                                  options)
        except OSError as exc:
            line = write_refused_line(exc, final)  # the logs were read; the dataset could not be written
            if line is None:
                raise
            raise GuidebenchError(line) from exc
    remove_shards(final)
    if report.imported == 0:
        raise NothingImportedError(
            f"{source}: nothing could be imported ({report.read} line(s) read, {report.quarantined} "
            f"quarantined, {report.blank_lines} blank; see {final / QUARANTINE_FILE})", report)
    return report


def _import_into(target: Path, final: Path, source: Path, kind: str, seed: int,
                 fractions: Optional[Mapping[str, float]], progress: Optional[bool], max_line_bytes: int,
                 num_proc: int, options: dict[str, Any]) -> ImportReport:
    """Import into the staging folder `target` (renamed to `final` afterwards); the report names `final`."""
    report = ImportReport(kind=kind, path=str(source), out=str(final))
    redactor = PatternRedactor()
    workdir = Path(tempfile.mkdtemp(prefix=".import-", dir=target))
    try:
        with Quarantine(target / QUARANTINE_FILE, redactor) as quarantine, \
                Quarantine(target / SIDE_QUARANTINE_FILE, redactor) as side_quarantine, \
                GroupedSpool(workdir / "records.jsonl") as records:
            ctx = ImportContext(path=source, out=final, seed=seed, report=report, redactor=redactor,
                                quarantine=quarantine, side_quarantine=side_quarantine, records=records,
                                workdir=workdir, options=dict(options), progress=progress,
                                max_line_bytes=max_line_bytes, num_proc=num_proc)
            try:
                IMPORTERS[kind](ctx)
            except OSError as exc:  # the OS would not let us read a log: name it, in one line
                if refused_write(exc):  # not the log's fault: the spool or the quarantine could not be written
                    raise
                raise GuidebenchError(f"{exc.filename or source}: cannot read: {exc.strerror or exc}") from None
            quarantine.close()
            side_quarantine.close()
            report.redactions = redactor.total
            report.redactions_by_kind = dict(sorted(redactor.counts.items()))
            if not report.balanced:  # a bug in an importer, never bad input: fail loudly
                raise RuntimeError(f"import counts do not add up: read {report.read} != imported {report.imported}"
                                   f" + quarantined {report.quarantined} + duplicates {report.duplicates}")
            if report.imported == 0:
                # The report and quarantine still go into place: they say why nothing was imported.
                write_report(target, report)
                return report
            groups = records.groups()
            assignment = assign_splits(groups, seed, fractions)
            labels: dict[str, Counter] = {name: Counter() for name in SPLITS}
            rows = {name: _rows(records, [g for g in groups if assignment[g] == name], labels[name])
                    for name in SPLITS}
            meta = {"seed": seed, "sources": report.sources, "guidebench_version": __version__,
                    "import": {key: report.model_dump()[key] for key in ("read", "imported", "quarantined",
                                                                         "duplicates", "blank_lines", "redactions")}
                    | report.extra_counts()}
            with ctx.bar(report.imported, "write dataset", unit="rec") as bar:
                report.dataset_id = write_dataset(target, kind, {name: _counted(split, bar)
                                                                 for name, split in rows.items()}, meta)
            report.splits = {name: sum(labels[name].values()) for name in SPLITS}
            report.distributions["labels"] = dict(sorted(sum(labels.values(), Counter()).items()))
            for name in SPLITS:
                report.distributions[f"labels_{name}"] = dict(sorted(labels[name].items()))
        if (target / SIDE_QUARANTINE_FILE).stat().st_size == 0:
            (target / SIDE_QUARANTINE_FILE).unlink()
        write_report(target, report)
        write_card(target, report)
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
