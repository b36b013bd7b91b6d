"""Direct method: the outcome model's expected improvement of each record's chosen family, averaged.

Low variance, no propensities; biased wherever the outcome model is wrong (it extrapolates to families the
logs rarely tried, and a program that chooses by the same model is rated by its own optimism).
"""

from __future__ import annotations

import numpy as np

from ._base import Estimator
from .bandit import LoggedBandit


class DirectMethod(Estimator):
    """V = mean_i q(x_i, target_i)."""

    name = "dm"
    title = "direct method (outcome model)"

    def columns(self, bandit: LoggedBandit, target: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The model's value of each record's choice, and a count."""
        return {"value": np.nan_to_num(bandit.q_of(target)), "count": np.ones(bandit.n)}

    def combine(self, sums: dict[str, np.ndarray]) -> np.ndarray:
        """Their mean."""
        return sums["value"] / sums["count"]


__all__ = ["DirectMethod"]
