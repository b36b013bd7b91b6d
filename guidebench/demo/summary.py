"""What the demo reads back from its commands' outputs and prints: leaderboard rows, the closing lines, the
summary file.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

from guidebench.demo.plan import SUMMARY_FILE
from guidebench.errors import GuidebenchError


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuidebenchError(f"{path}: expected output is missing or unreadable: {exc}") from None


def metric_value(metrics: dict[str, Any], name: str = "objective") -> Optional[float]:
    value = (metrics or {}).get(name)
    if isinstance(value, dict):
        value = value.get("value")
    return None if value is None else float(value)


def board_rows(board: dict[str, Any], top: Optional[int] = None) -> list[dict[str, Any]]:
    """Leaderboard rows reduced to what a summary needs: rank, name, objective with interval, comparison
    (difference, p, records compared, test, plain-words verdict), the share of decisions sent to an LM and
    the cost per 1,000 decisions."""
    from evals.stats import describe_test

    from guidebench.leaderboard.models import Comparison

    rows = []
    for row in board.get("rows", [])[:top]:
        metrics = row.get("metrics") or {}
        objective = metrics.get("objective") or {}
        comparison = row.get("comparison") or {}
        cost = row.get("cost") or {}
        compared = Comparison.model_validate(comparison) if comparison else None
        verdict = "champion" if row.get("champion") else compared.verdict() if compared else "not compared"
        rows.append({"rank": row.get("rank"), "name": row.get("name"), "source": row.get("source"),
                     "objective": objective.get("value"), "ci_low": objective.get("ci_low"),
                     "ci_high": objective.get("ci_high"), "n": objective.get("n"),
                     "diff_vs_champion": comparison.get("diff"), "p_value": comparison.get("p_value"),
                     "n_compared": comparison.get("n"), "test": describe_test(comparison.get("method")),
                     "test_detail": compared.test() if compared else None,
                     "ci_method": comparison.get("ci_method"), "verdict": verdict,
                     "lm_share": metric_value(metrics, "lm_share"),
                     "cost_per": cost.get("per_decisions", 1000), "lm_decisions_per_1k": cost.get("lm_decisions"),
                     "lm_calls_per_1k": cost.get("lm_calls"), "tokens_per_1k": cost.get("total_tokens"),
                     "seconds_per_1k": cost.get("seconds"), "champion": row.get("champion", False)})
    return rows


def fmt(value: Optional[float], digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def fmt_count(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_rows(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Leaderboard rows as aligned text lines: objective, the comparison with the champion (records compared,
    test, plain-words verdict), then the share of decisions sent to an LM and the cost per 1,000 decisions."""
    lines = [f"  {'#':>2}  {'variant':<34} {'objective [95% CI]':<24} {'n':>4}  {'test vs champion':<28} "
             f"{'verdict':<36} {'LM share':>8} {'LM calls/1k':>11} {'tokens/1k':>10} {'s/1k':>7}"]
    for row in rows:
        interval = f"{fmt(row['objective'])} [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]"
        n = row.get("n_compared")
        lines.append(f"  {row['rank']:>2}  {str(row['name'])[:34]:<34} {interval:<24} {'-' if n is None else n:>4}  "
                     f"{str(row.get('test') or '-'):<28} {str(row.get('verdict') or '-'):<36} "
                     f"{fmt(row.get('lm_share'), 2):>8} {fmt_count(row.get('lm_calls_per_1k')):>11} "
                     f"{fmt_count(row.get('tokens_per_1k')):>10} {fmt_count(row.get('seconds_per_1k')):>7}")
    return lines


def ui_command(tracking_uri: str) -> str:
    """The command that opens the MLflow UI on a store (a server URI is already a UI)."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"open {tracking_uri} in a browser"
    return f"mlflow ui --backend-store-uri {tracking_uri}"


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def quality_and_cost(row: dict[str, Any]) -> str:
    """One board row in words: quality with its interval, the share of decisions sent to the LM, cost per 1,000."""
    per = row.get("cost_per") or 1000
    return (f"{row['name']}: objective {fmt(row['objective'])} [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}] "
            f"on {row.get('n')} test records; {fmt(row.get('lm_share'), 2)} of its decisions sent to the LM; per "
            f"{per:,} decisions {fmt_count(row.get('lm_calls_per_1k'))} LM calls, {fmt_count(row.get('tokens_per_1k'))} "
            f"tokens, {fmt_count(row.get('seconds_per_1k'))} s")


def closing_lines(summary: dict[str, Any]) -> list[str]:
    """The short summary printed at the end of the demo."""
    out = Path(summary["out"])
    lines = [f"\nguidebench demo ({summary['mode']}) finished in {summary['wall_s'] / 60:.1f} min"]
    for family, title in (("full_auto", "Full Auto"), ("planner", "planner")):
        board = (summary.get("leaderboards") or {}).get(family)
        if board:
            lines.append(f"{title} leaderboard ({board['split']}, {board['n_records']} records), top rows:")
            lines += format_rows(board["rows"][:5])
    promotion = summary.get("promotion") or {}
    export = summary.get("export") or {}
    mlflow = summary.get("mlflow") or {}
    lines += [
        f"reports:         {out / 'reports'}  (baselines.md; leaderboard-*/leaderboard.html opens in a browser)",
        f"compiles:        {out / 'compiles'}  (per split: metrics, per-record results, confusion matrix, "
        "calibration)",
        f"exported module: {export.get('dir')}  (promotion: {promotion.get('outcome', 'n/a')})",
        f"  it is          {quality_and_cost(export['board_row']) if export.get('board_row') else 'n/a'}",
        f"load it:         {export.get('load')}",
    ]
    shadow = summary.get("shadow")
    if shadow:
        lines.append(f"shadow gate:     {shadow['verdict']} after {shadow['decided_at'] or shadow['n']} labeled decisions "
                     f"(plot {shadow['plot']})")
    lines += [
        f"MLflow:          {mlflow.get('tracking_uri')}",
        f"open its UI:     {mlflow.get('ui_command')}",
        f"summary:         {out / SUMMARY_FILE}",
    ]
    return lines
