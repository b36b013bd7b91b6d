"""Reaping dead trials: a dead worker's trial is failed and retried, a live one is left alone."""

import time
import warnings

import optuna
from optuna.storages import RDBStorage, RetryFailedTrialCallback, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from guidebench.search.workers import reap_stale_trials


def _study(url: str) -> optuna.Study:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = RDBStorage(url, heartbeat_interval=30, grace_period=1,
                             heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1))
    return optuna.create_study(study_name="reap", storage=storage, direction="maximize", load_if_exists=True)


def test_a_trial_killed_before_its_first_heartbeat_is_failed_and_retried(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _study(url)
    silent = study.ask()  # a worker died between ask() and its heartbeat thread's first beat
    beating = study.ask()
    time.sleep(1.5)
    study._storage.record_heartbeat(beating._trial_id)  # a live worker keeps beating

    assert reap_stale_trials(url, grace_s=1) == {"reap": [silent.number]}

    trials = {t.number: t for t in _study(url).get_trials(deepcopy=False)}
    assert trials[silent.number].state == TrialState.FAIL
    assert trials[beating.number].state == TrialState.RUNNING
    retries = [t for t in trials.values() if RetryFailedTrialCallback.retried_trial_number(t) == silent.number]
    assert len(retries) == 1 and retries[0].state == TrialState.WAITING


def test_a_trial_that_just_started_is_not_reaped(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _study(url)
    fresh = study.ask()

    assert reap_stale_trials(url, grace_s=60) == {}
    assert _study(url).trials[fresh.number].state == TrialState.RUNNING


def test_a_search_starting_again_reaps_a_trial_that_never_beat(tmp_path, monkeypatch):
    from optimizers import search

    monkeypatch.setattr(search, "GRACE_S", 1)
    study = _study(f"sqlite:///{tmp_path / 'study.db'}")
    silent = study.ask()  # no owner recorded, no heartbeat: killed right after ask()
    time.sleep(1.5)

    assert search.reap_dead_trials(study) == [silent.number]
    assert study.trials[silent.number].state == TrialState.FAIL
