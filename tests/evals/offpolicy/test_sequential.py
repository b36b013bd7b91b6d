"""evals.offpolicy.sequential: the doubly robust confidence sequence on a synthetic contextual bandit whose truth is
known: it covers at every look, an equal candidate is rarely promoted however often it is looked at, a better one is
promoted, a worse one rejected."""

from __future__ import annotations

import numpy as np
import pytest

from evals.offpolicy.sequential import PlannerStep, asymptotic_cs, dr_terms, planner_verdict, pseudo_outcomes

K = 3


def _run(seed: int, n: int, candidate_arm_shift: float = 0.0, epsilon: float = 0.3):
    """Iterations of a logging planner (epsilon-greedy on a noisy guess) and a candidate; the true running mean of
    the candidate - deployed difference at every look."""
    rng = np.random.default_rng(seed)
    steps, truth = [], []
    for _ in range(n):
        mu = rng.uniform(0, 1, K)  # the context's true expected improvement per family
        mu[2] += candidate_arm_shift
        greedy = int(np.argmax(mu + rng.normal(0, 0.5, K)))
        p = np.full(K, epsilon / K)
        p[greedy] += 1 - epsilon
        pi = np.zeros(K)
        pi[int(np.argmax(mu + rng.normal(0, 0.5, K))) if candidate_arm_shift == 0 else 2] = 1.0
        a = int(rng.choice(K, p=p))
        y = float(mu[a] + rng.normal(0, 1.0))
        steps.append(PlannerStep(logged=p, chosen=a, outcome=y, candidate=pi))
        truth.append(float(pi @ mu - p @ mu))
    return steps, np.cumsum(truth) / np.arange(1, n + 1)


def test_the_sequence_covers_the_running_truth_at_every_look():
    misses = 0
    for seed in range(200):
        steps, truth = _run(seed, 400)
        cs = asymptotic_cs(*dr_terms(steps)[:1], expected=dr_terms(steps)[1])
        misses += bool(np.any((truth < cs.low) | (truth > cs.high)))
    assert np.isinf(cs.low[:19]).all() and np.isfinite(cs.low[19:]).all()
    assert misses / 200 <= 0.07  # about alpha = 0.05 (asymptotic), at every look


def test_the_deployed_planner_against_itself_is_never_promoted():
    steps, _ = _run(0, 300)
    same = [PlannerStep(s.logged, s.chosen, s.outcome, candidate=s.logged) for s in steps]
    differences = pseudo_outcomes(same)
    assert np.allclose(differences, 0.0)
    assert planner_verdict(differences)[0].verdict == "keep shadowing"


def test_a_better_candidate_is_promoted_a_worse_one_rejected():
    better, _ = _run(1, 3000, candidate_arm_shift=0.8)
    differences, expected = dr_terms(better)
    verdict, cs = planner_verdict(differences, expected=expected)
    assert verdict.verdict == "promote" and verdict.low > 0 and verdict.decided_at >= 20
    worse, _ = _run(2, 3000, candidate_arm_shift=-0.8)
    assert planner_verdict(*dr_terms(worse)[:1], expected=dr_terms(worse)[1])[0].verdict == "reject"


def test_keep_shadowing_says_how_many_more_iterations_and_a_failed_candidate_is_worth_nothing():
    steps, _ = _run(3, 60, candidate_arm_shift=0.3)
    verdict, _ = planner_verdict(pseudo_outcomes(steps)[:25])
    assert verdict.verdict == "keep shadowing" and ("more iterations" in verdict.reason or
                                                    "would not reach" in verdict.reason)
    failed = [PlannerStep(s.logged, s.chosen, s.outcome, candidate=None) for s in steps]
    assert np.allclose(pseudo_outcomes(failed, "candidate"), 0.0)
    with pytest.raises(ValueError):
        asymptotic_cs([0.0, float("nan")])


def test_a_rare_family_widens_the_band_before_it_is_ever_drawn():
    # The deployed planner tries family 2 with probability 0.02 and never happened to; the candidate always picks it.
    steps = [PlannerStep(logged=[0.49, 0.49, 0.02], chosen=t % 2, outcome=float(t % 3), candidate=[0, 0, 1])
             for t in range(200)]
    differences, expected = dr_terms(steps)
    blind = asymptotic_cs(differences)
    aware = asymptotic_cs(differences, expected=expected)
    assert expected[-1] > 40 * differences.var()  # a weight of 50 on a residual is known before the draw
    assert (aware.high - aware.low)[-1] > 3 * (blind.high - blind.low)[-1]
