"""Intervals for every aggregate, as functions of record weights (the paired tests in `evals.paired` use them too).

A statistic here is a function of record weights: given a matrix `W` of shape (B, n) whose row b
says how much each record counts in draw b, it returns B values; the point estimate is the same
function at `W = 1`. This one form covers plain means of per-record scores and ratio metrics
(macro-F1, ECE) alike, and serves both procedures:

- Intervals: `scipy.stats.bootstrap` over the record indices (a resample is a row of draw counts),
  BCa where it is defined, the percentile interval otherwise (a degenerate or tiny sample), seeded;
  every `MetricValue` names its method and resample count. Above `BCA_MAX_N` records the interval is the
  percentile one: BCa's acceleration comes from a jackknife, n statistics of n weights each, so its cost
  grows with the square of the records (a 50,000-record split would take minutes per metric), while what it
  corrects shrinks as 1/n (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 14.3: both
  intervals are first-order correct, BCa second-order); at a few thousand records the two agree to well
  under the interval's own Monte Carlo error.
- Paired tests: `evals.paired` (a permutation test of the records' assignments, built on the same form).

Clustered records (`groups=`: a planner record's episode). The attempts of one episode share a kernel and a
history, so they are not independent: resampling or swapping single records would claim more certainty than
the logs hold. With `groups`, both procedures (this module's intervals, `evals.paired`'s tests) take the group as their unit: the interval is a cluster
bootstrap (whole groups drawn with replacement, every record of a drawn group weighted by its draw count;
Field & Welsh 2007, "Bootstrapping clustered data", JRSS B 69(3); Davison & Hinkley 1997, section 3.8), and
the paired test swaps the two programs' outcomes on a whole group at once (a cluster randomization test,
the sign-flip test of the groups' summed differences for a mean). Only groups holding a record the statistic
uses count. Fewer than `MIN_GROUPS` of them give no interval and no p-value (method `too_few_groups`): a
bootstrap over 2 or 3 episodes has no coverage to speak of (Field & Welsh 2007 section 4; Cameron, Gelbach &
Miller 2008 on few clusters), so no 95% interval is claimed.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, model_serializer
from scipy import stats as scipy_stats

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
EXACT_MAX_N = 16  # 2^16 = 65,536 assignments: cheap to enumerate
MIN_GROUPS = 10  # fewer whole groups (episodes) give "too few episodes": no interval, no p-value, no verdict
TOO_FEW_GROUPS = "too_few_groups"
BCA_MAX_N = 2_000  # above it, percentile intervals: BCa's jackknife costs n^2 (module docstring)
PERMUTATIONS = 9999
# Rows of W built at once: bounds memory to about this many floats whatever the record count (a draw's indices, its
# counts and its weights are each one such block). The draws do not depend on it: NumPy's generator gives the same
# numbers in one block or in several.
CHUNK_CELLS = 1_000_000


class Statistic:
    """A statistic of record weights `W` (B, n) -> (B,), with `n` the records it is computed on.

    `factory(*columns, **options)` rebuilt it; a paired permutation test rebuilds it on the
    concatenated columns of two programs (`paired_on`). `active` marks the records whose weight can
    change the value (None: every record); a paired test permutes only those.
    """

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], n: int,
                 factory: Optional[Callable[..., "Statistic"]] = None, columns: tuple = (),
                 options: Optional[dict] = None, active: Optional[np.ndarray] = None,
                 linear: Optional[tuple[np.ndarray, np.ndarray]] = None):
        self._fn = fn
        # (x, m) when the statistic is (W @ x) / (W @ m) (a mean, a ratio): a permutation test then needs two
        # products per assignment instead of the statistic of 2n weights twice (`permutation_p`)
        self.linear = linear
        self.n = int(n)
        self.factory, self.columns, self.options = factory, columns, dict(options or {})
        self.active = None if active is None else np.asarray(active, dtype=bool)

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        """Values of the statistic for each row of weights."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(self._fn(weights), dtype=float)

    def paired_on(self, other: "Statistic") -> "Statistic":
        """The same statistic on the 2n records of both programs (this one's first), for permutations."""
        if self.factory is None or self.factory is not other.factory or self.options != other.options:
            raise ValueError("a paired permutation needs the same kind of statistic for both programs")
        joined = [np.concatenate([np.asarray(a), np.asarray(b)]) for a, b in zip(self.columns, other.columns)]
        return self.factory(*joined, **self.options)


