"""A gate that stays valid while you watch it: a confidence sequence for the mean paired difference.

A fixed-n test (a paired permutation test, a t-test) is valid once, at a sample size fixed in advance. Re-run
on a growing sample after every batch of decisions, the chance that it says "better" at some look grows with
the number of looks, far above its nominal level. A confidence sequence (Howard, Ramdas, McAuliffe & Sekhon,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of Statistics 2021) is a sequence
of intervals CS_1, CS_2, ... that holds the true mean at every n at once with probability 1 - alpha, so it
may be looked at after every decision and acted on whenever it excludes a value.

Here the observations are paired differences D_i = candidate - deployed of a per-decision objective in
[-bound, bound] (the Full Auto objective is in [0, 1], so its differences are in [-1, 1]). The sequence is
their empirical-Bernstein confidence sequence (the paper's Theorem 4): with S_t = sum of D_i, the predictable
centre mu_{i-1} = the mean of D_1..D_{i-1} (0 before the first) and V_t = sum (D_i - mu_{i-1})^2,

    CS_t = S_t / t -/+ u(V_t) / t,

where u is the polynomial stitching boundary (the paper's eq. 10) with crossing probability alpha/2 on each
side, scale c = 2 * bound, eta = 2, s = 1.4 and m = 1 (the variance at which the boundary starts to be
tight, chosen before any data):

    u(v) = k1 sqrt(v l(v)) + k2 c l(v),  l(v) = s log log(eta v / m) + log(zeta(s) / (alpha/2 log^s eta)),
    k1 = (eta^1/4 + eta^-1/4) / sqrt 2,  k2 = (sqrt eta + 1) / 2,  v taken as max(v, m).

It adapts to the variance of the differences: when the two programs mostly agree (D_i = 0), V_t grows slowly
and the sequence narrows fast. It holds for dependent decisions too (the D_i need only have conditional mean
mu given the past), which turn-to-turn decisions of one loop are.

The gate (`sequential_verdict`): promote at the first look whose lower bound is above 0 (better, with
confidence 1 - alpha at every look); reject at the first look whose upper bound is below `min_effect` (it
cannot be better by the least gain worth having; with `min_effect` 0: it is worse); reject at
`max_decisions` without either (the most decisions a shadow may take); else keep shadowing, with the
labeled decisions the current difference would need. The chance of ever promoting a candidate that is not
better is at most alpha / 2 however often the gate is looked at; `tests/evals/test_sequential.py` checks it
on synthetic streams, `benchmarks/shadow_gate.py` on the Full Auto simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional, Sequence

import numpy as np
from scipy.special import zeta

VerdictName = Literal["promote", "reject", "keep shadowing"]
ETA = 2.0
S = 1.4
M = 1.0


def stitched_boundary(v: np.ndarray | float, alpha: float, scale: float, m: float = M, eta: float = ETA,
                      s: float = S) -> np.ndarray:
    """Howard et al.'s polynomial stitching boundary u(v) with crossing probability `alpha` (one side)."""
    v = np.maximum(np.asarray(v, dtype=float), m)
    ell = s * np.log(np.log(eta * v / m)) + math.log(float(zeta(s, 1)) / (alpha * math.log(eta) ** s))
    k1 = (eta ** 0.25 + eta ** -0.25) / math.sqrt(2.0)
    k2 = (math.sqrt(eta) + 1.0) / 2.0
    return k1 * np.sqrt(v * ell) + k2 * scale * ell


