"""The logs as a contextual bandit: for each planner record, what the packet showed, which family the deployed
planner tried, what that attempt brought, and what the models expect of every family.

A record's observed improvement is what its logged attempt took off the best: `best - cycles` for a valid attempt
below the best, 0 for a valid attempt at or above it and for an invalid one (the loop keeps the best), unknown for
a valid attempt whose cycles were not recorded or a packet with no best yet. The family of an attempt is its
`strategy_tags[0]` when that is a family (formats.md §2.4); an older line whose first tag is not one has no
family, so it teaches no model and corrects no estimate (it still counts as history in later packets).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from runtime.advisor import FAMILIES, AdvisorPacket
from runtime.outcome import OutcomeModel
from runtime.outcome_features import (POLICY_NAMES, ROW_NAMES, PacketFeatures, candidate_row, packet_features,
                                      policy_row)
from runtime.records import PlannerRecord

from ..progress import progress_bar
from .propensity import PropensityModel


@dataclass(frozen=True)
class Attempt:
    """One logged attempt as the models see it: the packet before it, its family and what it measured."""

    record_id: str
    episode_id: str
    packet: AdvisorPacket
    family: Optional[str]  # strategy_tags[0] when a family
    valid: Optional[bool]  # None: no outcome entry
    cycles: Optional[int]

    @property
    def best(self) -> Optional[int]:
        """The best the attempt started from: the packet's best (the runner's), else its summary's."""
        return self.packet.best_so_far

    @property
    def observed(self) -> Optional[float]:
        """Cycles the attempt took off the best (0 when it did not beat it or was invalid); None when unknown."""
        best = self.best
        if best is None or self.valid is None:
            return None
        if not self.valid:
            return 0.0
        if self.cycles is None:
            return None
        return float(max(0, best - self.cycles))


def attempt_of(record: PlannerRecord) -> Attempt:
    """A planner record as an attempt."""
    outcome = record.outcome
    return Attempt(record_id=record.record_id, episode_id=record.episode_id, packet=record.packet,
                   family=outcome.family if outcome is not None else None,
                   valid=outcome.valid if outcome is not None else None,
                   cycles=outcome.cycles if outcome is not None else None)


def attempt_of_example(example: Any) -> Attempt:
    """A `programs.planner_example` as an attempt (its packet, logged family, validity, cycles and episode)."""
    packet = example.get("packet")
    packet = packet if isinstance(packet, AdvisorPacket) else AdvisorPacket.model_validate_json(packet) \
        if isinstance(packet, str) else AdvisorPacket.model_validate(packet)
    valid, cycles = example.get("outcome_valid"), example.get("outcome_cycles")
    family = example.get("logged_family")
    return Attempt(record_id=str(example.get("record_id") or ""),
                   episode_id=str(example.get("episode_id") or example.get("record_id") or ""), packet=packet,
                   family=family if family in FAMILIES else None, valid=valid if isinstance(valid, bool) else None,
                   cycles=cycles if isinstance(cycles, int) and not isinstance(cycles, bool) else None)


def observed_improvement(record: PlannerRecord) -> Optional[float]:
    """Cycles the logged attempt took off the best (0 when it did not beat it or was invalid); None when unknown."""
    return attempt_of(record).observed


