"""A program's off-policy estimates in one place, and how well the outcome model predicts the logged attempts.

`policy_estimates(bandit, families)` runs the three estimators on a program's choices; the doubly robust one is
the headline (`HEADLINE`). `observed_mean(bandit)` is what the deployed planner's attempts really brought (its
own outcomes: the on-policy truth `planner.logged`'s estimate must agree with). `calibration(bandit)` compares,
attempt by attempt, what the outcome model expected of the logged family with what the attempt brought:
binned means (the reliability plot), the ratio of the means, the correlation, and the share of bins whose
mean prediction lies inside the 95% interval of the bin's observed mean (coverage; about 0.95 when calibrated).
`extrapolation(bandit, families)` says which of a program's records rest on the outcome model alone: their choice
had a propensity under `SUPPORT_THRESHOLD` in that context (`_base`), with the share per family.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..stats import MIN_GROUPS, too_few_text
from ._base import (RESAMPLES, SUPPORT_THRESHOLD, FamilySupport, OffPolicyEstimate, episode_bootstrap, evaluable,
                    extrapolated, family_support)
from .bandit import LoggedBandit
from .direct import DirectMethod
from .dr import DoublyRobust
from .ipw import SelfNormalizedIPW

ESTIMATORS = (DirectMethod(), SelfNormalizedIPW(), DoublyRobust())
HEADLINE = "dr"
BINS = 10


def policy_estimates(bandit: LoggedBandit, families: Sequence[Optional[str]], *, resamples: int = RESAMPLES,
                     seed: int = 0) -> dict[str, OffPolicyEstimate]:
    """DM, IPW and DR estimates of a program whose choices are `families` (None: no change), by name."""
    target = bandit.target(families)
    return {e.name: e.estimate(bandit, target, resamples=resamples, seed=seed) for e in ESTIMATORS}


def observed_mean(bandit: LoggedBandit, *, resamples: int = RESAMPLES, seed: int = 0) -> OffPolicyEstimate:
    """The mean improvement the logged attempts brought (records with a family and a known outcome)."""
    mask = (bandit.logged >= 0) & np.isfinite(bandit.observed) & np.isfinite(bandit.best)
    columns = {"value": np.where(mask, np.nan_to_num(bandit.observed), 0.0), "count": mask.astype(float)}
    combine = lambda sums: sums["value"] / sums["count"]  # noqa: E731
    n = int(mask.sum())
    value = float(columns["value"].sum() / n) if n else None
    episodes = int(len(np.unique(bandit.groups[mask])))
    few = bool(n) and episodes < MIN_GROUPS  # too few episodes: the mean, no interval
    low, high = episode_bootstrap(columns, bandit.groups, combine, resamples=resamples, seed=seed) \
        if n and not few else (math.nan, math.nan)
    return OffPolicyEstimate(estimator="observed", title="what the logged attempts brought", value=value,
                             ci_low=low if n and not few else None, ci_high=high if n and not few else None, n=n,
                             n_episodes=episodes, ess=float(n), support=1.0, supported=bool(n),
                             note=f"{too_few_text(episodes)}: no 95% interval" if few else "")


class Extrapolation(BaseModel):
    """Which of a program's estimated records are extrapolated, and the share per family it chose."""

    model_config = ConfigDict(extra="forbid")

    threshold: float  # propensity under which a record's choice is extrapolated
    source: str  # where the propensities came from: "model", "logged" or "logged + model"
    n: int  # records estimated on where the program acts or not (the estimates' n)
    extrapolated: int
    by_family: dict[str, FamilySupport]
    shares: dict[str, float]  # extrapolated / n per family (the board's and the eval's line)
    records: list[str]  # ids of the extrapolated records

    def text(self) -> str:
        """"extrapolated: break_deps 40 of 52 (77%), reduce_loads 0 of 80 (0%)" or "extrapolated: none of 140"."""
        if not self.extrapolated:
            return f"extrapolated: none of {self.n} (propensity < {self.threshold:g})"
        parts = [f"{family.split(':')[-1]} {s.extrapolated} of {s.n} ({s.share:.0%})"
                 for family, s in self.by_family.items()]
        return f"extrapolated: {', '.join(parts)} (propensity < {self.threshold:g})"


