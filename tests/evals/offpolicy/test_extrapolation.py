"""Records whose chosen family the deployed planner (almost) never chose in that context are flagged `extrapolated`,
counted per family on every estimate and in the summary; where nothing extrapolates the estimate's JSON is as
before."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evals.offpolicy import (SUPPORT_THRESHOLD, Extrapolation, LoggedBandit, OffPolicyEstimate, extrapolation,
                             policy_estimates)
from evals.offpolicy._base import CLIP, MIN_PROPENSITY, extrapolated
from evals.offpolicy.held_out import family_calibration
from runtime.advisor import FAMILIES

SCHEDULE, LOADS, DEPS = FAMILIES
N, EPISODES = 2000, 200
BEFORE = {"estimator", "title", "value", "ci_low", "ci_high", "n", "n_episodes", "ess", "support", "supported", "note",
          "logged_propensities"}  # an estimate's JSON keys before extrapolation was counted


def logs(*, rare_deps: bool, seed: int = 0) -> tuple[LoggedBandit, np.ndarray]:
    """A bandit over a context x in [0, 1]: with `rare_deps` the deployed planner chooses break_deps with
    probability 0.01 where x > 0.7 (where it pays nothing), otherwise every family is tried everywhere."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=N)
    near = x > 0.7
    p_deps = np.where(near & rare_deps, 0.01, 0.3)
    propensity = np.column_stack([(1 - p_deps) / 2, (1 - p_deps) / 2, p_deps])
    logged = np.asarray([rng.choice(3, p=p) for p in propensity])
    q = np.column_stack([np.full(N, 20.0), np.full(N, 10.0), np.where(near, 0.0, 30.0)])
    observed = q[np.arange(N), logged] + rng.normal(0, 4, size=N)
    return LoggedBandit(record_ids=[f"r{i}" for i in range(N)], groups=np.arange(N) % EPISODES,
                        best=np.full(N, 1000.0), logged=logged, observed=observed, q=q,
                        p_valid=np.full((N, 3), 0.9), propensity=propensity), near


def test_the_threshold_is_where_the_weights_are_clipped():
    assert SUPPORT_THRESHOLD == pytest.approx(1 / CLIP) == pytest.approx(MIN_PROPENSITY)


def test_choices_the_logs_rarely_made_in_that_context_are_flagged_and_counted_per_family():
    bandit, near = logs(rare_deps=True)
    choices = [DEPS if i % 2 else LOADS for i in range(N)]
    target = bandit.target(choices)
    flags = extrapolated(bandit, target)
    assert np.array_equal(flags, near & (target == 2))  # loads is always supported, deps where x > 0.7 is not
    estimates = policy_estimates(bandit, choices, resamples=50)
    deps, loads = (np.asarray(choices) == DEPS), (np.asarray(choices) == LOADS)
    for estimate in estimates.values():
        assert estimate.extrapolated == int(flags.sum())
        assert estimate.by_family[DEPS].n == int(deps.sum())
        assert estimate.by_family[DEPS].extrapolated == int((near & deps).sum())
        assert estimate.by_family[LOADS].extrapolated == 0 and estimate.by_family[LOADS].n == int(loads.sum())
        dumped = json.loads(estimate.model_dump_json())
        assert dumped["extrapolated"] == int(flags.sum()) and set(dumped) == BEFORE | {"extrapolated", "by_family"}
        assert OffPolicyEstimate.model_validate(dumped) == estimate  # it reads back
        assert f"extrapolated {int((near & deps).sum())} of {int(deps.sum())} break_deps" in estimate.text()
    summary = extrapolation(bandit, choices)
    assert summary.records == [rid for rid, flag in zip(bandit.record_ids, flags) if flag]
    assert summary.shares[DEPS] == pytest.approx((near & deps).sum() / deps.sum(), abs=1e-4)
    assert summary.shares[LOADS] == 0.0 and summary.source == "model"
    assert "break_deps" in summary.text() and "reduce_loads 0 of" in summary.text()


def test_where_nothing_extrapolates_the_estimates_json_is_what_it_was():
    bandit, _ = logs(rare_deps=False)
    choices = [DEPS if i % 2 else LOADS for i in range(N)]
    for estimate in policy_estimates(bandit, choices, resamples=50).values():
        assert estimate.extrapolated == 0 and set(estimate.model_dump()) == BEFORE
        assert "extrapolated" not in estimate.text()
    summary = extrapolation(bandit, choices)
    assert summary.extrapolated == 0 and summary.records == [] and summary.text().startswith("extrapolated: none")


def test_no_change_and_the_deployed_planners_own_choices_never_extrapolate():
    bandit, near = logs(rare_deps=True)
    assert not extrapolated(bandit, np.full(N, -1)).any()  # a rejected directive needs no estimate
    logged = [FAMILIES[k] for k in bandit.logged]
    assert extrapolation(bandit.on_policy(), logged).extrapolated == 0
    # off-policy, the deployed planner's rare near-bound deps attempts are themselves extrapolated records
    assert extrapolation(bandit, logged).extrapolated == int((near & (bandit.logged == 2)).sum())


def test_logged_propensities_define_support_where_present():
    bandit, _ = logs(rare_deps=False)
    bandit.propensity[:10] = [0.98, 0.01, 0.01]  # the planner stated these itself
    bandit.logged_propensity[:10] = True
    choices = [DEPS] * N
    made = extrapolation(bandit, choices)
    assert made.source == "logged + model" and made.records == [f"r{i}" for i in range(10)]
    assert Extrapolation.model_validate(made.model_dump()) == made


def test_per_family_calibration_on_held_out_episodes_has_n_and_intervals():
    rng = np.random.default_rng(1)
    n = 1200
    family = np.arange(n) % 3
    groups = [f"e{i // 20}" for i in range(n)]  # 60 episodes of 20 attempts, every family in each
    observed = rng.gamma(2.0, 0.01, size=n)
    predicted = observed.mean() * np.where(family == 2, 1.5, 1.0) * rng.uniform(0.8, 1.2, size=n)
    predicted[::40] = np.nan  # not held out: left out
    propensity = np.where(np.arange(n) % 10 == 0, 0.01, 0.4)
    made = family_calibration(family, predicted, observed, groups, propensity, resamples=200)
    assert made["support_threshold"] == SUPPORT_THRESHOLD
    rows = made["families"]
    assert sum(row["n"] for row in rows.values()) == n - 30 and all(row["episodes"] == 60 for row in rows.values())
    assert rows[DEPS]["ratio_low"] <= 1.5 * observed.mean() / observed[family == 2].mean() <= rows[DEPS]["ratio_high"]
    assert rows[SCHEDULE]["ratio_low"] < 1.2 < rows[DEPS]["ratio_low"]  # the overrated family stands out
    low = rows[DEPS]["low_propensity"]
    assert low["n"] == int(((family == 2) & (np.arange(n) % 10 == 0) & np.isfinite(predicted)).sum())
    few = family_calibration(family[:60], predicted[:60], observed[:60], groups[:60], resamples=50)
    assert all(row["ratio_low"] is None for row in few["families"].values())  # 3 episodes: no interval
