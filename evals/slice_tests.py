"""The tests a post-mortem runs: each slice's mean score against the rest's, the Benjamini-Hochberg correction
across a family of such tests, and the fence beyond which a record's cost is an outlier.

- `below_rest_p`: one-sided Monte Carlo permutation test of "this slice scores below the other records".
  Under the null the slice's records are a random draw of its size from the scored records, so the records'
  scores are permuted and each slice's sum recomputed; p = (1 + #{permuted sum <= observed}) / (1 + B), a
  valid p-value for any B (ties count against the slice). All slices share the same B permutations (one
  matrix product per chunk), which makes their tests positively dependent; Benjamini-Hochberg holds under
  such (PRDS) dependence.
- `benjamini_hochberg`: adjusted p-values (q-values) of a family; a test is a discovery at false-discovery
  rate `fdr` when its q <= fdr.
- `shared_intervals`: 95% percentile bootstrap intervals of many statistics of record weights (`evals.stats`)
  from one set of resamples of the whole record set: a slice's statistic is masked to its records, so a
  resample holds a varying number of them, as a new sample of the same size would. One draw serves every
  slice, which keeps a post-mortem of dozens of slices to a few matrix products.
- `cost_fence`: Tukey's far-out fence, Q3 + 3 x IQR of the program's own records; a record is a cost outlier
  when its value is strictly above it (with IQR 0, anything above the upper quartile).
"""

from __future__ import annotations

import math
from typing import Hashable, Mapping, Optional, Sequence

import numpy as np
from scipy import stats as scipy_stats

from .stats import CONFIDENCE, PERMUTATIONS, MetricValue, Statistic

FDR = 0.05
FENCE_IQRS = 3.0
_CHUNK_CELLS = 2_000_000  # permuted scores held at once


def below_rest_p(scores: Sequence[float], members: np.ndarray, *, seed: int = 0,
                 permutations: int = PERMUTATIONS) -> np.ndarray:
    """One-sided permutation p-value per column of `members` (records x slices, bool) that the slice's mean
    score is below the rest's; NaN for a slice that is empty or holds every record."""
    x = np.asarray(scores, dtype=float)
    m = np.asarray(members, dtype=float).reshape(len(x), -1)
    sizes = m.sum(axis=0)
    testable = (sizes > 0) & (sizes < len(x))
    p = np.full(m.shape[1], np.nan)
    if not testable.any() or len(x) < 2:
        return p
    observed = x @ m
    tolerance = 1e-9 * np.maximum(1.0, np.abs(observed))
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // len(x))
    hits = np.zeros(m.shape[1])
    done = 0
    while done < permutations:
        size = min(rows, permutations - done)
        permuted = rng.permuted(np.broadcast_to(x, (size, len(x))), axis=1)
        hits += np.count_nonzero(permuted @ m <= observed + tolerance, axis=0)
        done += size
    p[testable] = (hits[testable] + 1.0) / (permutations + 1.0)
    return p


def shared_intervals(statistics: Mapping[Hashable, Statistic], n_records: int, *, n_resamples: int = 1000,
                     seed: int = 0, confidence: float = CONFIDENCE) -> dict[Hashable, MetricValue]:
    """Point value and percentile bootstrap interval of every statistic, all from the same resamples."""
    ones = np.ones((1, n_records))
    draws: dict[Hashable, list[np.ndarray]] = {key: [] for key in statistics}
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // max(n_records, 1))
    done = 0
    while n_records and done < n_resamples:
        size = min(rows, n_resamples - done)
        weights = rng.multinomial(n_records, np.full(n_records, 1.0 / n_records), size=size).astype(float)
        for key, stat in statistics.items():
            draws[key].append(stat(weights))
        done += size
    tail = 100 * (1 - confidence) / 2
    result: dict[Hashable, MetricValue] = {}
    for key, stat in statistics.items():
        value = float(stat(ones)[0]) if n_records else math.nan
        if stat.n == 0 or not math.isfinite(value):
            result[key] = MetricValue.empty() if stat.n == 0 else MetricValue(value=None, ci_low=None, ci_high=None,
                                                                              n=stat.n)
            continue
        sample = np.concatenate(draws[key]) if draws[key] else np.array([])
        sample = sample[np.isfinite(sample)]  # a resample without one of the slice's records has no value
        if stat.n < 2 or sample.size == 0 or np.ptp(sample) == 0:
            result[key] = MetricValue(value=value, ci_low=value, ci_high=value, n=stat.n, method="degenerate",
                                      n_resamples=n_resamples)
            continue
        low, high = np.percentile(sample, [tail, 100 - tail])
        result[key] = MetricValue(value=value, ci_low=min(float(low), value), ci_high=max(float(high), value),
                                  n=stat.n, method="percentile", n_resamples=n_resamples)
    return result


def benjamini_hochberg(p_values: Sequence[Optional[float]]) -> list[Optional[float]]:
    """Benjamini-Hochberg adjusted p-values of one family; None (untested) entries stay None and do not count."""
    finite = [(i, float(p)) for i, p in enumerate(p_values) if p is not None and math.isfinite(p)]
    adjusted: list[Optional[float]] = [None] * len(p_values)
    if not finite:
        return adjusted
    q = scipy_stats.false_discovery_control([p for _, p in finite], method="bh")
    for (index, _), value in zip(finite, np.atleast_1d(q)):
        adjusted[index] = float(min(1.0, value))
    return adjusted


def cost_fence(values: Sequence[float]) -> Optional[dict[str, float]]:
    """{"q1", "median", "q3", "iqr", "fence"} of the finite values (None when there are none)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return None
    q1, median, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    return {"q1": q1, "median": median, "q3": q3, "iqr": q3 - q1, "fence": q3 + FENCE_IQRS * (q3 - q1)}
