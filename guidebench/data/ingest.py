"""Streaming, loss-free reading of JSONL logs: physical lines, strict JSON, quarantine and counts.

Line policy (also written into every import report as `line_policy`):
- Lines are physical lines split on `\\n` (a trailing `\\r` is dropped), numbered from 1.
- A fully empty line (nothing between two line ends, e.g. a trailing blank line) is *blank*:
  skipped, not counted in `read`, counted in `blank_lines`. Every other line, whitespace-only
  included, is counted in `read` exactly once and ends in exactly one of `imported`,
  `quarantined` or `duplicates` (read == imported + quarantined + duplicates); a
  whitespace-only line is quarantined as such.
- A line that is not valid UTF-8, longer than the line limit, not strict JSON (NaN, Infinity
  and numbers that overflow a double are rejected; so is truncated JSON), not a JSON object,
  nested deeper than 64 levels, holding text UTF-8 cannot store (an unpaired `\\ud83d` escape) or an
  integer beyond 64 bits (the dataset stores int64; the error names the field), or
  fails the record contract goes to the quarantine as {"source", "line", "error", "raw"}; `raw`
  is the line itself (redacted; undecodable bytes escaped as `\\xNN`; an over-long line keeps
  its first 4,096 characters and says how long it was).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from guidebench.data.redaction import PatternRedactor

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
RAW_PREVIEW_CHARS = 4096
READ_BUFFER_BYTES = 256 * 1024  # fewer read calls on large logs than the default 8 KiB
MAX_ERRORS_SHOWN = 5
MAX_NOTES = 200
# Deeper JSON is refused at parse time: no log nests this deep, and the code after the parser
# (redaction, validation, hashing) recurses once per level.
MAX_JSON_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")
# The dataset stores integers as int64; one beyond it has 19 digits or more in the raw text.
INT64_RANGE = (-(2 ** 63), 2 ** 63 - 1)
_LONG_DIGITS = re.compile(r"\d{19}")
LINE_POLICY = (
    "physical lines numbered from 1; fully empty lines are skipped and counted in blank_lines, not in read; "
    "every other line (whitespace-only included) is read and ends in exactly one of imported, quarantined, "
    "duplicates"
)


@dataclass(frozen=True)
class PhysicalLine:
    """One physical line of a file: its 1-based number, text, and why it cannot be read (if so)."""

    number: int
    text: Optional[str]
    raw: str
    error: Optional[str]
    offset: int
    size: int

    @property
    def blank(self) -> bool:
        """True for a fully empty line (skipped and not counted as read)."""
        return self.error is None and self.text == ""


def _undecodable(data: bytes, limit: int = RAW_PREVIEW_CHARS) -> str:
    return data[:limit].decode("utf-8", errors="backslashreplace")


def read_lines(
    path: str | os.PathLike,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    digest: Optional["hashlib._Hash"] = None,
) -> Iterator[PhysicalLine]:
    """Stream the physical lines of a file; never loads more than one line (at most the limit) at once."""
    with open(path, "rb", buffering=READ_BUFFER_BYTES) as handle:
        yield from _lines_of(handle, max_line_bytes, digest)


def _lines_of(handle: IO[bytes], max_line_bytes: int, digest: Optional["hashlib._Hash"]) -> Iterator[PhysicalLine]:
    number = 0
    offset = 0
    while True:
        chunk = handle.readline(max_line_bytes + 1)
        if not chunk:
            return
        number += 1
        size = len(chunk)
        if digest is not None:
            digest.update(chunk)
        if not chunk.endswith(b"\n") and size > max_line_bytes:
            head = chunk[:RAW_PREVIEW_CHARS]
            while True:  # skip the rest of the over-long line without keeping it
                more = handle.readline(1024 * 1024)
                if not more:
                    break
                size += len(more)
                if digest is not None:
                    digest.update(more)
                if more.endswith(b"\n"):
                    break
            raw = f"{_undecodable(head)}... [line truncated here: {size} bytes in all]"
            yield PhysicalLine(number, None, raw, f"line too long: {size} bytes (limit {max_line_bytes})", offset, size)
            offset += size
            continue
        data = chunk[:-1] if chunk.endswith(b"\n") else chunk
        if data.endswith(b"\r"):
            data = data[:-1]
        if number == 1 and data.startswith(codecs.BOM_UTF8):
            data = data[len(codecs.BOM_UTF8):]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield PhysicalLine(number, None, _undecodable(data, len(data)),
                               f"invalid UTF-8 at byte {exc.start}: {exc.reason}", offset, size)
        else:
            yield PhysicalLine(number, text, text, None, offset, size)
        offset += size


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (NaN and Infinity are rejected)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} does not fit a double")
    return value


def parse_json_object(text: str) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """Strict JSON object from one line: (object, None) or (None, error naming the column)."""
    if not text.strip():
        return None, "line holds only whitespace"
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON at column {exc.colno}: {exc.msg}"
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__ if value is not None else 'null'}"
    error = _unstorable(text, value)
    if error is not None:
        return None, error
    return value, None


# ASCII text: digits to "0", everything else to " ", then one substring search (the regex tries every position).
_DIGITS_TO_ZERO = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_ZEROS = b"0" * 19


def might_overflow(text: str) -> bool:
    """True when the raw text may hold an integer beyond int64 (a run of 19 digits or more)."""
    if text.isascii():  # \d is [0-9] there
        return _ZEROS in text.encode("ascii").translate(_DIGITS_TO_ZERO)
    return _LONG_DIGITS.search(text) is not None


def _unstorable(text: str, value: Any) -> Optional[str]:
    """Why a parsed line cannot be stored (too deep for the code after the parser, text UTF-8 cannot hold, an
    integer beyond int64), else None. The walk is iterative and runs only when the raw text makes one possible."""
    deep = text.count("[") + text.count("{") > MAX_JSON_DEPTH
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    big = might_overflow(text)
    if not deep and not surrogates and not big:
        return None
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels"
            children = list(item.items() if isinstance(item, dict) else enumerate(item))
            for key, child in reversed(children):  # popped in the line's order: the first problem is named
                if surrogates and isinstance(key, str) and not _utf8(key):
                    return "text cannot be stored as UTF-8: an object key holds an unpaired surrogate escape"
                stack.append((child, depth + 1, f"{path}.{key}" if path else str(key)))
        elif surrogates and isinstance(item, str) and not _utf8(item):
            return "text cannot be stored as UTF-8: a string holds an unpaired surrogate escape (e.g. \\ud83d)"
        elif big and isinstance(item, int) and not isinstance(item, bool) and \
                not INT64_RANGE[0] <= item <= INT64_RANGE[1]:
            digits = str(item)
            shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits.lstrip('-'))} digits)"
            return f"{path}: integer {shown} does not fit 64 bits (the dataset stores int64)"
    return None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def validation_error_text(exc: ValidationError, prefix: str = "") -> str:
    """`field.path: message` for each error (the first few), e.g. `summary.turn_count: Input should be a valid integer`."""
    parts = []
    errors = exc.errors(include_url=False)
    for error in errors[:MAX_ERRORS_SHOWN]:
        where = ".".join(str(part) for part in (prefix, *error["loc"]) if part != "")
        message = error["msg"]
        parts.append(f"{where}: {message}" if where else message)
    if len(errors) > MAX_ERRORS_SHOWN:
        parts.append(f"(+{len(errors) - MAX_ERRORS_SHOWN} more)")
    return "; ".join(parts)


# Characters JSON may leave raw in a string but that some readers take for line ends (Python's
# str.splitlines, JavaScript): escaped, so that one entry is always one line for every reader.
_LINE_BREAKING = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def jsonl_line(entry: Any) -> str:
    """One JSON Lines line (UTF-8 text kept readable; line-breaking characters escaped) ending in a newline."""
    text = json.dumps(entry, ensure_ascii=False)
    for char, escaped in _LINE_BREAKING.items():
        if char in text:
            text = text.replace(char, escaped)
    return text + "\n"


class Quarantine:
    """Writer of quarantined lines, one JSON object per line: {"source", "line", "error", "raw"}."""

    def __init__(self, path: str | os.PathLike, redactor: Optional[PatternRedactor] = None) -> None:
        self.path = Path(path)
        self.count = 0
        self._redactor = redactor
        self._handle = open(self.path, "w", encoding="utf-8")

    def add(self, source: str, line: int, error: str, raw: str, count_redactions: bool = True) -> None:
        """Quarantine one line (its raw text is redacted first; counted unless the line was counted already)."""
        if self._redactor is not None:
            raw = (self._redactor if count_redactions else PatternRedactor()).text(raw)
        entry = {"source": source, "line": line, "error": error, "raw": raw}
        self._handle.write(jsonl_line(entry))
        self.count += 1

    def extend(self, path: Path) -> None:
        """Append the lines of another quarantine file (redacted and counted in the report where they were written,
        as a shard's are)."""
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                self._handle.write(line)
                self.count += 1

    def close(self) -> None:
        """Flush and close the file."""
        if not self._handle.closed:
            self._handle.close()

    def __enter__(self) -> "Quarantine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ImportReport(BaseModel):
    """The counts of one import; kind-specific counts (e.g. `runs`) are extra top-level fields."""

    model_config = ConfigDict(extra="allow")

    kind: str
    path: str
    out: str = ""
    read: int = 0
    imported: int = 0
    quarantined: int = 0
    duplicates: int = 0
    redactions: int = 0
    blank_lines: int = 0
    redactions_by_kind: dict[str, int] = Field(default_factory=dict)
    side_quarantined: int = 0
    dataset_id: str = ""
    splits: dict[str, int] = Field(default_factory=dict)
    distributions: dict[str, dict[str, int]] = Field(default_factory=dict)
    sources: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    line_policy: str = LINE_POLICY

    def add(self, name: str, amount: int = 1) -> None:
        """Increase a count (declared or kind-specific) by `amount`."""
        # Called for every line: write the field directly (pydantic's setattr costs microseconds).
        if name in type(self).model_fields:
            self.__dict__[name] += amount
        else:
            extra = self.__pydantic_extra__
            extra[name] = extra.get(name, 0) + amount

    def count(self, name: str) -> int:
        """A count by name (0 when never set)."""
        return int(getattr(self, name, 0) or 0)

    def tally(self, distribution: str, key: Any, amount: int = 1) -> None:
        """Count one occurrence of `key` in a named distribution (shown on the dataset card)."""
        bucket = self.distributions.setdefault(distribution, {})
        bucket[str(key)] = bucket.get(str(key), 0) + amount

    def note(self, message: str) -> None:
        """Keep a message for the user (the first few hundred; the counts hold the rest)."""
        if len(self.notes) < MAX_NOTES:
            self.notes.append(message)
        elif len(self.notes) == MAX_NOTES:
            self.notes.append("... further notes left out; see the counts and quarantine files")

    @property
    def balanced(self) -> bool:
        """The import invariant: read == imported + quarantined + duplicates."""
        return self.read == self.imported + self.quarantined + self.duplicates

    def extra_counts(self) -> dict[str, int]:
        """The kind-specific integer counts (e.g. runs, runs_missing_config)."""
        return {key: value for key, value in (self.model_extra or {}).items() if isinstance(value, int)}
