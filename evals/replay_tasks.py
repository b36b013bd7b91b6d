"""Replay as independent tasks: chunks of records, each replayed and scored as `evals.replay.replay` does.

`evals.replay.ReplayChunk` is the unit a cluster runs (`evals.tasks`: `replay` maps it over chunks of its records when a caller
installed a cluster's map); `replay_chunks` replays records that arrive in chunks, read from a split as they are
replayed, keeping each record's row (its scores) and never the records: a compile's scoring of dev and test then
holds rows, not a split's records.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Optional, Sequence

from . import metrics_planner, tasks
from .cycles import CyclesModel
from .progress import progress_bar
from .replay import TASK_RECORDS, ReplayChunk, ReplayResult, _kind_of, _result, resolve_program

TASK_WINDOW = 16  # chunks of a streamed replay in flight on a cluster at once


def replay_chunks(program: Any, chunks: Iterable[Sequence[Any]], *, n_resamples: int = 1000, seed: int = 0,
                  rollouts: int = metrics_planner.ROLLOUTS, name: Optional[str] = None,
                  cycles_model: Optional[CyclesModel] = None, progress: bool = False,
                  total: Optional[int] = None) -> ReplayResult:
    """`replay` of records that come in chunks (read from a split as they are replayed): only each record's row
    (its scores) is kept, never the records, so the memory of a split's scoring holds its rows, not its records.
    The rows are the ones `replay` gives on the same records in one list when each chunk but the last holds whole
    batches (`TASK_RECORDS`): a batch-answering program sees the same batches. Records replay one at a time, in
    this process (or a window of chunks at a time as a cluster's tasks): a program that calls an LM, which wants
    records in flight together (`threads`), takes `replay`."""
    instance, program_name, declared = resolve_program(program)
    replays_log = bool(getattr(instance, "replays_log", False))
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    kind: Optional[str] = None
    window: list[Sequence[Any]] = []
    with progress_bar(total or 0, f"replay {name or program_name}", progress) as bar:
        def flush() -> None:
            work = ReplayChunk(instance, kind, replays_log, rollouts, cycles_model)
            for part in tasks.task_map(work, window):
                rows.extend(part)
                bar.update(len(part))
            window.clear()

        for chunk in chunks:
            if not chunk:
                continue
            found = _kind_of(chunk, declared)
            if kind is not None and found != kind:
                raise TypeError("records must all be of one kind")
            kind = found
            window.append(chunk)
            if len(window) >= (TASK_WINDOW if tasks.distributed() else 1):
                flush()
        if window:
            flush()
    return _result(kind or declared or "full_auto", rows, program_name, name, time.perf_counter() - started, 1,
                   n_resamples, seed, replays_log, cycles_model)


__all__ = ["TASK_WINDOW", "replay_chunks"]
