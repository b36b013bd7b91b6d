"""Bootstrap intervals for every aggregate and paired comparisons of two programs on the same records.

A statistic here is a function of resampling weights: given a matrix `W` of shape (B, n) whose
row b says how many times each record is drawn in resample b, it returns B values. The point
estimate is the same function at `W = 1`. This one form covers plain means of per-record scores
and ratio metrics (macro-F1, ECE) alike, resamples whole records, and lets a paired comparison use
the identical resamples for both programs.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats as scipy_stats

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
# Rows of W built at once: bounds memory to about this many floats whatever the record count.
_CHUNK_CELLS = 4_000_000


class Statistic:
    """A statistic of resampling weights `W` (B, n) -> (B,), with `n` the records it is computed on."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], n: int):
        self._fn = fn
        self.n = int(n)

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        """Values of the statistic for each row of resampling weights."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(self._fn(weights), dtype=float)


class MetricValue(BaseModel):
    """One aggregate with its bootstrap interval: `{"value", "ci_low", "ci_high", "n"}`."""

    model_config = ConfigDict(frozen=True)

    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    n: int

    @classmethod
    def empty(cls) -> "MetricValue":
        """The value of a metric with no record to compute it on."""
        return cls(value=None, ci_low=None, ci_high=None, n=0)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return self.model_dump()


class PairedComparison(BaseModel):
    """Difference a - b of one metric on the same records, with its interval and p-value."""

    model_config = ConfigDict(frozen=True)

    diff: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    p_value: Optional[float]
    n: int
    method: str = "paired_bootstrap"

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return self.model_dump()


class McNemarResult(BaseModel):
    """McNemar's test on paired correctness: discordant counts, exact and continuity-corrected p."""

    model_config = ConfigDict(frozen=True)

    a_only: int
    b_only: int
    n: int
    p_exact: float
    p_continuity: float
    statistic: float


def _finite(x: float) -> Optional[float]:
    return float(x) if x is not None and math.isfinite(x) else None


# ----- statistics as functions of resampling weights -------------------------------------------

def mean_of(values: Sequence[float], mask: Optional[Sequence[bool]] = None) -> Statistic:
    """Mean of per-record values over the records in `mask` (all when None); NaN values are skipped."""
    x = np.asarray(values, dtype=float)
    m = np.isfinite(x) if mask is None else np.asarray(mask, dtype=bool) & np.isfinite(x)
    x = np.where(m, x, 0.0)
    m = m.astype(float)

    def statistic(w: np.ndarray) -> np.ndarray:
        return (w @ x) / (w @ m)

    return Statistic(statistic, int(m.sum()))


