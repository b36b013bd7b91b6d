"""The off-policy estimators on a synthetic bandit whose truth is known: a logging policy that prefers the family
that pays (confounded), outcomes with noise, and models that are right or wrong on purpose."""

from __future__ import annotations

import numpy as np
import pytest

from evals.offpolicy import DirectMethod, DoublyRobust, LoggedBandit, SelfNormalizedIPW, calibration, policy_estimates
from evals.offpolicy._base import MIN_ESS
from runtime.advisor import FAMILIES

N, EPISODES = 3000, 300


def true_q(x: np.ndarray) -> np.ndarray:
    """What each family brings (cycles), by context: family 0 pays at low x, family 1 at high x, family 2 a bit."""
    return np.column_stack([40 * (1 - x), 40 * x, np.full_like(x, 12.0)])


def bandit(*, q_bias: tuple[float, float, float] = (0, 0, 0), never: int = -1,
           seed: int = 0) -> tuple[LoggedBandit, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=N)
    q = true_q(x)
    logits = np.column_stack([2 * (1 - x), 2 * x, np.full_like(x, 0.5)])
    if never >= 0:
        logits[:, never] = -50.0
    propensity = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    logged = np.asarray([rng.choice(3, p=p) for p in propensity])
    observed = q[np.arange(N), logged] + rng.normal(0, 8, size=N)
    made = LoggedBandit(record_ids=[str(i) for i in range(N)], groups=np.arange(N) % EPISODES,
                        best=np.full(N, 1000.0), logged=logged, observed=observed, q=q + np.asarray(q_bias),
                        p_valid=np.full((N, 3), 0.9), propensity=propensity)
    return made, q


def value_of(q: np.ndarray, target: np.ndarray) -> float:
    return float(np.mean(np.where(target >= 0, q[np.arange(N), np.maximum(target, 0)], 0.0)))


def choices(target: np.ndarray) -> list:
    return [FAMILIES[t] if t >= 0 else None for t in target]


@pytest.mark.parametrize("estimator", [SelfNormalizedIPW(), DoublyRobust()])
def test_ipw_and_dr_recover_a_policy_the_logs_did_not_follow(estimator):
    logs, q = bandit(q_bias=(0, 0, 15))  # a wrong outcome model does not matter to IPW, DR corrects it
    target = np.where(np.arange(N) % 2 == 0, 2, 0)  # half "family 2", half "family 0", whatever the context
    truth = value_of(q, target)
    estimate = estimator.estimate(logs, target)
    assert estimate.supported and estimate.ci_low <= truth <= estimate.ci_high
    assert abs(estimate.value - truth) < 0.1 * truth


def test_the_direct_method_is_biased_when_its_model_is_wrong_and_exact_when_it_is_right():
    wrong, q = bandit(q_bias=(0, 0, 15))
    target = np.full(N, 2)
    truth = value_of(q, target)
    biased = DirectMethod().estimate(wrong, target)
    assert biased.value == pytest.approx(truth + 15)
    assert not biased.ci_low <= truth <= biased.ci_high
    right, _ = bandit()
    assert DirectMethod().estimate(right, target).value == pytest.approx(truth)


def test_a_family_the_logs_never_tried_is_unsupported_not_a_number():
    logs, _ = bandit(never=2)
    estimates = policy_estimates(logs, choices(np.full(N, 2)))
    for estimate in estimates.values():
        assert estimate.value is None and not estimate.supported
        assert estimate.ess < MIN_ESS and "unsupported" in estimate.note
        assert "unsupported" in estimate.text() and "ESS" in estimate.text()


def test_no_change_records_are_worth_zero_and_the_rest_is_estimated():
    logs, q = bandit()
    target = np.where(np.arange(N) % 4 == 0, -1, 1)  # a quarter rejected (no change)
    for estimate in policy_estimates(logs, choices(target)).values():
        assert estimate.ci_low <= value_of(q, target) <= estimate.ci_high


def test_the_deployed_planner_on_its_own_logs_weighs_one():
    logs, _ = bandit()
    own = logs.on_policy()
    estimates = policy_estimates(own, choices(logs.logged))
    assert estimates["ipw"].value == pytest.approx(float(np.mean(logs.observed)))
    assert estimates["dr"].value == pytest.approx(float(np.mean(logs.observed)))
    assert estimates["ipw"].ess == pytest.approx(N)


