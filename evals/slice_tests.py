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
from typing import Callable, Hashable, Iterator, Mapping, Optional, Sequence

import numpy as np
from scipy import sparse
from scipy import stats as scipy_stats

from . import tasks
from .stats import CONFIDENCE, PERMUTATIONS, MetricValue, Statistic

FDR = 0.05
FENCE_IQRS = 3.0
_CHUNK_CELLS = 2_000_000  # permuted scores held at once
Tick = Callable[[int], None]  # told how many draws (permutations, resamples) one chunk has done: a progress bar


def membership(masks: Sequence[np.ndarray], n_records: int) -> sparse.csr_matrix:
    """The (slices x records) 0/1 matrix of boolean masks over `n_records` records, sparse: a post-mortem's
    slices, pairs and groups hold a few records each, and their count grows with the records (one group per
    thread), so a dense matrix would grow with the square of the records."""
    return _sparse_rows([(where, np.ones(len(where))) for where in (np.flatnonzero(mask) for mask in masks)],
                        n_records)


def _slices_by_records(members: "np.ndarray | sparse.spmatrix", n_records: int) -> sparse.csr_matrix:
    """`members` (records x slices, bool; dense or sparse) as a sparse (slices x records) float matrix."""
    if sparse.issparse(members):
        return sparse.csr_matrix(members.T, dtype=float)  # scipy's own transpose: (records x slices) given
    return sparse.csr_matrix(np.asarray(members, dtype=bool).reshape(n_records, -1).T, dtype=float)


def below_rest_p(scores: Sequence[float], members: "np.ndarray | sparse.spmatrix", *, seed: int = 0,
                 permutations: int = PERMUTATIONS, tick: Optional[Tick] = None) -> np.ndarray:
    """One-sided permutation p-value per column of `members` (records x slices, bool, dense or sparse) that the
    slice's mean score is below the rest's; NaN for a slice that is empty or holds every record.

    Each permutation's slice sums are a sparse product: its cost is the memberships (records x slices they are
    in), not records x slices."""
    x = np.asarray(scores, dtype=float)
    m = _slices_by_records(members, len(x))
    sizes = np.asarray(m.sum(axis=1)).ravel()
    testable = (sizes > 0) & (sizes < len(x))
    p = np.full(m.shape[0], np.nan)
    if not testable.any() or len(x) < 2:
        return p
    observed = m @ x
    threshold = (observed + 1e-9 * np.maximum(1.0, np.abs(observed)))[:, None]
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // len(x))
    hits = np.zeros(m.shape[0])
    done = 0
    while done < permutations:
        size = min(rows, permutations - done)
        permuted = rng.permuted(np.broadcast_to(x, (size, len(x))), axis=1)
        hits += np.count_nonzero(m @ np.ascontiguousarray(permuted.T) <= threshold, axis=1)
        done += size
        if tick is not None:
            tick(size)
    p[testable] = (hits[testable] + 1.0) / (permutations + 1.0)
    return p


class _Linear:
    """Statistics of the form (W @ x) / (W @ m) (means, ratios), evaluated together: two sparse products per draw
    for all of them instead of two dense ones each."""

    def __init__(self, keys: list[Hashable], numerators: sparse.csr_matrix, denominators: sparse.csr_matrix):
        self.keys, self.numerators, self.denominators = keys, numerators, denominators

    @classmethod
    def of(cls, statistics: Mapping[Hashable, Statistic], n_records: int) -> "_Linear":
        keys = [key for key, stat in statistics.items() if stat.linear is not None
                and all(np.shape(column) == (n_records,) for column in stat.linear)]
        columns = [[np.asarray(statistics[key].linear[i], dtype=float) for key in keys] for i in (0, 1)]
        return cls(keys, *(_stacked(part, n_records) for part in columns))

    def draws(self, weights: np.ndarray) -> Iterator[tuple[Hashable, np.ndarray]]:
        """(key, the statistic of every row of weights) for each statistic."""
        by_record = np.ascontiguousarray(weights.T)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = (self.numerators @ by_record) / (self.denominators @ by_record)
        return zip(self.keys, values)


