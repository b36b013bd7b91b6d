"""evals.paired: paired differences with their intervals and permutation p-values, and McNemar's test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import f1_score

from evals.paired import (
    mcnemar,
    paired_comparison,
    paired_many,
    paired_mean_difference,
    permutation_p,
    permutation_ps,
)
from evals.stats import bootstrap_mean, macro_f1_of, mean_of, ratio_of


def test_paired_difference_detects_a_shift_and_not_noise():
    rng = np.random.default_rng(7)
    base = rng.random(300)
    better = paired_mean_difference(base + 0.03 + rng.normal(0, 0.01, 300), base)
    assert better.diff == pytest.approx(0.03, abs=0.005)
    assert better.ci_low > 0 and better.p_value < 0.01
    same = paired_mean_difference(base + rng.normal(0, 0.05, 300), base)
    assert same.ci_low < 0 < same.ci_high and same.p_value > 0.05
    identical = paired_mean_difference(base, base)
    assert identical.diff == 0.0 and identical.p_value == 1.0


def test_pairing_narrows_the_interval_compared_with_independent_samples():
    rng = np.random.default_rng(11)
    skill = rng.random(400)  # record difficulty shared by both programs
    a = skill + 0.02 + rng.normal(0, 0.02, 400)
    b = skill + rng.normal(0, 0.02, 400)
    paired = paired_mean_difference(a, b)
    width_independent = 2 * 1.96 * math.sqrt(a.var(ddof=1) / 400 + b.var(ddof=1) / 400)
    assert paired.ci_high - paired.ci_low < width_independent / 3


def test_paired_many_compares_ratio_metrics_on_the_same_records():
    truth = ["a", "b", "a", "b"] * 25
    good = truth[:]
    bad = ["a"] * 100
    result = paired_many({"f1": macro_f1_of(truth, good)}, {"f1": macro_f1_of(truth, bad)}, 100)
    assert result["f1"].diff == pytest.approx(1.0 - f1_score(truth, bad, average="macro"))
    assert result["f1"].p_value < 0.01
    assert paired_comparison(mean_of([1.0] * 5), mean_of([1.0] * 5), 5).p_value == 1.0


def test_paired_needs_equal_lengths():
    with pytest.raises(ValueError):
        paired_mean_difference([1.0, 0.0], [1.0])
    with pytest.raises(ValueError):
        mcnemar([True], [True, False])


def test_mcnemar_matches_the_binomial_and_chi_square_formulas():
    a = [True] * 30 + [True] * 12 + [False] * 3 + [False] * 5
    b = [True] * 30 + [False] * 12 + [True] * 3 + [False] * 5
    result = mcnemar(a, b)
    assert (result.a_only, result.b_only, result.n) == (12, 3, 50)
    assert result.p_exact == pytest.approx(scipy_stats.binomtest(3, 15, 0.5).pvalue)
    assert result.statistic == pytest.approx((abs(12 - 3) - 1) ** 2 / 15)
    assert result.p_continuity == pytest.approx(scipy_stats.chi2.sf((abs(12 - 3) - 1) ** 2 / 15, 1))
    assert mcnemar([True, False], [True, False]).p_exact == 1.0


def test_permutation_p_values_equal_scipys_on_the_same_data():
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(11)
    a, b = rng.normal(0.2, 1.0, 12), rng.normal(0.0, 1.0, 12)
    ours = paired_mean_difference(a, b)
    theirs = scipy_stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis), permutation_type="samples",
        n_resamples=np.inf, vectorized=True)
    assert ours.method == "permutation_exact" and ours.n_permutations == 2 ** 12
    assert ours.p_value == pytest.approx(theirs.pvalue)
    # a non-mean metric: which program each record's prediction belongs to is what gets permuted
    labels = np.array(["continue", "pause", "stop"])
    truth = rng.choice(labels, 10)
    good = np.where(rng.random(10) < 0.8, truth, rng.choice(labels, 10))
    bad = rng.choice(labels, 10)
    ours = paired_many({"f1": macro_f1_of(truth, good)}, {"f1": macro_f1_of(truth, bad)}, 10)["f1"]

    def f1(x, y):
        return macro_f1_of(truth, x)(np.ones((1, 10)))[0] - macro_f1_of(truth, y)(np.ones((1, 10)))[0]

    theirs = scipy_stats.permutation_test((good, bad), f1, permutation_type="samples", n_resamples=np.inf,
                                          vectorized=False)
    assert ours.p_value == pytest.approx(theirs.pvalue)


def test_three_pairs_cannot_be_significant_and_intervals_name_their_method():
    result = paired_mean_difference([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    assert result.p_value == pytest.approx(0.25) and result.n_permutations == 8
    big = paired_mean_difference(np.ones(40), np.zeros(40) + np.random.default_rng(0).normal(0, 0.1, 40))
    assert big.method == "permutation_monte_carlo" and big.n_permutations == 9999 and big.p_value < 0.001
    value = bootstrap_mean(np.random.default_rng(1).normal(0, 1, 50))
    assert value.method == "bca" and value.n_resamples == 1000
    assert bootstrap_mean([1.0, 1.0, 1.0]).method in ("percentile", "degenerate")


def test_exact_or_monte_carlo_is_decided_by_the_records_compared_not_the_total():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.4, 1.0, 40), rng.normal(0.0, 1.0, 40)
    missing = np.ones(40, dtype=bool)
    missing[rng.choice(40, 10, replace=False)] = False  # 10 scattered records scored by both programs
    a[missing[:20].nonzero()[0]] = np.nan  # missing in a on some records,
    b[20 + missing[20:].nonzero()[0]] = np.nan  # in b on others
    kept = ~missing
    ours = paired_mean_difference(a, b)
    theirs = scipy_stats.permutation_test(
        (a[kept], b[kept]), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="samples", n_resamples=np.inf, vectorized=True)
    assert ours.n == 10 and ours.method == "permutation_exact" and ours.n_permutations == 2 ** 10
    assert ours.p_value == pytest.approx(theirs.pvalue)
    assert ours.p_value == pytest.approx(paired_mean_difference(a[kept], b[kept]).p_value)
    # 20 compared records among 25: above the exact limit, whatever the total
    c, d = rng.normal(0.0, 1.0, 25), rng.normal(0.0, 1.0, 25)
    c[:5] = np.nan
    wide = paired_mean_difference(c, d)
    assert wide.n == 20 and wide.method == "permutation_monte_carlo" and wide.n_permutations == 9999
    # a rate leaves out the records with nothing in either sum
    ratio = paired_many({"r": ratio_of([1, 0, 1, 0, 2], [1, 0, 1, 0, 2])},
                        {"r": ratio_of([0, 0, 1, 0, 1], [1, 0, 1, 0, 2])}, 5)["r"]
    assert ratio.method == "permutation_exact" and ratio.n_permutations == 2 ** 3


def test_every_comparison_names_its_test_and_interval_method_in_words():
    small = paired_mean_difference([1.0, 0.5, 1.0, 0.0], [0.0, 0.5, 0.25, 0.0])
    assert small.describe().startswith("exact permutation test (16 assignments); 95% CI: ")
    assert small.describe().endswith(("BCa bootstrap (1,000 resamples)", "percentile bootstrap (1,000 resamples)"))
    big = paired_mean_difference(np.ones(40), np.zeros(40) + np.random.default_rng(0).normal(0, 0.1, 40))
    assert big.describe() == "Monte Carlo permutation test (9,999 assignments); 95% CI: BCa bootstrap (1,000 resamples)"


def test_means_are_compared_on_the_records_both_programs_score():
    a = np.array([1.0, 1.0, np.nan, np.nan, 0.0, 1.0])
    b = np.array([0.0, 1.0, 1.0, 1.0, 0.0, np.nan])
    apart = paired_many({"m": mean_of(a)}, {"m": mean_of(b)}, 6)["m"]
    together = paired_many({"m": mean_of(a)}, {"m": mean_of(b)}, 6, common=True)["m"]
    assert apart.diff == pytest.approx(0.75 - 0.6)  # each program's mean over its own records
    assert together.n == 3 and together.diff == pytest.approx((2 - 1) / 3)  # records 0, 1 and 4 only


def test_permutation_ps_of_many_tests_are_each_ones_permutation_p():
    n = 300
    rng = np.random.default_rng(11)
    a, b = rng.choice([0.0, 0.5, 1.0], size=n), rng.choice([0.0, 0.5, 1.0, 1.0], size=n)
    labels = rng.choice(["continue", "stop"], size=n)
    some = np.arange(n) < 200
    pairs = {"mean": (mean_of(a), mean_of(b)), "masked": (mean_of(a, some), mean_of(b, some)),
             "ratio": (ratio_of(a, np.ones(n)), ratio_of(b, np.ones(n))), "same": (mean_of(a), mean_of(a)),
             "f1": (macro_f1_of(labels, np.where(a > 0.4, "continue", "stop")),
                    macro_f1_of(labels, np.where(b > 0.4, "continue", "stop"))),
             "few": (mean_of(a, np.arange(n) < 10), mean_of(b, np.arange(n) < 10))}  # exact: 2^10 assignments
    ones = np.ones((1, n))
    tests = {name: (x.paired_on(y), float(x(ones)[0] - y(ones)[0]), x.active | y.active)
             for name, (x, y) in pairs.items()}
    together = permutation_ps(tests, n, seed=3, permutations=999)
    for name, (joined, observed, active) in tests.items():
        assert together[name] == permutation_p(joined, n, observed, seed=3, permutations=999, active=active), name
    assert together["same"][0] == 1.0 and together["few"][1] == "permutation_exact"