def ratio_of(numerator: Sequence[float], denominator: Sequence[float]) -> Statistic:
    """Sum of numerators over sum of denominators (a rate whose records weigh differently)."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)

    def statistic(w: np.ndarray) -> np.ndarray:
        return (w @ num) / (w @ den)

    return Statistic(statistic, int(np.count_nonzero(den)))


def macro_f1_of(y_true: Sequence[str], y_pred: Sequence[str], mask: Optional[Sequence[bool]] = None) -> Statistic:
    """Macro-F1 over the classes seen in either column (a class never right scores F1 0)."""
    true = np.asarray([str(v) for v in y_true], dtype=object)
    pred = np.asarray([str(v) for v in y_pred], dtype=object)
    keep = np.ones(len(true), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    classes = sorted(set(true[keep]) | set(pred[keep]))
    index = {c: i for i, c in enumerate(classes)}
    k = len(classes)
    # One column per (true, pred) cell so that W @ onehot gives every resample's confusion matrix.
    codes = np.array([index[t] * k + index[p] if ok else -1 for t, p, ok in zip(true, pred, keep)], dtype=int)
    onehot = np.zeros((len(codes), max(k * k, 1)))
    rows = np.nonzero(codes >= 0)[0]
    onehot[rows, codes[rows]] = 1.0

    def statistic(w: np.ndarray) -> np.ndarray:
        if k == 0:
            return np.full(w.shape[0], np.nan)
        cm = (w @ onehot).reshape(-1, k, k)
        tp = np.einsum("bii->bi", cm)
        support = cm.sum(axis=2)
        predicted = cm.sum(axis=1)
        denom = support + predicted
        present = denom > 0
        f1 = np.where(present, 2 * tp / np.where(present, denom, 1), 0.0)
        return f1.sum(axis=1) / present.sum(axis=1)

    return Statistic(statistic, int(keep.sum()))


def ece_of(confidence: Sequence[float], correct: Sequence[float], mask: Optional[Sequence[bool]] = None,
           n_bins: int = 10) -> Statistic:
    """Expected calibration error: bin-weighted |accuracy - mean confidence| over equal-width bins."""
    conf = np.clip(np.asarray(confidence, dtype=float), 0.0, 1.0)
    hit = np.asarray(correct, dtype=float)
    keep = np.isfinite(conf) & np.isfinite(hit)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    bins = np.minimum((np.nan_to_num(conf) * n_bins).astype(int), n_bins - 1)
    onehot = np.zeros((len(conf), n_bins))
    rows = np.nonzero(keep)[0]
    onehot[rows, bins[rows]] = 1.0
    conf_cols = onehot * np.nan_to_num(conf)[:, None]
    hit_cols = onehot * np.nan_to_num(hit)[:, None]

    def statistic(w: np.ndarray) -> np.ndarray:
        count = w @ onehot
        total = count.sum(axis=1)
        gap = np.abs(w @ hit_cols - w @ conf_cols)
        return gap.sum(axis=1) / total

    return Statistic(statistic, int(keep.sum()))


# ----- resampling -------------------------------------------------------------------------------

def _weight_chunks(n: int, n_resamples: int, seed: int):
    """Yield matrices of how often each record is drawn (n draws with replacement per row), seeded."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(n_resamples, _CHUNK_CELLS // max(n, 1)))
    done = 0
    while done < n_resamples:
        size = min(rows, n_resamples - done)
        draws = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
        yield np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(float)
        done += size


def _percentile_interval(samples: np.ndarray, confidence: float) -> tuple[Optional[float], Optional[float]]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None, None
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_many(statistics: Mapping[str, Statistic], n_records: int, *,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                   confidence: float = CONFIDENCE) -> dict[str, MetricValue]:
    """Point values and percentile intervals of several statistics over the same resamples."""
    if n_records == 0:
        return {name: MetricValue.empty() for name in statistics}
    ones = np.ones((1, n_records))
    values = {name: _finite(stat(ones)[0]) for name, stat in statistics.items()}
    live = {name: stat for name, stat in statistics.items() if stat.n > 0 and values[name] is not None}
    samples: dict[str, list[np.ndarray]] = {name: [] for name in live}
    if live:
        for weights in _weight_chunks(n_records, n_resamples, seed):
            for name, stat in live.items():
                samples[name].append(stat(weights))
    result: dict[str, MetricValue] = {}
    for name, stat in statistics.items():
        value = values[name]
        if stat.n == 0:
            result[name] = MetricValue.empty()
        elif value is None:
            result[name] = MetricValue(value=None, ci_low=None, ci_high=None, n=stat.n)
        else:
            low, high = _percentile_interval(np.concatenate(samples[name]), confidence)
            # A percentile interval can miss a degenerate point estimate by rounding; keep value inside.
            low = value if low is None else min(low, value)
            high = value if high is None else max(high, value)
            result[name] = MetricValue(value=value, ci_low=low, ci_high=high, n=stat.n)
    return result


def bootstrap(statistic: Statistic, n_records: int, *, n_resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE) -> MetricValue:
    """Point value and percentile bootstrap interval of one statistic, resampling whole records."""
    return bootstrap_many({"_": statistic}, n_records, n_resamples=n_resamples, seed=seed,
                          confidence=confidence)["_"]