def test_the_interval_is_a_bootstrap_over_episodes():
    logs, _ = bandit()
    # Attempts of one episode share its kernel: give each episode its own offset, as real episodes differ.
    logs.observed = logs.observed + np.random.default_rng(1).normal(0, 15, size=EPISODES)[logs.groups]
    own = logs.on_policy()
    wide = SelfNormalizedIPW().estimate(own, own.logged)
    # Read as if every attempt were independent, the same records would claim a much narrower interval.
    own.groups = np.arange(N)
    narrow = SelfNormalizedIPW().estimate(own, own.logged)
    assert wide.n_episodes == EPISODES and narrow.n_episodes == N
    assert narrow.ci_high - narrow.ci_low < 0.75 * (wide.ci_high - wide.ci_low)


def test_calibration_of_a_right_model_and_of_a_scaled_one():
    logs, q = bandit()
    right = calibration(logs)
    assert right.n == N and right.mean_ratio == pytest.approx(1.0, abs=0.05)
    assert right.correlation > 0.6 and right.coverage >= 0.7
    logs.q = q * 2
    doubled = calibration(logs)
    assert doubled.mean_ratio == pytest.approx(2.0, abs=0.1) and doubled.coverage < 0.5


# ----- logged propensities: the planner's own stated probabilities replace the propensity model ------------------

@pytest.fixture(scope="module")
def logged_records(tmp_path_factory):
    from guidebench.data import import_logs
    from planner_sidecar_support import all_records, logs_with_sidecars

    root = tmp_path_factory.mktemp("logged-propensities")
    logs, _ = logs_with_sidecars(root, episodes=3, iterations=20)
    import_logs(logs, "experiments", root / "d", progress=False)
    return all_records(root / "d")


def test_logged_propensities_are_used_where_a_record_has_them_and_said_so(logged_records, outcome_fit):
    from evals.offpolicy.bandit import LoggedBandit
    from evals.offpolicy.summary import policy_estimates
    from runtime.advisor import FAMILIES

    stripped = [r.model_copy(update={"planner_log": None}) if i % 2 else r for i, r in enumerate(logged_records)]
    bandit = LoggedBandit.build(stripped, outcome_fit.outcome, outcome_fit.propensity)
    modelled = LoggedBandit.build(stripped, outcome_fit.outcome, outcome_fit.propensity).propensity
    for i, record in enumerate(stripped):
        if record.planner_log is not None:
            assert list(bandit.propensity[i]) == [record.planner_log.probabilities[f] for f in FAMILIES]
        else:
            assert not bandit.logged_propensity[i] and np.allclose(bandit.propensity[i], modelled[i])
    assert bandit.logged_records == [r.record_id for r in stripped if r.planner_log is not None]
    greedy = [r.planner_log.family if r.planner_log else r.outcome.family for r in stripped]
    estimates = policy_estimates(bandit, greedy, resamples=50)
    assert estimates["dr"].logged_propensities == len(bandit.logged_records) > 0
    assert estimates["dr"].propensity_source == "logged + model"
    assert f"{len(bandit.logged_records)} with logged propensities" in estimates["ipw"].text()


def test_with_every_propensity_logged_no_propensity_model_is_needed(logged_records, outcome_fit):
    from evals.offpolicy.bandit import LoggedBandit
    from evals.offpolicy.summary import policy_estimates

    bandit = LoggedBandit.build(logged_records, outcome_fit.outcome, None)
    assert bandit.logged_propensity.all() and np.isfinite(bandit.propensity).all()
    families = [r.outcome.family for r in logged_records]  # the deployed planner's own choices
    estimates = policy_estimates(bandit, families, resamples=50)
    ipw = estimates["ipw"]
    assert ipw.propensity_source == "logged" and ipw.value is not None
    known = (bandit.logged >= 0) & np.isfinite(bandit.observed) & np.isfinite(bandit.best)
    weights = 1 / bandit.propensity[np.nonzero(known)[0], bandit.logged[known]]
    assert weights.max() <= 1 / 0.05 + 1e-9  # the floor bounds every weight
    snips = float((weights * bandit.observed[known]).sum() / weights.sum())
    assert ipw.n == known.sum() and ipw.value == pytest.approx(snips)


def test_the_bandit_shows_its_records_with_an_eta_only_when_asked_and_builds_the_same(logged_records, outcome_fit,
                                                                                         capsys):
    from evals.offpolicy.bandit import LoggedBandit

    quiet = LoggedBandit.build(logged_records, outcome_fit.outcome, outcome_fit.propensity)
    assert capsys.readouterr().err == ""
    shown = LoggedBandit.build(logged_records, outcome_fit.outcome, outcome_fit.propensity, progress=True)
    bar = capsys.readouterr().err
    assert "off-policy: outcome model" in bar and f"/{len(logged_records)}" in bar and "rec" in bar
    assert np.array_equal(shown.q, quiet.q, equal_nan=True)
    assert np.array_equal(shown.propensity, quiet.propensity, equal_nan=True)