def _stacked(columns: Sequence[np.ndarray], n_records: int) -> sparse.csr_matrix:
    """Columns over the records as the rows of a sparse matrix (zeros left out: they add nothing to a sum)."""
    return _sparse_rows([_nonzero(np.asarray(column, dtype=float)) for column in columns], n_records)


def _nonzero(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    where = np.flatnonzero(column)
    return where, column[where]


def _sparse_rows(rows: Sequence[tuple[np.ndarray, np.ndarray]], n_records: int) -> sparse.csr_matrix:
    """(indices, values) of each row as a sparse (rows x records) matrix."""
    if not rows:
        return sparse.csr_matrix((0, n_records))
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(where) for where, _ in rows], out=indptr[1:])
    return sparse.csr_matrix((np.concatenate([data for _, data in rows]), np.concatenate([where for where, _ in rows]),
                              indptr), shape=(len(rows), n_records))


def _resamples(n_records: int, n_resamples: int, seed: int, tick: Optional[Tick] = None,
               units: Optional[np.ndarray] = None) -> Iterator[np.ndarray]:
    """Chunks of bootstrap draws of the whole record set as rows of draw counts (seeded; the same chunks for
    every caller with the same records, resamples and seed); `tick` is told each chunk's size once it is used.
    `units` (each record's cluster code, 0 .. G - 1): whole clusters are drawn, each record weighted by its
    cluster's draw count (cluster bootstrap)."""
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // max(n_records, 1))
    drawn = _drawn(n_records, units)
    done = 0
    while n_records and done < n_resamples:
        size = min(rows, n_resamples - done)
        counts = rng.multinomial(drawn, np.full(drawn, 1.0 / drawn), size=size).astype(float)
        yield counts if units is None else counts[:, units]
        done += size
        if tick is not None:
            tick(size)


def _resample_states(n_records: int, n_resamples: int, seed: int,
                     units: Optional[np.ndarray] = None) -> list[tuple[dict, int]]:
    """(generator state, size) at the start of each chunk `_resamples` yields: the draws are one seeded stream, so
    it is walked here, in order, and each task draws its own chunk again from where the stream was."""
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // max(n_records, 1))
    drawn = _drawn(n_records, units)
    states, done = [], 0
    while n_records and done < n_resamples:
        size = min(rows, n_resamples - done)
        states.append((rng.bit_generator.state, size))
        rng.multinomial(drawn, np.full(drawn, 1.0 / drawn), size=size)
        done += size
    return states


def _drawn(n_records: int, units: Optional[np.ndarray]) -> int:
    """How many things one resample draws: the records, or the clusters when `units` codes them."""
    return n_records if units is None else int(np.max(units)) + 1 if n_records else 0


class _ChunkDraws:
    """One cluster task of `mean_intervals`: a chunk of resamples, drawn as `_resamples` draws it, and every
    statistic's values on it (in `linear.keys` order)."""

    def __init__(self, linear: "_Linear", n_records: int, units: Optional[np.ndarray] = None) -> None:
        self.linear, self.n_records, self.units = linear, n_records, units

    def __call__(self, chunk: tuple[dict, int]) -> list[np.ndarray]:
        state, size = chunk
        rng = np.random.default_rng()
        rng.bit_generator.state = state
        drawn = _drawn(self.n_records, self.units)
        counts = rng.multinomial(drawn, np.full(drawn, 1.0 / drawn), size=size).astype(float)
        weights = counts if self.units is None else counts[:, self.units]
        return [values for _, values in self.linear.draws(weights)]