def bootstrap_mean(values: Sequence[float], *, mask: Optional[Sequence[bool]] = None,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> MetricValue:
    """Mean of per-record scores with its bootstrap interval (NaN scores are left out)."""
    return bootstrap(mean_of(values, mask), len(values), n_resamples=n_resamples, seed=seed)


def paired_many(statistics_a: Mapping[str, Statistic], statistics_b: Mapping[str, Statistic], n_records: int, *,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                confidence: float = CONFIDENCE) -> dict[str, PairedComparison]:
    """Differences a - b of every statistic present in both mappings, all on the same resamples.

    Records are resampled in pairs (one weight per record for both programs). The p-value is the
    share of resampled differences at least as far from the observed one as the observed one is
    from zero (the bootstrap distribution shifted to the null), with the +1 correction so it is
    never exactly zero.
    """
    names = [name for name in statistics_a if name in statistics_b]
    result: dict[str, PairedComparison] = {}
    ones = np.ones((1, n_records))
    live: dict[str, float] = {}
    for name in names:
        n = min(statistics_a[name].n, statistics_b[name].n) if n_records else 0
        diff = _finite(statistics_a[name](ones)[0] - statistics_b[name](ones)[0]) if n else None
        result[name] = PairedComparison(diff=diff, ci_low=None, ci_high=None, p_value=None, n=n)
        if diff is not None:
            live[name] = diff
    samples: dict[str, list[np.ndarray]] = {name: [] for name in live}
    if live:
        for weights in _weight_chunks(n_records, n_resamples, seed):
            for name in live:
                samples[name].append(statistics_a[name](weights) - statistics_b[name](weights))
    for name, diff in live.items():
        draws = np.concatenate(samples[name])
        draws = draws[np.isfinite(draws)]
        low, high = _percentile_interval(draws, confidence)
        if diff == 0.0 or draws.size == 0:
            p_value = 1.0
        else:
            extreme = np.count_nonzero(np.abs(draws - diff) >= abs(diff))
            p_value = (extreme + 1.0) / (draws.size + 1.0)
        result[name] = PairedComparison(diff=diff, ci_low=diff if low is None else min(low, diff),
                                        ci_high=diff if high is None else max(high, diff),
                                        p_value=float(min(1.0, p_value)), n=result[name].n)
    return result


def paired_bootstrap(statistic_a: Statistic, statistic_b: Statistic, n_records: int, *,
                     n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                     confidence: float = CONFIDENCE) -> PairedComparison:
    """Difference a - b of one statistic on the same records, with interval and p-value (see paired_many)."""
    return paired_many({"_": statistic_a}, {"_": statistic_b}, n_records, n_resamples=n_resamples, seed=seed,
                       confidence=confidence)["_"]


def paired_mean_difference(a: Sequence[float], b: Sequence[float], **kwargs) -> PairedComparison:
    """Paired bootstrap of the mean of two per-record score columns on the same records."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired scores need the same records: {x.shape} vs {y.shape}")
    both = np.isfinite(x) & np.isfinite(y)
    return paired_bootstrap(mean_of(x, both), mean_of(y, both), len(x), **kwargs)


def mcnemar(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> McNemarResult:
    """McNemar's test for paired accuracy: exact binomial and chi-square with continuity correction."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired correctness needs the same records: {a.shape} vs {b.shape}")
    a_only = int(np.count_nonzero(a & ~b))
    b_only = int(np.count_nonzero(~a & b))
    discordant = a_only + b_only
    if discordant == 0:
        return McNemarResult(a_only=0, b_only=0, n=int(a.size), p_exact=1.0, p_continuity=1.0, statistic=0.0)
    p_exact = float(scipy_stats.binomtest(min(a_only, b_only), discordant, 0.5).pvalue)
    statistic = (abs(a_only - b_only) - 1.0) ** 2 / discordant
    p_continuity = float(scipy_stats.chi2.sf(statistic, df=1))
    return McNemarResult(a_only=a_only, b_only=b_only, n=int(a.size), p_exact=min(1.0, p_exact),
                         p_continuity=min(1.0, p_continuity), statistic=float(statistic))
