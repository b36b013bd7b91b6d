"""The anytime-valid test of each watched metric against its baseline, run on the new records of one pass.

Each metric holds its running confidence sequence (`evals.sequential.RunningSequence`: Howard, Ramdas, McAuliffe &
Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of Statistics 2021, the
empirical-Bernstein sequence with the stitching boundary). The budget (`_base`): alpha_k = alpha / K for each of the
loop's K metrics (Bonferroni), half for the baseline's interval, half for the sequence. The sequence is checked at
every record, so an alarm names the record at which it started; once started it stays (a confidence sequence that
excluded the baseline once has shown the change: reset the monitor after acting on it).

A metric without a baseline from the champion's evidence takes it from the reference window: its first
`reference` live observations, measured once (and then never part of the sequence); its interval allows for records
that come in clusters (batch means, `reference_baseline`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from evals.sequential import RunningSequence, fixed_interval, sequence_bounds

from guidebench.monitor._base import (
    SERIES_POINTS,
    Alarm,
    Baseline,
    LoopKind,
    MetricSpec,
    MetricState,
    MonitorState,
    SeriesPoint,
)

BATCHES = 10  # the reference window's batches for its batch-means interval
WINDOW = 200  # a series point every so many observations of a metric (and one at the end of every run)


@dataclass
class Observations:
    """The new observations of one metric in this pass, in record order."""

    values: list[float] = field(default_factory=list)  # as added; `clipped` puts them in [0, 1]
    at: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)

    def add(self, value: float, at: str, where: str) -> None:
        """One observation in [0, 1] of the record at `where`, logged at `at` (clipped once per pass, in numpy: a
        pass adds some 100,000)."""
        self.values.append(value)
        self.at.append(at)
        self.where.append(where)

    def clipped(self) -> np.ndarray:
        """The values as floats in [0, 1]."""
        return np.clip(np.asarray(self.values, dtype=float), 0.0, 1.0)


def metric_alpha(state: MonitorState, specs: Sequence[MetricSpec]) -> float:
    """This loop's share of the budget for each metric (Bonferroni over the metrics)."""
    return state.alpha / len(specs)


def batch_size(reference: int) -> int:
    """Records per batch of the reference window (BATCHES batches)."""
    return max(reference // BATCHES, 1)


def reference_baseline(spec: MetricSpec, metric: MetricState, alpha_k: float) -> Baseline:
    """The reference window's baseline: its mean and an interval at half the metric's share, the wider of the
    independent-records interval (`fixed_interval`) and the batch-means interval (Student t over the means of
    BATCHES consecutive batches), so that records that come in clusters (a session's turns, an episode's
    attempts) do not make the baseline look surer than it is."""
    value = metric.reference_total / metric.reference_n
    low, high = fixed_interval(value, metric.reference_n, alpha=alpha_k / 2, binary=spec.binary)
    size = batch_size(metric.reference_n)
    means = np.asarray(metric.reference_batches[:BATCHES], dtype=float) / size
    if len(means) >= 2:
        from scipy.stats import t

        radius = float(t.ppf(1 - alpha_k / 4, len(means) - 1) * means.std(ddof=1) / np.sqrt(len(means)))
        low, high = min(low, max(value - radius, 0.0)), max(high, min(value + radius, 1.0))
    return Baseline(value=value, low=low, high=high, n=metric.reference_n,
                    source=f"the reference window: the first {metric.reference_n} live records")


def _take_reference(spec: MetricSpec, metric: MetricState, values: np.ndarray, reference: int,
                    alpha_k: float) -> int:
    """Move observations into the reference window until it is full; returns how many it took."""
    if metric.baseline is not None:
        return 0
    take = min(max(reference - metric.reference_n, 0), len(values))
    size = batch_size(reference)
    window = values[:take].tolist()  # Python floats, summed in order as always
    for offset, value in enumerate(window):
        index = (metric.reference_n + offset) // size
        if index >= len(metric.reference_batches):
            metric.reference_batches.append(0.0)
        metric.reference_batches[index] += value
    metric.reference_n += take
    metric.reference_total += float(sum(window))
    if metric.reference_n >= reference > 0:
        metric.baseline = reference_baseline(spec, metric, alpha_k)
    return take


def _points(metric: MetricState, mean: np.ndarray, low: np.ndarray, high: np.ndarray, n0: int,
            at: list[str]) -> None:
    steps = [i for i in range(len(mean)) if (n0 + i + 1) % WINDOW == 0]
    if len(mean) and (not steps or steps[-1] != len(mean) - 1):
        steps.append(len(mean) - 1)
    for i in steps:
        metric.series.append(SeriesPoint(n=n0 + i + 1, at=at[i], mean=float(mean[i]), low=float(low[i]),
                                         high=float(high[i])))
    while len(metric.series) > SERIES_POINTS:  # thin the older half, keep the latest points
        half = len(metric.series) // 2
        metric.series = metric.series[:half:2] + metric.series[half:]


def _alarm_at(spec: MetricSpec, base: Baseline, low: np.ndarray, high: np.ndarray) -> tuple[Optional[int], str]:
    above = low > base.high
    below = np.zeros_like(above) if spec.one_sided else high < base.low
    hits = np.flatnonzero(above | below)
    if not hits.size:
        return None, ""
    i = int(hits[0])
    return i, "above" if above[i] else "below"


def update_metric(spec: MetricSpec, metric: MetricState, obs: Observations, *, loop: LoopKind, alpha_k: float,
                  reference: int, advice: str = "") -> Optional[Alarm]:
    """Count this pass's observations of one metric; returns an alarm that started in this pass."""
    values = obs.clipped()
    skip = _take_reference(spec, metric, values, reference, alpha_k)
    values = values[skip:]
    if not values.size or metric.baseline is None:
        return None
    at, where = obs.at[skip:], obs.where[skip:]
    if metric.n == 0:
        metric.first_record = where[0]
    metric.last_record = where[-1]
    n0 = metric.n
    running = RunningSequence(n=metric.n, total=metric.total, v=metric.v, start=metric.baseline.value)
    mean, v = running.extend(values)
    metric.n, metric.total, metric.v = running.n, running.total, running.v
    cs_alpha = alpha_k if spec.exact is not None else alpha_k / 2
    low, high = sequence_bounds(mean, v, n0 + np.arange(1, values.size + 1), alpha=cs_alpha, scale=1.0)
    _points(metric, mean, low, high, n0, at)
    if metric.alarm is not None:  # it stays; its current interval moves on
        metric.alarm = metric.alarm.model_copy(update=dict(mean=float(mean[-1]), low=float(low[-1]),
                                                           high=float(high[-1]), n=metric.n,
                                                           last_record=where[-1]))
        return None
    index, direction = _alarm_at(spec, metric.baseline, low, high)
    if index is None:
        return None
    metric.alarm = Alarm(metric=spec.name, loop=loop, direction=direction, baseline=metric.baseline,
                         started_n=n0 + index + 1, started_at=at[index], started_record=where[index],
                         mean=float(mean[-1]), low=float(low[-1]), high=float(high[-1]), n=metric.n,
                         first_record=metric.first_record, last_record=where[-1], alpha=alpha_k,
                         meaning=spec.meaning, advice=advice)
    return metric.alarm


def current(metric: MetricState) -> Optional[SeriesPoint]:
    """The metric's latest point (None before its sequence has a record)."""
    return metric.series[-1] if metric.series else None
