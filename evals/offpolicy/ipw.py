"""Inverse propensity weighting, self-normalized and clipped (SNIPS).

Only records whose logged family is the target's choice count, each weighted by 1 / P(deployed planner chose it)
(clipped at `CLIP`); the weighted mean of their observed improvements is normalized by the weights' sum, so a
propensity model that is off by a constant factor cancels out. Records where the target makes no change are
worth 0 exactly. Unbiased up to the clipping when the propensities are right, whatever the outcome model; high
variance when the weights are uneven (see the effective sample size).
"""

from __future__ import annotations

import numpy as np

from ._base import Estimator, importance_weights
from .bandit import LoggedBandit


class SelfNormalizedIPW(Estimator):
    """V = (acting share) * sum_i w_i y_i / sum_i w_i."""

    name = "ipw"
    title = "inverse propensity weighting (self-normalized, clipped)"

    def columns(self, bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Weighted observations, weights, acting records and all records."""
        w = importance_weights(bandit, target)
        return {"wy": w * np.nan_to_num(bandit.observed), "w": w, "acting": (target >= 0).astype(float),
                "count": np.ones(bandit.n)}

    def combine(self, sums: dict[str, np.ndarray]) -> np.ndarray:
        """Acting share times the self-normalized weighted mean."""
        return sums["acting"] / sums["count"] * sums["wy"] / sums["w"]


__all__ = ["SelfNormalizedIPW"]