@dataclass(frozen=True)
class ConfidenceSequence:
    """The running mean of the differences and its (1 - alpha) confidence sequence after each decision."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    variance: np.ndarray  # V_t, the sum of squared deviations from the predictable centre
    alpha: float
    bound: float

    @property
    def n(self) -> int:
        """The number of differences."""
        return int(len(self.mean))


def confidence_sequence(differences: Sequence[float], *, alpha: float = 0.05, bound: float = 1.0) -> ConfidenceSequence:
    """The empirical-Bernstein confidence sequence of paired differences in [-bound, bound] (see the module)."""
    d = np.asarray(differences, dtype=float)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if d.size and (not np.all(np.isfinite(d)) or np.abs(d).max() > bound + 1e-12):
        raise ValueError(f"differences must be finite and within [-{bound:g}, {bound:g}]")
    t = np.arange(1, d.size + 1, dtype=float)
    total = np.cumsum(d)
    centre = np.concatenate([[0.0], total[:-1] / t[:-1]]) if d.size else d
    variance = np.cumsum((d - centre) ** 2)
    radius = stitched_boundary(variance, alpha / 2.0, 2.0 * bound) / t if d.size else d
    mean = total / t if d.size else d
    return ConfidenceSequence(mean=mean, low=np.maximum(mean - radius, -bound), high=np.minimum(mean + radius, bound),
                              variance=variance, alpha=alpha, bound=bound)


@dataclass(frozen=True)
class SequentialVerdict:
    """What the gate says after `n` labeled paired decisions."""

    verdict: VerdictName
    n: int
    decided_at: Optional[int]  # the look (number of decisions) at which the sequence first crossed; None: none yet
    difference: Optional[float]  # at `decided_at`, else at `n`
    low: Optional[float]
    high: Optional[float]
    reason: str
    more_needed: Optional[int] = None  # keep shadowing: about how many more labeled decisions the current effect needs
    alpha: float = 0.05
    min_effect: float = 0.0
    max_decisions: int = 0


def _first(mask: np.ndarray) -> Optional[int]:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def _crossing_n(rate: float, target: float, alpha: float, bound: float, start: int, limit: int) -> Optional[int]:
    """The least n in (start, limit] at which a sequence with variance `rate` per decision is narrower than
    `target` (its half-width u(rate n) / n below it), or None."""
    if target <= 0 or start >= limit:
        return None

    def narrow(n: int) -> bool:
        return float(stitched_boundary(rate * n, alpha / 2.0, 2.0 * bound)) / n < target

    if not narrow(limit):
        return None
    low, high = start, limit  # narrow(high) holds; the half-width shrinks as n grows
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if narrow(middle) else (middle, high)
    return high


def more_needed(cs: ConfidenceSequence, min_effect: float, max_decisions: int) -> tuple[Optional[int], str]:
    """About how many more labeled decisions would reach a verdict if the current difference and its variance
    per decision held (None: not within `max_decisions`), and the verdict they would reach."""
    n = cs.n
    if n == 0:
        return None, "no labeled decision yet"
    mean = float(cs.mean[-1])
    rate = max(float(cs.variance[-1]) / n, 1e-6)
    options = []
    if mean > 0:
        options.append((_crossing_n(rate, mean, cs.alpha, cs.bound, n, max_decisions), "promote"))
    if mean < min_effect:
        options.append((_crossing_n(rate, min_effect - mean, cs.alpha, cs.bound, n, max_decisions), "reject"))
    reachable = [(total, name) for total, name in options if total is not None]
    if not reachable:
        return None, f"the current difference {mean:+.4f} would not reach a verdict within {max_decisions} decisions"
    total, name = min(reachable)
    return total - n, f"about {total - n} more labeled decisions to {name} if the difference stays {mean:+.4f}"


def sequential_verdict(differences: Sequence[float], *, alpha: float = 0.05, min_effect: float = 0.0,
                       max_decisions: int = 5000, bound: float = 1.0) -> tuple[SequentialVerdict, ConfidenceSequence]:
    """The gate's verdict on the paired differences in the order they arrived, and their confidence sequence."""
    if min_effect < 0 or max_decisions < 1:
        raise ValueError("min_effect must be at least 0 and max_decisions at least 1")
    cs = confidence_sequence(list(differences)[:max_decisions], alpha=alpha, bound=bound)
    settings = dict(alpha=alpha, min_effect=min_effect, max_decisions=max_decisions)
    promote, reject = _first(cs.low > 0), _first(cs.high < min_effect)
    crossed = [index for index in (promote, reject) if index is not None]
    if crossed:
        at = min(crossed)
        name: VerdictName = "reject" if at == reject else "promote"  # both at once: better, by less than min_effect
        bounds = (float(cs.mean[at]), float(cs.low[at]), float(cs.high[at]))
        below = f"the minimum effect {min_effect:+g}" if min_effect > 0 else "0"
        why = (f"the {1 - alpha:.0%} confidence sequence is above 0 after {at + 1} decisions" if name == "promote" else
               f"the {1 - alpha:.0%} confidence sequence is below {below} after {at + 1} decisions")
        return SequentialVerdict(name, cs.n, at + 1, *bounds, reason=why, **settings), cs
    if cs.n == 0:
        return SequentialVerdict("keep shadowing", 0, None, None, None, None, reason="no labeled paired decision yet",
                                 **settings), cs
    last = (float(cs.mean[-1]), float(cs.low[-1]), float(cs.high[-1]))
    if cs.n >= max_decisions:
        return SequentialVerdict("reject", cs.n, cs.n, *last, reason=f"the maximum of {max_decisions} decisions was "
                                 "reached without evidence that the candidate is better", **settings), cs
    extra, why = more_needed(cs, min_effect, max_decisions)
    return SequentialVerdict("keep shadowing", cs.n, None, *last, reason=why, more_needed=extra, **settings), cs