class MetricValue(BaseModel):
    """One aggregate with its 95% interval: `{"value", "ci_low", "ci_high", "n", "method", "n_resamples"}` (and
    `estimator` where one is chosen)."""

    model_config = ConfigDict(frozen=True)

    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    n: int
    method: Optional[str] = None  # "bca", "percentile" (scipy.stats.bootstrap) or "degenerate" (no spread)
    n_resamples: Optional[int] = None
    # What estimated the per-record values, where that is a choice (the planner's cycles model: "sim", "learned")
    estimator: Optional[str] = None
    # Groups (episodes) the interval resampled; None when records were resampled one by one
    n_groups: Optional[int] = None

    @classmethod
    def empty(cls) -> "MetricValue":
        """The value of a metric with no record to compute it on."""
        return cls(value=None, ci_low=None, ci_high=None, n=0)

    @model_serializer(mode="wrap")
    def _named_estimator_only(self, handler: Any) -> dict:
        """Every serialization (metrics.json, boards, MLflow) carries `estimator` only when one is named."""
        data = handler(self)
        for key in ("estimator", "n_groups"):  # named only when they apply: record shapes stay as they were
            if data.get(key) is None:
                data.pop(key, None)
        return data

    def interval_text(self) -> str:
        """How the interval was computed in words, e.g. "BCa cluster bootstrap over 24 episodes (1,000 resamples)"."""
        return describe_interval(self.method, self.n_resamples, self.n_groups)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return self.model_dump()


def too_few_text(n_groups: Optional[int]) -> str:
    """"too few episodes (4 < 10)": why a clustered statistic has no interval, p-value or verdict."""
    return f"too few episodes ({n_groups or 0} < {MIN_GROUPS})"


def describe_test(method: Optional[str], count: Optional[int] = None, n_groups: Optional[int] = None) -> str:
    """The test behind a p-value in words, e.g. "exact permutation test (8 assignments)"."""
    if method == TOO_FEW_GROUPS:
        return f"no test: {too_few_text(n_groups)}"
    units = f" over {n_groups:,} episodes" if n_groups else ""
    if method == "permutation_exact":
        return f"exact permutation test{units}" + (f" ({count:,} assignments)" if count else "")
    if method == "permutation_monte_carlo":
        return f"Monte Carlo permutation test{units}" + (f" ({count:,} assignments)" if count else "")
    if method and method.startswith("mcnemar"):
        return "McNemar's exact test"
    return method or "no test"


def describe_interval(method: Optional[str], n_resamples: Optional[int] = None,
                      n_groups: Optional[int] = None) -> str:
    """How an interval was computed in words, e.g. "BCa bootstrap (1,000 resamples)"."""
    if method == TOO_FEW_GROUPS:
        return f"no interval: {too_few_text(n_groups)}"
    if method in ("bca", "percentile"):
        name = "BCa" if method == "bca" else "percentile"
        kind = f"cluster bootstrap over {n_groups:,} episodes" if n_groups else "bootstrap"
        return f"{name} {kind}" + (f" ({n_resamples:,} resamples)" if n_resamples else "")
    if method == "degenerate":
        return "no interval (no spread)"
    return method or "no interval"


def finite_or_none(x: float) -> Optional[float]:
    """x as a float, or None when it is missing or not finite."""
    return float(x) if x is not None and math.isfinite(x) else None


# ----- statistics as functions of resampling weights -------------------------------------------

def mean_of(values: Sequence[float], mask: Optional[Sequence[bool]] = None) -> Statistic:
    """Mean of per-record values over the records in `mask` (all when None); NaN values are skipped."""
    x = np.asarray(values, dtype=float)
    m = np.isfinite(x) if mask is None else np.asarray(mask, dtype=bool) & np.isfinite(x)
    columns = (np.asarray(values, dtype=float), m.copy())
    x = np.where(m, x, 0.0)
    m = m.astype(float)

    def statistic(w: np.ndarray) -> np.ndarray:
        return (w @ x) / (w @ m)

    return Statistic(statistic, int(m.sum()), mean_of, columns, active=m > 0, linear=(x, m))


