"""The post-mortem's tests: the slice-against-the-rest p-value, Benjamini-Hochberg, the cost fence and the
shared bootstrap intervals, checked against SciPy and against hand computations."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from evals.slice_tests import below_rest_p, benjamini_hochberg, cost_fence, shared_intervals
from evals.stats import mean_of


def test_below_rest_p_agrees_with_scipys_permutation_test():
    rng = np.random.default_rng(3)
    scores = rng.choice([0.0, 0.5, 1.0], size=40, p=[0.2, 0.3, 0.5])
    inside = np.zeros(40, dtype=bool)
    inside[:12] = True
    scores[:12] = np.minimum(scores[:12], 0.5)  # the slice scores lower
    ours = below_rest_p(scores, inside[:, None], seed=1, permutations=9999)[0]
    reference = scipy_stats.permutation_test(
        (scores[inside], scores[~inside]), lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        permutation_type="independent", alternative="less", n_resamples=9999, random_state=2).pvalue
    assert ours < 0.05
    assert abs(ours - reference) < 4 * math.sqrt(reference * (1 - reference) / 9999) + 2e-4


def test_below_rest_p_is_one_sided_and_skips_what_cannot_be_tested():
    scores = np.array([1.0] * 10 + [0.0] * 10)
    members = np.stack([np.arange(20) < 10, np.arange(20) >= 10, np.zeros(20, bool), np.ones(20, bool)], axis=1)
    p = below_rest_p(scores, members, permutations=999)
    assert p[0] == 1.0  # a slice scoring above the rest is never "below" it
    assert p[1] == 1 / 1000  # no permutation is as low: the Monte Carlo floor 1 / (B + 1)
    assert math.isnan(p[2]) and math.isnan(p[3])  # empty; every record


def test_benjamini_hochberg_adjusts_within_the_family_and_keeps_untested_entries():
    p = [0.01, None, 0.04, 0.03, float("nan"), 0.20]
    q = benjamini_hochberg(p)
    # four tested: sorted 0.01, 0.03, 0.04, 0.20 -> 0.04, 0.0533, 0.0533, 0.20 (step-up minimum)
    assert q[1] is None and q[4] is None
    assert np.allclose([q[0], q[3], q[2], q[5]], [0.04, 0.04 / 0.75, 0.04 / 0.75, 0.20])
    assert benjamini_hochberg([]) == [] and benjamini_hochberg([None]) == [None]


def test_the_cost_fence_is_tukeys_far_out_fence():
    fence = cost_fence([1, 2, 3, 4, 5, 6, 7, 8, float("nan")])
    assert fence["q1"] == 2.75 and fence["q3"] == 6.25 and fence["fence"] == 6.25 + 3 * 3.5
    flat = cost_fence([0, 0, 0, 0, 900])  # no spread: anything above the upper quartile lies beyond
    assert flat["iqr"] == 0 and flat["fence"] == 0
    assert cost_fence([float("nan")]) is None


def test_shared_intervals_hold_each_slices_mean_and_say_when_there_is_nothing():
    values = np.array([0.0, 1.0] * 20)
    mask = np.arange(40) < 20
    out = shared_intervals({"slice": mean_of(values, mask), "constant": mean_of(np.ones(40), mask),
                            "empty": mean_of(values, np.zeros(40, bool))}, 40, n_resamples=400, seed=0)
    assert out["slice"].value == 0.5 and out["slice"].ci_low < 0.5 < out["slice"].ci_high
    assert out["slice"].method == "percentile" and out["slice"].n == 20 and out["slice"].n_resamples == 400
    assert (out["constant"].ci_low, out["constant"].ci_high, out["constant"].method) == (1.0, 1.0, "degenerate")
    assert out["empty"].value is None and out["empty"].n == 0
