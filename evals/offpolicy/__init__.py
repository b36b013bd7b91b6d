"""Off-policy estimates of a planner's improvement from logs another planner (the deployed one) produced.

The logs are a contextual bandit (`bandit`): per record the packet, the family the deployed planner tried and
what it brought. An outcome model (`runtime.outcome`) and a propensity model (`propensity`) fit on the train
split feed three estimators, one module each behind `_base.Estimator`: the direct method (`direct`),
self-normalized clipped inverse propensity weighting (`ipw`) and doubly robust (`dr`), each with an interval
from a bootstrap over episodes and a support diagnostic (effective sample size; "unsupported" instead of a
number where the logs never tried the program's choices in similar states). `summary` runs them on a program's
choices, says which records rest on the outcome model alone (`extrapolation`: their choice had a propensity under
`SUPPORT_THRESHOLD`), and measures the outcome model's calibration on the logged attempts. See docs/offpolicy.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from ._base import SUPPORT_THRESHOLD, Estimator, FamilySupport, OffPolicyEstimate
    from .bandit import LoggedBandit, TrainingData, choices_of, observed_improvement, training_data
    from .direct import DirectMethod
    from .dr import DoublyRobust
    from .ipw import SelfNormalizedIPW
    from .propensity import PropensityModel
    from .summary import Calibration, Extrapolation, calibration, extrapolation, observed_mean, policy_estimates

_WHERE: dict[str, str] = {
    "Estimator": "_base", "FamilySupport": "_base", "OffPolicyEstimate": "_base", "SUPPORT_THRESHOLD": "_base",
    "LoggedBandit": "bandit", "TrainingData": "bandit", "choices_of": "bandit", "observed_improvement": "bandit",
    "training_data": "bandit",
    "DirectMethod": "direct", "DoublyRobust": "dr", "SelfNormalizedIPW": "ipw", "PropensityModel": "propensity",
    "Calibration": "summary", "Extrapolation": "summary", "calibration": "summary",
    "extrapolation": "summary", "observed_mean": "summary", "policy_estimates": "summary",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
