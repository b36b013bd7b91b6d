"""A post-mortem's tests when records come in clusters: a planner's attempts share their episode's kernel and
history, so records of one episode are not independent, and a test that swaps them one by one finds "slices" that
are only a few unlucky episodes (its p-values are too small). Each slice's test against the rest here takes the
episode as its unit, as `evals.stats` does for intervals and `evals.paired` for paired tests.

- A slice made of whole episodes (an episode itself, pooled small episodes, a slice whose value is constant within
  each episode): a permutation test of the episodes. Under the null the slice's episodes are a random draw of that
  many from the episodes, so the episodes' score sums and record counts are permuted together and the slice's mean
  minus the rest's recomputed; p = (1 + #{permuted <= observed}) / (1 + B), one-sided (below the rest). With G
  episodes no p is below 1 / G.
- A slice that cuts across episodes (a family, a stage of the episode): the difference of means with a
  cluster-robust (CR1) standard error by episode (Liang & Zeger 1986) against Student's t with G - 1 degrees of
  freedom (Cameron & Miller 2015), one-sided. It needs the slice's records in two episodes or more: the standard
  error of a slice inside one episode cannot see how episodes differ.

Both need `evals.stats.MIN_GROUPS` episodes with a scored record; fewer, and nothing is tested by episode.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy import sparse
from scipy import stats as scipy_stats

from .slice_tests import Tick
from .stats import MIN_GROUPS, PERMUTATIONS

_CHUNK_CELLS = 2_000_000


def cluster_codes(labels: Sequence[str]) -> np.ndarray:
    """Each record's cluster as an integer code (0 .. G - 1)."""
    _, codes = np.unique(np.asarray([str(label) for label in labels], dtype=object), return_inverse=True)
    return codes.astype(np.int64)


def _by_cluster(codes: np.ndarray) -> sparse.csr_matrix:
    """The (records x clusters) 0/1 matrix."""
    n = len(codes)
    return sparse.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, int(codes.max()) + 1 if n else 0))


def why_untested(inside: np.ndarray, codes: np.ndarray) -> str:
    """Why a slice (mask over the scored records) cannot be tested by episode, "" when it can."""
    episodes = len(np.unique(codes))
    if episodes < MIN_GROUPS:
        return f"{episodes} episode(s) with a scored record, fewer than {MIN_GROUPS}: not tested by episode"
    touched = np.unique(codes[inside])
    whole = not np.isin(codes, touched)[~inside].any()
    if not whole and len(touched) < 2:
        return "its records lie in one episode, which is tested as a group"
    return ""


def below_rest_p_by_cluster(scores: np.ndarray, members: sparse.spmatrix, codes: np.ndarray, *, seed: int = 0,
                            permutations: int = PERMUTATIONS, tick: Optional[Tick] = None) -> np.ndarray:
    """One-sided p-value per column of `members` (records x tests, bool) that the slice's mean is below the rest's,
    with the records' clusters `codes` as the unit (see the module)."""
    x = np.asarray(scores, dtype=float)
    m = sparse.csr_matrix(members.T, dtype=float)  # tests x records
    c = _by_cluster(codes)
    sums, counts = np.asarray(c.T @ x).ravel(), np.asarray(c.sum(axis=0)).ravel()
    inside_counts = (m @ c).toarray()  # tests x clusters: records of the slice in each cluster
    whole = np.all((inside_counts == 0) | (inside_counts == counts[None, :]), axis=1)
    p = np.full(m.shape[0], np.nan)
    if whole.any():
        chosen = sparse.csr_matrix((inside_counts[whole] > 0).astype(float))
        p[whole] = _permuted_clusters(chosen, sums, counts, seed, permutations, tick)
    if (~whole).any():
        p[~whole] = _cluster_robust(m[np.flatnonzero(~whole)], x, c, sums, counts)
    return p


def _difference(inside_sum: np.ndarray, inside_n: np.ndarray, total: float, n: float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return inside_sum / inside_n - (total - inside_sum) / (n - inside_n)


def _permuted_clusters(chosen: sparse.csr_matrix, sums: np.ndarray, counts: np.ndarray, seed: int,
                       permutations: int, tick: Optional[Tick]) -> np.ndarray:
    """Permutation p-values of slices made of whole clusters (`chosen`: tests x clusters)."""
    total, n = float(sums.sum()), float(counts.sum())
    observed = _difference(chosen @ sums, chosen @ counts, total, n)
    threshold = (observed + 1e-9 * np.maximum(1.0, np.abs(observed)))[:, None]
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // max(len(sums), 1))
    hits, done = np.zeros(chosen.shape[0]), 0
    while done < permutations:
        size = min(rows, permutations - done)
        order = rng.permuted(np.broadcast_to(np.arange(len(sums)), (size, len(sums))), axis=1)
        drawn = _difference(chosen @ sums[order].T, chosen @ counts[order].T, total, n)
        hits += np.count_nonzero(drawn <= threshold, axis=1)
        done += size
        if tick is not None:
            tick(size)
    return (hits + 1.0) / (permutations + 1.0)


def _cluster_robust(m: sparse.csr_matrix, x: np.ndarray, c: sparse.csr_matrix, sums: np.ndarray,
                    counts: np.ndarray) -> np.ndarray:
    """One-sided p-values of the difference of means (slice - rest) with a CR1 standard error by cluster, t(G - 1).

    Each cluster's score of the difference is s_g = sum over its records of (x_i - m1) / n1 inside the slice and
    -(x_i - m0) / n0 outside; Var = G / (G - 1) sum_g s_g^2."""
    n1 = np.asarray(m.sum(axis=1)).ravel()
    n0 = len(x) - n1
    m1 = (m @ x) / n1
    m0 = (x.sum() - m @ x) / n0
    in_x = (m.multiply(x[None, :]) @ c).toarray()
    in_n = (m @ c).toarray()
    s = (in_x * (1 / n1 + 1 / n0)[:, None] - in_n * (m1 / n1 + m0 / n0)[:, None]
         - (sums[None, :] - m0[:, None] * counts[None, :]) / n0[:, None])
    g = len(sums)
    se = np.sqrt(g / (g - 1) * (s ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (m1 - m0) / se
    p = scipy_stats.t.cdf(t, df=g - 1)
    return np.where(se > 0, p, np.nan)  # no spread at all: nothing to test against


__all__ = ["below_rest_p_by_cluster", "cluster_codes", "why_untested"]
