"""The frozen split a leaderboard is scored on, and the rule that results from any other split never join it.

A split is identified by its dataset id, split name and split hash (`SplitRef`); reading it
(`evals.data`) recomputes its hash from the stored rows, so a split edited after it was frozen is
refused. A scored variant carries the `SplitRef` it was scored on, and `check_same_split` admits it
only if that identity and the exact record ids match the board's.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from evals.replay import ReplayResult

from guidebench.errors import GuidebenchError
from guidebench.evaluation.inputs import load_eval_data
from guidebench.leaderboard.packages import SplitRef, Variant


class SplitMismatchError(GuidebenchError):
    """Results from different frozen splits were offered to one board."""


@dataclass
class FrozenSplit:
    """The frozen split a board is scored on, with its records."""

    ref: SplitRef
    kind: str  # program kind: full_auto | planner
    records: list[Any]
    data_dir: Path
    notes: list[str] = field(default_factory=list)
    subset: str = ""  # set when the board ranks on a seeded subset of the split

    @property
    def record_ids(self) -> list[str]:
        """Record ids in stored order."""
        return [record.record_id for record in self.records]


@dataclass
class ScoredVariant:
    """A variant's replay result together with the split it was scored on."""

    variant: Variant
    result: ReplayResult
    split: SplitRef
    notes: list[str] = field(default_factory=list)


# ----- the frozen split -------------------------------------------------------------------------

def load_split(data: Path, split: str = "test") -> FrozenSplit:
    """Load a split (a raw log is imported on the fly, whole); reading checks it against its declared hash."""
    data = Path(data)
    work = Path(tempfile.mkdtemp(prefix="guidebench-leaderboard-"))
    try:
        loaded = load_eval_data(data, split, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ref = SplitRef(dataset_id=loaded.dataset_id, split=loaded.split, split_hash=loaded.split_hash)
    return FrozenSplit(ref=ref, kind=loaded.kind, records=loaded.records, data_dir=data,
                       notes=[f"{data}: {loaded.source}"] + list(loaded.notes))


def check_same_split(scored: Sequence[ScoredVariant], board: Optional[SplitRef] = None,
                     record_ids: Optional[Sequence[str]] = None) -> SplitRef:
    """The one split all results share; raises SplitMismatchError naming the first result that differs."""
    if not scored:
        raise GuidebenchError("no scored variants to rank")
    reference = board or scored[0].split
    stored_ids = list(record_ids if record_ids is not None else (row["record_id"] for row in scored[0].result.rows))
    reference_ids = sorted(stored_ids)
    for item in scored:
        if not item.split.same_as(reference):
            raise SplitMismatchError(
                f"refusing {item.variant.label!r}: it was scored on {item.split.describe()}, but this board is on "
                f"{reference.describe()}; results from different splits are never mixed, re-score it on "
                f"the board's split")
        ids = sorted(row["record_id"] for row in item.result.rows)
        if ids != reference_ids:
            missing = len(set(reference_ids) - set(ids))
            extra = len(set(ids) - set(reference_ids))
            raise SplitMismatchError(
                f"refusing {item.variant.label!r}: its result covers other records than the board's split "
                f"{reference.describe()} ({missing} missing, {extra} extra); results are never mixed"
                + _limit_hint(stored_ids, set(ids)))
    return reference


def _limit_hint(board_ids: Sequence[str], ids: set[str]) -> str:
    """What to pass when a result covers the seeded subset `compile --eval-limit N` scores ("" when it does not)."""
    from guidebench.compile import seeded_subset

    n = len(ids)
    if not 0 < n < len(board_ids) or set(seeded_subset(board_ids, n)) != ids:
        return ""
    return (f": it was scored on the seeded subset of {n} records that `guidebench compile --eval-limit {n}` "
            f"evaluates; add --eval-limit {n} to rank on those records")


def limit_split(split: FrozenSplit, limit: Optional[int]) -> FrozenSplit:
    """The same split cut to the seeded subset `guidebench compile --eval-limit N` evaluates on.

    The split's identity is unchanged; the record ids tell the subset, and results are admitted
    only on exactly these ids. Records keep their stored order.
    """
    if not limit or len(split.records) <= limit:
        return split
    from guidebench.compile import seeded_subset

    records = seeded_subset(split.records, limit)
    subset = f"{limit} of {len(split.records)} records (the seeded subset of `compile --eval-limit {limit}`)"
    return FrozenSplit(ref=split.ref, kind=split.kind, records=records, data_dir=split.data_dir,
                       notes=split.notes + [f"Ranked on {subset}."], subset=subset)
