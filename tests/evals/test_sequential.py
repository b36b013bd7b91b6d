"""The confidence sequence and the sequential gate on synthetic streams of paired differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evals.sequential import confidence_sequence, more_needed, sequential_verdict, stitched_boundary


def _stream(rng: np.random.Generator, n: int, mean: float, disagree: float = 0.3) -> np.ndarray:
    """Paired differences in [-1, 1]: 0 where the programs agree, else a signed cost step, with the given mean."""
    steps = rng.choice([0.2, 0.4, 0.6, 1.0], size=n)
    sign_up = 0.5 + mean / (2 * disagree * steps.mean())
    signs = np.where(rng.random(n) < sign_up, 1.0, -1.0)
    return np.where(rng.random(n) < disagree, signs * steps, 0.0)


def test_the_boundary_is_the_papers_stitching_formula():
    # eq. (10) of Howard et al. (2021) at eta = 2, s = 1.4, m = 1: at v = m, l(m) = log(zeta(s) / alpha)
    alpha, c = 0.025, 2.0
    ell = math.log(3.1055472 / alpha)
    k1, k2 = (2 ** 0.25 + 2 ** -0.25) / math.sqrt(2), (math.sqrt(2) + 1) / 2
    assert float(stitched_boundary(1.0, alpha, c)) == pytest.approx(k1 * math.sqrt(ell) + k2 * c * ell, rel=1e-6)
    assert float(stitched_boundary(0.1, alpha, c)) == float(stitched_boundary(1.0, alpha, c))  # v below m: u(m)
    v = np.array([10.0, 100.0, 1000.0])
    assert np.all(np.diff(stitched_boundary(v, alpha, c)) > 0) and np.all(np.diff(stitched_boundary(v, alpha, c) / v) < 0)


def test_the_sequence_holds_the_mean_at_every_look_at_least_1_minus_alpha_of_the_time():
    # 300 streams of 2,000 decisions with mean 0.02: the share whose sequence ever misses the mean is below alpha
    rng = np.random.default_rng(7)
    missed = 0
    for _ in range(300):
        d = _stream(rng, 2000, 0.02)
        cs = confidence_sequence(d, alpha=0.05)
        missed += bool(np.any((cs.low > 0.02) | (cs.high < 0.02)))
    assert missed / 300 <= 0.05


def test_an_aa_stream_is_never_promoted_however_often_it_is_looked_at_while_a_fixed_n_test_is():
    rng = np.random.default_rng(1)
    sequential = fixed = 0
    looks = np.arange(50, 2001, 50)
    for _ in range(200):
        d = _stream(rng, 2000, 0.0)
        verdict, _cs = sequential_verdict(d, alpha=0.05, max_decisions=2000)
        sequential += verdict.verdict == "promote"
        mean = np.cumsum(d)[looks - 1] / looks
        sd = np.sqrt((np.cumsum(d * d)[looks - 1] - looks * mean ** 2) / (looks - 1))
        p = 2 * stats.t.sf(np.abs(mean / (sd / np.sqrt(looks))), looks - 1)  # the paired t-test at each look
        fixed += bool(np.any((p < 0.05) & (mean > 0)))
    assert sequential / 200 <= 0.05 / 2
    assert fixed / 200 > 0.05, "re-running a fixed-n test at 40 looks inflates its error (the reason for the gate)"


def test_a_better_stream_is_promoted_and_a_worse_one_rejected_at_their_first_crossing():
    rng = np.random.default_rng(3)
    better, _ = sequential_verdict(_stream(rng, 5000, 0.08), max_decisions=5000)
    worse, cs = sequential_verdict(_stream(rng, 5000, -0.08), max_decisions=5000)
    assert better.verdict == "promote" and better.low > 0 and better.decided_at < 5000
    assert worse.verdict == "reject" and worse.high < 0
    assert cs.high[worse.decided_at - 1] < 0 and np.all(cs.high[: worse.decided_at - 1] >= 0)


def test_min_effect_rejects_a_gain_too_small_to_matter():
    rng = np.random.default_rng(5)
    d = _stream(rng, 20000, 0.005, disagree=0.05)
    verdict, _ = sequential_verdict(d, min_effect=0.05, max_decisions=20000)
    assert verdict.verdict == "reject" and verdict.high < 0.05 and "minimum effect" in verdict.reason


def test_keep_shadowing_says_about_how_many_more_decisions_the_current_effect_needs():
    rng = np.random.default_rng(11)
    d = _stream(rng, 8000, 0.05)
    early, cs = sequential_verdict(d[:200], max_decisions=8000)
    assert early.verdict == "keep shadowing" and early.more_needed and "to promote" in early.reason
    # the estimate, had the difference and its variance held, crosses where it says
    mean, rate, total = float(cs.mean[-1]), float(cs.variance[-1]) / 200, 200 + early.more_needed
    radius = lambda n: float(stitched_boundary(rate * n, 0.025, 2.0)) / n  # noqa: E731
    assert radius(total) < mean <= radius(total - 1)
    flat, _ = sequential_verdict(np.zeros(300), max_decisions=1000)
    assert flat.verdict == "keep shadowing" and flat.more_needed is None and "would not reach" in flat.reason


def test_the_maximum_ends_shadowing_with_a_reject():
    verdict, _ = sequential_verdict(np.zeros(600), max_decisions=500)
    assert (verdict.verdict, verdict.n, verdict.decided_at) == ("reject", 500, 500)
    assert "maximum of 500" in verdict.reason


def test_bad_streams_and_settings_are_refused():
    with pytest.raises(ValueError):
        confidence_sequence([0.5, 1.5])
    with pytest.raises(ValueError):
        confidence_sequence([0.0, math.nan])
    with pytest.raises(ValueError):
        sequential_verdict([0.1], min_effect=-0.1)
    empty, cs = sequential_verdict([])
    assert empty.verdict == "keep shadowing" and cs.n == 0
    assert more_needed(cs, 0.0, 10) == (None, "no labeled decision yet")
