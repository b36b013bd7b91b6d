"""Replay as independent tasks: chunks of records, each replayed and scored as `evals.replay.replay` does.

`ReplayChunk` is the unit a cluster runs (`evals.tasks`: `replay` maps it over chunks of its records when a caller
installed a cluster's map); `replay_chunks` replays records that arrive in chunks, read from a split as they are
replayed, keeping each record's row (its scores) and never the records: a compile's scoring of dev and test then
holds rows, not a split's records.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Optional, Sequence

from . import metrics_planner, tasks
from .blas import one_blas_thread
from .cycles import CyclesModel
from .progress import progress_bar
from .replay import BATCH, ReplayResult, _batch_answers, _kind_of, _replay_decision, _replay_planner, _result, \
    resolve_program

TASK_RECORDS = 4 * BATCH  # records per cluster task: whole batches, so a batch-answering program sees the batches
# one process gives it (its answers, and so its rows, are the same)
TASK_WINDOW = 16  # chunks of a streamed replay (`replay_chunks`) in flight on a cluster at once


class ReplayChunk:
    """One cluster task of a replay (`evals.tasks`): a chunk of records, replayed and scored as one process does."""

    def __init__(self, instance: Any, kind: str, replays_log: bool, rollouts: int,
                 cycles_model: Optional[CyclesModel]) -> None:
        self.instance, self.kind, self.replays_log = instance, kind, replays_log
        self.rollouts, self.cycles_model = rollouts, cycles_model

    def __call__(self, records: Sequence[Any]) -> list[dict[str, Any]]:
        with one_blas_thread():
            answers = _batch_answers(self.instance, self.kind, records) or [None] * len(records)
        if self.kind == "full_auto":
            return [_replay_decision(self.instance, record, self.replays_log, answer)
                    for record, answer in zip(records, answers)]
        return [_replay_planner(self.instance, record, self.rollouts, self.cycles_model, self.replays_log, answer)
                for record, answer in zip(records, answers)]


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


__all__ = ["TASK_RECORDS", "TASK_WINDOW", "ReplayChunk", "replay_chunks"]
