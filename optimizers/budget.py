"""Compile budgets: a cap on LM calls and tokens that stops a compile cleanly.

A `BudgetGuard` is a DSPy callback that sees every LM call (global callbacks run for every LM,
including the copies optimizers make with `lm.copy(...)`). Before a call would exceed the budget
it raises `BudgetExceeded`; `Recipe.compile` catches it at the compile boundary, keeps the best
program found so far and marks the result as stopped by budget.

Only new LM work counts: calls answered from DSPy's cache (a resumed compile replays its
finished calls from the cache) cost nothing. Token counts come from the `evals.usage` ledger,
so they are exact for instrumented LMs (`evals.usage.instrument`); a call on an LM that is not
instrumented still counts as one call.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from dspy.dsp.utils.settings import settings, thread_local_overrides
from dspy.dsp.utils.utils import dotdict
from dspy.utils.callback import BaseCallback

from evals.usage import UsageLedger, track_calls


@dataclass(frozen=True)
class Budget:
    """Limits of one compile; None means unlimited."""

    max_lm_calls: Optional[int] = None
    max_tokens: Optional[int] = None

    def __post_init__(self) -> None:
        for name in ("max_lm_calls", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")

    @property
    def unlimited(self) -> bool:
        """True when neither limit is set."""
        return self.max_lm_calls is None and self.max_tokens is None

    def as_params(self) -> dict[str, Any]:
        """The limits as tracking params ('none' when unset)."""
        return {"budget.max_lm_calls": self.max_lm_calls if self.max_lm_calls is not None else "none",
                "budget.max_tokens": self.max_tokens if self.max_tokens is not None else "none"}


class BudgetExceeded(BaseException):
    """Raised before an LM call that the budget does not allow.

    A BaseException on purpose, like KeyboardInterrupt: DSPy's callback runner, its parallel
    executor, optimizers and programs all catch `Exception` to score a failed call as 0 and go on;
    the budget must cross them to reach the compile boundary.
    """

    def __init__(self, reason: str, usage: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.usage = usage


class BudgetGuard(BaseCallback):
    """DSPy callback that refuses LM calls beyond a `Budget` and meters the calls it let through."""

    def __init__(self, budget: Optional[Budget] = None) -> None:
        self.budget = budget or Budget()
        self._lock = threading.Lock()
        self._started = 0
        self._tripped: Optional[str] = None
        # One ledger per activation: a compile retried after transient LM failures activates the
        # guard again, and the budget covers every attempt.
        self._ledgers: list[UsageLedger] = []

    # -- accounting -------------------------------------------------------------------------
    def usage(self) -> dict[str, Any]:
        """Calls and tokens so far: ledger totals plus `lm_calls_started` and `paid_calls`."""
        with self._lock:
            return self._usage()

    def _usage(self) -> dict[str, Any]:
        totals = _sum_totals([ledger.totals() for ledger in self._ledgers])
        # Calls the ledger has not seen (uninstrumented LMs, calls in flight) count as paid.
        paid = max(self._started, totals["lm_calls"]) - totals["cache_hits"]
        return {**totals, "lm_calls_started": self._started, "paid_calls": paid}

    @property
    def tripped(self) -> Optional[str]:
        """Why the budget stopped the compile, or None."""
        return self._tripped

    def _check(self) -> None:
        usage = self._usage()
        reason = None
        if self.budget.max_lm_calls is not None and usage["paid_calls"] >= self.budget.max_lm_calls:
            reason = f"LM-call budget reached ({usage['paid_calls']} of {self.budget.max_lm_calls} calls)"
        elif self.budget.max_tokens is not None and usage["total_tokens"] >= self.budget.max_tokens:
            reason = f"token budget reached ({usage['total_tokens']} of {self.budget.max_tokens} tokens)"
        if reason is not None:
            self._tripped = self._tripped or reason
            raise BudgetExceeded(reason, usage)

    # -- DSPy callback ----------------------------------------------------------------------
    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        """Refuse the call when the budget is spent; otherwise count it as started."""
        with self._lock:
            self._check()
            self._started += 1

    @contextmanager
    def active(self) -> Iterator["BudgetGuard"]:
        """Install the guard (first of all callbacks) and its ledger for the block."""
        with track_calls() as ledger:
            with self._lock:
                self._ledgers.append(ledger)
            current = list(settings.callbacks or [])
            # First, so that a refused call never opens another callback's span or pending entry.
            callbacks = [self, *(c for c in current if c is not self)]
            token = thread_local_overrides.set(dotdict({**thread_local_overrides.get(), "callbacks": callbacks}))
            try:
                yield self
            finally:
                thread_local_overrides.reset(token)


def _sum_totals(parts: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("lm_calls", "prompt_tokens", "completion_tokens", "total_tokens", "cache_hits", "latency_s")
    summed: dict[str, Any] = {key: sum(part.get(key, 0) for part in parts) for key in keys}
    summed["latency_s"] = round(summed["latency_s"], 6)
    return summed
