"""optimizers.budget: the guard counts calls and tokens and stops at the token budget."""

from __future__ import annotations

import pytest

import programs
from optimizer_support import decision_examples
from optimizers.budget import Budget, BudgetExceeded, BudgetGuard

DEV = decision_examples(6, offset=100)


def test_token_budget_and_guard_accounting(fake_lm):
    guard = BudgetGuard(Budget(max_tokens=1))
    with guard.active():
        programs.get("full_auto.predict")(**DEV[0].inputs())
        with pytest.raises(BudgetExceeded, match="token budget"):
            programs.get("full_auto.predict")(**DEV[1].inputs())
    usage = guard.usage()
    assert usage["lm_calls"] == 1 and usage["total_tokens"] > 1 and guard.tripped
    with pytest.raises(ValueError):
        Budget(max_lm_calls=-1)
