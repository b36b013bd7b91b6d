"""The logged attempts as a bandit: what is usable, and logs with nothing usable."""

from __future__ import annotations

from evals.offpolicy.bandit import training_data
from runtime.outcome_features import POLICY_NAMES, ROW_NAMES


def test_logs_with_no_usable_attempt_give_an_empty_table_not_a_crash():
    """Old-shape logs whose strategy_tags[0] is never a family used to crash the fit with a reshape error (a
    traceback on `guidebench eval` of small logs); the fit now says in one line that nothing is usable."""
    data = training_data([])
    assert data.n == 0 and data.rows.shape == (0, len(ROW_NAMES)) and data.policy_rows.shape == (0, len(POLICY_NAMES))
