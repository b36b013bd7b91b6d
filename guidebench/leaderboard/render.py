"""Leaderboard reports: JSON, Markdown, a self-contained HTML page with the plots embedded, and terminal text.

Every rendering names the test behind each p-value and the interval method actually used (as stored
with each comparison and metric), the records compared and a plain-words verdict per row.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Optional

from evals.offpolicy import SUPPORT_THRESHOLD
from evals.stats import MetricValue, describe_interval

from guidebench.evaluation.postmortem import fmt_p, table
from guidebench.leaderboard.models import (
    ALPHA,
    Comparison,
    DecisionView,
    Leaderboard,
    RecordDiff,
    headline_metric,
    lower_is_better,
)
from guidebench.leaderboard.plots import METRICS_PNG, QUALITY_COST_PNG, write_plots
from guidebench.leaderboard.postmortem import html_section, markdown_lines

JSON_FILE = "leaderboard.json"
MARKDOWN_FILE = "leaderboard.md"
HTML_FILE = "leaderboard.html"
DIFF_RECORDS_SHOWN = 12
INPUT_CHARS_SHOWN = 400
COST_COLUMNS = (("lm_decisions", "decisions sent to an LM"), ("lm_calls", "LM calls"), ("prompt_tokens", "prompt tok"), ("completion_tokens", "completion tok"),
                ("total_tokens", "total tok"), ("seconds", "seconds"), ("wall_seconds", "wall s"),
                ("cache_hits", "cache hits"))


# ----- number formatting ------------------------------------------------------------------------

def fmt_number(value: Optional[float], digits: int = 3) -> str:
    """A number for a table cell; an em dash when there is none."""
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def fmt_metric(metric: Optional[MetricValue]) -> str:
    """`value [low, high]` for a metric with its 95% interval."""
    if metric is None or metric.value is None:
        return "—"
    if metric.ci_low is None or metric.ci_high is None:  # e.g. too few episodes: the value, and why no interval
        return f"{fmt_number(metric.value)} ({metric.interval_text()})"
    return f"{fmt_number(metric.value)} [{fmt_number(metric.ci_low)}, {fmt_number(metric.ci_high)}]"


def _p_relation(p_value: Optional[float]) -> str:
    text = fmt_p(p_value)
    return text if text.startswith("<") else f"={text}"


def fmt_diff(comparison: Optional[Comparison]) -> str:
    """`+diff [low, high]` for a paired comparison."""
    if comparison is None or comparison.diff is None:
        return "—"
    if comparison.ci_low is None or comparison.ci_high is None:
        return f"{comparison.diff:+.3f} (no interval)"
    return (f"{comparison.diff:+.3f} [{fmt_number(comparison.ci_low)}, {fmt_number(comparison.ci_high)}]")


def _short(value: Any, limit: int = INPUT_CHARS_SHOWN) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit} chars)"


def _decision_text(view: DecisionView) -> str:
    if view.error:
        return f"error: {view.error}"
    parts = [f"{view.action or '—'}"]
    if view.confidence is not None:
        parts.append(f"conf {view.confidence:.2f}")
    if view.model_action and view.model_action != view.action:
        parts.append(f"model said {view.model_action}")
    if view.guardrail_rule:
        parts.append(f"rule {view.guardrail_rule}")
    text = ", ".join(parts)
    return f"{text}: {view.reason}" if view.reason else text


# ----- JSON -------------------------------------------------------------------------------------

def write_json(board: Leaderboard, path: Path) -> Path:
    """`{"rows": [...], ...}` with every metric as {value, ci_low, ci_high, n}."""
    path.write_text(json.dumps(board.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


# ----- Markdown ---------------------------------------------------------------------------------

def _summary_lines(board: Leaderboard) -> list[tuple[str, str]]:
    return [
        ("Dataset", f"{board.kind} `{board.dataset_id}`"),
        ("Split", f"`{board.split}` (hash `{board.split_hash}`), "
                  + (board.subset if board.subset else f"{board.n_records} records")),
        ("Ranking", f"`{board.ranking_metric}` (higher is better), 95% intervals: {_interval_method(board)}"),
        ("Test", f"paired permutation of the {_units(board)}' assignments vs the champion, two-sided: "
                 f"{_test_methods(board)} "
                 f"on `{board.ranking_metric}` (McNemar's exact test for accuracy); Δ intervals: "
                 f"{_diff_interval_methods(board)}; {VERDICT_RULE}; n = {_compared_n(board)}"),
        ("Champion", f"{board.champion} ({board.champion_rule})"),
        *([("Cycles model", board.cycles_model)] if board.cycles_model else []),
        *([("Off-policy", OFF_POLICY_TEXT)] if _has_off_policy(board) else []),
        ("Cost axis", f"{board.cost_axis.replace('_', ' ')} per 1,000 decisions"),
        ("LM", board.lm or "—"),
        ("Created", board.created_at),
        ("MLflow run", board.mlflow_run_id or "—"),
    ]


OFF_POLICY_TEXT = ("each row's expected improvement of the best per record (cycles) from the logs, doubly robust "
                   "(outcome and propensity models fit on train + dev), 95% interval by a bootstrap over episodes, "
                   "with the effective sample size of its importance weights (\"unsupported\": the logs rarely "
                   "tried that row's choices in such states; docs/offpolicy.md); \"extrapolated\": per family the "
                   "row chose, the share of its records where the deployed planner chose that family with a "
                   "propensity under 0.05, whose estimate rests on the outcome model alone")


VERDICT_RULE = (f"a verdict is the test's at p < {ALPHA:g} and is given only when the Δ interval excludes 0 "
                "(where they disagree: cannot tell apart)")


def _units(board: Leaderboard) -> str:
    """What the paired test swaps: whole episodes on a planner board (its rows say so), else records."""
    return "episodes" if any(row.comparison.n_groups is not None for row in board.rows) else "records"


def _compared_n(board: Leaderboard) -> str:
    """The records the ranking comparisons used (a planner's: records both rows score), and their episodes."""
    rows = _compared_rows(board)
    counts = sorted({row.comparison.n for row in rows})
    text = (f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}") if counts else "0"
    text += f" of {board.n_records} records"
    groups = sorted({row.comparison.n_groups for row in rows if row.comparison.n_groups is not None})
    if groups:
        text += f" in {groups[0]}" + (f"-{groups[-1]}" if len(groups) > 1 else "") + " episodes (the unit)"
    return text


def _has_off_policy(board: Leaderboard) -> bool:
    return any(row.off_policy is not None for row in board.rows)


def _interval_method(board: Leaderboard) -> str:
    """How the board's intervals were computed, from the ranking metric's own record."""
    methods = {(m.method, m.n_resamples, m.n_groups) for row in board.rows
               for m in [row.metrics.get(board.ranking_metric)] if m is not None and getattr(m, "method", None)}
    if not methods:
        return "bootstrap"
    return ", ".join(sorted({describe_interval(method, count, groups) for method, count, groups in methods}))


def _compared_rows(board: Leaderboard) -> list:
    """The challengers' rows (the champion's comparison with itself is the identity), else every row."""
    return [row for row in board.rows if not row.champion] or list(board.rows)


def _test_methods(board: Leaderboard) -> str:
    """The tests the rows' ranking comparisons actually used, in words."""
    return ", ".join(sorted({row.comparison.test() for row in _compared_rows(board)})) or "none"


def _diff_interval_methods(board: Leaderboard) -> str:
    """How the rows' differences with the champion got their intervals, in words."""
    return ", ".join(sorted({row.comparison.interval() for row in _compared_rows(board)
                             if row.comparison.diff is not None})) or "none"


def _ranking_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    off_policy = _has_off_policy(board)
    header = ["#", "variant", board.ranking_metric, f"Δ vs {board.champion}", "p-value", "test", "n", "verdict",
              "errors", f"{board.cost_axis.replace('_', ' ')}/1k", "Pareto"]
    if off_policy:
        header[3:3] = ["improvement, off-policy [95% CI]", "estimator", "ESS", "extrapolated"]
    rows = []
    for row in board.rows:
        name = row.name + (" (champion)" if row.champion else "")
        cells = [str(row.rank), name, fmt_metric(row.metrics.get(board.ranking_metric)),
                 fmt_diff(row.comparison), fmt_p(row.comparison.p_value), row.comparison.test(),
                 str(row.comparison.n), row.verdict(), str(row.errors),
                 fmt_number(getattr(row.cost, board.cost_axis), 1), "yes" if row.pareto else ""]
        if off_policy:
            cell = row.off_policy
            cells[3:3] = ["—", "—", "—", "—"] if cell is None else \
                [cell.text(), cell.estimator.upper(), f"{cell.ess:.1f} of {cell.n}", cell.extrapolated_text()]
        rows.append(cells)
    return header, rows


def _metrics_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """One line per metric, one column per variant (boards are taller than wide)."""
    header = ["metric"] + [row.name for row in board.rows]
    return header, [[m + (" ↓" if lower_is_better(m) else "")] + [fmt_metric(row.metrics.get(m)) for row in board.rows]
                    for m in board.metric_names()]


def _comparisons_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """One line per headline metric, one column per challenger: difference with the champion, interval, p."""
    challengers = [row for row in board.rows if not row.champion]
    metrics = [m for m in board.metric_names() if headline_metric(m) and any(m in r.comparisons for r in challengers)]
    rows = []
    for metric in metrics:
        cells = [metric + (" ↓" if lower_is_better(metric) else "")]
        for row in challengers:
            comparison = row.comparisons.get(metric)
            cells.append("—" if comparison is None or comparison.diff is None else
                         f"{fmt_diff(comparison)} p{_p_relation(comparison.p_value)}"
                         + (" (McNemar)" if comparison.method.startswith("mcnemar") else ""))
        rows.append(cells)
    return [f"metric: row − {board.champion}"] + [row.name for row in challengers], (rows if challengers else [])


def _cost_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    header = ["variant"] + [label for _, label in COST_COLUMNS] + ["Pareto"]
    rows = [[row.name] + [fmt_number(getattr(row.cost, key), 1) for key, _ in COST_COLUMNS]
            + ["yes" if row.pareto else ""] for row in board.rows]
    return header, rows


def _run_links(board: Leaderboard) -> list[tuple[str, str, Optional[str]]]:
    """(variant, MLflow run id, UI link) of each row that has its own run."""
    return [(row.name, row.mlflow_run_id, row.mlflow_url) for row in board.rows if row.mlflow_run_id]


def render_markdown(board: Leaderboard) -> str:
    """The board as Markdown: summary, ranking, all metrics, comparisons, cost, per-record diffs."""
    lines = [f"# Leaderboard: {board.kind}, split `{board.split}`", ""]
    lines += [f"- **{key}**: {value}" for key, value in _summary_lines(board)]
    if board.command:
        lines += ["", "Regenerate with:", "", "```", board.command, "```"]
    lines += ["", "## Ranking", ""] + table(*_ranking_table(board))
    lines += ["", f"Δ is this row minus the champion on the records both score (n in each row: {_compared_n(board)}), "
              "with its 95% interval; its p-value is a paired permutation test (McNemar for accuracy); "
              f"{VERDICT_RULE}. \"Cannot tell apart\" means the data cannot show a difference at p < 0.05, "
              "whatever the point estimates say.", ""]
    if _run_links(board):
        lines += ["Each row's MLflow run (metrics, intervals, per-record results; open with `mlflow ui`):", ""]
        lines += [f"- {name}: [{run_id}]({url})" if url else f"- {name}: {run_id}"
                  for name, run_id, url in _run_links(board)] + [""]
    if _has_off_policy(board):
        lines += ["Off-policy estimates of each row's improvement per record (cycles), every estimator:", ""]
        lines += table(["variant", "DM", "IPW", "DR", f"extrapolated (propensity < {SUPPORT_THRESHOLD:g})"],
                           [[row.name] + [row.off_policy.all.get(k, "—") for k in ("dm", "ipw", "dr")]
                            + [row.off_policy.extrapolated_text()]
                            for row in board.rows if row.off_policy is not None]) + [""]
        lines += ["A record is extrapolated when the deployed planner chose the row's family there with a "
                  f"propensity under {SUPPORT_THRESHOLD:g}: its estimate rests on the outcome model alone "
                  "(docs/offpolicy.md).", ""]
    lines += ["## Every metric (value [95% interval]; ↓ lower is better)", ""] + table(*_metrics_table(board))
    header, rows = _comparisons_table(board)
    if rows:
        lines += ["", "## Paired comparisons with the champion", ""] + table(header, rows)
    lines += ["", "## Cost per 1,000 decisions", ""] + table(*_cost_table(board))
    lines += ["", f"Pareto front ({board.ranking_metric} against {board.cost_axis.replace('_', ' ')}): "
              + ", ".join(board.pareto), ""]
    lines += ["## Plots", "", f"![metrics]({METRICS_PNG})", "", f"![quality against cost]({QUALITY_COST_PNG})", ""]
    lines += markdown_lines(board.postmortem)
    lines += ["## Per-record differences with the champion", ""]
    if not board.diffs:
        lines.append("No challenger on this board.")
    for diff in board.diffs:
        lines += [f"### {diff.challenger} vs {diff.champion}", "",
                  f"{diff.fixed} fixed, {diff.broken} broken, {diff.changed} changed otherwise "
                  f"(by per-record `{diff.score_metric}`).", ""]
        if diff.records:
            lines += table(["record", "change", "label", diff.champion, diff.challenger, "inputs"],
                               [[d.record_id, d.change, d.label or "—", _decision_text(d.champion),
                                 _decision_text(d.challenger), _short(_inputs_digest(d), 240)]
                                for d in diff.records[:DIFF_RECORDS_SHOWN]])
            if len(diff.records) > DIFF_RECORDS_SHOWN:
                lines.append(f"\n… and {len(diff.records) - DIFF_RECORDS_SHOWN} more in {JSON_FILE}.")
            lines.append("")
    if board.notes or any(row.notes for row in board.rows):
        lines += ["## Notes", ""] + [f"- {note}" for note in board.notes]
        lines += [f"- {row.name}: {note}" for row in board.rows for note in row.notes]
    return "\n".join(lines).rstrip() + "\n"


def _inputs_digest(diff: RecordDiff) -> str:
    keep = ("last_turn_status", "turn_error", "turn_plan", "diff_summary", "pending_approvals",
            "pending_tool_inputs", "turn_count", "no_progress_count", "goal", "best_cycles")
    items = [(k, v) for k, v in diff.inputs.items() if k in keep and v not in ("", None, "[]")]
    return "; ".join(f"{k}={_short(v, 80)}" for k, v in (items or list(diff.inputs.items())[:6]))


# ----- HTML -------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2}tr.champion{background:#fff4e5}tr.pareto td.name{font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dl.summary dt{font-weight:600}
img.plot{max-width:100%;border:1px solid #ddd;margin:8px 0}pre{white-space:pre-wrap;font-size:12px;margin:0}
.fixed{color:#1b7e3c}.broken{color:#b3261e}code{background:#f5f5f5;padding:0 3px}
"""


def _h(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_table(header: list[str], rows: list[list[str]], table_id: str, row_classes: Optional[list[str]] = None,
                name_col: int = 0, numeric_from: int = 1) -> str:
    head = "".join(f"<th>{_h(c)}</th>" for c in header)
    body = []
    for index, row in enumerate(rows):
        css = f' class="{row_classes[index]}"' if row_classes and row_classes[index] else ""
        cells = "".join(f'<td class="{"name" if i == name_col else "num" if i >= numeric_from else ""}">'
                        f"{_h(c)}</td>" for i, c in enumerate(row))
        body.append(f"<tr{css}>{cells}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _img(path: Path, alt: str, img_id: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img class="plot" id="{img_id}" alt="{_h(alt)}" src="data:image/png;base64,{data}">'


def _html_diff(diff_board: Any) -> str:
    parts = [f"<h3>{_h(diff_board.challenger)} vs {_h(diff_board.champion)}</h3>",
             f"<p><span class=fixed>{diff_board.fixed} fixed</span>, <span class=broken>{diff_board.broken} "
             f"broken</span>, {diff_board.changed} changed otherwise (per-record "
             f"<code>{_h(diff_board.score_metric)}</code>).</p>"]
    for record in diff_board.records[:DIFF_RECORDS_SHOWN]:
        inputs = "\n".join(f"{k}: {_short(v)}" for k, v in record.inputs.items())
        parts.append(
            f'<details class="record-diff"><summary><code>{_h(record.record_id)}</code> '
            f'<span class="{record.change}">{record.change}</span>; label {_h(record.label or "—")}; '
            f"{_h(diff_board.champion)}: {_h(record.champion.action or record.champion.error or '—')} → "
            f"{_h(diff_board.challenger)}: {_h(record.challenger.action or record.challenger.error or '—')}"
            f"</summary><table><tr><th>{_h(diff_board.champion)}</th><td>{_h(_decision_text(record.champion))}"
            f"</td></tr><tr><th>{_h(diff_board.challenger)}</th><td>{_h(_decision_text(record.challenger))}"
            f"</td></tr><tr><th>inputs</th><td><pre>{_h(inputs)}</pre></td></tr></table></details>")
    if len(diff_board.records) > DIFF_RECORDS_SHOWN:
        parts.append(f"<p>… and {len(diff_board.records) - DIFF_RECORDS_SHOWN} more in {JSON_FILE}.</p>")
    return "".join(parts)


def render_html(board: Leaderboard, plots: dict[str, Path]) -> str:
    """A self-contained page: summary, tables, embedded PNG plots and per-record diffs; no external resource."""
    classes = [" ".join(c for c in ("champion" if r.champion else "", "pareto" if r.pareto else "") if c)
               for r in board.rows]
    summary = "".join(f"<dt>{_h(k)}</dt><dd>{_h(v.replace('`', ''))}</dd>" for k, v in _summary_lines(board))
    sections = [
        f"<h1>Leaderboard: {_h(board.kind)}, split {_h(board.split)}</h1>",
        f'<dl class="summary">{summary}</dl>',
        f"<p>Regenerate: <code>{_h(board.command)}</code></p>" if board.command else "",
        "<h2>Ranking</h2>", _html_table(*_ranking_table(board), table_id="leaderboard-table",
                                        row_classes=classes, name_col=1, numeric_from=2),
        f"<p>Δ is this row minus the champion on the records both score (n in each row: "
        f"{_h(_compared_n(board))}), with its 95% interval ({_h(_diff_interval_methods(board))}); its p-value is a "
        f"paired permutation test ({_h(_test_methods(board))}; McNemar's exact test for accuracy); "
        f"{_h(VERDICT_RULE)}. \"Cannot tell apart\" means the data cannot show a difference at p &lt; {ALPHA:g}, "
        f"whatever the point estimates say.</p>",
        ('<p>Each row\'s MLflow run (metrics, intervals, per-record results):</p><ul id="mlflow-runs">'
         + "".join(f"<li>{_h(name)}: " + (f'<a href="{_h(url)}">{_h(run_id)}</a>' if url else _h(run_id)) + "</li>"
                   for name, run_id, url in _run_links(board)) + "</ul>") if _run_links(board) else "",
        "<h2>Plots</h2>",
        _img(plots[METRICS_PNG], "metric bars with 95% intervals", "plot-metrics"),
        _img(plots[QUALITY_COST_PNG], "quality against cost with the Pareto front", "plot-quality-cost"),
        "<h2>Every metric (value [95% interval]; ↓ lower is better)</h2>",
        _html_table(*_metrics_table(board), table_id="metrics-table", numeric_from=1),
    ]
    header, rows = _comparisons_table(board)
    if rows:
        sections += ["<h2>Paired comparisons with the champion</h2>",
                     _html_table(header, rows, table_id="comparisons-table", numeric_from=1)]
    sections += ["<h2>Cost per 1,000 decisions</h2>",
                 _html_table(*_cost_table(board), table_id="cost-table", row_classes=classes, numeric_from=1),
                 f"<p>Pareto front: {_h(', '.join(board.pareto))}</p>",
                 html_section(board.postmortem),
                 "<h2>Per-record differences with the champion</h2>"]
    sections += [_html_diff(d) for d in board.diffs] or ["<p>No challenger on this board.</p>"]
    notes = board.notes + [f"{row.name}: {note}" for row in board.rows for note in row.notes]
    if notes:
        sections += ["<h2>Notes</h2><ul>" + "".join(f"<li>{_h(n)}</li>" for n in notes) + "</ul>"]
    title = f"guidebench leaderboard: {board.kind} {board.split}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_h(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(s for s in sections if s) + "</body></html>\n")


# ----- terminal ---------------------------------------------------------------------------------

def render_text(board: Leaderboard) -> str:
    """A plain-text ranking: objective with interval, difference with the champion, p, n, test, verdict, cost."""
    lines = [f"{board.kind} leaderboard on {board.split} ({board.n_records} records, dataset {board.dataset_id[:12]}); "
             f"champion {board.champion} ({board.champion_rule})",
             f"test: paired permutation vs the champion, two-sided ({_test_methods(board)}); 95% intervals: "
             f"{_interval_method(board)}; Δ intervals: {_diff_interval_methods(board)}",
             f"{'#':>2}  {'variant':<32} {'objective [95% CI]':<26} {'Δ vs champion [95% CI]':<28} {'p':>7} "
             f"{'n':>5}  {'test':<23} {'verdict':<34} {board.cost_axis + '/1k':>18}  pareto"]
    for row in board.rows:
        comparison = row.comparison
        verdict = row.verdict()
        lines.append(f"{row.rank:>2}  {row.name[:32]:<32} {fmt_metric(row.metrics.get(board.ranking_metric)):<26} "
                     f"{fmt_diff(comparison):<28} {fmt_p(comparison.p_value):>7} {comparison.n:>5}  "
                     f"{comparison.method:<23} {verdict:<34} "
                     f"{fmt_number(getattr(row.cost, board.cost_axis), 1):>18}  {'yes' if row.pareto else ''}")
    return "\n".join(lines)


def write_reports(board: Leaderboard, out: Path) -> dict[str, Path]:
    """Write JSON, Markdown, the PNG plots and the HTML page into OUT; returns name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    plots = {path.name: path for path in write_plots(board, out)}
    files = {JSON_FILE: write_json(board, out / JSON_FILE)}
    (out / MARKDOWN_FILE).write_text(render_markdown(board), encoding="utf-8")
    (out / HTML_FILE).write_text(render_html(board, plots), encoding="utf-8")
    files.update({MARKDOWN_FILE: out / MARKDOWN_FILE, HTML_FILE: out / HTML_FILE, **plots})
    return files
