"""evals.stats: bootstrap intervals of statistics of record weights, by record and by episode (the paired tests
are in test_paired.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import f1_score

from evals.paired import paired_comparison
from evals.stats import (
    MetricValue,
    bootstrap,
    bootstrap_many,
    bootstrap_mean,
    ece_of,
    macro_f1_of,
    mean_of,
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


