"""What a program learned from, and the one check that no program is judged on those records.

A program that learns from records (a trained model's fit, demos drawn or bootstrapped from train, KNN's demo
pool, any selection on dev: the fit's cross-validation, a cascade's threshold, an optimizer's candidates, a
search's trials) carries a `Provenance`: the dataset id, how many records of each split it learned from, and
the identity of each of those records. A compile writes it into its state (`program.json`'s `provenance`
entry) and `compile.json`; an export carries it in its manifest; an evaluation's `summary.json` carries the
program's. `check_overlap` counts the scored records that are among them: `guidebench eval`, `compile`,
`leaderboard`, `promote` and `search` all call it, refuse promotion and the champion's place on overlap, and
flag it everywhere else.

Records are identified by their content without their identifiers, not by their record id nor by any id they
carry (`DecisionRecord.content_hash`, `PlannerRecord.content_hash`, `runtime.records`; docs/workflow.md, "What a
record is known by", lists exactly what is hashed): re-importing the same logs with another seed reshuffles the
splits, and renaming every UUID, branch or sha in them makes new ids, while a record's content stays the same. A
`Provenance` stores, per split, the sorted, distinct first `hash_chars` hex digits of each SHA-256 (16: 64 bits):
a record it never saw matches one by chance with probability `false_positive_rate()` (n / 2^64, about 5e-17 for
a thousand records).

Unknown provenance: `None` where a provenance is expected (an export or state written before provenance was
recorded, or a state file that lost it), and a provenance that does not hold together (`Provenance.problem`): one
that identifies records by an earlier scheme (`PREVIOUS_IDENTITIES`: `inputs_hash`, whose hashes include the ids,
and `content_hash`, which hashed JSON texts as written and an archived packet's timestamp, branches and worktree
path; their hashes match no record as hashed now, so believed they would read every record as never learned
from: recompile and export again), one without an identity (`{}`), one whose counts per split disagree with its
hashes (hashes emptied or removed while `splits` still claims the records), and one the program's own fitted
model contradicts (`cross_checked`: a fit that counts train or dev records, `n_train` / `n_dev` of its `fit` in
program.json, cannot have learned from no record of that split; checksums re-signed over a forged provenance do
not change what the fit counts). Unknown is reported as "provenance unknown: <why>", and promotion refuses
it. A provenance with no hash and no count is a program that learned from no record (a rule policy, hand-written
seed demos).
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Mapping, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

HASH_CHARS = 16
PROVENANCE_KEY = "provenance"  # the entry of a program state (program.json) and of summary.json that holds it
IDENTITY = "content_hash_v2"  # the identity scheme (docs/workflow.md, "What a record is known by")
# States and exports written under an earlier scheme: their hashes no longer match what `content_hash` computes, so
# checking them would read every record as "never learned from". Unknown, with why, until recompiled.
PREVIOUS_IDENTITIES: dict[str, str] = {
    "inputs_hash": "it knows records by their inputs hash, which includes their ids (written before content "
                   "hashes), so a renamed copy of a record escapes it",
    "content_hash": "it knows records by the first content hashes (written before content_hash_v2), which hashed "
                    "JSON texts as written and the archived packet's timestamp, branches and worktree path, so a "
                    "re-serialised, re-dated or moved copy of a record escapes it",
}
# Where a fitted state counts the records its fit used, per split: program.json entries holding a model state
# (`{"model": {..., "fit": {"n_train", "n_dev"}}}`) and the `fit` block's keys.
FIT_ENTRIES: tuple[str, ...] = ("trained_model", "outcome_model")
FIT_COUNT_KEYS: dict[str, str] = {"train": "n_train", "dev": "n_dev"}
SPLIT_ORDER: tuple[str, ...] = ("train", "dev", "test")
RECOMPILE = "recompile it and export or evaluate it again (its program.json then records content hashes)"
_HEX = frozenset("0123456789abcdef")


def record_key(record: Any, chars: int = HASH_CHARS) -> str:
    """A record's identity as a provenance stores it: the first `chars` hex digits of its content hash."""
    return str(record.content_hash)[:chars]


