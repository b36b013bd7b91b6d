"""Seeded simulators that write logs in the real writers' shapes: Full Auto coding-agent runs and
kernel-optimization episodes (the sample data and the tests come from them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guidebench.data.simulators.fullauto import FullAutoSimulator, SimConfig, SimRun
    from guidebench.data.simulators.fullauto_policy import deployed_raw_output
    from guidebench.data.simulators.experiments import simulate_episode, write_episodes, SimulationSummary

_WHERE: dict[str, str] = {
    "FullAutoSimulator": "fullauto", "SimConfig": "fullauto", "SimRun": "fullauto",
    "deployed_raw_output": "fullauto_policy",
    "simulate_episode": "experiments", "write_episodes": "experiments", "SimulationSummary": "experiments",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (keeps `import guidebench.data.simulators` cheap)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