def extrapolation(bandit: LoggedBandit, families: Sequence[Optional[str]]) -> Extrapolation:
    """The records of a program's choices (`families`, as `policy_estimates` takes them) whose estimate rests on the
    outcome model alone, counted per family."""
    target = bandit.target(families)
    mask = evaluable(bandit, target)
    flagged = extrapolated(bandit, target) & mask
    by_family = family_support(bandit, target, mask)
    logged = int((mask & bandit.logged_propensity).sum())
    n = int(mask.sum())
    source = "model" if logged == 0 else "logged" if logged >= n else "logged + model"
    return Extrapolation(threshold=SUPPORT_THRESHOLD, source=source, n=n, extrapolated=int(flagged.sum()),
                         by_family=by_family, shares={f: round(s.share, 4) for f, s in by_family.items()},
                         records=[rid for rid, flag in zip(bandit.record_ids, flagged) if flag])


class CalibrationBin(BaseModel):
    """One bin of logged attempts, by the model's prediction."""

    model_config = ConfigDict(extra="forbid")

    n: int
    predicted: float
    observed: float
    observed_low: float
    observed_high: float


class Calibration(BaseModel):
    """Predicted against observed improvement of the logged attempts (cycles)."""

    model_config = ConfigDict(extra="forbid")

    n: int
    mean_predicted: Optional[float]
    mean_observed: Optional[float]
    mean_ratio: Optional[float]  # mean predicted / mean observed
    correlation: Optional[float]  # Pearson, attempt by attempt
    coverage: Optional[float]  # share of bins whose mean prediction is inside the observed mean's 95% interval
    bins: list[CalibrationBin]


def _bin_interval(values: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    if len(values) < 2:
        return float(values.mean()), float(values.mean())
    draws = rng.choice(values, size=(resamples, len(values)), replace=True).mean(axis=1)
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def calibration(bandit: LoggedBandit, *, bins: int = BINS, resamples: int = RESAMPLES, seed: int = 0) -> Calibration:
    """Binned reliability, mean ratio, correlation and coverage of the model on the logged attempts."""
    mask = (bandit.logged >= 0) & np.isfinite(bandit.observed)
    idx = np.nonzero(mask)[0]
    predicted = bandit.q[idx, bandit.logged[idx]] if len(idx) else np.zeros(0)
    keep = np.isfinite(predicted)
    predicted, observed = predicted[keep], bandit.observed[idx][keep]
    n = len(predicted)
    if n == 0:
        return Calibration(n=0, mean_predicted=None, mean_observed=None, mean_ratio=None, correlation=None,
                           coverage=None, bins=[])
    rng = np.random.default_rng(seed)
    order = np.argsort(predicted, kind="stable")
    parts = [part for part in np.array_split(order, min(bins, n)) if len(part)]
    made = []
    for part in parts:
        low, high = _bin_interval(observed[part], rng, resamples)
        made.append(CalibrationBin(n=len(part), predicted=float(predicted[part].mean()),
                                   observed=float(observed[part].mean()), observed_low=low, observed_high=high))
    covered = [b.observed_low <= b.predicted <= b.observed_high for b in made]
    mean_obs = float(observed.mean())
    spread = predicted.std() > 0 and observed.std() > 0
    return Calibration(n=n, mean_predicted=float(predicted.mean()), mean_observed=mean_obs,
                       mean_ratio=float(predicted.mean() / mean_obs) if mean_obs > 0 else None,
                       correlation=float(np.corrcoef(predicted, observed)[0, 1]) if spread else None,
                       coverage=float(np.mean(covered)), bins=made)


__all__ = ["BINS", "Calibration", "CalibrationBin", "ESTIMATORS", "Extrapolation", "HEADLINE", "calibration",
           "extrapolation", "observed_mean", "policy_estimates"]
