"""What every off-policy estimator shares: the estimate's shape, the support diagnostic and the episode bootstrap.

An estimator turns the logged bandit (`evals.offpolicy.bandit.LoggedBandit`) and a target program's choices
(a family per record, or none: no change) into the expected improvement of the best per record, in cycles.
Each one writes its value as a function of per-record columns summed over the records (`columns` and
`combine`), so the interval is a bootstrap over whole episodes: each draw resamples the episodes with
replacement and recomputes the value from the resampled sums (records of one episode are not independent).
Fewer than `evals.stats.MIN_GROUPS` episodes give the value with no interval ("too few episodes"): a bootstrap
over a handful of episodes has no coverage to speak of (Field & Welsh 2007).

Support: the importance weight of a record is 1 / P(deployed planner chose the target's family), clipped at
`CLIP`, where the target's choice is the logged one, else 0. Its effective sample size (Kish: (sum w)^2 / sum w^2
over the records where the target acts) says how many logged attempts the estimate really rests on. When it is
under `MIN_ESS`, or fewer than `MIN_SUPPORT` of the target's choices had a propensity of at least
`MIN_PROPENSITY`, the logs (almost) never tried those families in similar states: the estimate is
"unsupported" and carries no value, only its effective sample size.

Extrapolation, record by record: a record whose target family the deployed planner chose with a propensity under
`SUPPORT_THRESHOLD` in that context (the fitted propensity model's, or the planner's logged one) is `extrapolated`.
The threshold is 1 / `CLIP` (= `MIN_PROPENSITY`, 0.05): below it the importance weight is clipped, so neither IPW
nor the doubly robust correction can undo the outcome model's error there, and whatever the estimate says of that
record is the outcome model's extrapolation from states where the family was tried (fewer than 1 in 20 similar
states). An estimate counts its extrapolated records (`extrapolated`, and per family `by_family`); the counts are
left out of its JSON when there is none, so an estimate where nothing extrapolates reads as before.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from .. import tasks
from ..stats import MIN_GROUPS, too_few_text
from runtime.advisor import FAMILIES

from .bandit import SKIPPED, LoggedBandit

CLIP = 20.0  # largest importance weight (a propensity under 1/20 counts as 1/20)
MIN_ESS = 10.0
MIN_PROPENSITY = 0.05
MIN_SUPPORT = 0.5
RESAMPLES = 1000
CONFIDENCE = 0.95
SUPPORT_THRESHOLD = 1.0 / CLIP  # a record's choice below this propensity is extrapolated (see the module)


class FamilySupport(BaseModel):
    """How many of the records where the target chose a family are extrapolated (propensity < SUPPORT_THRESHOLD)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int
    extrapolated: int

    @property
    def share(self) -> float:
        """Extrapolated share of the family's records (0 without a record)."""
        return self.extrapolated / self.n if self.n else 0.0


class OffPolicyEstimate(BaseModel):
    """A program's expected improvement of the best per record (cycles) by one estimator, with its support."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    estimator: str  # "dm" | "ipw" | "dr"
    title: str
    value: Optional[float]  # None: unsupported or nothing to estimate
    ci_low: Optional[float]
    ci_high: Optional[float]
    n: int  # records estimated on
    n_episodes: int
    ess: float  # effective sample size of the importance weights
    support: float  # share of the target's choices the deployed planner made with propensity >= MIN_PROPENSITY
    supported: bool
    note: str = ""
    logged_propensities: int = 0  # of the n records, those whose propensities the deployed planner logged
    extrapolated: int = 0  # of the n records, those whose choice had propensity < SUPPORT_THRESHOLD
    by_family: dict[str, "FamilySupport"] = {}  # per family the target chose: its records and the extrapolated

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The fields, without the extrapolation counts when nothing extrapolates (the JSON stays as it was)."""
        data = handler(self)
        if not self.extrapolated:
            data.pop("extrapolated", None)
            data.pop("by_family", None)
        return data

    @property
    def propensity_source(self) -> str:
        """Where the weights came from: "logged", "model" or "logged + model"."""
        if self.logged_propensities == 0:
            return "model"
        return "logged" if self.logged_propensities >= self.n else "logged + model"

    def text(self) -> str:
        """One line: "412.3 [350.1, 470.8] (DR, ESS 61.2 of 140)" or "unsupported (DR, ESS 2.1 of 140)", with ", 40
        with logged propensities" when some records had them."""
        logged = f", {self.logged_propensities} with logged propensities" if self.logged_propensities else ""
        if self.extrapolated:
            logged += f", {self.extrapolated_text()}"
        if self.value is None:
            return f"{self.note or 'unsupported'} ({self.estimator.upper()}, ESS {self.ess:.1f} of {self.n}{logged})"
        if self.ci_low is None or self.ci_high is None:
            return f"{self.value:.1f}, {self.note} ({self.estimator.upper()}, ESS {self.ess:.1f} of {self.n}{logged})"
        return (f"{self.value:.1f} [{self.ci_low:.1f}, {self.ci_high:.1f}] ({self.estimator.upper()}, "
                f"ESS {self.ess:.1f} of {self.n}{logged})")


    def extrapolated_text(self) -> str:
        """"extrapolated 40 of 52 break_deps, 3 of 80 reduce_loads" ("" when nothing extrapolates)."""
        parts = [f"{s.extrapolated} of {s.n} {family.split(':')[-1]}" for family, s in self.by_family.items()
                 if s.extrapolated]
        return f"extrapolated {', '.join(parts)}" if parts else ""


