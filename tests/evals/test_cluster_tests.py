"""evals.cluster_tests and a planner's post-mortem by episode: with episodes that differ (as kernels do), a test that
swaps records one by one finds slices below the rest that are only unlucky episodes; the tests by episode keep their
error rate, and still find a slice that is really worse."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from evals.cluster_tests import below_rest_p_by_cluster, cluster_codes, why_untested
from evals.postmortem import CLUSTER_TEST_TEXT, post_mortem
from evals.slice_tests import below_rest_p, mean_intervals

EPISODES, PER_EPISODE = 24, 12


def _episodes(rng: np.random.Generator, effect: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Scores with a strong episode effect, each episode's label, a slice of whole episodes, and a slice that cuts
    across episodes with a share that depends on the episode (0.15 or 0.85 of its records); `effect` is added to the
    scores of the cutting slice's records (0: the null)."""
    codes = np.repeat(np.arange(EPISODES), PER_EPISODE)
    level = rng.normal(0.0, 1.0, EPISODES)[codes]
    whole = rng.random(EPISODES)[codes] < 0.5
    share = np.where(rng.random(EPISODES) < 0.5, 0.15, 0.85)[codes]
    cutting = rng.random(len(codes)) < share
    scores = level + rng.normal(0.0, 0.3, len(codes)) + effect * cutting
    return scores, codes, whole, cutting


def _members(*masks: np.ndarray) -> sparse.csr_matrix:
    return sparse.csr_matrix(np.column_stack(masks).astype(float))  # records x tests


def test_by_episode_the_tests_keep_their_error_rate_where_record_swaps_do_not():
    rng = np.random.default_rng(7)
    record_level, by_episode = [], []
    for _ in range(150):
        scores, codes, whole, cutting = _episodes(rng)
        members = _members(whole, cutting)
        record_level.append(below_rest_p(scores, members, seed=1, permutations=199) <= 0.05)
        by_episode.append(below_rest_p_by_cluster(scores, members, codes, seed=1, permutations=199) <= 0.05)
    record_level, by_episode = np.array(record_level), np.array(by_episode)
    # swapping records one by one, about a quarter of null slices look "below the rest" (the bug, planted here)
    assert record_level.mean(axis=0).min() > 0.2, record_level.mean(axis=0)
    # by episode: about the nominal 5% (one-sided, so at most half the draws that differ from the rest)
    assert by_episode.mean(axis=0).max() < 0.1, by_episode.mean(axis=0)


def test_by_episode_a_slice_that_is_really_worse_is_found():
    rng = np.random.default_rng(3)
    found = []
    for _ in range(20):
        scores, codes, whole, cutting = _episodes(rng, effect=-1.0)
        found.append(below_rest_p_by_cluster(scores, _members(cutting), codes, seed=1, permutations=199)[0] <= 0.05)
    assert np.mean(found) >= 0.9


def test_a_whole_episode_slice_is_a_permutation_of_the_episodes():
    rng = np.random.default_rng(1)
    scores, codes, _, _ = _episodes(rng)
    worst = int(np.argmin([scores[codes == g].mean() for g in range(EPISODES)]))
    p = below_rest_p_by_cluster(scores, _members(codes == worst), codes, seed=0, permutations=999)[0]
    # the lowest of 24 episodes: about 1/24 of the permutations put an episode as low, never less than 1/24
    assert 1 / EPISODES - 0.02 <= p <= 1 / EPISODES + 0.03


def test_what_cannot_be_tested_by_episode_says_why():
    codes = np.repeat(np.arange(EPISODES), PER_EPISODE)
    inside_one = np.zeros(len(codes), dtype=bool)
    inside_one[:3] = True  # three records of episode 0
    assert why_untested(inside_one, codes) == "its records lie in one episode, which is tested as a group"
    assert why_untested(codes == 0, codes) == ""  # the whole episode: its permutation test
    few = np.repeat(np.arange(6), 5)
    assert why_untested(few < 3, few) == "6 episode(s) with a scored record, fewer than 10: not tested by episode"
    assert list(cluster_codes(["b", "a", "b"])) == [1, 0, 1]


def _planner_rows(rng: np.random.Generator) -> list[dict]:
    scores, codes, _, cutting = _episodes(rng)
    return [{"record_id": f"r{i}", "group_id": f"episode-{codes[i]:02d}", "scores": {"objective": float(s)},
             "slices": {"current_family": "schedule" if cutting[i] else "break_deps"}, "usage": {"total_tokens": 0}}
            for i, s in enumerate(scores)]


def test_a_planner_post_mortem_tests_and_resamples_by_episode():
    rows = _planner_rows(np.random.default_rng(5))
    pm = post_mortem("planner", rows, n_resamples=200, permutations=199, pairs=False)
    assert pm.test == CLUSTER_TEST_TEXT.format(permutations=199, fdr=0.05, resamples=200)
    tested = [g for g in pm.groups if not g.untested]
    assert len(tested) == EPISODES and min(g.p_value for g in tested) >= 1 / 200  # 199 episode permutations
    # the current_family slice's interval: from resamples of whole episodes, wider than record resamples of its records
    masks = {v: np.array([r["slices"]["current_family"] == v for r in rows]) for v in ("schedule", "break_deps")}
    objective = np.array([r["scores"]["objective"] for r in rows])
    by_record = mean_intervals({"objective": objective}, {v: ("objective", m) for v, m in masks.items()}, len(rows),
                               n_resamples=200)
    for stat in (s for s in pm.slices if s.slice == "current_family"):
        mine, theirs = stat.metrics["objective"], by_record[stat.value]
        assert mine.value == theirs.value and mine.ci_high - mine.ci_low > 2 * (theirs.ci_high - theirs.ci_low)
