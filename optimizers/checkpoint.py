"""Checkpoints of a compile, so an interrupted compile resumes without repeating finished LM work.

Two mechanisms work together:
- DSPy's disk cache, one directory per compile: a resumed compile replays the same seeded
  optimizer, and every LM request it already made is answered from disk (a cache hit, no LM work);
- a checkpoint folder holding the compile request, its stage (`status.json`), the candidate
  history (`candidates.jsonl`, appended as candidates finish) and the compiled program state once
  the compile is done, so a resume after the compile skips straight to evaluation.
GEPA additionally keeps its own resumable state in `gepa/` (its `log_dir`).

Every file is written atomically (temp file + rename): a crash never leaves a torn checkpoint.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import dspy

STAGES: tuple[str, ...] = ("started", "compiled", "evaluated", "done")
# DSPy's default disk limit (~1 GB) is larger than a compile needs; keep each compile's cache modest.
CACHE_LIMIT_BYTES = 512 * 1024 * 1024


def atomic_write_text(path: Path, text: str) -> None:
    """Write text to path atomically (a reader sees the old or the new file, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    """Write pretty JSON atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


class Checkpoint:
    """The checkpoint folder of one compile (`<root>/<run_id>/`)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)

    @classmethod
    def for_run(cls, root: Path, run_id: str) -> "Checkpoint":
        """The checkpoint of a run id under a checkpoint root."""
        return cls(Path(root) / run_id)

    @property
    def request_path(self) -> Path:
        """What was asked for: program, optimizer, recipe settings, seed, data, LM, budget."""
        return self.dir / "request.json"

    @property
    def status_path(self) -> Path:
        """The last stage reached and its details."""
        return self.dir / "status.json"

    @property
    def program_path(self) -> Path:
        """The compiled program's state JSON (written when the compile finished)."""
        return self.dir / "program.json"

    @property
    def history_path(self) -> Path:
        """Candidate history, one JSON line per evaluated candidate."""
        return self.dir / "candidates.jsonl"

    @property
    def cache_dir(self) -> Path:
        """This compile's DSPy disk cache."""
        return self.dir / "cache"

    @property
    def gepa_dir(self) -> Path:
        """GEPA's own resumable run state."""
        return self.dir / "gepa"

    def exists(self) -> bool:
        """True when a request was recorded here."""
        return self.request_path.exists()

    def write_request(self, request: dict[str, Any]) -> None:
        """Record the compile request (first start only)."""
        atomic_write_json(self.request_path, request)

    def read_request(self) -> dict[str, Any]:
        """The recorded compile request."""
        return json.loads(self.request_path.read_text(encoding="utf-8"))

    def mark(self, stage: str, **details: Any) -> None:
        """Record that the compile reached a stage."""
        if stage not in STAGES:
            raise ValueError(f"unknown checkpoint stage {stage!r}; expected one of {STAGES}")
        atomic_write_json(self.status_path, {"stage": stage, **details})

    def status(self) -> dict[str, Any]:
        """The last recorded stage (`{"stage": None}` before any)."""
        if not self.status_path.exists():
            return {"stage": None}
        return json.loads(self.status_path.read_text(encoding="utf-8"))

    def reached(self, stage: str) -> bool:
        """True when the recorded stage is this one or later."""
        current = self.status().get("stage")
        return current in STAGES and STAGES.index(current) >= STAGES.index(stage)

    def save_program(self, state: dict[str, Any]) -> None:
        """Store the compiled program state."""
        atomic_write_json(self.program_path, state)

    def load_program(self) -> Optional[dict[str, Any]]:
        """The stored compiled program state, if the compile finished."""
        if not self.program_path.exists():
            return None
        return json.loads(self.program_path.read_text(encoding="utf-8"))


@contextmanager
def disk_cache(directory: Path) -> Iterator[None]:
    """Route DSPy's LM cache to a disk directory for the block, then restore the previous cache."""
    import dspy.clients as clients

    previous = getattr(dspy, "cache")
    directory.mkdir(parents=True, exist_ok=True)
    clients.configure_cache(enable_disk_cache=True, enable_memory_cache=True,
                            disk_cache_dir=str(directory), disk_size_limit_bytes=CACHE_LIMIT_BYTES)
    try:
        yield
    finally:
        current = dspy.cache
        with dspy._cache_lock:
            dspy.cache = previous
        _close(current)


def _close(cache: Any) -> None:
    disk = getattr(cache, "disk_cache", None)
    close = getattr(disk, "close", None)
    if callable(close):
        close()
