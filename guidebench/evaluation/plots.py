"""Plots of one replay: confusion matrix and confidence calibration (Full Auto), effect calibration
and family choice (planner). PNG files, matplotlib's Agg backend, no display needed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from evals.metrics_fullauto import DISPATCH_ACTIONS, ECE_BINS, dispatch_action  # noqa: E402


def _save(fig: Any, ax: Any, path: Path, title: str, *, xlabel: str = "", ylabel: str = "",
          fontsize: int = 10) -> Path:
    """Label the axes, title the plot, write it as a PNG and free the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=fontsize)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion_png(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Outcome label (rows) against enforced action (columns) over labeled records."""
    labels = list(DISPATCH_ACTIONS)
    counts = [[0] * len(labels) for _ in labels]
    for row in rows:
        truth, got = dispatch_action(row.get("label_action")), dispatch_action(row.get("enforced_action"))
        if truth in labels and got in labels:
            counts[labels.index(truth)][labels.index(got)] += 1
    fig, ax = plt.subplots(figsize=(4.6, 4.0))
    ax.imshow(counts, cmap="Blues")
    peak = max(max(r) for r in counts) or 1
    for i, row in enumerate(counts):
        for j, value in enumerate(row):
            ax.text(j, i, str(value), ha="center", va="center", color="white" if value > peak / 2 else "black")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    return _save(fig, ax, path, title, xlabel="enforced action", ylabel="outcome label")


def calibration_png(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Reliability diagram: accuracy of the model's own action against its confidence, per bin."""
    bins = [[0, 0.0, 0.0] for _ in range(ECE_BINS)]  # count, confidence sum, correct sum
    for row in rows:
        correct = row["scores"].get("model_correct", math.nan)
        if correct is None or math.isnan(correct):
            continue
        confidence = min(1.0, max(0.0, float(row.get("model_confidence", 0.0))))
        index = min(int(confidence * ECE_BINS), ECE_BINS - 1)
        bins[index][0] += 1
        bins[index][1] += confidence
        bins[index][2] += correct
    fig, ax = plt.subplots(figsize=(4.6, 4.0))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
    xs = [b[1] / b[0] for b in bins if b[0]]
    ys = [b[2] / b[0] for b in bins if b[0]]
    sizes = [20 + 180 * b[0] / max(1, max(c[0] for c in bins)) for b in bins if b[0]]
    ax.plot(xs, ys, color="tab:blue", linewidth=1)
    ax.scatter(xs, ys, s=sizes, color="tab:blue", label="model (size = records)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, ax, path, title, xlabel="model confidence", ylabel="share of right actions")


def effect_calibration_png(rows: Sequence[Mapping[str, Any]], path: Path, title: str, estimator: str = "") -> Path:
    """Planner: predicted cycle drop (-expected_effect_cycles) against the cycles model's expected drop."""
    xs, ys = [], []
    for row in rows:
        effect, gain = row.get("expected_effect_cycles"), row["scores"].get("cycles_improvement", math.nan)
        if isinstance(effect, (int, float)) and not isinstance(effect, bool) and gain == gain:
            xs.append(-float(effect))
            ys.append(float(gain))
    fig, ax = plt.subplots(figsize=(4.6, 4.0))
    if xs:
        low, high = min(xs + ys + [0.0]), max(xs + ys + [1.0])
        ax.plot([low, high], [low, high], linestyle="--", color="grey", linewidth=1)
        ax.scatter(xs, ys, s=18, alpha=0.7, color="tab:orange")
    return _save(fig, ax, path, title, xlabel="predicted drop of the best (cycles)",
                 ylabel=f"expected drop, {estimator or 'cycles'} model (cycles)")


def family_png(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Planner: chosen families, split by whether they complied with the pivot policy."""
    families = ("family:schedule", "family:reduce_loads", "family:break_deps")
    ok = [sum(1 for r in rows if r.get("strategy_family") == f and r["scores"].get("pivot_compliance") == 1.0)
          for f in families]
    bad = [sum(1 for r in rows if r.get("strategy_family") == f and r["scores"].get("pivot_compliance") != 1.0)
           for f in families]
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    names = [f.split(":")[1] for f in families]
    ax.bar(names, ok, color="tab:green", label="compliant")
    ax.bar(names, bad, bottom=ok, color="tab:red", label="not compliant")
    ax.legend(fontsize=8)
    return _save(fig, ax, path, title, ylabel="directives")


def offpolicy_calibration_png(calibration: Mapping[str, Any], path: Path, title: str) -> Path:
    """Reliability plot of the outcome model: each bin's mean predicted against mean observed improvement (cycles),
    with the observed mean's 95% interval, and the diagonal."""
    bins = calibration.get("bins") or []
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    if bins:
        predicted = [b["predicted"] for b in bins]
        observed = [b["observed"] for b in bins]
        errors = [[b["observed"] - b["observed_low"] for b in bins], [b["observed_high"] - b["observed"] for b in bins]]
        ax.errorbar(predicted, observed, yerr=errors, fmt="o", color="#1f77b4", capsize=3, label="bins (95% CI)")
        top = max(max(predicted), max(b["observed_high"] for b in bins), 1.0)
        ax.plot([0, top], [0, top], color="#999999", linestyle="--", linewidth=1, label="calibrated")
        ratio, corr, cover = (calibration.get(k) for k in ("mean_ratio", "correlation", "coverage"))
        ax.text(0.02, 0.98, f"n {calibration['n']}; mean ratio {ratio if ratio is None else round(ratio, 2)}; "
                f"corr {corr if corr is None else round(corr, 2)}; coverage {cover if cover is None else round(cover, 2)}",
                transform=ax.transAxes, va="top", fontsize=7)
        ax.legend(loc="lower right", fontsize=7)
    return _save(fig, ax, path, title, xlabel="predicted improvement (cycles)", ylabel="observed improvement (cycles)",
                 fontsize=9)


def replay_plots(kind: str, rows: Sequence[Mapping[str, Any]], out_dir: Path, program: str,
                 estimator: str = "") -> dict[str, Path]:
    """Write the plots of one replay into out_dir (a planner's effect against `estimator`, its cycles model's
    name); returns {name: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind == "full_auto":
        return {
            "confusion_matrix": confusion_png(rows, out_dir / "confusion_matrix.png", f"{program}: label vs enforced"),
            "calibration": calibration_png(rows, out_dir / "calibration.png", f"{program}: confidence calibration"),
        }
    return {
        "calibration": effect_calibration_png(rows, out_dir / "calibration.png",
                                              f"{program}: expected_effect_cycles calibration", estimator),
        "families": family_png(rows, out_dir / "families.png", f"{program}: families chosen"),
    }