def shared_intervals(statistics: Mapping[Hashable, Statistic], n_records: int, *, n_resamples: int = 1000,
                     seed: int = 0, confidence: float = CONFIDENCE) -> dict[Hashable, MetricValue]:
    """Point value and percentile bootstrap interval of every statistic, all from the same resamples."""
    ones = np.ones((1, n_records))
    linear = _Linear.of(statistics, n_records)
    batched = set(linear.keys)
    others = {key: stat for key, stat in statistics.items() if key not in batched}
    draws: dict[Hashable, list[np.ndarray]] = {key: [] for key in statistics}
    for weights in _resamples(n_records, n_resamples, seed):
        for key, values in linear.draws(weights):
            draws[key].append(values)
        for key, stat in others.items():
            draws[key].append(stat(weights))
    result: dict[Hashable, MetricValue] = {}
    for key, stat in statistics.items():
        value = float(stat(ones)[0]) if n_records else math.nan
        result[key] = _percentile(value, stat.n, draws[key], n_resamples, confidence)
    return result


def mean_intervals(columns: Mapping[str, np.ndarray], entries: Mapping[Hashable, tuple[str, np.ndarray]],
                   n_records: int, *, n_resamples: int = 1000, seed: int = 0,
                   confidence: float = CONFIDENCE, tick: Optional[Tick] = None,
                   units: Optional[np.ndarray] = None) -> dict[Hashable, MetricValue]:
    """`shared_intervals` of `mean_of(columns[name], mask)` for every entry `key: (name, mask)`, with the same
    values, without a statistic (four columns over every record) per entry: a post-mortem has one per slice value,
    pair, group and metric. `units`: each record's cluster code, drawn whole (`_resamples`)."""
    ones = np.ones((1, n_records))
    finite = {name: np.isfinite(np.asarray(column, dtype=float)) for name, column in columns.items()}
    values: dict[Hashable, float] = {}
    counts: dict[Hashable, int] = {}
    numerators, denominators = [], []
    for key, (name, mask) in entries.items():
        m = np.asarray(mask, dtype=bool) & finite[name]
        x = np.where(m, np.asarray(columns[name], dtype=float), 0.0)
        weight = m.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            values[key] = float(((ones @ x) / (ones @ weight))[0]) if n_records else math.nan
        counts[key] = int(weight.sum())
        numerators.append(_nonzero(x))  # sparse at once: a dense column per entry would grow with records^2
        denominators.append(_nonzero(weight))
    linear = _Linear(list(entries), _sparse_rows(numerators, n_records), _sparse_rows(denominators, n_records))
    draws: dict[Hashable, list[np.ndarray]] = {key: [] for key in entries}
    if tasks.distributed() and n_records:  # a cluster's tasks: each chunk of resamples drawn and applied there
        chunks = _resample_states(n_records, n_resamples, seed, units)
        for part in tasks.task_map(_ChunkDraws(linear, n_records, units), chunks):
            for key, drawn in zip(linear.keys, part):
                draws[key].append(drawn)
        if tick is not None:
            tick(n_resamples)
    else:
        for weights in _resamples(n_records, n_resamples, seed, tick, units):
            for key, drawn in linear.draws(weights):
                draws[key].append(drawn)
    return {key: _percentile(values[key], counts[key], draws[key], n_resamples, confidence) for key in entries}


def _percentile(value: float, n: int, draws: list[np.ndarray], n_resamples: int,
                confidence: float) -> MetricValue:
    """The MetricValue of a statistic's point value and its bootstrap draws (percentile interval)."""
    if n == 0 or not math.isfinite(value):
        return MetricValue.empty() if n == 0 else MetricValue(value=None, ci_low=None, ci_high=None, n=n)
    sample = np.concatenate(draws) if draws else np.array([])
    sample = sample[np.isfinite(sample)]  # a resample without one of the slice's records has no value
    if n < 2 or sample.size == 0 or np.ptp(sample) == 0:
        return MetricValue(value=value, ci_low=value, ci_high=value, n=n, method="degenerate",
                           n_resamples=n_resamples)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(sample, [tail, 100 - tail])
    return MetricValue(value=value, ci_low=min(float(low), value), ci_high=max(float(high), value), n=n,
                       method="percentile", n_resamples=n_resamples)


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
