"""Doubly robust (Dudík, Langford & Li 2011): the direct method corrected by the weighted residuals.

V = mean_i [ q(x_i, target_i) + w_i (y_i - q(x_i, logged_i)) ], with w_i the clipped importance weight (0 unless
the logged family is the target's choice). Unbiased when either the outcome model or the propensities are right;
its variance is the residuals', not the outcomes', so it is usually tighter than IPW. As in the Open Bandit
Pipeline's `DoublyRobust`, the weights are clipped, not normalized.
"""

from __future__ import annotations

import numpy as np

from ._base import Estimator, importance_weights
from .bandit import LoggedBandit


class DoublyRobust(Estimator):
    """V = mean_i [q(x_i, target_i) + w_i (y_i - q(x_i, logged_i))]."""

    name = "dr"
    title = "doubly robust (outcome model + propensity weights)"

    def columns(self, bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Per-record DR terms, and a count."""
        w = importance_weights(bandit, target)
        q = np.nan_to_num(bandit.q_of(target))
        residual = np.where(w > 0, np.nan_to_num(bandit.observed) - q, 0.0)
        return {"value": q + w * residual, "count": np.ones(bandit.n)}

    def combine(self, sums: dict[str, np.ndarray]) -> np.ndarray:
        """Their mean."""
        return sums["value"] / sums["count"]


__all__ = ["DoublyRobust"]