def extrapolated(bandit: LoggedBandit, target: np.ndarray) -> np.ndarray:
    """Per record: the target acts and the deployed planner chose its family with a propensity under
    SUPPORT_THRESHOLD in that context (unknown propensities count as 0: nothing shows the family was tried there)."""
    out = np.zeros(bandit.n, dtype=bool)
    acting = np.nonzero(target >= 0)[0]
    p = bandit.propensity[acting, target[acting]] if len(acting) else np.zeros(0)
    out[acting] = np.nan_to_num(p, nan=0.0) < SUPPORT_THRESHOLD
    return out


def family_support(bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> dict[str, "FamilySupport"]:
    """Per family the target chose on the `mask` records (FAMILIES order): its records and the extrapolated ones."""
    flagged = extrapolated(bandit, target) & mask
    found = {}
    for k, family in enumerate(FAMILIES):
        mine = mask & (target == k)
        if mine.any():
            found[family] = FamilySupport(n=int(mine.sum()), extrapolated=int((flagged & mine).sum()))
    return found


def importance_weights(bandit: LoggedBandit, target: np.ndarray) -> np.ndarray:
    """w_i = 1[logged_i == target_i] / propensity_i(logged), clipped at CLIP; 0 where the observation is unknown."""
    w = np.zeros(bandit.n)
    match = (target >= 0) & (bandit.logged == target) & np.isfinite(bandit.observed)
    idx = np.nonzero(match)[0]
    p = bandit.propensity[idx, target[idx]]
    with np.errstate(divide="ignore"):
        w[idx] = np.where(np.isfinite(p) & (p > 0), np.minimum(1.0 / np.maximum(p, 1e-12), CLIP), CLIP)
    return w


def evaluable(bandit: LoggedBandit, target: np.ndarray) -> np.ndarray:
    """Records an estimate is computed on: scored, a best to measure against, a model value for the choice."""
    known_best = np.isfinite(bandit.best)
    q = bandit.q_of(target)
    return known_best & (target != SKIPPED) & ((target < 0) | np.isfinite(q))


def support_of(bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """(ESS of the importance weights, share of acting records with propensity >= MIN_PROPENSITY)."""
    acting = mask & (target >= 0)
    if not acting.any():
        return 0.0, 0.0
    w = importance_weights(bandit, target)[acting]
    ess = float(w.sum() ** 2 / (w ** 2).sum()) if (w ** 2).sum() > 0 else 0.0
    idx = np.nonzero(acting)[0]
    p = bandit.propensity[idx, target[idx]]
    return ess, float(np.mean(np.nan_to_num(p, nan=0.0) >= MIN_PROPENSITY))


TASK_DRAWS = 250  # bootstrap draws per cluster task


class _Draws:
    """`combine` of the resampled sums, for rows of episode counts (one row per draw)."""

    def __init__(self, sums: dict[str, np.ndarray], combine: Any) -> None:
        self.sums, self.combine = sums, combine

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.combine({name: counts @ total for name, total in self.sums.items()})


def episode_bootstrap(columns: dict[str, np.ndarray], groups: np.ndarray, combine, *, resamples: int = RESAMPLES,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile interval of `combine(sums)` over resamples of whole episodes (with replacement)."""
    codes, inverse = np.unique(groups, return_inverse=True)
    sums = {name: np.bincount(inverse, weights=values, minlength=len(codes)) for name, values in columns.items()}
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(codes), np.full(len(codes), 1.0 / len(codes)), size=resamples)
    if tasks.distributed():  # a cluster's tasks: the draws in chunks of rows, put back in order
        parts = tasks.task_map(_Draws(sums, combine), [counts[a:b] for a, b in tasks.chunks(resamples, TASK_DRAWS)])
        draws = np.concatenate(parts) if parts else np.array([])
    else:
        draws = _Draws(sums, combine)(counts)
    draws = draws[np.isfinite(draws)]
    if not len(draws):
        return math.nan, math.nan
    tail = (1 - CONFIDENCE) / 2 * 100
    return float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))


class Estimator(ABC):
    """An off-policy estimator: per-record columns, summed over records, combined into the value."""

    name: ClassVar[str]
    title: ClassVar[str]

    @abstractmethod
    def columns(self, bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Per-record columns (zero outside `mask`) whose sums `combine` turns into the value."""

    @abstractmethod
    def combine(self, sums: dict[str, np.ndarray]) -> np.ndarray:
        """The value from the columns' sums (arrays: one entry per bootstrap draw)."""

    def estimate(self, bandit: LoggedBandit, target: np.ndarray, *, resamples: int = RESAMPLES,
                 seed: int = 0, require_support: bool = True) -> OffPolicyEstimate:
        """The value with its episode-bootstrap interval; None when unsupported (see the module docstring)."""
        mask = evaluable(bandit, target)
        n = int(mask.sum())
        episodes = int(len(np.unique(bandit.groups[mask]))) if n else 0
        ess, support = support_of(bandit, target, mask)
        supported = ess >= MIN_ESS and support >= MIN_SUPPORT
        common = dict(estimator=self.name, title=self.title, n=n, n_episodes=episodes, ess=round(ess, 3),
                      support=round(support, 4), supported=supported,
                      logged_propensities=int((mask & bandit.logged_propensity).sum()))
        by_family = family_support(bandit, target, mask)
        flagged = sum(s.extrapolated for s in by_family.values())
        if flagged:
            common.update(extrapolated=flagged, by_family=by_family)
        if n == 0:
            return OffPolicyEstimate(value=None, ci_low=None, ci_high=None, note="no record to estimate on", **common)
        if require_support and not supported and (target[mask] >= 0).any():
            why = (f"unsupported: the logs rarely tried these families in such states (ESS {ess:.1f}, "
                   f"{support:.0%} of the choices with propensity >= {MIN_PROPENSITY})")
            return OffPolicyEstimate(value=None, ci_low=None, ci_high=None, note=why, **common)
        columns = {name: np.where(mask, values, 0.0) for name, values in self.columns(bandit, target, mask).items()}
        with np.errstate(invalid="ignore", divide="ignore"):
            value = float(self.combine({name: np.asarray([v.sum()]) for name, v in columns.items()})[0])
        finite = math.isfinite(value)
        if finite and episodes < MIN_GROUPS:
            return OffPolicyEstimate(value=value, ci_low=None, ci_high=None,
                                     note=f"{too_few_text(episodes)}: no 95% interval", **common)
        low, high = episode_bootstrap(columns, bandit.groups, self.combine, resamples=resamples, seed=seed)
        return OffPolicyEstimate(value=value if finite else None, ci_low=low if finite else None,
                                 ci_high=high if finite else None,
                                 note="" if finite else "no logged attempt matches the program's choices", **common)


__all__ = ["CLIP", "CONFIDENCE", "Estimator", "FamilySupport", "MIN_ESS", "MIN_PROPENSITY", "MIN_SUPPORT",
           "OffPolicyEstimate", "RESAMPLES", "SUPPORT_THRESHOLD", "episode_bootstrap", "evaluable", "extrapolated",
           "family_support", "importance_weights", "support_of"]
