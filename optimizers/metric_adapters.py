"""Metric adapters: a plain metric as DSPy's bootstrap wants it (score, or pass/fail when tracing) and as
GEPA's feedback metric.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import dspy

Metric = Callable[..., Any]


def scalar_metric(metric: Metric, threshold: Optional[float] = None) -> Metric:
    """A metric DSPy's bootstrap can use: float score, or pass/fail against threshold when tracing."""
    def wrapped(example: Any, pred: Any, trace: Any = None) -> Any:
        value = _as_float(metric(example, pred, trace))
        if trace is not None and threshold is not None:
            return value >= threshold
        return value
    wrapped.__name__ = getattr(metric, "__name__", "metric")
    return wrapped


def feedback_from_scalar(metric: Metric) -> Metric:
    """A GEPA feedback metric built from a plain metric when no feedback metric is given."""
    def feedback(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None) -> Any:
        score = _as_float(metric(gold, pred, trace))
        return dspy.Prediction(score=score, feedback=f"This answer scored {score:.2f} of 1.")
    feedback.__name__ = getattr(metric, "__name__", "metric")
    return feedback


def _as_float(value: Any) -> float:
    score = getattr(value, "score", value)
    if isinstance(score, bool):
        return 1.0 if score else 0.0
    return float(score)
