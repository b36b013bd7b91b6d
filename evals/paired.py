"""Paired tests of two programs on the same records: the difference of a statistic with its interval and a
paired permutation p-value (`paired_many`, `paired_comparison`, `paired_mean_difference`), and McNemar's test of
paired correctness (`mcnemar`).

The p-value is a paired permutation test of the records' assignments. Under the null the two programs are exchangeable on each record, so every record's pair of outcomes may be swapped: the
statistic of both programs is evaluated on the 2n records of the pair with weights
`[1 - s, s]` and `[s, 1 - s]` for an assignment `s`. For a mean this is the sign-flip test of
the per-record differences; for macro-F1 or ECE it permutes which program each record's outcome
belongs to. Only the records the comparison uses are permuted (a record masked out of both
programs' statistic, e.g. one without a label, is left where it is), and their count decides the
procedure: exact enumeration of all 2^n assignments up to `EXACT_MAX_N` records, Monte Carlo with
`PERMUTATIONS` seeded assignments above it (p = (hits + 1) / (draws + 1)). With 3 records the
smallest two-sided p is 2/8 = 0.25: no test here claims more than the data can show.
`tests/evals/test_paired.py` checks the permutation p-values against `scipy.stats.permutation_test`.

Clustered records (`groups=`) swap whole groups at once (`evals.stats` says why and when there are too few).
The differences' intervals are `evals.stats`' bootstrap of the same statistics.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, model_serializer
from scipy import stats as scipy_stats

from .stats import (BCA_MAX_N, CHUNK_CELLS, CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, EXACT_MAX_N, MIN_GROUPS,
                    PERMUTATIONS, TOO_FEW_GROUPS, Statistic, bootstrap, describe_interval, describe_test,
                    finite_or_none, group_units, interval, interval_from_bounds, mean_of, percentile_intervals,
                    used_records)


class PairedComparison(BaseModel):
    """Difference a - b of one metric on the same records, with its interval and p-value.

    `method` names the test of the p-value (`permutation_exact` with 2^n assignments,
    `permutation_monte_carlo` with `n_permutations`, or `mcnemar_exact`), `ci_method` the interval's.
    """

    model_config = ConfigDict(frozen=True)

    diff: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    p_value: Optional[float]
    n: int
    method: str = "permutation_exact"
    n_permutations: Optional[int] = None
    ci_method: Optional[str] = None
    n_resamples: Optional[int] = None
    # Groups (episodes) swapped and resampled as units; None when the records were the units
    n_groups: Optional[int] = None
    # a's and b's statistic on the records the difference compares (diff = value_a - value_b): for a planner's
    # means, the records both score, which need not be all the records either program scores on its own
    value_a: Optional[float] = None
    value_b: Optional[float] = None

    @model_serializer(mode="wrap")
    def _groups_only_whenused_records(self, handler: Any) -> dict:
        data = handler(self)
        if data.get("n_groups") is None:
            data.pop("n_groups", None)
        return data

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return self.model_dump()

    def describe(self) -> str:
        """Test and interval method in words, e.g. "exact permutation test (8 assignments); 95% CI: BCa bootstrap"."""
        if self.method == TOO_FEW_GROUPS:
            return describe_test(self.method, None, self.n_groups)
        return (f"{describe_test(self.method, self.n_permutations, self.n_groups)}; "
                f"95% CI: {describe_interval(self.ci_method, self.n_resamples, self.n_groups)}")


class McNemarResult(BaseModel):
    """McNemar's test on paired correctness: discordant counts, exact and continuity-corrected p."""

    model_config = ConfigDict(frozen=True)

    a_only: int
    b_only: int
    n: int
    p_exact: float
    p_continuity: float
    statistic: float


# ----- paired permutation tests --------------------------------------------------------------------

