"""The post-mortem's tests: the slice-against-the-rest p-value, Benjamini-Hochberg, the cost fence and the
shared bootstrap intervals, checked against SciPy and against hand computations."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from evals.postmortem import pooled_values
from evals.slice_tests import below_rest_p, benjamini_hochberg, cost_fence, mean_intervals, membership, shared_intervals
from evals.stats import macro_f1_of, mean_of


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


def _slices(n: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.0, 0.5, 1.0, np.nan], size=n, p=[0.2, 0.3, 0.4, 0.1])
    codes = rng.integers(0, 7, size=n)
    return scores, [codes == k for k in range(7)] + [codes < 3, np.zeros(n, bool), np.ones(n, bool)]


def test_below_rest_p_gives_the_same_p_values_for_a_sparse_membership_as_for_a_dense_one():
    scores, masks = _slices(300, 4)
    scores = np.nan_to_num(scores)
    dense = below_rest_p(scores, np.stack(masks, axis=1), seed=5, permutations=999)
    sparse_members = membership(masks, len(scores))
    assert sparse_members.shape == (len(masks), 300) and sparse_members.nnz == sum(int(m.sum()) for m in masks)
    same = below_rest_p(scores, sparse_members.T, seed=5, permutations=999)
    assert np.array_equal(np.isnan(dense), np.isnan(same))
    assert np.array_equal(dense[~np.isnan(dense)], same[~np.isnan(same)])


def test_mean_intervals_are_the_shared_intervals_of_the_masked_means():
    scores, masks = _slices(500, 6)
    other = np.where(np.isnan(scores), np.nan, 1.0 - np.nan_to_num(scores) ** 2)
    columns = {"score": scores, "other": other}
    entries = {(i, name): (name, mask) for i, mask in enumerate(masks) for name in columns}
    expected = shared_intervals({key: mean_of(columns[name], mask) for key, (name, mask) in entries.items()}, 500,
                                n_resamples=300, seed=2)
    got = mean_intervals(columns, entries, 500, n_resamples=300, seed=2)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key].value == value.value and got[key].n == value.n and got[key].method == value.method
        if value.ci_low is not None:  # one sparse product for all against one dense product each: rounding only
            assert math.isclose(got[key].ci_low, value.ci_low, rel_tol=1e-12, abs_tol=1e-12)
            assert math.isclose(got[key].ci_high, value.ci_high, rel_tol=1e-12, abs_tol=1e-12)
    assert got[(8, "score")].n == 0 and got[(8, "score")].value is None  # the empty mask


def test_shared_intervals_batch_the_means_and_still_take_any_other_statistic():
    scores, masks = _slices(200, 8)
    labels = np.where(np.nan_to_num(scores) > 0.4, "continue", "stop")
    statistics = {"mean": mean_of(scores, masks[0]), "f1": macro_f1_of(labels, labels[::-1])}
    out = shared_intervals(statistics, 200, n_resamples=200, seed=1)
    alone = shared_intervals({"f1": statistics["f1"]}, 200, n_resamples=200, seed=1)
    assert out["f1"] == alone["f1"] and out["f1"].method == "percentile"
    assert out["mean"].value == float(mean_of(scores, masks[0])(np.ones((1, 200)))[0])


def test_pooled_values_keep_the_larger_values_in_count_order_and_pool_the_small_ones():
    column = ["b"] * 9 + ["a"] * 9 + ["c"] * 12 + ["x", "y", "y"]
    found = pooled_values(column, min_n=8)
    assert [value for value, _, _ in found] == ["c", "a", "b", "other (pooled)"]
    values = np.asarray(column, dtype=object)
    for value, mask, pooled in found[:3]:
        assert np.array_equal(mask, values == value) and pooled == []
    assert found[3][2] == ["x", "y"] and np.array_equal(found[3][1], np.isin(values, ["x", "y"]))


def test_the_permutations_and_resamples_are_told_chunk_by_chunk_and_add_up():
    scores, masks = _slices(3000, seed=5)
    x = np.nan_to_num(scores)
    members = membership(masks, len(x)).T
    told: list[int] = []
    p = below_rest_p(x, members, seed=1, permutations=2500, tick=told.append)
    assert sum(told) == 2500 and len(told) > 1  # 2M cells a chunk: several chunks at 3000 records
    assert np.array_equal(p, below_rest_p(x, members, seed=1, permutations=2500), equal_nan=True)
    resampled: list[int] = []
    entries = {i: ("score", mask) for i, mask in enumerate(masks)}
    mean_intervals({"score": scores}, entries, len(x), n_resamples=700, seed=2, tick=resampled.append)
    assert sum(resampled) == 700
