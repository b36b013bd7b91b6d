"""The monitor's renderings: a terminal table and a self-contained HTML page (the time series of every metric with
its confidence band and the baseline's band, the alarms, the counts), built as the leaderboard's page is: PNG plots
embedded as data URIs, no external resource."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Optional

from guidebench.leaderboard.render import _CSS, _h, _html_table, _img
from guidebench.monitor._base import METHOD, MonitorState
from guidebench.monitor.run import summary_rows

HTML_FILE = "monitor.html"
PLOT_ID = "plot-monitor"


def _fmt(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.4f}"


def table_rows(state: MonitorState) -> tuple[list[str], list[list[str]]]:
    """Header and rows: metric, status, live n, live mean [CS], baseline [interval], baseline source."""
    header = ["metric", "status", "live n", "live mean [confidence sequence]", "baseline [interval]", "baseline from"]
    rows = []
    for row in summary_rows(state):
        base = row["baseline"]
        status = row["status"] if base is not None else f"reference window {row['reference']}/{state.reference}"
        rows.append([row["metric"], status, str(row["n"]),
                     f"{_fmt(row['mean'])} [{_fmt(row['low'])}, {_fmt(row['high'])}]" if row["mean"] is not None
                     else "—",
                     f"{base.value:.4f} [{base.low:.4f}, {base.high:.4f}]" if base else "—",
                     f"{base.source} (n={base.n})" if base else "—"])
    return header, rows


def render_text(state: MonitorState) -> str:
    """The terminal table, then one line per alarm in force."""
    header, rows = table_rows(state)
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header[:5], widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) for r in rows]
    lines += [m.alarm.line() for m in state.metrics.values() if m.alarm is not None]
    return "\n".join(lines)


def plot(state: MonitorState, path: Path) -> Path:
    """One panel per metric: running mean, its confidence band, the baseline and its band, the alarm's start."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(state.metrics)
    cols = 3
    rows = (len(names) + cols - 1) // cols
    figure = Figure(figsize=(5.0 * cols, 3.0 * rows))
    FigureCanvasAgg(figure)
    for index, name in enumerate(names):
        metric = state.metrics[name]
        axes = figure.add_subplot(rows, cols, index + 1)
        if metric.baseline is not None:
            base = metric.baseline
            axes.axhspan(base.low, base.high, color="#d95f02", alpha=0.15, label="baseline interval")
            axes.axhline(base.value, color="#d95f02", linewidth=1, label="baseline")
        if metric.series:
            n = [p.n for p in metric.series]
            axes.fill_between(n, [p.low for p in metric.series], [p.high for p in metric.series], color="#1b9e77",
                              alpha=0.25, step="post", label="confidence sequence")
            axes.plot(n, [p.mean for p in metric.series], color="#1b9e77", linewidth=1.5, label="live mean")
        if metric.alarm is not None:
            axes.axvline(metric.alarm.started_n, color="#b3261e", linestyle="--", label="alarm")
        axes.set_title(f"{name}{' (ALARM)' if metric.alarm else ''}", fontsize=10,
                       color="#b3261e" if metric.alarm else "black")
        axes.set_xlabel("live records", fontsize=8)
        axes.tick_params(labelsize=8)
        if index == 0:
            axes.legend(fontsize=7, loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    return path


def render_html(state: MonitorState, champion: str, command: str = "") -> str:
    """The self-contained page."""
    with tempfile.TemporaryDirectory() as work:
        image = _img(plot(state, Path(work) / "monitor.png"), "each metric's live mean, confidence sequence and "
                     "baseline", PLOT_ID)
    header, rows = table_rows(state)
    alarms = [m.alarm for m in state.metrics.values() if m.alarm is not None]
    alarm_rows = [[a.metric, a.direction, f"{a.mean:.4f} [{a.low:.4f}, {a.high:.4f}]", str(a.n),
                   f"{a.baseline.value:.4f} [{a.baseline.low:.4f}, {a.baseline.high:.4f}]",
                   f"record {a.started_n} ({a.started_at}; {a.started_record})", a.advice] for a in alarms]
    counts = [[k, str(v)] for k, v in sorted(state.counts.items())]
    sections = [
        f"<h1>Monitor: {_h(champion or state.module or state.loop)}</h1>",
        f"<p>Logs <code>{_h(state.logs)}</code>; {state.records} records over {state.runs} runs; last run "
        f"{_h(state.updated_at)}. Alarms in force: <strong id=\"alarm-count\">{len(alarms)}</strong>.</p>",
        f"<p>Method: {_h(METHOD)}. The chance that any alarm ever fires with no change is at most "
        f"{state.alpha:g} (each of the {len(state.metrics)} metrics: {state.alpha / len(state.metrics):.4g}).</p>",
        f"<p>Command: <code>{_h(command)}</code></p>" if command else "",
        "<h2>Alarms</h2>",
        _html_table(["metric", "direction", "live [CS]", "n", "baseline [interval]", "started", "what to do"],
                    alarm_rows, table_id="alarms-table", numeric_from=2) if alarm_rows else "<p>None.</p>",
        "<h2>Metrics</h2>", _html_table(header, rows, table_id="metrics-table", numeric_from=2),
        "<h2>Time series</h2>", image,
        "<h2>Counts</h2>", _html_table(["count", "value"], counts, table_id="counts-table"),
    ]
    if state.quarantine:
        sections += ["<h2>Quarantined lines (latest)</h2>",
                     _html_table(["file", "line", "field", "error"],
                                 [[q.file, str(q.line), q.field, q.error] for q in state.quarantine],
                                 table_id="quarantine-table", numeric_from=9)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>guidebench monitor</title><style>{_CSS}</style></head><body>"
            + "\n".join(s for s in sections if s) + "</body></html>\n")


def write_html(state: MonitorState, out: Path, champion: str = "", command: str = "") -> Path:
    """Write the page to OUT (a file ending .html, else OUT/monitor.html)."""
    path = out if out.suffix == ".html" else out / HTML_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(".tmp")
    temp.write_text(render_html(state, champion, command), encoding="utf-8")
    temp.replace(path)
    return path


def describe(values: dict[str, Any]) -> str:
    """Counts as one line."""
    return ", ".join(f"{k} {v}" for k, v in sorted(values.items()))
