"""A split's Arrow files read without holding their pages: the rows `evals.data` streams and looks up.

`datasets` memory-maps a split's files, and every page a read touches stays in the process's resident size until
the split is closed: streaming a year of decisions counted its whole train file (300 MB at 130,000 decisions) on
top of the records, and a few thousand rows looked up across it (`SplitRecords`: a fit's held-out examples) did the
same. Here:

- `stream_batches` reads each file's record batches in order through plain reads (`pyarrow.OSFile`): a batch is
  read, handed out as columns of Python values (what `Dataset.iter` gives) and let go;
- `MappedRows` maps the files itself and, after each row it hands out, tells the kernel the mapping's pages are not
  needed (`madvise(MADV_DONTNEED)`: clean file pages, read again from the page cache when touched again).

Both read a split as `datasets` wrote it (`ArrowWriter`'s IPC streams); a split with an indices mapping (none that
guidebench writes) is left to `datasets` (`plain_files` gives None).
"""

from __future__ import annotations

import mmap
from typing import Any, Iterator, Optional


def plain_files(part: Any) -> Optional[list[str]]:
    """The Arrow files of a loaded split (`datasets.Dataset`) in row order, or None when its rows are not simply
    theirs in order (an indices mapping, an in-memory table)."""
    files = [entry.get("filename") for entry in getattr(part, "cache_files", None) or []]
    if getattr(part, "_indices", None) is not None or not files or not all(files):
        return None
    return files


def stream_batches(files: list[str]) -> Iterator[dict[str, list[Any]]]:
    """Every record batch of the files, in order, as {column: Python values}."""
    import pyarrow as pa

    for path in files:
        with pa.OSFile(path) as source:
            for batch in pa.ipc.open_stream(source):
                yield batch.to_pydict()


class MappedRows:
    """Rows of the files by index, as {column: Python value} (what `Dataset[index]` gives), whose pages are let go
    after each row."""

    def __init__(self, files: list[str]) -> None:
        import pyarrow as pa

        self._maps: list[mmap.mmap] = []
        tables = []
        for path in files:
            with open(path, "rb") as handle:
                mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            self._maps.append(mapped)
            tables.append(pa.ipc.open_stream(pa.py_buffer(mapped)).read_all())
        self._table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def __len__(self) -> int:
        return self._table.num_rows

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self._table.num_rows:
            raise IndexError(f"row {index} of {self._table.num_rows}")
        row = self._table.slice(index, 1).to_pylist()[0]
        for mapped in self._maps:
            if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
                mapped.madvise(mmap.MADV_DONTNEED)
        return row


__all__ = ["MappedRows", "plain_files", "stream_batches"]
