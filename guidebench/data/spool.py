"""An on-disk, append-only spool of text lines grouped by run or episode.

Imports stream records through spools instead of lists so that memory stays flat however
large the log: per line only a file offset (8 bytes) is kept in memory.
"""

from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import IO, Any, Iterator, Mapping, Optional, Sequence

# An offset is kept with the number of its file (0: the spool's own, then the adopted ones) in its high bits.
_OFFSET_BITS = 40  # 1 TiB a file
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1


class GroupedSpool:
    """Lines appended under a group key; read back one group at a time, groups in first-seen order."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._handle = open(self.path, "w+b")
        self._offsets: dict[str, array] = {}
        self._end = 0
        self._dirty = False
        self._at_end = True
        self._adopted: list[Path] = []  # files whose lines were adopted in place (number 1, 2, ...)
        self._reading: Optional[tuple[int, IO[bytes]]] = None

    def append(self, group: str, text: str) -> None:
        """Append one line (must not contain a newline) to a group."""
        if not self._at_end:
            self._handle.seek(self._end)
            self._at_end = True
        data = text.encode("utf-8") + b"\n"
        self._offsets.setdefault(group, array("q")).append(self._end)
        self._handle.write(data)
        self._end += len(data)
        self._dirty = True

    def groups(self) -> list[str]:
        """The groups in the order they were first appended to."""
        return list(self._offsets)

    def size(self, group: str) -> int:
        """How many lines a group holds."""
        return len(self._offsets.get(group, ()))

    def __len__(self) -> int:
        return sum(len(offsets) for offsets in self._offsets.values())

    def index(self) -> dict[str, array]:
        """{group: [offsets]} of the lines in the spool's own file, flushed to it: what `adopt` takes to read them
        in place elsewhere (another process)."""
        if self._adopted:
            raise ValueError("a spool that adopted other files has no index of its own file alone")
        self._handle.flush()
        self._dirty = False
        return {group: array("q", offsets) for group, offsets in self._offsets.items()}

    def adopt(self, path: Path, index: Mapping[str, Sequence[int]]) -> None:
        """Append the lines of another spool's file to their groups without copying them: `index` holds each
        group's line offsets in that file (which must stay in place until this spool is read)."""
        self._adopted.append(Path(path))
        base = len(self._adopted) << _OFFSET_BITS
        for group, offsets in index.items():
            self._offsets.setdefault(group, array("q")).extend(base + offset for offset in offsets)

    def _file(self, number: int) -> IO[bytes]:
        if number == 0:
            self._at_end = False
            return self._handle
        if self._reading is None or self._reading[0] != number:
            if self._reading is not None:
                self._reading[1].close()
            self._reading = (number, open(self._adopted[number - 1], "rb"))
        return self._reading[1]

    def read_group(self, group: str) -> Iterator[str]:
        """The lines of one group, in the order they were appended."""
        if self._dirty:
            self._handle.flush()
            self._dirty = False
        for encoded in self._offsets.get(group, ()):
            handle = self._file(encoded >> _OFFSET_BITS)
            handle.seek(encoded & _OFFSET_MASK)
            yield handle.readline()[:-1].decode("utf-8")

    def close(self) -> None:
        """Close and delete the spool file (adopted files are their owner's)."""
        if self._reading is not None:
            self._reading[1].close()
            self._reading = None
        if not self._handle.closed:
            self._handle.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> "GroupedSpool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
