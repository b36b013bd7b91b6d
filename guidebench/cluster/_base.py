"""What every engine gives guidebench: a map of independent tasks whose results come back in order."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Sequence

from guidebench.errors import GuidebenchError

ENV = "GUIDEBENCH_CLUSTER"  # the address when --cluster is not given


class ClusterError(GuidebenchError):
    """The cluster could not be reached, or went away while tasks ran (one line naming its address)."""


class Executor(ABC):
    """Runs `fn(item)` for each item somewhere, and returns the results in the items' order."""

    name: str = ""
    address: str = ""

    @abstractmethod
    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list:
        """The results of `fn` over `items`, in order; a task's own exception is raised here as it was raised."""

    def close(self) -> None:
        """Let go of the engine (a cluster keeps running: it is its operator's)."""

    def describe(self) -> str:
        """One line for a report: the engine and where it runs."""
        return self.name