def ratio_of(numerator: Sequence[float], denominator: Sequence[float]) -> Statistic:
    """Sum of numerators over sum of denominators (a rate whose records weigh differently)."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)

    def statistic(w: np.ndarray) -> np.ndarray:
        return (w @ num) / (w @ den)

    # a record with nothing in either sum weighs nothing, whatever its weight
    return Statistic(statistic, int(np.count_nonzero(den)), ratio_of, (num, den), active=(num != 0) | (den != 0),
                     linear=(num, den))


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

    return Statistic(statistic, int(keep.sum()), macro_f1_of, (true, pred, keep), active=keep)


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

    return Statistic(statistic, int(keep.sum()), ece_of, (np.asarray(confidence, dtype=float), hit, keep),
                     {"n_bins": n_bins}, active=keep)


# ----- intervals ---------------------------------------------------------------------------------

def _weights_of(indices: np.ndarray, n: int) -> np.ndarray:
    """Rows of drawn record indices -> rows of draw counts (what a statistic of weights takes)."""
    rows = np.atleast_2d(indices).reshape(-1, np.shape(indices)[-1]).astype(int)
    offsets = (np.arange(rows.shape[0]) * n)[:, None]
    counts = np.bincount((rows + offsets).ravel(), minlength=rows.shape[0] * n)
    return counts.reshape(rows.shape[0], n).astype(float)


def group_units(groups: Sequence[Any], used: np.ndarray) -> tuple[int, np.ndarray]:
    """(number of groups holding a used record, each record's group index; 0 for a record no statistic uses).

    A record nobody uses carries no weight in the statistic, so the group it is put in does not matter."""
    labels = np.asarray([str(g) for g in groups], dtype=object)
    idx = np.nonzero(np.asarray(used, dtype=bool))[0]
    codes, inverse = np.unique(labels[idx], return_inverse=True) if len(idx) else (np.zeros(0), np.zeros(0, int))
    unit = np.zeros(len(labels), dtype=int)
    unit[idx] = inverse
    return len(codes), unit


def interval(fn: Callable[[np.ndarray], np.ndarray], n: int, value: float, *, n_resamples: int = DEFAULT_RESAMPLES,
             seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE,
             unit: Optional[np.ndarray] = None, n_units: int = 0) -> tuple[float, float, str]:
    """(low, high, method) of a statistic of record weights, by `scipy.stats.bootstrap` (BCa, else percentile).

    With `unit` (each record's group index, `group_units`) whole groups are drawn: a draw's group counts become
    the weights of the group's records (cluster bootstrap)."""
    cells = max(n, 1)
    if unit is not None:
        by_record, unit = fn, np.asarray(unit, dtype=int)
        fn = lambda w: by_record(w[:, unit])  # noqa: E731
        n = n_units
    if n < 2:
        return value, value, "degenerate"

    def statistic(indices: np.ndarray, axis: int = -1) -> np.ndarray:
        values = fn(_weights_of(indices, n))
        return values.reshape(np.shape(indices)[:-1])

    for method in ("BCa", "percentile") if n <= BCA_MAX_N else ("percentile",):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DegenerateDataWarning: BCa is undefined; fall back below
            result = scipy_stats.bootstrap((np.arange(n),), statistic, n_resamples=n_resamples, vectorized=True,
                                           batch=max(1, CHUNK_CELLS // cells), confidence_level=confidence,
                                           method=method, random_state=np.random.default_rng(seed))
        low, high = result.confidence_interval
        if math.isfinite(low) and math.isfinite(high):
            # an interval can miss a degenerate point estimate by rounding: keep the value inside
            return min(float(low), value), max(float(high), value), method.lower()
    return value, value, "degenerate"


def percentile_intervals(functions: Mapping[str, Callable[[np.ndarray], np.ndarray]], n: int, *,
                         n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                         confidence: float = CONFIDENCE) -> dict[str, tuple[float, float]]:
    """(low, high) of each statistic of the same `n` records (more than `BCA_MAX_N`: percentile intervals), from
    one set of draws: the numbers `interval` gives each one, at the cost of one.

    `interval` asks `scipy.stats.bootstrap` for each statistic with a generator seeded alike, so every statistic is
    computed on the same resampled indices; here they are drawn once (`Generator.integers`, as scipy draws them,
    in the same blocks), and each statistic's bootstrap distribution goes through `scipy.stats.quantile` as scipy's
    percentile interval does. A non-finite bound is NaN here (`interval` then says "degenerate")."""
    rng = np.random.default_rng(seed)
    batch = max(1, CHUNK_CELLS // max(n, 1))
    theta: dict[str, list[np.ndarray]] = {name: [] for name in functions}
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        weights = _weights_of(rng.integers(0, n, size=(size, n), dtype="int64"), n)
        for name, fn in functions.items():
            theta[name].append(np.asarray(fn(weights), dtype=float).reshape(size))
    tail = (1 - confidence) / 2
    bounds: dict[str, tuple[float, float]] = {}
    for name, draws in theta.items():
        sample = np.concatenate(draws)
        alpha = np.asarray(tail, dtype=sample.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            low, high = scipy_stats.quantile(sample, np.stack((alpha, 1 - alpha), axis=-1), axis=-1)
        bounds[name] = (float(low), float(high))
    return bounds


def interval_from_bounds(bounds: tuple[float, float], value: float) -> tuple[float, float, str]:
    """`interval`'s answer (low, high, method) from percentile bounds (`percentile_intervals`)."""
    low, high = bounds
    if math.isfinite(low) and math.isfinite(high):
        return min(low, value), max(high, value), "percentile"
    return value, value, "degenerate"


def used_records(statistic: Statistic, n_records: int) -> np.ndarray:
    """The records a statistic's value depends on (all of them when it does not say)."""
    if statistic.active is None or statistic.active.shape != (n_records,):
        return np.ones(n_records, dtype=bool)
    return statistic.active


def bootstrap_many(statistics: Mapping[str, Statistic], n_records: int, *,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                   confidence: float = CONFIDENCE, groups: Optional[Sequence[Any]] = None) -> dict[str, MetricValue]:
    """Point values and 95% intervals (scipy BCa, else percentile) of several statistics, same resamples.

    `groups` (one label per record, e.g. its episode): a cluster bootstrap over the groups holding the records a
    statistic uses; fewer than `MIN_GROUPS` of them give the value with no interval (`too_few_groups`)."""
    if n_records == 0:
        return {name: MetricValue.empty() for name in statistics}
    ones = np.ones((1, n_records))
    result: dict[str, MetricValue] = {}
    shared = percentile_intervals(
        {name: stat for name, stat in statistics.items() if stat.n and finite_or_none(stat(ones)[0]) is not None},
        n_records, n_resamples=n_resamples, seed=seed, confidence=confidence) \
        if groups is None and n_records > BCA_MAX_N else {}
    for name, stat in statistics.items():
        value = finite_or_none(stat(ones)[0])
        if stat.n == 0:
            result[name] = MetricValue.empty()
            continue
        n_units, unit = group_units(groups, used_records(stat, n_records)) if groups is not None else (None, None)
        if value is None:
            result[name] = MetricValue(value=None, ci_low=None, ci_high=None, n=stat.n, n_groups=n_units)
        elif n_units is not None and n_units < MIN_GROUPS:
            result[name] = MetricValue(value=value, ci_low=None, ci_high=None, n=stat.n, method=TOO_FEW_GROUPS,
                                       n_groups=n_units)
        else:
            low, high, method = interval_from_bounds(shared[name], value) if name in shared else \
                interval(stat, n_records, value, n_resamples=n_resamples, seed=seed, confidence=confidence,
                         unit=unit, n_units=n_units or 0)
            result[name] = MetricValue(value=value, ci_low=low, ci_high=high, n=stat.n, method=method,
                                       n_resamples=n_resamples, n_groups=n_units)
    return result


def bootstrap(statistic: Statistic, n_records: int, *, n_resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE) -> MetricValue:
    """Point value and 95% bootstrap interval of one statistic, resampling whole records."""
    return bootstrap_many({"_": statistic}, n_records, n_resamples=n_resamples, seed=seed,
                          confidence=confidence)["_"]


def bootstrap_mean(values: Sequence[float], *, mask: Optional[Sequence[bool]] = None,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> MetricValue:
    """Mean of per-record scores with its bootstrap interval (NaN scores are left out)."""
    return bootstrap(mean_of(values, mask), len(values), n_resamples=n_resamples, seed=seed)
