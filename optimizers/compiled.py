"""Loading a compiled program state back into a program, whatever recipe produced it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import dspy

from runtime.provenance import PROVENANCE_KEY

from .knn_fewshot import KNN_STATE_KEY, NearestDemos, is_knn_state


class StateMismatchError(ValueError):
    """A state that is not the program's: it holds entries the program has no place for, or predictors of
    another signature (DSPy's `load_state` would drop or misplace them without a word)."""


def load_compiled(program: dspy.Module, state: Mapping[str, Any] | str | Path) -> dspy.Module:
    """The program (a fresh, uncompiled instance) with a compiled state loaded; KNN states come back wrapped.

    Raises `StateMismatchError` for the state of another program.
    """
    if isinstance(state, (str, Path)):
        state = json.loads(Path(state).read_text(encoding="utf-8"))
    # DSPy's dependency metadata and the compile's provenance (`runtime.provenance`) are about the state, not in it.
    state = {k: v for k, v in dict(state).items() if k not in ("metadata", PROVENANCE_KEY)}
    target: dspy.Module = NearestDemos.wrap(program) if is_knn_state(state) else program
    before = {name: (parameter, _input_prefixes(parameter)) for name, parameter in target.named_predictors()}
    target.load_state(state)
    _check_fits(target, state, before)
    return target


def _input_prefixes(predictor: dspy.Predict) -> list[str]:
    return [str((field.json_schema_extra or {}).get("prefix", "")) for field in predictor.signature.input_fields.values()]


def _check_fits(target: dspy.Module, state: Mapping[str, Any],
                before: Mapping[str, tuple[dspy.Predict, list[str]]]) -> None:
    """Raise `StateMismatchError` when the loaded `state` holds more than `target`'s parameters, or a predictor
    state of another signature: another number of fields, or other input prefixes than the predictor had
    before the load (`before`: name -> (predictor, its input prefixes); optimizers rewrite instructions and
    output prefixes, never the inputs')."""
    parameters = dict(target.named_parameters())
    unused = sorted(set(state) - set(parameters) - {KNN_STATE_KEY})
    if unused:
        has = ", ".join(sorted(parameters)) or "none"
        raise StateMismatchError(f"the state holds {', '.join(unused)}, which the program does not have "
                                 f"(its parameters: {has})")
    for name, predictor in target.named_predictors():
        fields = ((state.get(name) or {}).get("signature") or {}).get("fields")
        if not isinstance(fields, list):
            continue
        if len(fields) != len(predictor.signature.fields):
            raise StateMismatchError(f"the state's predictor {name} has {len(fields)} signature fields, the "
                                     f"program's has {len(predictor.signature.fields)}")
        original, prefixes = before.get(name, (None, []))
        saved = [str((field or {}).get("prefix", "")) for field in fields[:len(prefixes)]]
        if original is predictor and saved != prefixes:  # a predictor the load rebuilt has no "before"
            theirs, ours = next((a, b) for a, b in zip(saved, prefixes) if a != b)
            raise StateMismatchError(f"the state's predictor {name} reads other inputs than the program's "
                                     f"({theirs!r} where it reads {ours!r})")