# ----- running statistics for a monitor: the same confidence sequence, one batch of observations at a time -----

@dataclass
class RunningSequence:
    """The empirical-Bernstein confidence sequence above for observations in [low, low + scale], kept as three
    running sums so that a monitor can extend it with each batch of new records and store it between runs:
    `n`, `total` (the sum of observations) and `v` (the sum of squared deviations from the predictable centre,
    the mean of the observations before each one; `start` before the first). Its intervals hold the mean at every
    n at once with probability 1 - alpha (Howard et al. 2021, Theorem 4 with the stitching boundary)."""

    n: int = 0
    total: float = 0.0
    v: float = 0.0
    start: float = 0.0

    def extend(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add `values` in order; returns the running mean and V after each of them (arrays of len(values))."""
        x = np.asarray(values, dtype=float)
        if not x.size:
            return x, x
        t = self.n + np.arange(1, x.size + 1, dtype=float)
        sums = self.total + np.cumsum(x)
        before = np.concatenate([[self.total], sums[:-1]])
        centre = np.where(t > 1, before / np.maximum(t - 1, 1), self.start)
        v = self.v + np.cumsum((x - centre) ** 2)
        self.n, self.total, self.v = int(t[-1]), float(sums[-1]), float(v[-1])
        return sums / t, v


def sequence_bounds(mean: np.ndarray, v: np.ndarray, n: np.ndarray, *, alpha: float, scale: float,
                    low: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided (1 - alpha) confidence sequence at each (mean, V, n): alpha / 2 on each side, clipped to the
    observations' range [low, low + scale]."""
    radius = stitched_boundary(v, alpha / 2.0, scale) / np.maximum(np.asarray(n, dtype=float), 1.0)
    return np.maximum(mean - radius, low), np.minimum(mean + radius, low + scale)


def fixed_interval(value: float, n: int, *, alpha: float, binary: bool) -> tuple[float, float]:
    """A (1 - alpha) interval for a mean in [0, 1] measured once on n records: Clopper-Pearson for a rate (binary
    observations), Hoeffding's for any other mean in [0, 1]. It treats the n records as independent."""
    from scipy.stats import beta

    if n <= 0:
        return 0.0, 1.0
    if binary:
        k = int(round(min(max(value, 0.0), 1.0) * n))
        low = float(beta.ppf(alpha / 2, k, n - k + 1)) if k > 0 else 0.0
        high = float(beta.ppf(1 - alpha / 2, k + 1, n - k)) if k < n else 1.0
        return low, high
    radius = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    return max(0.0, value - radius), min(1.0, value + radius)


def exceedance_bound(n: int, alpha: float) -> float:
    """With probability 1 - alpha, the chance that a new exchangeable draw scores above the maximum of n draws is
    at most this: that chance is Beta(1, n) distributed (ties only lower it), so P(chance > t) = (1 - t)^n."""
    if n <= 0:
        return 1.0
    return float(1.0 - alpha ** (1.0 / n))
