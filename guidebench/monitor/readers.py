"""Incremental reads of append-only JSONL logs: only what was appended since the last run, complete lines only.

A log's cursor (`FileCursor`) holds its inode, the offset after the last complete line and a hash of its first
bytes. At the next run the log is read on from that offset if it is still the same file (same inode, not
shorter, same first bytes); otherwise it was rotated, truncated or replaced and is read from its start. Records
are counted once whatever happens: each record's key is remembered (`MonitorState.seen`), so a record read again
from a replaced or rewritten log is skipped and counted as a duplicate. A line being written (no newline yet) is
left for the next run. A line that is not a JSON object is quarantined with its file and line number, and counted.

Speed (10,000 decisions must be read in well under 2 s): lines are decoded by orjson, with the standard library as
the judge of every line orjson refuses or could read differently (`loads`), so what is read and each quarantine
message stay the standard library's; files are read with `os.pread`, without buffered file objects (a pass opens
thousands of small events files).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Optional, Union

import orjson

from guidebench.monitor._base import FileCursor, MonitorState, Quarantined

HEAD_BYTES = 4096
QUARANTINE_KEPT = 50
READ_BLOCK = 1 << 16
# Where orjson and the standard library read the same document differently, the standard library reads it: an
# integer beyond 64 bits (orjson makes it a float) is found as a run of 19 digits or more, once per chunk of a log
# (real lines have none: ids are text, counts small). One difference is left on purpose: nesting between the
# standard library's recursion limit (about 1000 levels) and orjson's (1024) is read where the standard library
# raised RecursionError and stopped the whole pass.
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_NUMBER = b"0" * 19


def _has_long_number(raw: bytes) -> bool:
    return _LONG_NUMBER in raw.translate(_DIGITS)


class Line(NamedTuple):
    """One complete JSON object line of a log (a tuple: tens of thousands are made per pass)."""

    file: str
    number: int
    data: dict[str, Any]

    def where(self) -> str:
        """file:line, for alarms and quarantine."""
        return f"{self.file}:{self.number}"


def loads(raw: bytes, fallback: Callable[[bytes], Any] = json.loads) -> Any:
    """One JSON document as `fallback` (the standard library) reads it, about three times faster: orjson reads it
    unless it has a long number; whatever orjson refuses (NaN, Infinity, a byte-order mark, a lone surrogate, bad
    JSON) is read, or refused with its own message, by `fallback`. Where both read a document they agree (the same
    floats, the last of duplicate keys)."""
    return fallback(raw) if _has_long_number(raw) else _orjson_or(raw, fallback)


def _orjson_or(raw: bytes, fallback: Callable[[bytes], Any] = json.loads) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return fallback(raw)


def read_bytes(path: Union[str, Path]) -> bytes:
    """A whole (small) file, without the buffered file object's cost (thousands of run files per pass)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, READ_BLOCK)]
        while len(chunks[-1]) == READ_BLOCK:  # a regular file reads short only at its end: no read of nothing
            chunks.append(os.read(fd, READ_BLOCK))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _pread(fd: int, size: int, offset: int) -> bytes:
    chunks = []
    while size > 0 and (chunk := os.pread(fd, size, offset)):
        chunks.append(chunk)
        size, offset = size - len(chunk), offset + len(chunk)
    return b"".join(chunks)


def _same_file(fd: int, stat: os.stat_result, cursor: FileCursor) -> bool:
    if stat.st_ino != cursor.inode or stat.st_size < cursor.offset:
        return False
    if cursor.head_len == 0:
        return True
    return hashlib.sha256(_pread(fd, cursor.head_len, 0)).hexdigest() == cursor.head


def quarantine(state: MonitorState, file: str, line: int, field: str, error: str) -> None:
    """Count a line that cannot be used and keep the latest few with where and why."""
    state.counts["quarantined"] = state.counts.get("quarantined", 0) + 1
    state.quarantine.append(Quarantined(file=file, line=line, field=field, error=error[:300]))
    del state.quarantine[:-QUARANTINE_KEPT]


@dataclass
class Appended:
    """The complete lines appended to a log since its cursor, not counted yet."""

    key: str
    path: str
    start: FileCursor  # the cursor they start at (a new one when the log is new, rotated, truncated or replaced)
    inode: int
    body: bytes  # whole lines, each ending in a newline
    head: str
    head_len: int

    def commit(self, state: MonitorState, lines: int) -> None:
        """Move the log's cursor past the body, which held `lines` lines."""
        state.cursors[self.key] = FileCursor(path=self.start.path, inode=self.inode,
                                             offset=self.start.offset + len(self.body), lines=self.start.lines + lines,
                                             head=self.head, head_len=self.head_len, resets=self.start.resets)


def appended(path: Union[str, Path], state: MonitorState, name: Optional[str] = None) -> Optional[Appended]:
    """What `path` appended since its cursor, None when it is missing or holds no new complete line."""
    path = os.fspath(path)
    key = name or path
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        stat = os.fstat(fd)
        cursor = state.cursors.get(key)
        if cursor is None or not _same_file(fd, stat, cursor):
            if cursor is not None:
                state.counts["logs_reread"] = state.counts.get("logs_reread", 0) + 1
            cursor = FileCursor(path=path, inode=stat.st_ino, resets=(cursor.resets + 1) if cursor else 0)
        data = _pread(fd, max(stat.st_size - cursor.offset, 0), cursor.offset)
        end = data.rfind(b"\n")
        if end < 0:
            state.cursors[key] = cursor
            return None
        if cursor.head_len < HEAD_BYTES:  # the first bytes are still growing: hash them again
            first = data[:HEAD_BYTES] if cursor.offset == 0 else _pread(fd, HEAD_BYTES, 0)
            head, head_len = hashlib.sha256(first).hexdigest(), len(first)
        else:
            head, head_len = cursor.head, cursor.head_len
    finally:
        os.close(fd)
    return Appended(key, path, cursor, stat.st_ino, data[: end + 1], head, head_len)


def lines_of(chunk: Appended, state: MonitorState, parse: Callable[[bytes], Any] = loads) -> Iterator[Line]:
    """The chunk's lines as JSON objects (`parse` reads one line; what it cannot read is quarantined); the cursor
    moves once all are yielded."""
    number = chunk.start.lines
    if parse is loads and not _has_long_number(chunk.body):  # checked once for the whole chunk, not line by line
        parse = _orjson_or
    for raw in chunk.body.splitlines():
        number += 1
        if not raw or raw.isspace():  # a blank line (`strip` would copy every line)
            continue
        try:
            obj = parse(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            quarantine(state, chunk.key, number, "line", f"not JSON: {exc}")
            continue
        if not isinstance(obj, dict):
            quarantine(state, chunk.key, number, "line", f"a JSON {type(obj).__name__}, not an object")
            continue
        yield Line(chunk.key, number, obj)
    chunk.commit(state, number - chunk.start.lines)


def read_new(path: Union[str, Path], state: MonitorState, name: Optional[str] = None,
             parse: Callable[[bytes], Any] = loads) -> Iterator[Line]:
    """The complete lines appended to `path` since its cursor, as JSON objects (`parse` reads one line); the cursor
    moves once all are yielded (the caller saves the state only after it has counted them all)."""
    chunk = appended(path, state, name)
    if chunk is not None:
        yield from lines_of(chunk, state, parse)


def record_key(*parts: Any) -> str:
    """A short stable key of a record (what `seen` remembers)."""
    # surrogatepass: a writer may escape half of a surrogate pair in an id, and JSON lets it
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass"), digest_size=9).hexdigest()
