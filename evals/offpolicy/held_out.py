"""The outcome model's calibration per family on episodes it did not see: predicted against observed gain share.

The fit (`optimizers.outcome_fitting`) splits the logged attempts into folds of whole episodes, fits on the other
folds and predicts each fold's attempts (the same folds that choose the model). Its per-family scale
(`family_scale`) is itself set from those predictions, so here each fold's predictions are scaled by the factor the
OTHER folds give: neither the model nor its scale saw the attempts it is checked on. Per family: the attempts and
episodes checked, the mean predicted and observed improvement (share of the best), their ratio with a 95% interval
from a bootstrap over episodes (none under `evals.stats.MIN_GROUPS` episodes), the correlation attempt by
attempt, and the same ratio on the attempts whose family the deployed planner chose with a propensity under
`SUPPORT_THRESHOLD` (where the outcome model's estimates are extrapolations: see `_base`), n next to each.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from runtime.advisor import FAMILIES

from ..stats import MIN_GROUPS
from ._base import SUPPORT_THRESHOLD, episode_bootstrap


def _ratio(predicted: np.ndarray, observed: np.ndarray, groups: np.ndarray, *, resamples: int,
           seed: int) -> dict[str, Any]:
    """n, episodes, means, their ratio and its episode-bootstrap interval."""
    n, episodes = int(len(predicted)), int(len(np.unique(groups)))
    mean_obs = float(observed.mean()) if n else math.nan
    out: dict[str, Any] = {"n": n, "episodes": episodes, "predicted": float(predicted.mean()) if n else None,
                           "observed": mean_obs if n else None,
                           "ratio": float(predicted.sum() / observed.sum()) if n and observed.sum() > 0 else None,
                           "ratio_low": None, "ratio_high": None}
    if out["ratio"] is not None and episodes >= MIN_GROUPS:
        low, high = episode_bootstrap({"p": predicted, "o": observed}, groups, lambda s: s["p"] / s["o"],
                                      resamples=resamples, seed=seed)
        if math.isfinite(low) and math.isfinite(high):
            out["ratio_low"], out["ratio_high"] = low, high
    return out


def family_calibration(family: np.ndarray, predicted: np.ndarray, observed: np.ndarray, groups: Sequence[str],
                       propensity: Optional[np.ndarray] = None, *, resamples: int = 1000,
                       seed: int = 0) -> dict[str, Any]:
    """Per family (index into FAMILIES per attempt): held-out `predicted` against `observed` gain shares (NaN
    predictions: not held out, left out), with `propensity` (the deployed planner's probability of the logged family)
    splitting off the attempts under SUPPORT_THRESHOLD."""
    codes = np.unique(np.asarray(groups), return_inverse=True)[1]
    keep = np.isfinite(predicted) & np.isfinite(observed)
    families: dict[str, Any] = {}
    for k, name in enumerate(FAMILIES):
        mine = keep & (family == k)
        if not mine.any():
            continue
        row = _ratio(predicted[mine], observed[mine], codes[mine], resamples=resamples, seed=seed)
        spread = mine.sum() > 1 and predicted[mine].std() > 0 and observed[mine].std() > 0
        row["correlation"] = float(np.corrcoef(predicted[mine], observed[mine])[0, 1]) if spread else None
        if propensity is not None:
            low = mine & (np.nan_to_num(propensity, nan=0.0) < SUPPORT_THRESHOLD)
            row["low_propensity"] = _ratio(predicted[low], observed[low], codes[low], resamples=resamples, seed=seed)
        families[name] = row
    return {"what": "held-out episodes (grouped folds): predicted / observed improvement share per family",
            "support_threshold": SUPPORT_THRESHOLD, "families": families}


__all__ = ["family_calibration"]
