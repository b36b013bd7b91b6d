"""Decision programs (DSPy modules and no-LM reference policies) and their registry.

`programs.get(name)` builds a fresh program; `programs.names()` lists them; inputs and labeled
examples come from `decision_inputs` / `planner_inputs` / `decision_example` / `planner_example`.
"""

from .inputs import (
    DECISION_EXTRA_FIELDS,
    LOGGED_FIELDS,
    PLANNER_EXTRA_FIELDS,
    blocked_families,
    decision_example,
    decision_inputs,
    packet_from_inputs,
    planner_example,
    planner_inputs,
    tail_entries,
)
from .registry import KINDS, ProgramSpec, UnknownProgramError, get, names, register, resolve, spec, specs
from .results import decision_prediction, directive_prediction, safe_directive

__all__ = [
    "DECISION_EXTRA_FIELDS", "KINDS", "LOGGED_FIELDS", "PLANNER_EXTRA_FIELDS", "ProgramSpec",
    "UnknownProgramError", "blocked_families", "decision_example", "decision_inputs", "decision_prediction",
    "directive_prediction", "get", "names", "packet_from_inputs", "planner_example", "planner_inputs",
    "register", "resolve", "safe_directive", "spec", "specs", "tail_entries",
]
