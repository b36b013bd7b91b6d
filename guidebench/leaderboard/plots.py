"""PNG plots of a leaderboard: metric bars with their intervals, and quality against cost."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from guidebench.leaderboard.models import Leaderboard, headline_metric, lower_is_better

METRICS_PNG = "leaderboard_metrics.png"
QUALITY_COST_PNG = "leaderboard_quality_vs_cost.png"
CHAMPION_COLOR = "#d95f02"
OTHER_COLOR = "#1b9e77"
FRONT_COLOR = "#7570b3"


def _save(figure: Figure, path: Path) -> Path:
    # The Agg canvas object, not pyplot: no global figure state, safe from any thread.
    FigureCanvasAgg(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path


def _interval(value: Optional[float], low: Optional[float], high: Optional[float]) -> tuple[float, float]:
    if value is None or low is None or high is None:
        return 0.0, 0.0
    return max(0.0, value - low), max(0.0, high - value)


def plot_metrics(board: Leaderboard, path: Path, max_metrics: int = 12) -> Path:
    """One panel per headline metric: a bar per variant with its 95% bootstrap interval."""
    metrics = [m for m in board.metric_names() if headline_metric(m)][:max_metrics]
    names = [row.name for row in board.rows]
    cols = min(3, max(1, len(metrics)))
    rows_n = max(1, math.ceil(len(metrics) / cols))
    height = max(1.6, 0.38 * len(names) + 0.9)
    figure = Figure(figsize=(4.6 * cols, height * rows_n), layout="constrained")
    figure.suptitle(f"{board.kind} leaderboard on {board.split} (n={board.n_records}); bars: 95% interval")
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows_n, cols, index + 1)
        values, lows, highs, colors = [], [], [], []
        for row in board.rows:
            item = row.metrics.get(metric)
            value = item.value if item else None
            values.append(0.0 if value is None else value)
            low, high = _interval(value, item.ci_low if item else None, item.ci_high if item else None)
            lows.append(low)
            highs.append(high)
            colors.append(CHAMPION_COLOR if row.champion else OTHER_COLOR)
        positions = list(range(len(names)))
        axes.barh(positions, values, xerr=[lows, highs], color=colors, alpha=0.85,
                  error_kw={"ecolor": "#333333", "capsize": 3, "elinewidth": 1})
        axes.set_yticks(positions, labels=names, fontsize=8)
        axes.invert_yaxis()
        suffix = "  (ranking)" if metric == board.ranking_metric else "  (lower is better)" if lower_is_better(metric) else ""
        axes.set_title(metric + suffix, fontsize=9)
        axes.tick_params(axis="x", labelsize=8)
        axes.grid(axis="x", alpha=0.3)
    return _save(figure, path)


def plot_quality_vs_cost(board: Leaderboard, path: Path) -> Path:
    """Ranking metric (with interval) against cost per 1,000 decisions; the Pareto front joined up."""
    figure = Figure(figsize=(7.5, 4.8), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    points = []
    for row in board.rows:
        metric = row.metrics.get(board.ranking_metric)
        if metric is None or metric.value is None:
            continue
        cost = float(getattr(row.cost, board.cost_axis))
        low, high = _interval(metric.value, metric.ci_low, metric.ci_high)
        axes.errorbar([cost], [metric.value], yerr=[[low], [high]], fmt="o", capsize=4,
                      color=CHAMPION_COLOR if row.champion else OTHER_COLOR,
                      markersize=8 if row.pareto else 6, markeredgecolor="black" if row.pareto else "none")
        axes.annotate(row.name, (cost, metric.value), textcoords="offset points", xytext=(6, 4), fontsize=8)
        points.append((cost, metric.value, row.pareto))
    front = sorted((c, q) for c, q, on_front in points if on_front)
    if len(front) > 1:
        axes.step([c for c, _ in front], [q for _, q in front], where="post", color=FRONT_COLOR,
                  linestyle="--", label="Pareto front")
        axes.legend(fontsize=8, loc="lower right")
    # Rule programs cost zero tokens: a symmetric log axis keeps them on the plot next to LM programs.
    if any(c > 0 for c, _, _ in points):
        axes.set_xscale("symlog", linthresh=1.0)
        axes.set_xlim(left=-0.5)
    else:
        axes.set_xlim(-1.0, 10.0)
        axes.text(0.98, 0.02, "no variant made an LM call", transform=axes.transAxes, ha="right", fontsize=8,
                  color="#555555")
    axes.set_xlabel(f"{board.cost_axis.replace('_', ' ')} per 1,000 decisions")
    axes.set_ylabel(f"{board.ranking_metric} (95% interval)")
    axes.set_title(f"Quality against cost ({board.split}, n={board.n_records})", fontsize=10)
    axes.grid(alpha=0.3)
    return _save(figure, path)


def write_plots(board: Leaderboard, out: Path) -> list[Path]:
    """Write both PNGs into OUT; returns their paths."""
    return [plot_metrics(board, out / METRICS_PNG), plot_quality_vs_cost(board, out / QUALITY_COST_PNG)]
