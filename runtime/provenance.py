"""What a program learned from, and the one check that no program is judged on those records.

A program that learns from records (a trained model's fit, demos drawn or bootstrapped from train, KNN's demo
pool, any selection on dev: the fit's cross-validation, a cascade's threshold, an optimizer's candidates, a
search's trials) carries a `Provenance`: the dataset id, how many records of each split it learned from, and
the identity of each of those records. A compile writes it into its state (`program.json`'s `provenance`
entry) and `compile.json`; an export carries it in its manifest; an evaluation's `summary.json` carries the
program's. `check_overlap` counts the scored records that are among them: `guidebench eval`, `compile`,
`leaderboard`, `promote` and `search` all call it, refuse promotion and the champion's place on overlap, and
flag it everywhere else.

Records are identified by their inputs, not by their record id: re-importing the same logs with another seed
reshuffles the splits, and a record's inputs stay the same (`DecisionRecord.inputs_hash`: the turn summary and
guardrail config; `PlannerRecord.inputs_hash`: the packet the planner sees). A `Provenance` stores the sorted,
distinct first `hash_chars` hex digits of each SHA-256 (16: 64 bits): a record it never saw matches one by
chance with probability `false_positive_rate()` (n / 2^64, about 5e-17 for a thousand records).

`None` where a provenance is expected means unknown (an export or state written before provenance was
recorded, or a state file that lost it): it is reported as "provenance unknown", and promotion refuses it. A
provenance with no hash is a program that learned from no record (a rule policy, hand-written seed demos).
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

HASH_CHARS = 16
PROVENANCE_KEY = "provenance"  # the entry of a program state (program.json) and of summary.json that holds it
IDENTITY = "inputs_hash"
SPLIT_ORDER: tuple[str, ...] = ("train", "dev", "test")
_HEX = frozenset("0123456789abcdef")


def record_key(record: Any, chars: int = HASH_CHARS) -> str:
    """A record's identity as a provenance stores it: the first `chars` hex digits of its inputs hash."""
    return str(record.inputs_hash)[:chars]


class Provenance(BaseModel):
    """The records a program learned from (fit, demos, selection), by the identity of their inputs."""

    model_config = ConfigDict(extra="forbid")

    dataset_id: Optional[str] = Field(None, description="the dataset the records came from (None: no record)")
    splits: dict[str, int] = Field(default_factory=dict, description="records learned from, by split")
    identity: Literal["inputs_hash"] = Field(IDENTITY, description=(
        "what identifies a record: SHA-256 of its inputs (turn summary + guardrail config; a planner record's "
        "packet), not its record id"))
    hash_chars: int = Field(HASH_CHARS, ge=8, le=64, description="hex digits of each SHA-256 kept")
    hashes: list[str] = Field(default_factory=list, description="sorted, distinct truncated inputs hashes")

    @model_validator(mode="after")
    def _well_formed(self) -> "Provenance":
        bad = next((h for h in self.hashes if len(h) != self.hash_chars or not set(h) <= _HEX), None)
        if bad is not None:
            raise ValueError(f"hash {bad!r} is not {self.hash_chars} lowercase hex digits")
        if any(a >= b for a, b in zip(self.hashes, self.hashes[1:])):
            raise ValueError("hashes must be sorted and distinct")
        return self

    @classmethod
    def of(cls, dataset_id: Optional[str], records_by_split: Mapping[str, Iterable[Any]]) -> "Provenance":
        """The provenance of these records (each with an `inputs_hash`), by the split they came from."""
        keys: set[str] = set()
        splits: dict[str, int] = {}
        for split, records in records_by_split.items():
            found = {record_key(record) for record in records}
            if found:
                splits[split] = len(found)
                keys |= found
        return cls(dataset_id=dataset_id if keys else None, splits=splits, hashes=sorted(keys))

    @property
    def n(self) -> int:
        """Distinct records learned from."""
        return len(self.hashes)

    def false_positive_rate(self) -> float:
        """The chance that a record never learned from matches one of the stored hashes."""
        return min(1.0, self.n / 16.0 ** self.hash_chars)

    def overlap(self, records: Iterable[Any]) -> int:
        """How many of these records (each with an `inputs_hash`) are among those learned from."""
        learned = set(self.hashes)
        return sum(record_key(record, self.hash_chars) in learned for record in records) if learned else 0

    def describe(self) -> str:
        """Short human form: `train 812 + dev 175 of dataset 0123456789ab`, or `no record`."""
        if not self.hashes:
            return "no record"
        parts = " + ".join(f"{split} {n}" for split, n in sorted(self.splits.items(), key=_split_order))
        return f"{parts} of dataset {self.dataset_id[:12]}" if self.dataset_id else parts


