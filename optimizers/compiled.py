"""Loading a compiled program state back into a program, whatever recipe produced it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import dspy

from runtime.provenance import PROVENANCE_KEY

from .knn_fewshot import NearestDemos, is_knn_state


def load_compiled(program: dspy.Module, state: Mapping[str, Any] | str | Path) -> dspy.Module:
    """The program (a fresh, uncompiled instance) with a compiled state loaded; KNN states come back wrapped."""
    if isinstance(state, (str, Path)):
        state = json.loads(Path(state).read_text(encoding="utf-8"))
    # DSPy's dependency metadata and the compile's provenance (`runtime.provenance`) are about the state, not in it.
    state = {k: v for k, v in dict(state).items() if k not in ("metadata", PROVENANCE_KEY)}
    target: dspy.Module = NearestDemos.wrap(program) if is_knn_state(state) else program
    target.load_state(state)
    return target
