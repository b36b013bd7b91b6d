"""Incremental reads of append-only JSONL logs: only what was appended since the last run, complete lines only.

A log's cursor (`FileCursor`) holds its inode, the offset after the last complete line and a hash of its first
bytes. At the next run the log is read on from that offset if it is still the same file (same inode, not
shorter, same first bytes); otherwise it was rotated, truncated or replaced and is read from its start. Records
are counted once whatever happens: each record's key is remembered (`MonitorState.seen`), so a record read again
from a replaced or rewritten log is skipped and counted as a duplicate. A line being written (no newline yet) is
left for the next run. A line that is not a JSON object is quarantined with its file and line number, and counted.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Optional

from guidebench.monitor._base import FileCursor, MonitorState, Quarantined

HEAD_BYTES = 4096
QUARANTINE_KEPT = 50


@dataclass(frozen=True)
class Line:
    """One complete JSON object line of a log."""

    file: str
    number: int
    data: dict[str, Any]

    def where(self) -> str:
        """file:line, for alarms and quarantine."""
        return f"{self.file}:{self.number}"


def _same_file(handle: BinaryIO, stat: os.stat_result, cursor: FileCursor) -> bool:
    if stat.st_ino != cursor.inode or stat.st_size < cursor.offset:
        return False
    if cursor.head_len == 0:
        return True
    handle.seek(0)
    return hashlib.sha256(handle.read(cursor.head_len)).hexdigest() == cursor.head


def quarantine(state: MonitorState, file: str, line: int, field: str, error: str) -> None:
    """Count a line that cannot be used and keep the latest few with where and why."""
    state.counts["quarantined"] = state.counts.get("quarantined", 0) + 1
    state.quarantine.append(Quarantined(file=file, line=line, field=field, error=error[:300]))
    del state.quarantine[:-QUARANTINE_KEPT]


def read_new(path: Path, state: MonitorState, name: Optional[str] = None,
             parse: Callable[[bytes], Any] = json.loads) -> Iterator[Line]:
    """The complete lines appended to `path` since its cursor, as JSON objects (`parse` reads one line); the cursor
    moves once all are yielded (the caller saves the state only after it has counted them all)."""
    key = name or str(path)
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    with handle:
        stat = os.fstat(handle.fileno())
        cursor = state.cursors.get(key)
        if cursor is None or not _same_file(handle, stat, cursor):
            if cursor is not None:
                state.counts["logs_reread"] = state.counts.get("logs_reread", 0) + 1
            cursor = FileCursor(path=str(path), inode=stat.st_ino, resets=(cursor.resets + 1) if cursor else 0)
        handle.seek(cursor.offset)
        data = handle.read(max(stat.st_size - cursor.offset, 0))
        end = data.rfind(b"\n")
        if end < 0:
            state.cursors[key] = cursor
            return
        if cursor.head_len < HEAD_BYTES:  # the first bytes are still growing: hash them again
            handle.seek(0)
            first = handle.read(HEAD_BYTES)
            head, head_len = hashlib.sha256(first).hexdigest(), len(first)
        else:
            head, head_len = cursor.head, cursor.head_len
    number = cursor.lines
    for raw in data[: end + 1].splitlines():
        number += 1
        if not raw.strip():
            continue
        try:
            obj = parse(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            quarantine(state, key, number, "line", f"not JSON: {exc}")
            continue
        if not isinstance(obj, dict):
            quarantine(state, key, number, "line", f"a JSON {type(obj).__name__}, not an object")
            continue
        yield Line(key, number, obj)
    state.cursors[key] = cursor.model_copy(update=dict(offset=cursor.offset + end + 1, lines=number, head=head,
                                                       head_len=head_len, inode=stat.st_ino))


def record_key(*parts: Any) -> str:
    """A short stable key of a record (what `seen` remembers)."""
    return hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=9).hexdigest()