class Provenance(BaseModel):
    """The records a program learned from (fit, demos, selection), by the identity of their content, per split.

    Read leniently (every field has a default, a list of hashes is the older shape) so that a provenance that does
    not hold together is reported as unknown (`problem`) rather than taken for one that learned from nothing."""

    model_config = ConfigDict(extra="forbid")

    dataset_id: Optional[str] = Field(None, description="the dataset the records came from (None: no record)")
    identity: Optional[str] = Field(None, description=(
        "what identifies a record: `content_hash`, SHA-256 of its content without ids (docs/workflow.md); "
        "`inputs_hash` in states written before it"))
    hash_chars: int = Field(HASH_CHARS, ge=8, le=64, description="hex digits of each SHA-256 kept")
    splits: dict[str, int] = Field(default_factory=dict, description="records learned from, by split")
    hashes: Union[dict[str, list[str]], list[str]] = Field(default_factory=dict, description=(
        "per split, the sorted, distinct truncated content hashes (one per counted record); a flat list in "
        "states written before content hashes"))

    @classmethod
    def of(cls, dataset_id: Optional[str], records_by_split: Mapping[str, Iterable[Any]]) -> "Provenance":
        """The provenance of these records (each with a `content_hash`), by the split they came from."""
        hashes: dict[str, list[str]] = {}
        for split, records in records_by_split.items():
            found = sorted({record_key(record) for record in records})
            if found:
                hashes[split] = found
        return cls(dataset_id=dataset_id if hashes else None, identity=IDENTITY,
                   splits={split: len(found) for split, found in hashes.items()}, hashes=hashes)

    # What the program's own fitted state says against this provenance (`cross_checked`); not serialised: it is
    # found again from the state wherever the state is read.
    _contradiction: Optional[str] = PrivateAttr(default=None)

    def problem(self) -> Optional[str]:
        """Why this provenance cannot be trusted (None: it holds together); a provenance with a problem is unknown."""
        if self.identity != IDENTITY:
            if self.identity in PREVIOUS_IDENTITIES:
                return PREVIOUS_IDENTITIES[str(self.identity)]
            return f"it names no record identity ({self.identity!r}, not {IDENTITY!r})"
        if self._contradiction:
            return self._contradiction
        if not isinstance(self.hashes, dict):
            return "its hashes are not listed by split"
        if set(self.splits) != set(self.hashes):
            return (f"its counts name splits {sorted(self.splits)} and its hashes splits {sorted(self.hashes)}")
        for split in sorted(self.splits, key=lambda name: _split_order((name, 0))):
            claimed, listed = self.splits[split], self.hashes[split]
            if claimed != len(listed):
                return f"it claims {claimed} records of split {split} and lists {len(listed)} hashes"
            bad = next((h for h in listed if len(h) != self.hash_chars or not set(h) <= _HEX), None)
            if bad is not None:
                return f"hash {bad!r} of split {split} is not {self.hash_chars} lowercase hex digits"
            if any(a >= b for a, b in zip(listed, listed[1:])):
                return f"the hashes of split {split} are not sorted and distinct"
        if self.keys() and not self.dataset_id:
            return "it holds hashes of records of no dataset"
        return None

    @property
    def contradiction(self) -> Optional[str]:
        """Why the program's own fitted state contradicts this provenance (`cross_checked`; None: it does not)."""
        return self._contradiction

    def keys(self) -> frozenset[str]:
        """Every truncated content hash learned from (any split)."""
        if not isinstance(self.hashes, dict):
            return frozenset(self.hashes)
        return frozenset(h for listed in self.hashes.values() for h in listed)

    def knows(self, record: Any) -> bool:
        """True when this record (with a `content_hash`) is among those learned from."""
        return record_key(record, self.hash_chars) in self.keys()

    @property
    def n(self) -> int:
        """Distinct records learned from."""
        return len(self.keys())

    def false_positive_rate(self) -> float:
        """The chance that a record never learned from matches one of the stored hashes."""
        return min(1.0, self.n / 16.0 ** self.hash_chars)

    def overlap(self, records: Iterable[Any]) -> int:
        """How many of these records (each with a `content_hash`) are among those learned from."""
        learned = self.keys()
        return sum(record_key(record, self.hash_chars) in learned for record in records) if learned else 0

    def describe(self) -> str:
        """Short human form: `train 812 + dev 175 of dataset 0123456789ab`, `no record`, or `unknown (why)`."""
        problem = self.problem()
        if problem:
            return f"unknown ({problem})"
        if not self.n:
            return "no record"
        parts = " + ".join(f"{split} {n}" for split, n in sorted(self.splits.items(), key=_split_order))
        return f"{parts} of dataset {self.dataset_id[:12]}" if self.dataset_id else parts


def _split_order(item: tuple[str, int]) -> tuple[int, str]:
    return (SPLIT_ORDER.index(item[0]) if item[0] in SPLIT_ORDER else len(SPLIT_ORDER), item[0])


NOTHING = Provenance(identity=IDENTITY)  # a program that learned from no record


def known(provenance: Optional[Provenance]) -> Optional[Provenance]:
    """The provenance when it holds together, None when it is unknown (absent, or `problem()`)."""
    return provenance if provenance is not None and provenance.problem() is None else None