def _assignments(n: int, active: np.ndarray, seed: int, permutations: int, unit: Optional[np.ndarray] = None,
                 spread_bits: bool = True):
    """Chunks of swap assignments s (rows of 0/1 over n records) that swap only the `active` record indices:
    all 2^m of them when m <= EXACT_MAX_N, else `permutations` seeded random ones. m is the number of active
    records, or with `unit` (the group index of each active record) the number of groups: a group's records
    are swapped together (`spread_bits` False: the same chunks as rows of 0/1 over the active records only)."""
    m = len(active) if unit is None else (int(unit.max()) + 1 if len(unit) else 0)
    rows = max(1, CHUNK_CELLS // max(2 * n, 1))

    def spread(bits: np.ndarray) -> np.ndarray:
        over_active = bits if unit is None else bits[:, unit]
        if not spread_bits or (unit is None and m == n):  # the bits are the assignment
            return over_active
        swap = np.zeros((bits.shape[0], n))
        swap[:, active] = over_active
        return swap

    if m <= EXACT_MAX_N:
        codes = np.arange(2 ** m)
        for start in range(0, codes.size, rows):
            chunk = codes[start:start + rows]
            yield spread(((chunk[:, None] >> np.arange(m)) & 1).astype(float))
        return
    rng = np.random.default_rng(seed)
    done = 0
    while done < permutations:
        size = min(rows, permutations - done)
        yield spread(rng.integers(0, 2, size=(size, m)).astype(float))
        done += size


def permutation_p(joined: Statistic, n: int, observed: float, *, seed: int = DEFAULT_SEED,
                  permutations: int = PERMUTATIONS, active: Optional[Sequence[bool]] = None,
                  unit: Optional[np.ndarray] = None) -> tuple[Optional[float], str, int]:
    """Two-sided p of `observed` = stat(a) - stat(b) under swaps of each record's pair of outcomes.

    `joined` is the statistic on the 2n records (a's then b's); only the records marked in `active`
    (all when None) are swapped, and their count m decides exact (2^m assignments) or Monte Carlo. With `unit`
    (each record's group index, `group_units`) the groups are swapped whole and m counts the groups.
    Returns (p, method, assignments).
    """
    indices = np.arange(n) if active is None else np.nonzero(np.asarray(active, dtype=bool))[0]
    of_active = None if unit is None else np.asarray(unit, dtype=int)[indices]
    m = len(indices) if of_active is None else (int(of_active.max()) + 1 if len(of_active) else 0)
    exact = m <= EXACT_MAX_N
    method, count = ("permutation_exact", 2 ** m) if exact else ("permutation_monte_carlo", permutations)
    if observed == 0:
        return 1.0, method, count  # every assignment is at least as far from 0: no need to enumerate them
    hits = total = 0
    tolerance = 1e-12 * max(1.0, abs(observed))
    swapped = _linear_swaps(joined, n, indices)
    for swap in _assignments(n, indices, seed, permutations, of_active, spread_bits=swapped is None):
        with np.errstate(invalid="ignore", divide="ignore"):
            diff = swapped(swap) if swapped is not None else \
                joined(np.hstack([1.0 - swap, swap])) - joined(np.hstack([swap, 1.0 - swap]))
        finite = np.isfinite(diff)
        hits += int(np.count_nonzero(np.abs(diff[finite]) >= abs(observed) - tolerance))
        total += int(finite.sum())
    if total == 0:
        return None, method, 0
    if exact:
        return min(1.0, hits / total), method, count
    # the observed assignment counts once more (it is a permutation that was not drawn on purpose)
    return min(1.0, (hits + 1) / (total + 1)), method, count


def on_common_records(a: Statistic, b: Statistic) -> tuple[Statistic, Statistic]:
    """Two means restricted to the records both score (other statistics as they are): a paired difference of
    means then compares like with like, never one program's mean over records the other left out."""
    if a.factory is not mean_of or b.factory is not mean_of:
        return a, b
    both = np.asarray(a.columns[1], dtype=bool) & np.asarray(b.columns[1], dtype=bool)
    return mean_of(a.columns[0], both), mean_of(b.columns[0], both)


def permutation_ps(tests: Mapping[str, tuple[Statistic, float, Optional[np.ndarray]]], n: int, *,
                   seed: int = DEFAULT_SEED,
                   permutations: int = PERMUTATIONS) -> dict[str, tuple[Optional[float], str, int]]:
    """`permutation_p` of several tests `name: (joined statistic, observed, active)` of the same n record pairs
    (records swapped one by one): the same p-values, with the Monte Carlo tests of means and ratios that swap the
    same records computed together, on one set of seeded assignments (each test drew the same ones alone)."""
    batches: dict[bytes, list[str]] = {}
    parts: dict[str, tuple[np.ndarray, np.ndarray, tuple[float, float, float, float]]] = {}
    result: dict[str, tuple[Optional[float], str, int]] = {}
    for name, (joined, observed, active) in tests.items():
        indices = np.arange(n) if active is None else np.nonzero(np.asarray(active, dtype=bool))[0]
        linear = _linear_parts(joined, n, indices)
        if linear is None or len(indices) <= EXACT_MAX_N or observed == 0:
            result[name] = permutation_p(joined, n, observed, seed=seed, permutations=permutations, active=active)
            continue
        parts[name] = linear
        batches.setdefault(indices.tobytes(), []).append(name)
    for names in batches.values():
        indices = np.nonzero(np.asarray(tests[names[0]][2], dtype=bool))[0] if tests[names[0]][2] is not None \
            else np.arange(n)
        dx = np.column_stack([parts[name][0] for name in names])
        dm = np.column_stack([parts[name][1] for name in names])
        sums = np.asarray([parts[name][2] for name in names]).T  # four rows: sum x_a, x_b, m_a, m_b
        observed = np.abs(np.asarray([tests[name][1] for name in names], dtype=float))
        threshold = observed - 1e-12 * np.maximum(1.0, observed)
        hits, total = np.zeros(len(names), dtype=np.int64), np.zeros(len(names), dtype=np.int64)
        for bits in _assignments(n, indices, seed, permutations, None, spread_bits=False):
            t, u = bits @ dx, bits @ dm
            with np.errstate(invalid="ignore", divide="ignore"):
                diff = (sums[0] + t) / (sums[2] + u) - (sums[1] - t) / (sums[3] - u)
            finite = np.isfinite(diff)
            hits += np.count_nonzero(finite & (np.abs(np.where(finite, diff, 0.0)) >= threshold), axis=0)
            total += np.count_nonzero(finite, axis=0)
        for name, found, drawn in zip(names, hits.tolist(), total.tolist()):
            p_value = None if drawn == 0 else min(1.0, (found + 1) / (drawn + 1))
            result[name] = (p_value, "permutation_monte_carlo", permutations) if drawn else \
                (None, "permutation_monte_carlo", 0)
    return {name: result[name] for name in tests}


def _linear_parts(joined: Statistic, n: int,
                  active: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray, tuple[float, float, float, float]]]:
    """(x_b - x_a, m_b - m_a over the active records, (sum x_a, sum x_b, sum m_a, sum m_b)) of a (W @ x) / (W @ m)
    statistic on 2n records (a's first); None for any other statistic."""
    if joined.linear is None:
        return None
    x, m = (np.asarray(column, dtype=float) for column in joined.linear)
    if x.shape != (2 * n,) or m.shape != (2 * n,):
        return None
    xa, xb, ma, mb = x[:n], x[n:], m[:n], m[n:]
    return (xb - xa)[active], (mb - ma)[active], (xa.sum(), xb.sum(), ma.sum(), mb.sum())


