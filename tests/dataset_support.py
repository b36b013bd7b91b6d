"""Helpers shared by the tests that damage a dataset folder on purpose: a split's Arrow file swapped for
another split's, or bytes of a text value overwritten."""

from __future__ import annotations

import shutil
from pathlib import Path

SHARD = "data-00000-of-00001.arrow"  # the one shard `evals.data.write_dataset` writes per split


def swapped_split(dataset: Path, out: Path, *, into: str = "test", source: str = "dev") -> Path:
    """A copy of `dataset` whose `into` split's Arrow file is `source`'s (dataset.json left as written)."""
    shutil.copytree(dataset, out)
    shutil.copyfile(out / source / SHARD, out / into / SHARD)
    return out


def corrupted_split(dataset: Path, out: Path, *, split: str = "test", text: bytes = b"thread-") -> Path:
    """A copy of `dataset` whose `split` file has the first occurrence of `text` overwritten with bytes that
    are not UTF-8 (the Arrow structure stays readable, the text column does not decode)."""
    shutil.copytree(dataset, out)
    path = out / split / SHARD
    data = bytearray(path.read_bytes())
    start = data.index(text)
    data[start:start + len(text)] = b"\xff" * len(text)
    path.write_bytes(bytes(data))
    return out
