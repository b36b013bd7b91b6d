"""Bootstrap intervals, paired comparisons and McNemar's test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import f1_score

from evals.stats import (
    MetricValue,
    bootstrap,
    bootstrap_many,
    bootstrap_mean,
    ece_of,
    macro_f1_of,
    mcnemar,
    mean_of,
    paired_comparison,
    paired_many,
    paired_mean_difference,
    ratio_of,
)


def test_mean_interval_covers_the_mean_and_has_the_normal_width():
    rng = np.random.default_rng(3)
    x = rng.normal(10.0, 2.0, 400)
    value = bootstrap_mean(x, seed=1)
    assert value.value == pytest.approx(x.mean())
    assert value.ci_low < x.mean() < value.ci_high
    # The percentile bootstrap of a mean is close to mean ± 1.96 * s / sqrt(n).
    half = 1.96 * x.std(ddof=1) / math.sqrt(len(x))
    assert (value.ci_high - value.ci_low) / 2 == pytest.approx(half, rel=0.15)
    assert value.n == 400


def test_intervals_are_reproducible_from_the_seed_and_change_with_it():
    x = np.random.default_rng(0).random(200)
    assert bootstrap_mean(x, seed=5) == bootstrap_mean(x, seed=5)
    assert bootstrap_mean(x, seed=5).ci_low != bootstrap_mean(x, seed=6).ci_low


def test_nan_scores_and_masks_leave_records_out():
    values = [1.0, 0.0, math.nan, 1.0]
    assert bootstrap_mean(values).value == pytest.approx(2 / 3)
    assert bootstrap_mean(values).n == 3
    assert bootstrap_mean([1.0, 0.0, 1.0, 1.0], mask=[True, True, False, False]).value == pytest.approx(0.5)


def test_empty_and_single_record_metrics():
    assert bootstrap_mean([]) == MetricValue.empty()
    assert bootstrap_mean([math.nan, math.nan]).n == 0
    single = bootstrap_mean([0.25])
    assert (single.value, single.ci_low, single.ci_high, single.n) == (0.25, 0.25, 0.25, 1)
    assert MetricValue.empty().to_dict() == {"value": None, "ci_low": None, "ci_high": None, "n": 0, "method": None,
                                             "n_resamples": None}


def test_macro_f1_point_value_matches_sklearn_and_gets_an_interval():
    rng = np.random.default_rng(1)
    truth = rng.choice(["continue", "pause", "stop"], 300, p=[0.6, 0.25, 0.15])
    pred = np.where(rng.random(300) < 0.7, truth, rng.choice(["continue", "pause", "stop"], 300))
    value = bootstrap(macro_f1_of(truth, pred), 300)
    assert value.value == pytest.approx(f1_score(truth, pred, average="macro"))
    assert value.ci_low < value.value < value.ci_high


def test_macro_f1_counts_a_class_only_predicted_as_zero():
    # sklearn's macro-F1 over the union of labels: a spurious class scores F1 0.
    truth, pred = ["a", "a", "b", "b"], ["a", "c", "b", "b"]
    value = bootstrap(macro_f1_of(truth, pred), 4).value
    assert value == pytest.approx(f1_score(truth, pred, average="macro", labels=["a", "b", "c"], zero_division=0))


def test_ece_of_a_perfectly_calibrated_bin_and_of_an_overconfident_model():
    conf = [0.95] * 20
    assert bootstrap(ece_of(conf, [1.0] * 19 + [0.0]), 20).value == pytest.approx(0.0, abs=1e-12)
    assert bootstrap(ece_of([0.9] * 10, [0.0] * 10), 10).value == pytest.approx(0.9)
    # Two bins: |0.5 - 0.25| * 1/2 + |1.0 - 0.85| * 1/2
    value = bootstrap(ece_of([0.25, 0.25, 0.85, 0.85], [1, 0, 1, 1]), 4).value
    assert value == pytest.approx(0.5 * 0.25 + 0.5 * 0.15)


def test_ratio_metric_resamples_records_not_the_ratio():
    value = bootstrap(ratio_of([1, 0, 3, 0], [2, 0, 4, 1]), 4)
    assert value.value == pytest.approx(4 / 7)
    assert value.n == 3


def test_bootstrap_many_shares_resamples_and_matches_single_calls():
    rng = np.random.default_rng(2)
    x, y = rng.random(150), rng.random(150)
    many = bootstrap_many({"x": mean_of(x), "y": mean_of(y)}, 150, seed=4)
    assert many["x"] == bootstrap(mean_of(x), 150, seed=4)
    assert many["y"] == bootstrap(mean_of(y), 150, seed=4)


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


# ----- clustered records: episodes as the unit (a planner's records) ---------------------------------------------

def _episodes(sizes):
    return np.repeat([f"ep{i}" for i in range(len(sizes))], sizes)


def test_the_episode_test_is_the_sign_flip_of_the_episodes_summed_differences():
    from evals.stats import MIN_GROUPS

    rng = np.random.default_rng(3)
    sizes = rng.integers(2, 9, size=12)
    groups = _episodes(sizes)
    a, b = rng.normal(0.3, 1.0, len(groups)), rng.normal(0.0, 1.0, len(groups))
    ours = paired_comparison(mean_of(a), mean_of(b), len(groups), groups=groups, n_resamples=300)
    # The mean over records swaps as the episodes' sums do: scipy's paired test on the sums gives the same p.
    sum_a = np.asarray([a[groups == g].sum() for g in np.unique(groups)])
    sum_b = np.asarray([b[groups == g].sum() for g in np.unique(groups)])
    theirs = scipy_stats.permutation_test(
        (sum_a, sum_b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis), permutation_type="samples",
        n_resamples=np.inf, vectorized=True)
    assert 12 >= MIN_GROUPS and ours.n_groups == 12 and ours.n == len(groups)
    assert ours.method == "permutation_exact" and ours.n_permutations == 2 ** 12  # episodes, not records, swapped
    assert ours.p_value == pytest.approx(theirs.pvalue)
    assert ours.describe().startswith("exact permutation test over 12 episodes (4,096 assignments); 95% CI: ")
    assert "cluster bootstrap over 12 episodes" in ours.describe()


def test_the_cluster_bootstrap_is_wider_when_episodes_differ_and_names_its_unit():
    rng = np.random.default_rng(4)
    groups = _episodes([15] * 20)
    offsets = rng.normal(0, 1.0, 20)  # each episode its own kernel: its attempts move together
    values = np.repeat(offsets, 15) + rng.normal(0, 0.2, len(groups))
    records = bootstrap_many({"m": mean_of(values)}, len(values), n_resamples=400)["m"]
    episodes = bootstrap_many({"m": mean_of(values)}, len(values), n_resamples=400, groups=groups)["m"]
    assert records.value == episodes.value and records.n_groups is None and episodes.n_groups == 20
    assert episodes.ci_high - episodes.ci_low > 2.5 * (records.ci_high - records.ci_low)
    assert episodes.interval_text() == f"{'BCa' if episodes.method == 'bca' else 'percentile'} cluster bootstrap over " \
                                       "20 episodes (400 resamples)"
    assert "n_groups" not in records.to_dict() and episodes.to_dict()["n_groups"] == 20


def test_too_few_episodes_give_no_interval_and_no_test():
    from evals.stats import MIN_GROUPS, TOO_FEW_GROUPS

    groups = _episodes([40, 35, 30, 36])  # 141 records, 4 episodes
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 0.1, len(groups)), rng.normal(0.0, 0.1, len(groups))
    value = bootstrap_many({"m": mean_of(a)}, len(a), groups=groups)["m"]
    assert value.value == pytest.approx(a.mean()) and value.ci_low is None and value.ci_high is None
    assert value.method == TOO_FEW_GROUPS and value.n_groups == 4 < MIN_GROUPS
    assert value.interval_text() == f"no interval: too few episodes (4 < {MIN_GROUPS})"
    paired = paired_comparison(mean_of(a), mean_of(b), len(a), groups=groups)
    assert paired.diff == pytest.approx(a.mean() - b.mean())  # the difference is plain, a test of it is not
    assert paired.p_value is None and paired.ci_low is None and paired.method == TOO_FEW_GROUPS
    assert paired.describe() == f"no test: too few episodes (4 < {MIN_GROUPS})"
    # only episodes holding a record the metric uses count: 12 episodes, 3 of them scored
    many = _episodes([5] * 12)
    scored = np.where(np.isin(many, ["ep0", "ep1", "ep2"]), 1.0, np.nan)
    assert bootstrap_many({"m": mean_of(scored)}, 60, groups=many)["m"].n_groups == 3


def test_means_are_compared_on_the_records_both_programs_score():
    a = np.array([1.0, 1.0, np.nan, np.nan, 0.0, 1.0])
    b = np.array([0.0, 1.0, 1.0, 1.0, 0.0, np.nan])
    apart = paired_many({"m": mean_of(a)}, {"m": mean_of(b)}, 6)["m"]
    together = paired_many({"m": mean_of(a)}, {"m": mean_of(b)}, 6, common=True)["m"]
    assert apart.diff == pytest.approx(0.75 - 0.6)  # each program's mean over its own records
    assert together.n == 3 and together.diff == pytest.approx((2 - 1) / 3)  # records 0, 1 and 4 only


def test_above_bca_max_n_the_interval_is_the_percentile_one_and_close_to_bca(monkeypatch):
    import numpy as np

    from evals import stats

    values = np.random.default_rng(1).binomial(1, 0.9, 2500).astype(float).tolist()
    percentile = stats.bootstrap(stats.mean_of(values), len(values))
    assert percentile.method == "percentile" and len(values) > stats.BCA_MAX_N
    monkeypatch.setattr(stats, "BCA_MAX_N", len(values))
    bca = stats.bootstrap(stats.mean_of(values), len(values))
    assert bca.method == "bca"
    width = bca.ci_high - bca.ci_low
    # the jackknife's correction at 2,500 records: a few percent of the width (module docstring)
    assert abs(bca.ci_low - percentile.ci_low) < 0.1 * width and abs(bca.ci_high - percentile.ci_high) < 0.1 * width


def test_percentile_intervals_of_many_statistics_are_each_ones_interval():
    from evals.stats import BCA_MAX_N, interval, percentile_intervals

    n = BCA_MAX_N + 301  # percentile intervals: one set of draws may serve every statistic
    rng = np.random.default_rng(5)
    scores = rng.choice([0.0, 0.5, 1.0, np.nan], size=n)
    confidence = rng.random(n)
    labels = rng.choice(["continue", "stop", "pause"], size=n)
    answers = np.where(rng.random(n) < 0.7, labels, "stop")
    statistics = {"mean": mean_of(scores), "ratio": ratio_of(confidence, (confidence > 0.4).astype(float)),
                  "macro_f1": macro_f1_of(labels, answers), "ece": ece_of(confidence, labels == answers),
                  "constant": mean_of(np.ones(n))}
    shared = percentile_intervals(statistics, n, n_resamples=500, seed=7)
    ones = np.ones((1, n))
    for name, statistic in statistics.items():
        value = float(statistic(ones)[0])
        low, high, method = interval(statistic, n, value, n_resamples=500, seed=7)
        assert method == "percentile"
        assert (min(shared[name][0], value), max(shared[name][1], value)) == (low, high)
    many = bootstrap_many(statistics, n, n_resamples=500, seed=7)
    assert all(many[name].ci_low <= many[name].value <= many[name].ci_high for name in statistics)


def test_permutation_ps_of_many_tests_are_each_ones_permutation_p():
    from evals.stats import permutation_p, permutation_ps

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
