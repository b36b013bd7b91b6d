"""The map that independent units of work go through: this process unless a caller installed another.

Per-record replay, the post-mortem's resamples and the off-policy bootstrap are lists of independent units whose
results are put back in order. One process runs them in its own loops, as it always has. A caller that has a
cluster (`guidebench.cluster`, `--cluster ADDRESS`) installs that cluster's map with `using(...)`, and the same
units run as the engine's tasks. evals cannot import guidebench, so the map comes down as a callable in a context
variable, not as an import: the code paths below test `distributed()` and keep their one-process loop otherwise.

A map takes a function of one item and a list of items, and returns the results in the items' order. The function
is pickled (cloudpickle) to the engine's workers: it must not need this process's state (an LM configured here,
open files).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")
TaskMap = Callable[[Callable[[Any], Any], Sequence[Any]], list]

_CURRENT: ContextVar[Optional[TaskMap]] = ContextVar("evals_task_map", default=None)


def distributed() -> bool:
    """Whether a caller installed a map of its own (a cluster's) for this context."""
    return _CURRENT.get() is not None


def task_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`[fn(item) for item in items]`, through the installed map when there is one (results in the items' order)."""
    mapper = _CURRENT.get()
    if mapper is None:
        return [fn(item) for item in items]
    return list(mapper(fn, list(items)))


@contextmanager
def using(mapper: Optional[TaskMap]) -> Iterator[None]:
    """Run the block with `mapper` as the map of every `task_map` in it (None: this process)."""
    token = _CURRENT.set(mapper)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def chunks(n: int, size: int) -> list[tuple[int, int]]:
    """(start, stop) of consecutive chunks of `size` over `n` items (the last one shorter)."""
    return [(start, min(start + size, n)) for start in range(0, n, max(1, size))]


__all__ = ["TaskMap", "chunks", "distributed", "task_map", "using"]
