"""Decision programs (DSPy modules and no-LM reference policies) and their registry.

`programs.get(name)` builds a fresh program; `programs.names()` lists them; inputs and labeled
examples come from `decision_inputs` / `planner_inputs` / `decision_example` / `planner_example`.
Names are re-exported lazily (`runtime._lazy`): listing the registry imports no DSPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from .inputs import (CARRIED_FEATURES, DECISION_EXTRA_FIELDS, LOGGED_FIELDS, PLANNER_EXTRA_FIELDS,
                         blocked_families, decision_example, decision_fit_fields, decision_inputs, example_features,
                         packet_from_inputs, planner_example, planner_inputs, planner_labeled,
                         tail_entries)
    from .registry import KINDS, ProgramSpec, UnknownProgramError, get, names, register, resolve, spec, specs
    from .results import decision_prediction, directive_prediction, safe_directive

_INPUTS = ("CARRIED_FEATURES", "DECISION_EXTRA_FIELDS", "LOGGED_FIELDS", "PLANNER_EXTRA_FIELDS", "blocked_families",
           "decision_example", "decision_fit_fields", "decision_inputs", "example_features", "packet_from_inputs",
           "planner_example", "planner_inputs", "planner_labeled", "tail_entries")
_REGISTRY = ("KINDS", "ProgramSpec", "UnknownProgramError", "get", "names", "register", "resolve", "spec", "specs")
_RESULTS = ("decision_prediction", "directive_prediction", "safe_directive")
_WHERE: dict[str, str] = {**dict.fromkeys(_INPUTS, "inputs"), **dict.fromkeys(_REGISTRY, "registry"),
                          **dict.fromkeys(_RESULTS, "results")}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
