"""This process: the default, and what a cluster's results are checked against."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from guidebench.cluster._base import Executor


class LocalExecutor(Executor):
    """Runs every task in this process, in order."""

    name = "local"

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list:
        return [fn(item) for item in items]