def _linear_swaps(joined: Statistic, n: int, active: np.ndarray) -> Optional[Callable[[np.ndarray], np.ndarray]]:
    """For a (W @ x) / (W @ m) statistic: stat(a) - stat(b) of swap rows over the active records, by products.

    With a's columns first, weights [1 - s, s] give sum(x_a) + s @ (x_b - x_a) over sum(m_a) + s @ (m_b - m_a), and
    [s, 1 - s] the mirror: the same numbers as the statistic of the 2n weights (to rounding), at two products of
    the active records per assignment. None for any other statistic.
    """
    parts = _linear_parts(joined, n, active)
    if parts is None:
        return None
    dx, dm, sums = parts

    def diff(bits: np.ndarray) -> np.ndarray:
        t, u = bits @ dx, bits @ dm
        return (sums[0] + t) / (sums[2] + u) - (sums[1] - t) / (sums[3] - u)

    return diff


def paired_many(statistics_a: Mapping[str, Statistic], statistics_b: Mapping[str, Statistic], n_records: int, *,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                confidence: float = CONFIDENCE, permutations: int = PERMUTATIONS,
                groups: Optional[Sequence[Any]] = None, common: bool = False) -> dict[str, PairedComparison]:
    """Differences a - b of every statistic present in both mappings, on the same records.

    p-value: paired permutation test (module docstring) of the records either statistic uses;
    interval: scipy bootstrap of the difference, both programs resampled with the same records.
    `groups`: groups (episodes) are the unit of both, and fewer than `MIN_GROUPS` give neither;
    `common`: means are compared on the records both score (`on_common_records`).
    """
    names = [name for name in statistics_a if name in statistics_b]
    result: dict[str, PairedComparison] = {}
    ones = np.ones((1, n_records))
    # Records resampled one by one above BCA_MAX_N: every difference's percentile interval from one set of draws,
    # after the tests (`percentile_intervals`; the same numbers as `interval` of each).
    deferred: dict[str, tuple[Callable[[np.ndarray], np.ndarray], dict[str, Any]]] = {}
    tested: dict[str, tuple[Statistic, Statistic, float, int, np.ndarray, Optional[int], Optional[np.ndarray],
                            dict[str, Optional[float]]]] = {}
    for name in names:
        a, b = statistics_a[name], statistics_b[name]
        if common:
            a, b = on_common_records(a, b)
        n = min(a.n, b.n) if n_records else 0
        point_a, point_b = (float(a(ones)[0]), float(b(ones)[0])) if n else (float("nan"), float("nan"))
        diff = finite_or_none(point_a - point_b) if n else None
        values = dict(value_a=finite_or_none(point_a), value_b=finite_or_none(point_b))
        used = used_records(a, n_records) | used_records(b, n_records)
        n_units, unit = group_units(groups, used) if groups is not None and n_records else (None, None)
        if diff is None:
            result[name] = PairedComparison(diff=None, ci_low=None, ci_high=None, p_value=None, n=n, n_groups=n_units,
                                            **values)
            continue
        if n_units is not None and n_units < MIN_GROUPS:
            result[name] = PairedComparison(diff=diff, ci_low=None, ci_high=None, p_value=None, n=n,
                                            method=TOO_FEW_GROUPS, n_groups=n_units, **values)
            continue
        tested[name] = (a, b, diff, n, used, n_units, unit, values)
    # records swapped one by one: the tests of means that swap the same records share their assignments
    p_values = permutation_ps({name: (a.paired_on(b), diff, used) for name, (a, b, diff, _, used, _, unit, _)
                               in tested.items() if unit is None}, n_records, seed=seed, permutations=permutations)
    for name, (a, b, diff, n, used, n_units, unit, values) in tested.items():
        p_value, method, count = p_values[name] if name in p_values else \
            permutation_p(a.paired_on(b), n_records, diff, seed=seed, permutations=permutations, active=used,
                          unit=unit)
        difference = lambda w, a=a, b=b: a(w) - b(w)  # noqa: E731
        fields = dict(diff=diff, p_value=p_value, n=n, method=method, n_permutations=count, n_resamples=n_resamples,
                      n_groups=n_units, **values)
        if unit is None and n_records > BCA_MAX_N:
            deferred[name] = (difference, fields)
            continue
        low, high, ci_method = interval(difference, n_records, diff, n_resamples=n_resamples, seed=seed,
                                        confidence=confidence, unit=unit, n_units=n_units or 0)
        result[name] = PairedComparison(ci_low=low, ci_high=high, ci_method=ci_method, **fields)
    bounds = percentile_intervals({name: fn for name, (fn, _) in deferred.items()}, n_records,
                                  n_resamples=n_resamples, seed=seed, confidence=confidence) if deferred else {}
    for name, (_, fields) in deferred.items():
        low, high, ci_method = interval_from_bounds(bounds[name], fields["diff"])
        result[name] = PairedComparison(ci_low=low, ci_high=high, ci_method=ci_method, **fields)
    return {name: result[name] for name in names}


def paired_comparison(statistic_a: Statistic, statistic_b: Statistic, n_records: int, *,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                confidence: float = CONFIDENCE, groups: Optional[Sequence[Any]] = None) -> PairedComparison:
    """Difference a - b of one statistic on the same records, with interval and p-value (see paired_many)."""
    return paired_many({"_": statistic_a}, {"_": statistic_b}, n_records, n_resamples=n_resamples, seed=seed,
                       confidence=confidence, groups=groups)["_"]


# The earlier name, from when the p-value came from a bootstrap; the test is a permutation test now.
paired_bootstrap = paired_comparison


def paired_mean_difference(a: Sequence[float], b: Sequence[float], **kwargs) -> PairedComparison:
    """Paired test of the means of two per-record score columns on the same records."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired scores need the same records: {x.shape} vs {y.shape}")
    both = np.isfinite(x) & np.isfinite(y)
    return paired_comparison(mean_of(x, both), mean_of(y, both), len(x), **kwargs)


def min_records_for(alpha: float) -> int:
    """The fewest paired records whose exact two-sided sign-flip test can reach p < alpha (2 / 2^n < alpha)."""
    n = 1
    while 2.0 / 2 ** n >= alpha:
        n += 1
    return n


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