def read_provenance(data: Mapping[str, Any]) -> Optional[Provenance]:
    """The `provenance` entry of a program state or summary (None when absent: unknown); ValueError (one line)
    when it is not a provenance at all (a provenance that does not hold together is read, and unknown)."""
    raw = data.get(PROVENANCE_KEY)
    if raw is None:
        return None
    try:
        return Provenance.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"field {PROVENANCE_KEY}{'.' + where if where else ''}: {first['msg']}") from None


def fit_counts(state: Mapping[str, Any]) -> dict[str, int]:
    """The records a program state's fitted model counts it was fit on, per split (`FIT_ENTRIES`' `fit` blocks:
    `n_train`, `n_dev`); {} for a state without a fitted model (rules, demos, an LM program)."""
    counts: dict[str, int] = {}
    for entry in FIT_ENTRIES:
        held = state.get(entry)
        model = held.get("model", held) if isinstance(held, Mapping) else None  # program.json: {"model": state}
        fit = model.get("fit") if isinstance(model, Mapping) else None
        if not isinstance(fit, Mapping):
            continue
        for split, key in FIT_COUNT_KEYS.items():
            value = fit.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                counts[split] = max(counts.get(split, 0), value)
    return counts


def fit_contradiction(provenance: Optional[Provenance], counts: Mapping[str, int]) -> Optional[str]:
    """Why a provenance cannot be the fitted model's (None when it may be): a fit that counts records of a split
    cannot have learned from none of that split (an emptied or forged provenance, re-signed or not)."""
    if provenance is None or provenance.identity != IDENTITY:
        return None
    for split in sorted(counts, key=lambda name: _split_order((name, 0))):
        listed = provenance.splits.get(split, 0) if isinstance(provenance.splits, dict) else 0
        if counts[split] > 0 and listed == 0:
            key = FIT_COUNT_KEYS[split]
            return (f"it lists no record of split {split}, while the program's fitted model counts {counts[split]} "
                    f"(`{key}` of its fit in program.json): a fitted model cannot have learned from no record")
    return None


def cross_checked(provenance: Optional[Provenance], state: Mapping[str, Any]) -> Optional[Provenance]:
    """The provenance, unknown (`problem`) when the program state's own fit contradicts it (`fit_contradiction`)."""
    why = fit_contradiction(provenance, fit_counts(state))
    if why and provenance is not None:
        provenance = provenance.model_copy()
        provenance._contradiction = why
    return provenance


def read_program_provenance(state: Mapping[str, Any]) -> Optional[Provenance]:
    """`read_provenance` of a program state (program.json), cross-checked against the state's own fit counts."""
    return cross_checked(read_provenance(state), state)


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
    unknown_because: str = ""  # why the provenance is unknown (status unknown)

    @property
    def overlaps(self) -> bool:
        """True when some scored record was learned from."""
        return self.status == "overlap"

    def line(self, who: str = "the program") -> str:
        """One line: how many records overlap and which split to use (or that none does, or that nobody knows);
        `who` names the program in it."""
        where = f"split {self.split} of dataset {self.dataset_id[:12]}"
        if self.status == "overlap":
            return (f"{self.n_overlap} of the {self.n_records} records of {where} are records {who} learned "
                    f"from ({self.learned_from}): its scores there are not evidence; {self.use_instead}")
        if self.status == "unknown":
            why = self.unknown_because or f"{who} does not record which records it learned from"
            return f"provenance unknown: {why}, so {where} may hold some; {self.use_instead}"
        return f"none of the {self.n_records} records of {where} was learned from ({self.learned_from})"

    def params(self) -> dict[str, Any]:
        """The check as flat values for a tracked run: `learned_from` (the status) and `learned_from_overlap`."""
        return {"learned_from": self.status,
                "learned_from_overlap": "unknown" if self.n_overlap is None else self.n_overlap}


def check_overlap(provenance: Optional[Provenance], records: Sequence[Any], *, dataset_id: str,
                  split: str) -> OverlapCheck:
    """The one check: how many of a split's records (each with a `content_hash`) the program learned from."""
    base = dict(dataset_id=dataset_id, split=split, n_records=len(records))
    if provenance is None:
        return OverlapCheck(status="unknown", use_instead="export or evaluate it again from its compile (its "
                            "program.json records what it learned from)", **base)
    problem = provenance.problem()
    if problem is not None:
        return OverlapCheck(status="unknown", unknown_because=f"its provenance does not hold together: {problem}",
                            use_instead=RECOMPILE, **base)
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


__all__ = ["HASH_CHARS", "IDENTITY", "NOTHING", "OverlapCheck", "PROVENANCE_KEY", "Provenance", "check_overlap",
           "cross_checked", "fit_contradiction", "fit_counts", "known", "read_program_provenance", "read_provenance",
           "record_key"]