def _split_order(item: tuple[str, int]) -> tuple[int, str]:
    return (SPLIT_ORDER.index(item[0]) if item[0] in SPLIT_ORDER else len(SPLIT_ORDER), item[0])


NOTHING = Provenance()  # a program that learned from no record


def read_provenance(data: Mapping[str, Any]) -> Optional[Provenance]:
    """The `provenance` entry of a program state or summary (None when absent: unknown); ValueError (one line)
    when it is not a provenance."""
    raw = data.get(PROVENANCE_KEY)
    if raw is None:
        return None
    try:
        return Provenance.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"field {PROVENANCE_KEY}{'.' + where if where else ''}: {first['msg']}") from None


class OverlapCheck(BaseModel):
    """How many records of one scored split a program learned from (None: its provenance is unknown)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["clean", "overlap", "unknown"]
    dataset_id: str
    split: str
    n_records: int
    n_overlap: Optional[int] = None
    learned_from: Optional[str] = None  # `Provenance.describe()`
    false_positive_rate: Optional[float] = None
    use_instead: str = ""  # where to judge it instead (overlap and unknown)

    @property
    def overlaps(self) -> bool:
        """True when some scored record was learned from."""
        return self.status == "overlap"

    def line(self) -> str:
        """One line: how many records overlap and which split to use (or that none does, or that nobody knows)."""
        where = f"split {self.split} of dataset {self.dataset_id[:12]}"
        if self.status == "overlap":
            return (f"{self.n_overlap} of the {self.n_records} records of {where} are records the program learned "
                    f"from ({self.learned_from}): its scores there are not evidence; {self.use_instead}")
        if self.status == "unknown":
            return (f"provenance unknown: the program does not record which records it learned from, so {where} "
                    f"may hold some; {self.use_instead}")
        return f"none of the {self.n_records} records of {where} was learned from ({self.learned_from})"

    def params(self) -> dict[str, Any]:
        """The check as flat values for a tracked run: `learned_from` (the status) and `learned_from_overlap`."""
        return {"learned_from": self.status,
                "learned_from_overlap": "unknown" if self.n_overlap is None else self.n_overlap}


def check_overlap(provenance: Optional[Provenance], records: Sequence[Any], *, dataset_id: str,
                  split: str) -> OverlapCheck:
    """The one check: how many of a split's records (each with an `inputs_hash`) the program learned from."""
    base = dict(dataset_id=dataset_id, split=split, n_records=len(records))
    if provenance is None:
        return OverlapCheck(status="unknown", use_instead="export or evaluate it again from its compile (its "
                            "program.json records what it learned from)", **base)
    n = provenance.overlap(records)
    check = OverlapCheck(status="overlap" if n else "clean", n_overlap=n, learned_from=provenance.describe(),
                         false_positive_rate=provenance.false_positive_rate(), **base)
    if n:
        others = [name for name in SPLIT_ORDER if name != split and not provenance.splits.get(name)]
        if provenance.dataset_id != dataset_id:
            check.use_instead = (f"judge it on the test split of dataset {str(provenance.dataset_id)[:12]}, where "
                                 "it was compiled, or on logs it never saw")
        elif others:
            check.use_instead = f"judge it on split {' or '.join(others)}"
        else:
            check.use_instead = "judge it on logs it never saw"
    return check


__all__ = ["HASH_CHARS", "NOTHING", "OverlapCheck", "PROVENANCE_KEY", "Provenance", "check_overlap",
           "read_provenance", "record_key"]
