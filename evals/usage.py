"""LM call accounting: every LM call (model id, tokens, latency, cache hit, error) lands in the active ledgers.

Use it as::

    with track_calls() as ledger:
        program(**inputs)
    ledger.totals()  # {"lm_calls": 1, "prompt_tokens": 361, ...}

How calls reach a ledger: `LMCallRecorder` is a DSPy callback that `guidebench.lm.factory.make_lm`
(or `instrument(lm)`) attaches to an LM. Around each call it installs a per-call DSPy usage
tracker, so it sees exactly the usage DSPy accounts for that call; a call that never reports
usage was answered from DSPy's cache. Active ledgers live in DSPy's thread-local settings
overrides, which `dspy.Evaluate`/`dspy.Parallel` copy into their worker threads; a plain
`contextvars.ContextVar` would not reach those threads.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Optional

from dspy.dsp.utils.settings import thread_local_overrides
from dspy.dsp.utils.utils import dotdict
from dspy.utils.callback import BaseCallback

# Key under which the active ledgers ride in DSPy's thread-local settings overrides.
_LEDGERS_KEY = "guidebench_usage_ledgers"
TOTAL_KEYS: tuple[str, ...] = (
    "lm_calls", "prompt_tokens", "completion_tokens", "total_tokens", "cache_hits", "latency_s",
    "prompt_tokens_evaluated", "prompt_tokens_reused",
)


@dataclass(frozen=True)
class LMCall:
    """One LM call as the ledger saw it."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    # Prompt tokens the LM did not evaluate because their state was cached (a reused prefix); the
    # time of a local call follows the evaluated ones (`prompt_tokens - prompt_tokens_reused`).
    prompt_tokens_reused: int = 0
    cache_hit: bool = False
    error: Optional[str] = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (with total_tokens)."""
        return {**asdict(self), "total_tokens": self.total_tokens}

    @property
    def prompt_tokens_evaluated(self) -> int:
        """Prompt tokens the LM evaluated: all of them but the reused prefix."""
        return max(0, self.prompt_tokens - self.prompt_tokens_reused)


class UsageLedger:
    """Thread-safe list of the LM calls made while it was active."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[LMCall] = []

    def record(self, call: LMCall) -> None:
        """Append one call."""
        with self._lock:
            self._calls.append(call)

    @property
    def calls(self) -> list[LMCall]:
        """A snapshot of the recorded calls, oldest first."""
        with self._lock:
            return list(self._calls)

    @property
    def errors(self) -> int:
        """Number of calls that raised."""
        return sum(1 for call in self.calls if call.error)

    def totals(self) -> dict[str, Any]:
        """Sums over all calls: lm_calls, prompt/completion/total tokens, cache_hits, latency_s."""
        return _totals(self.calls)

    def by_model(self) -> dict[str, dict[str, Any]]:
        """The same sums, per model id."""
        models: dict[str, list[LMCall]] = {}
        for call in self.calls:
            models.setdefault(call.model, []).append(call)
        return {model: _totals(calls) for model, calls in models.items()}

    def __len__(self) -> int:
        return len(self.calls)


def _totals(calls: list[LMCall]) -> dict[str, Any]:
    prompt = sum(call.prompt_tokens for call in calls)
    completion = sum(call.completion_tokens for call in calls)
    reused = sum(call.prompt_tokens_reused for call in calls)
    return {
        "lm_calls": len(calls),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cache_hits": sum(1 for call in calls if call.cache_hit),
        "latency_s": round(sum(call.latency_s for call in calls), 6),
        "prompt_tokens_evaluated": prompt - reused,
        "prompt_tokens_reused": reused,
    }


def active_ledgers() -> tuple[UsageLedger, ...]:
    """The ledgers active in this context (innermost last)."""
    return tuple(thread_local_overrides.get().get(_LEDGERS_KEY) or ())


@contextmanager
def _overrides(**values: Any) -> Iterator[None]:
    # Only our keys: dspy.context() would also snapshot the global config (lm, adapter) and hide a
    # later dspy.configure() made inside the block.
    token = thread_local_overrides.set(dotdict({**thread_local_overrides.get(), **values}))
    try:
        yield
    finally:
        thread_local_overrides.reset(token)


@contextmanager
def track_calls() -> Iterator[UsageLedger]:
    """Record every LM call made inside the block (nested blocks all see the call)."""
    ledger = UsageLedger()
    with _overrides(**{_LEDGERS_KEY: active_ledgers() + (ledger,)}):
        yield ledger


def record_call(call: LMCall) -> None:
    """Add one call to every active ledger."""
    for ledger in active_ledgers():
        ledger.record(call)


class _CallUsage:
    """DSPy usage tracker for exactly one LM call; forwards to the tracker it replaced."""

    def __init__(self, outer: Any) -> None:
        self.outer = outer
        self.reported = False
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.prompt_tokens_reused = 0

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        self.reported = True
        self.prompt_tokens += _count(usage_entry.get("prompt_tokens"))
        self.completion_tokens += _count(usage_entry.get("completion_tokens"))
        details = usage_entry.get("prompt_tokens_details")
        if isinstance(details, dict):
            self.prompt_tokens_reused += _count(details.get("cached_tokens"))
        if self.outer is not None:
            self.outer.add_usage(lm, usage_entry)

    def __deepcopy__(self, memo: dict) -> "_CallUsage":
        # DSPy deep-copies the usage tracker into worker threads; a call's tracker is never shared.
        return self


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass
class _PendingCall:
    model: str
    started: float
    usage: _CallUsage
    token: Any
    ledgers: tuple[UsageLedger, ...]


class LMCallRecorder(BaseCallback):
    """DSPy callback that turns every call of the LM it is attached to into an `LMCall`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, _PendingCall] = {}

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        ledgers = active_ledgers()
        if not ledgers:
            return
        overrides = thread_local_overrides.get()
        usage = _CallUsage(overrides.get("usage_tracker"))
        token = thread_local_overrides.set(dotdict({**overrides, "usage_tracker": usage}))
        pending = _PendingCall(str(getattr(instance, "model", "unknown")), time.perf_counter(), usage, token, ledgers)
        with self._lock:
            self._pending[call_id] = pending

    def on_lm_end(self, call_id: str, outputs: Any, exception: Optional[Exception] = None) -> None:
        with self._lock:
            pending = self._pending.pop(call_id, None)
        if pending is None:
            return
        latency = time.perf_counter() - pending.started
        try:
            thread_local_overrides.reset(pending.token)
        except ValueError:  # ended in another context than it started: drop only our tracker
            overrides = thread_local_overrides.get()
            thread_local_overrides.set(dotdict({**overrides, "usage_tracker": pending.usage.outer}))
        usage = pending.usage
        call = LMCall(
            model=pending.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            prompt_tokens_reused=min(usage.prompt_tokens_reused, usage.prompt_tokens),
            latency_s=latency,
            # DSPy reports usage for every call it sends; only a cache hit reports none.
            cache_hit=exception is None and not usage.reported,
            error=None if exception is None else f"{type(exception).__name__}: {exception}"[:300],
        )
        for ledger in pending.ledgers:
            ledger.record(call)


_RECORDER = LMCallRecorder()


def instrument(lm: Any) -> Any:
    """Attach the call recorder to an LM (idempotent); returns the same LM."""
    callbacks = list(getattr(lm, "callbacks", None) or [])
    if not any(isinstance(callback, LMCallRecorder) for callback in callbacks):
        callbacks.append(_RECORDER)
        lm.callbacks = callbacks
    return lm
