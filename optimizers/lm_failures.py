"""Transient and fatal LM failures during a compile: which failures a wait can cure, the callback that
counts them per attempt, the backoff between attempts (`Recipe.compile` retries the optimizer).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from dspy.dsp.utils.settings import settings, thread_local_overrides
from dspy.dsp.utils.utils import dotdict
from dspy.utils.callback import BaseCallback
from dspy.utils.exceptions import (LMAuthError, LMBillingError, LMConfigurationError, LMUnsupportedModelError,
                                   is_retryable_lm_error)

MAX_BACKOFF_S = 60.0


@contextmanager
def extra_callbacks(*callbacks: Any) -> Iterator[None]:
    """Add DSPy callbacks for the block (after the ones already active), in this thread and its DSPy workers."""
    current = list(settings.callbacks or [])
    token = thread_local_overrides.set(dotdict({**thread_local_overrides.get(),
                                                "callbacks": [*current, *callbacks]}))
    try:
        yield
    finally:
        thread_local_overrides.reset(token)


def is_transient_lm_error(exc: BaseException) -> bool:
    """True when an LM failure (or what caused it) is worth retrying: rate limit, timeout, 5xx, lost connection."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, Exception) and is_retryable_lm_error(current):
            return True
        if isinstance(current, (TimeoutError, ConnectionError)):
            return True
        current = current.__cause__ or current.__context__
    return False


# LM failures no retry cures: the compile stops instead of building a program without the LM.
FATAL_LM_ERRORS: tuple[type[Exception], ...] = (LMAuthError, LMBillingError, LMConfigurationError,
                                                LMUnsupportedModelError)


class LMFailures(BaseCallback):
    """The LM calls of a compile attempt that failed after the LM's own retries: transient ones and fatal ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0  # transient failures
        self.last: Optional[str] = None
        self.retry_after: Optional[float] = None
        self.fatal: Optional[Exception] = None

    def on_lm_end(self, call_id: str, outputs: Any, exception: Optional[Exception] = None) -> None:
        """Record a call that ended in a transient or a fatal failure."""
        if isinstance(exception, FATAL_LM_ERRORS):
            with self._lock:
                self.fatal = self.fatal or exception
            return
        if exception is None or not is_transient_lm_error(exception):
            return
        hint = getattr(exception, "retry_after", None)
        with self._lock:
            self.count += 1
            self.last = short_error(exception)
            if isinstance(hint, (int, float)) and 0 <= hint < float("inf"):
                self.retry_after = max(self.retry_after or 0.0, float(hint))


def backoff(base: float, attempt: int, retry_after: Optional[float]) -> float:
    """Exponential backoff (base, 2 base, 4 base, ... capped), never shorter than the provider's retry_after."""
    delay = min(base * (2 ** attempt), MAX_BACKOFF_S)
    return min(max(delay, retry_after or 0.0), MAX_BACKOFF_S)


def short_error(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