@dataclass
class TrainingData:
    """What the models are fit on: one row per usable logged attempt, and what was left out, counted."""

    rows: np.ndarray  # candidate rows of the logged family (`runtime.outcome_features.candidate_row`)
    policy_rows: np.ndarray  # `policy_row` of each packet
    family: np.ndarray  # index of the logged family in FAMILIES
    valid: np.ndarray  # 1.0 / 0.0
    gain_share: np.ndarray  # observed improvement / best (NaN: unknown)
    groups: list[str]  # the episode of each row
    record_ids: list[str]
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Usable attempts."""
        return len(self.groups)


def training_data(attempts: Sequence[Attempt]) -> TrainingData:
    """The usable logged attempts (no outcome, no family or no best: skipped and counted)."""
    rows, policy, family, valid, share, groups, ids = [], [], [], [], [], [], []
    skipped: Counter[str] = Counter()
    for attempt in attempts:
        best = attempt.best
        if attempt.valid is None:
            skipped["no outcome entry"] += 1
            continue
        if attempt.family is None:
            skipped["no family in strategy_tags[0]"] += 1
            continue
        if best is None:
            skipped["no best before the attempt"] += 1
            continue
        features = packet_features(attempt.packet)
        gain = attempt.observed
        rows.append(candidate_row(features, attempt.family))
        policy.append(policy_row(features))
        family.append(FAMILIES.index(attempt.family))
        valid.append(float(attempt.valid))
        share.append(math.nan if gain is None else gain / best)
        groups.append(attempt.episode_id)
        ids.append(attempt.record_id)
    width = len(ROW_NAMES)
    return TrainingData(rows=np.asarray(rows, dtype=np.float64).reshape(len(rows), width),
                        # sized by name, not by the rows: logs with no usable attempt give an empty table, not a crash
                        policy_rows=np.asarray(policy, dtype=np.float64).reshape(len(policy), len(POLICY_NAMES)),
                        family=np.asarray(family, dtype=np.int64), valid=np.asarray(valid),
                        gain_share=np.asarray(share), groups=groups, record_ids=ids, skipped=dict(skipped))


@dataclass
class LoggedBandit:
    """Per record: episode, best, logged family and its observed improvement, and both models' view of each family.

    `q` holds the outcome model's expected improvement in cycles (NaN for a family the model never saw in train
    or a packet without a best), `propensity` the deployed planner's probability of each family: the probabilities
    the planner stated and logged (`PlannerRecord.planner_log`, the sidecar of docs/planner-shadow.md) where the
    record has them (`logged_propensity`), else the fitted propensity model's.
    """

    record_ids: list[str]
    groups: np.ndarray
    best: np.ndarray
    logged: np.ndarray  # index into FAMILIES, -1: no family
    observed: np.ndarray  # cycles, NaN: unknown
    q: np.ndarray  # (n, 3) cycles
    p_valid: np.ndarray  # (n, 3)
    propensity: np.ndarray  # (n, 3)
    group_names: list[str] = field(default_factory=list)
    logged_propensity: Optional[np.ndarray] = None  # (n,) bool: the record's propensities were logged, not fitted

    def __post_init__(self) -> None:
        if self.logged_propensity is None:
            self.logged_propensity = np.zeros(len(self.record_ids), dtype=bool)

    @property
    def logged_records(self) -> list[str]:
        """The records whose propensities the deployed planner logged (no propensity model used for them)."""
        return [rid for rid, logged in zip(self.record_ids, self.logged_propensity) if logged]

    @property
    def n(self) -> int:
        """Records."""
        return len(self.record_ids)

    @classmethod
    def build(cls, records: Sequence[PlannerRecord], outcome: OutcomeModel,
              propensity: Optional[PropensityModel] = None,
              features: Optional[Sequence[PacketFeatures]] = None, progress: bool = False) -> "LoggedBandit":
        """The bandit view of records under fitted models (features computed unless given, in record order);
        `progress`: a bar with its ETA over the records (their features and predictions take the time)."""
        n = len(records)
        feats: list[PacketFeatures] = []
        q = np.full((n, len(FAMILIES)), np.nan)
        p_valid = np.full((n, len(FAMILIES)), np.nan)
        with progress_bar(n, "off-policy: outcome model", progress) as bar:
            for i, record in enumerate(records):
                f = features[i] if features is not None else packet_features(record.packet)
                feats.append(f)
                for k, estimate in enumerate(outcome.estimates_of(f).values()):
                    if estimate is not None:
                        p_valid[i, k] = estimate.p_valid
                        q[i, k] = math.nan if estimate.cycles is None else estimate.cycles
                bar.update(1)
        props = propensity.probabilities(np.vstack([policy_row(f) for f in feats])) if propensity is not None and n \
            else np.full((n, len(FAMILIES)), np.nan)
        stated = np.zeros(n, dtype=bool)
        for i, record in enumerate(records):
            logged_choice = getattr(record, "planner_log", None)
            if logged_choice is not None:  # the planner's own stated probabilities: no model of them needed
                props[i] = [logged_choice.propensity(f) for f in FAMILIES]
                stated[i] = True
        names = sorted({r.episode_id for r in records})
        code = {name: i for i, name in enumerate(names)}
        attempts = [attempt_of(r) for r in records]
        logged = [a.family for a in attempts]
        observed = [a.observed for a in attempts]
        best = [a.best for a in attempts]
        return cls(record_ids=[r.record_id for r in records], groups=np.asarray([code[r.episode_id] for r in records]),
                   best=np.asarray([math.nan if b is None else float(b) for b in best]),
                   logged=np.asarray([-1 if f is None else FAMILIES.index(f) for f in logged], dtype=np.int64),
                   observed=np.asarray([math.nan if o is None else o for o in observed]),
                   q=q, p_valid=p_valid, propensity=props, group_names=names, logged_propensity=stated)

    def on_policy(self) -> "LoggedBandit":
        """The same logs seen by the deployed planner itself: each logged choice has weight 1 (its own policy)."""
        propensity = np.zeros_like(self.propensity)
        known = self.logged >= 0
        propensity[np.nonzero(known)[0], self.logged[known]] = 1.0
        return LoggedBandit(record_ids=self.record_ids, groups=self.groups, best=self.best, logged=self.logged,
                            observed=self.observed, q=self.q, p_valid=self.p_valid, propensity=propensity,
                            group_names=self.group_names, logged_propensity=self.logged_propensity)

    def target(self, families: Sequence[Optional[str]]) -> np.ndarray:
        """A program's choices as indices into FAMILIES (-1: no change, e.g. a rejected directive; -2: not scored,
        `UNSCORED`, e.g. a replayed log line that names no family: left out of every estimate)."""
        if len(families) != self.n:
            raise ValueError(f"{len(families)} choices for {self.n} records")
        return np.asarray([FAMILIES.index(f) if f in FAMILIES else (SKIPPED if f == UNSCORED else -1)
                           for f in families], dtype=np.int64)

    def q_of(self, target: np.ndarray) -> np.ndarray:
        """The model's expected improvement (cycles) of each record's chosen family (0 for no change)."""
        out = np.zeros(self.n)
        acting = target >= 0
        out[acting] = self.q[np.nonzero(acting)[0], target[acting]]
        return out


UNSCORED = "unscored"  # a choice that is not scored (the row says why): not an estimate's record
SKIPPED = -2


def choices_of(rows: Sequence[dict[str, Any]]) -> list[Optional[str]]:
    """The family each replay row's directive carried out (None when the loop runner rejects it: no change;
    `UNSCORED` for a row that is not scored)."""
    out: list[Optional[str]] = []
    for row in rows:
        if row.get("unscored"):
            out.append(UNSCORED)
            continue
        family = row.get("strategy_family")
        if "applied_family" in row:  # the family the loop runner carries out (None: it rejects the directive)
            family = row["applied_family"]
        out.append(family if family in FAMILIES else None)
    return out


__all__ = ["SKIPPED", "UNSCORED", "Attempt", "LoggedBandit", "TrainingData", "attempt_of", "attempt_of_example",
           "choices_of",
           "observed_improvement", "training_data"]
