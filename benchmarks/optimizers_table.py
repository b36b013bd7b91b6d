"""The measured table of reports/optimizers.md: one row per compile, read from each compile's compile.json.

    python -m benchmarks.optimizers_table .guidebench/compiles/opt-*      # rewrite the table's section

Every number comes from a compile's own output folder (`guidebench compile --out DIR`): the test objective
with its interval on the records the compile evaluated, the paired difference with the uncompiled program
on the same records (test and interval named), McNemar's test on action accuracy, the compile's LM calls
and tokens, and the wall time of compile plus evaluations. Nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional

from benchmarks.report import write_section
from evals.stats import describe_interval, describe_test

REPORT = Path(__file__).resolve().parents[1] / "reports" / "optimizers.md"
MARKER = "optimizers-table"


def _fmt(value: Optional[float], sign: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.3f}" if sign else f"{value:.3f}"


def _interval(metric: dict[str, Any], sign: bool = False) -> str:
    return f"{_fmt(metric.get('value', metric.get('diff')), sign)} [{_fmt(metric.get('ci_low'), sign)}, " \
           f"{_fmt(metric.get('ci_high'), sign)}]"


def _p(value: Optional[float], permutations: Optional[int] = None) -> str:
    if value is None:
        return "n/a"
    if permutations and value <= 1 / (permutations + 1) + 1e-12:
        return f"≤ {value:.4f} (floor)"  # no random assignment reached the observed difference
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def lm_half(folder: Path) -> str:
    """How the compile's LM half answered the test turns it decided that were labeled pause or review.

    Recall: of the LM-decided turns labeled pause or review, how many it answered pause or review (its own
    action, before the guardrails); precision: of its pause and review answers, how many were labeled so.
    A program that routes no turn (every turn is its LM's) counts all of them.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    path = folder / "test" / "results.parquet"
    if not path.is_file() or "label_action" not in pq.read_schema(path).names:
        return "n/a"  # a planner's results hold directives, not actions
    rows = pd.read_parquet(path, columns=["decided_by", "model_action", "label_action"])
    routed = rows["decided_by"].notna().any()
    lm = rows[rows["decided_by"] == "lm"] if routed else rows
    wanted = lm["label_action"].isin(["pause", "review"])
    answered = lm["model_action"].isin(["pause", "review"])
    hits = int((wanted & answered).sum())
    recall = f"{hits}/{int(wanted.sum())}" if wanted.any() else "0/0"
    precision = f"{hits}/{int(answered.sum())}" if answered.any() else "0/0"
    return f"recall {recall}, precision {precision} (of {len(lm)} LM turns)"


def row(folder: Path) -> dict[str, Any]:
    """The table's facts about one compile folder."""
    summary = json.loads((folder / "compile.json").read_text(encoding="utf-8"))
    objective = summary["test"]["objective"]
    paired = summary["test_vs_baseline"]["objective"]
    usage = summary["compile"].get("usage", {})
    return {
        "optimizer": summary["recipe"], "program": summary["request"]["program"],
        "test": _interval(objective), "n": objective.get("n"),
        "baseline": _interval(summary["baseline"]["test"]["objective"]),
        "diff": _interval(paired, sign=True), "p": _p(paired.get("p_value"), paired.get("n_permutations")),
        "test_name": describe_test(paired.get("method"), paired.get("n_permutations")),
        "ci_name": describe_interval(paired.get("ci_method"), paired.get("n_resamples")),
        "accuracy": _interval(summary["test"].get("action_accuracy") or summary["test"].get("schema_validity", {})),
        "mcnemar_p": _p(summary.get("mcnemar", {}).get("p_exact")),
        "lm_calls": usage.get("lm_calls", 0),
        "tokens": (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0),
        "demos": summary["compile"].get("demo_count"), "kept": summary["compile"].get("kept"),
        "compile_min": (summary["compile"].get("wall_s") or 0) / 60, "total_min": (summary.get("wall_s") or 0) / 60,
        "run": summary.get("mlflow_run_id") or "", "diff_value": paired.get("diff"),
        "p_value": paired.get("p_value"), "baseline_program": summary["baseline"]["program"],
        "whole": not summary["request"].get("eval_limit"), "lm_half": lm_half(folder),
    }


def render(rows: list[dict[str, Any]]) -> str:
    """The markdown table, with the methods named once under it."""
    lines = ["| optimizer | test objective [95% CI] | baseline | paired difference [95% CI] | p | action accuracy (planner: schema validity) "
             "| McNemar p | LM half on pause/review turns | demos | compile LM calls | compile tokens | compile min "
             "| total min | MLflow run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    programs = sorted({r["program"] for r in rows})
    for r in rows:
        label = r["optimizer"] if len(programs) == 1 else f"`{r['program']}` + {r['optimizer']}"
        lines.append(f"| {label} | {r['test']} | {r['baseline']} | {r['diff']} | {r['p']} | {r['accuracy']} "
                     f"| {r['mcnemar_p']} | {r['lm_half']} | {r['demos']} | {r['lm_calls']:,} | {r['tokens']:,} | "
                     f"{r['compile_min']:.1f} | {r['total_min']:.1f} | `{r['run'][:8]}` |")
    if rows:
        methods = sorted({(r["test_name"], r["ci_name"]) for r in rows})
        lines.append("")
        scope = "the whole test split" if rows[0]["whole"] else "a seeded subset of the test split, `--eval-limit`"
        baselines = ", ".join(sorted({f"`{r['baseline_program']}`" for r in rows}))
        program = f"Program: `{programs[0]}`" if len(programs) == 1 else "Programs: as each row names them"
        lines.append(f"n = {rows[0]['n']} test records in every row ({scope}). {program}; "
                     f"baseline: {baselines} (each row's own), uncompiled, on the same records. p: "
                     + "; ".join(f"{t}, 95% CI: {c}" for t, c in methods) + ".")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """Rewrite the table section of reports/optimizers.md from compile folders."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="`guidebench compile --out` folders")
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--marker", default=MARKER, help="the report section to rewrite (e.g. planner-table)")
    args = parser.parse_args(argv)
    rows = [row(folder) for folder in args.folders if (folder / "compile.json").is_file()]
    missing = [str(folder) for folder in args.folders if not (folder / "compile.json").is_file()]
    text = render(rows) + ("\n\nNot finished: " + ", ".join(missing) if missing else "")
    write_section(text, args.report, args.marker)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
