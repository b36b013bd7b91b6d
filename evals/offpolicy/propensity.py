"""The propensity model: how likely the deployed planner was to choose each family, from the packet alone.

A multinomial logistic model over `runtime.outcome_features.policy_row` (the context and every family's
features), fit on the train split with the outcome model (`optimizers/outcome_fitting.py`) and scored here
with NumPy. A family the deployed planner never chose in train gets probability 0: nothing in the logs
supports an estimate of it (`evals.offpolicy` says "unsupported").

State JSON: {"kind": "planner_propensity", "features_version": 1, "classes": [families it was fit on],
             "mean": [...], "scale": [...], "coef": [[...] per class], "intercept": [...], "fit": {...}}
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from runtime.advisor import FAMILIES
from runtime.outcome import OutcomeModelError
from runtime.outcome_features import FEATURES_VERSION, POLICY_NAMES

PROPENSITY_KIND = "planner_propensity"


def _matrix(state: Mapping[str, Any], key: str, shape: tuple[int, ...]) -> np.ndarray:
    try:
        value = np.asarray(state[key], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        raise OutcomeModelError(f"propensity: `{key}` must be numbers") from None
    if value.shape != shape or not np.all(np.isfinite(value)):
        raise OutcomeModelError(f"propensity: `{key}` must have shape {list(shape)} and finite numbers")
    return value


class PropensityModel:
    """P(family | packet) of the deployed planner: `probabilities(rows)` -> (n, 3) in FAMILIES order."""

    def __init__(self, state: Any) -> None:
        if not isinstance(state, Mapping) or state.get("kind") != PROPENSITY_KIND:
            raise OutcomeModelError(f"a propensity state is a JSON object of kind {PROPENSITY_KIND!r}")
        if state.get("features_version") != FEATURES_VERSION:
            raise OutcomeModelError(f"propensity: features version {state.get('features_version')!r}, expected "
                                    f"{FEATURES_VERSION}: fit it again")
        classes = state.get("classes")
        if not isinstance(classes, list) or not classes or any(c not in FAMILIES for c in classes) \
                or len(set(classes)) != len(classes):
            raise OutcomeModelError(f"propensity: `classes` must list distinct families, got {classes!r}")
        self.classes: list[str] = list(classes)
        width = len(POLICY_NAMES)
        self.mean = _matrix(state, "mean", (width,))
        self.scale = _matrix(state, "scale", (width,))
        if np.any(self.scale <= 0):
            raise OutcomeModelError("propensity: `scale` must hold positive numbers")
        self.coef = _matrix(state, "coef", (len(classes), width))
        self.intercept = _matrix(state, "intercept", (len(classes),))
        self.fit_info: dict[str, Any] = dict(state.get("fit") or {})

    def to_state(self) -> dict[str, Any]:
        """The model as JSON data."""
        return {"kind": PROPENSITY_KIND, "features_version": FEATURES_VERSION, "classes": list(self.classes),
                "mean": self.mean.tolist(), "scale": self.scale.tolist(), "coef": self.coef.tolist(),
                "intercept": self.intercept.tolist(), "fit": dict(self.fit_info)}

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """P(family | row) for policy rows, one column per family of FAMILIES (0 for a class never fit)."""
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        out = np.zeros((len(rows), len(FAMILIES)))
        if len(self.classes) == 1:
            out[:, FAMILIES.index(self.classes[0])] = 1.0
            return out
        z = self.intercept + ((rows - self.mean) / self.scale) @ self.coef.T
        z = np.exp(z - z.max(axis=1, keepdims=True))
        z /= z.sum(axis=1, keepdims=True)
        for k, family in enumerate(self.classes):
            out[:, FAMILIES.index(family)] = z[:, k]
        return out


__all__ = ["PROPENSITY_KIND", "PropensityModel"]
