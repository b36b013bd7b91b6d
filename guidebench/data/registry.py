"""The plug-in points of `guidebench data`: importers and simulators keyed by kind.

An importer is `run(ctx: ImportContext) -> None`: it reads `ctx.path`, counts every line in
`ctx.report`, quarantines what it cannot use with `ctx.reject(...)`, and hands each finished
record to `ctx.emit(record)`. `guidebench.data.import_logs` does the rest for every kind:
seeded split by group, the dataset folder, `import_report.json`, `quarantine.jsonl` and the card.

A simulator is a `SimulatorSpec`: `add_arguments(parser)` for `guidebench data simulate <kind>`
and `run(args) -> int`. Register both at import time of your module (see
`guidebench/data/fullauto.py`); `guidebench/data/__init__.py` imports the kind modules.
`ImportContext` is what an importer works with: input, counts, quarantine, redaction, record sink.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from pydantic import BaseModel, ValidationError
from tqdm import tqdm

from evals.data import row_of

from guidebench.data.ingest import (
    DEFAULT_MAX_LINE_BYTES,
    ImportReport,
    PhysicalLine,
    Quarantine,
    might_overflow,
    parse_json_object,
    read_lines,
    validation_error_text,
)
from guidebench.data.redaction import PatternRedactor, might_hold_secret
from guidebench.data.spool import GroupedSpool


class _NoBar:
    """Stands in for a progress bar where none is shown."""

    def update(self, amount: int = 1) -> None:
        """Nothing to show."""

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_BAR = _NoBar()


def row_line(record_id: str, group_id: str, label: str, record: str) -> str:
    """A spooled dataset row: a JSON header, a tab, the record JSON (JSON escapes tabs, so the split is safe)."""
    return json.dumps([record_id, group_id, label], ensure_ascii=False) + "\t" + record


def parse_row_line(line: str) -> tuple[str, str, str, str]:
    """(record_id, group_id, label, record JSON) of a spooled row."""
    header, record = line.split("\t", 1)
    record_id, group_id, label = json.loads(header)
    return record_id, group_id, label, record


@dataclass
class ImportContext:
    """Everything an importer needs: input path, counts, quarantine, redaction and the record sink."""

    path: Path
    out: Path
    seed: int
    report: ImportReport
    redactor: PatternRedactor
    quarantine: Quarantine
    side_quarantine: Quarantine
    records: GroupedSpool
    workdir: Path
    options: dict[str, Any] = field(default_factory=dict)
    progress: Optional[bool] = None
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    num_proc: int = 1  # processes for an importer that works in shards (`guidebench.data.shards`)
    # (file, line) whose parsed object was redacted and counted: quarantining it must not count again
    _counted: Optional[tuple[Path, int]] = None

    def display(self, file: Path) -> str:
        """How a file is named in quarantine entries and messages: as reached from the user's path."""
        return str(file)

    def relative(self, file: Path) -> str:
        """A machine-independent name for a file: relative to the imported folder (or its name)."""
        base = self.path if self.path.is_dir() else self.path.parent
        try:
            return file.relative_to(base).as_posix()
        except ValueError:
            return file.name

    def reject(self, source: Path, line: PhysicalLine, error: str) -> None:
        """Quarantine a primary log line (one that counts in `read`)."""
        self.quarantine.add(self.display(source), line.number, error, line.raw,
                            count_redactions=self._counted != (source, line.number))
        self.report.add("quarantined")

    def side_problem(self, counter: str, source: Path, line_number: int, error: str, raw: str) -> None:
        """Record an unusable line of a side file (raw, run, events, labels): side quarantine + counter."""
        self.side_quarantine.add(self.display(source), line_number, error, raw,
                                 count_redactions=self._counted != (source, line_number))
        self.report.add(counter)
        self.report.add("side_quarantined")
        self.report.note(f"{self.display(source)}:{line_number}: {error}")

    def emit(self, record: BaseModel) -> None:
        """Hand over one finished record (DecisionRecord or PlannerRecord) for the dataset."""
        row = row_of(record)
        self.records.append(row.group_id, row_line(row.record_id, row.group_id, row.label, row.record))
        self.report.add("imported")

    def bar(self, total: Optional[int], desc: str, unit: str = "B") -> tqdm:
        """A progress bar (hidden when not on a terminal unless progress was asked for)."""
        disable = None if self.progress is None else not self.progress
        return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", disable=disable, leave=False)

    def _bad_line(self, side_counter: Optional[str], file: Path, line: PhysicalLine, error: str) -> None:
        if side_counter is None:
            self.reject(file, line, error)
        else:
            self.side_problem(side_counter, file, line.number, error, line.raw)

    def _readable_lines(self, file: Path, side_counter: Optional[str], desc: Optional[str]) -> Iterator[PhysicalLine]:
        """Decodable, non-blank lines; counts `read`/`blank_lines` of the primary log and hashes it."""
        primary = side_counter is None
        digest = hashlib.sha256() if primary else None
        size = file.stat().st_size
        quiet = not primary and desc is None
        with (_NO_BAR if quiet else self.bar(size, desc or file.name)) as progress:
            for line in read_lines(file, self.max_line_bytes, digest):
                progress.update(line.size)
                if line.blank:
                    if primary:
                        self.report.add("blank_lines")
                    continue
                if primary:
                    self.report.add("read")
                if line.error is not None:
                    self._bad_line(side_counter, file, line, line.error)
                    continue
                yield line
        if digest is not None:
            self.report.sources.append({"file": self.relative(file), "bytes": size, "sha256": digest.hexdigest()})

    def _parsed(self, file: Path, line: PhysicalLine, side_counter: Optional[str],
                redact: bool) -> Optional[dict[str, Any]]:
        """The line's JSON object (redacted), or None after quarantining the line."""
        text = line.text or ""
        obj, error = parse_json_object(text)
        if obj is None:
            self._bad_line(side_counter, file, line, error or "unreadable line")
            return None
        if redact and might_hold_secret(text):  # one pre-check of the line spares walking a clean one
            obj = self.redactor.value(obj)
            self._counted = (file, line.number)
        return obj

    def json_lines(self, file: Path, side_counter: Optional[str] = None, desc: Optional[str] = None,
                   redact: bool = True) -> Iterator[tuple[PhysicalLine, dict[str, Any]]]:
        """Stream the JSON objects of a JSONL file (redacted), handling blank and unreadable lines.

        For the primary log (`side_counter` None) lines count in `read`/`blank_lines` and bad
        ones are quarantined; for a side file they count in `<side_counter>` on failure only.
        Secrets are counted once per line, whether the line is later imported or quarantined.
        `redact=False` is only for side files whose content is never stored (e.g. events);
        `desc=None` on a side file shows no progress bar (there may be thousands of small files).
        """
        for line in self._readable_lines(file, side_counter, desc):
            obj = self._parsed(file, line, side_counter, redact)
            if obj is not None:
                yield line, obj

    def model_lines(self, file: Path, model: type[BaseModel], side_counter: Optional[str] = None,
                    desc: Optional[str] = None, redact: bool = True,
                    needs_dict: Optional[Callable[[str], bool]] = None,
                    accept: Optional[Callable[[Any], bool]] = None,
                    ) -> Iterator[tuple[PhysicalLine, Any, Optional[dict[str, Any]]]]:
        """Stream the lines of a JSONL file validated as `model`: (line, instance, parsed dict or None).

        Same counting, quarantine and redaction as `json_lines`, plus validation (failures are
        quarantined as `field.path: message`). A clean line (no secret hint, no NaN/Infinity
        text, no digits of an integer that may overflow int64, `needs_dict(text)` false) is
        validated straight from its JSON text, several times faster, and comes with dict None. `accept(instance)` False sends a line down the strict
        path, whose verdict and error text are the ones that count.
        """
        for line in self._readable_lines(file, side_counter, desc):
            text = line.text or ""
            if not ((redact and might_hold_secret(text)) or "NaN" in text or "Infinity" in text
                    or might_overflow(text) or (needs_dict is not None and needs_dict(text))):
                try:
                    instance = model.model_validate_json(text)
                except ValidationError:
                    instance = None  # the strict path names the error
                if instance is not None and (accept is None or accept(instance)):
                    yield line, instance, None
                    continue
            obj = self._parsed(file, line, side_counter, redact)
            if obj is None:
                continue
            try:
                instance = model.model_validate(obj)
            except ValidationError as exc:
                self._bad_line(side_counter, file, line, validation_error_text(exc))
                continue
            yield line, instance, obj


Importer = Callable[[ImportContext], None]


@dataclass(frozen=True)
class SimulatorSpec:
    """`guidebench data simulate <kind>`: its help, its arguments and what it runs."""

    kind: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


IMPORTERS: dict[str, Importer] = {}
SIMULATORS: dict[str, SimulatorSpec] = {}


def register_importer(kind: str, importer: Importer) -> None:
    """Make `guidebench data import --kind <kind>` (and `import_logs(kind=...)`) use `importer`."""
    IMPORTERS[kind] = importer


def register_simulator(spec: SimulatorSpec) -> None:
    """Make `guidebench data simulate <spec.kind>` available."""
    SIMULATORS[spec.kind] = spec

