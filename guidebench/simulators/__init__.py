"""Seeded simulators that write logs in the real writers' shapes: Full Auto coding-agent runs and
kernel-optimization episodes (the sample data and the tests come from them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.simulators.fullauto import FullAutoSimulator, SimRun
    from guidebench.simulators.fullauto_world import SimConfig
    from guidebench.simulators.fullauto_policy import deployed_raw_output
    from guidebench.simulators.experiments import simulate_episode, write_episodes, SimulationSummary

_WHERE: dict[str, str] = {
    "FullAutoSimulator": "fullauto", "SimConfig": "fullauto_world", "SimRun": "fullauto",
    "deployed_raw_output": "fullauto_policy",
    "simulate_episode": "experiments", "write_episodes": "experiments", "SimulationSummary": "experiments",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
