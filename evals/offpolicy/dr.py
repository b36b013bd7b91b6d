"""Doubly robust (Dudík, Langford & Li 2011), self-normalized: the direct method corrected by weighted residuals.

V = mean_i q(x_i, target_i) + (acting share) * sum_i w_i (y_i - q(x_i, logged_i)) / sum_i w_i, with w_i the
clipped importance weight (0 unless the logged family is the target's choice). Unbiased when either the outcome
model or the propensities are right. The residuals' weighted mean is normalized by the weights' sum, as the Open
Bandit Pipeline's `SelfNormalizedDoublyRobust` does: with few episodes (a test split of a handful of them) the
unnormalized correction swings with every large weight, the normalized one stays within the residuals' range.
"""

from __future__ import annotations

import numpy as np

from ._base import Estimator, importance_weights
from .bandit import LoggedBandit


class DoublyRobust(Estimator):
    """V = mean_i q(x_i, target_i) + acting share * sum_i w_i r_i / sum_i w_i."""

    name = "dr"
    title = "doubly robust (outcome model + self-normalized propensity weights)"

    def columns(self, bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The model's value of each choice, weighted residuals, weights, acting records and a count."""
        w = importance_weights(bandit, target)
        q = np.nan_to_num(bandit.q_of(target))
        residual = np.where(w > 0, np.nan_to_num(bandit.observed) - q, 0.0)
        return {"value": q, "wr": w * residual, "w": w, "acting": (target >= 0).astype(float),
                "count": np.ones(bandit.n)}

    def combine(self, sums: dict[str, np.ndarray]) -> np.ndarray:
        """Direct method plus the acting share times the self-normalized residual mean (0 without a weight)."""
        correction = np.where(sums["w"] > 0, sums["wr"] / np.where(sums["w"] > 0, sums["w"], 1.0), 0.0)
        return sums["value"] / sums["count"] + sums["acting"] / sums["count"] * correction


__all__ = ["DoublyRobust"]
