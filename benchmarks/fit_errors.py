"""Where the trained model loses: its out-of-fold decisions on train + dev, grouped by label and reason.

The `fit` recipe scores every labeled turn test does not hold once, by a model fit without that turn's
thread (`optimizers.fitting`, cross-validation). This report groups those held-out decisions by the
label, the label's reason (its text up to the first colon) and the action production would dispatch,
with what each group costs under the objective's cost matrix and what `logged` (the deployed policy)
dispatched on the same turns. It reads no test record.

    python -m benchmarks.fit_errors --data .guidebench/data/opt-fullauto
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional, Sequence

from benchmarks.report import write_section
from evals.metrics_fullauto import COST, MAX_COST, dispatch_action, metric, outcome_from_example
from guidebench.compile import load_compile_data
from optimizers.fitting import FitSettings, fit_model
from programs.results import decision_prediction
from runtime.trained import decision_of

ROOT = Path(__file__).resolve().parents[1]


def _enforced(example: Any, prediction: Any) -> str:
    return str(dispatch_action(outcome_from_example(example, prediction).enforced.action))


def _logged_cost(logged: Any, example: Any, inputs: dict[str, Any], label: str) -> float:
    """What the deployed policy's logged answer cost on this turn (NaN for a turn logged without one)."""
    try:
        return COST[label][_enforced(example, logged(**inputs))]
    except ValueError:  # an example built without its logged decision
        return math.nan


def error_groups(trainset: Sequence[Any], valset: Sequence[Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The held-out decisions' groups (label, reason, dispatched action) with their costs, and the fit's choice."""
    import programs

    outcome = fit_model(trainset, valset, metric, FitSettings())
    logged = programs.get("logged")
    groups: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(
        lambda: {"n": 0, "cost": 0.0, "logged_cost": 0.0, "stalled": 0})
    for example, probabilities in outcome.held_out:
        inputs = example.inputs().toDict()
        answer = _enforced(example, decision_prediction(decision_of(probabilities, inputs, COST)))
        label = str(dispatch_action(example.action))
        reason = str(example.get("reason") or "").split(":", 1)[0][:60]
        group = groups[(label, reason, answer)]
        group["n"] += 1
        group["cost"] += COST[label][answer]
        group["logged_cost"] += _logged_cost(logged, example, inputs, label)
        group["stalled"] += str(inputs.get("no_progress_count") or "0").strip() not in ("", "0")
    rows = [{"label": label, "reason": reason, "answer": answer, **values}
            for (label, reason, answer), values in groups.items()]
    return sorted(rows, key=lambda row: (-row["cost"], -row["n"])), outcome.chosen


def render(rows: list[dict[str, Any]], chosen: dict[str, Any], command: str) -> str:
    """The report section: the groups that cost something, then the totals."""
    n = sum(row["n"] for row in rows)
    total, logged_total = sum(row["cost"] for row in rows), sum(row["logged_cost"] for row in rows)
    lines = [
        "### Where the trained model loses (out of fold, train + dev; no test record read)",
        "",
        f"`{command}`: the fit's own held-out decisions ({chosen['selected_on']}, C = {chosen['C']}, "
        f"class weight {chosen['class_weight']}), n = {n}. Cost is the objective's cost matrix summed over the "
        f"group (objective = 1 − cost / {MAX_COST:g} per turn); `logged` is the deployed policy on the same turns; "
        "\"stalled\" counts turns whose no-progress count is above 0 (the plan and diff did not change).",
        "",
        "| label | label's reason | model dispatched | turns | stalled | cost | `logged` cost on them |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row["cost"] or row["logged_cost"]:
            lines.append(f"| {row['label']} | {row['reason']} | {row['answer']} | {row['n']} | {row['stalled']} | "
                         f"{row['cost']:g} | {row['logged_cost']:g} |")
    lines += ["", f"Total cost {total:g} (objective {1 - total / MAX_COST / n:.3f}) against `logged`'s "
              f"{logged_total:g} (objective {1 - logged_total / MAX_COST / n:.3f}) on the same {n} turns."]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """Fit with the recipe's defaults, group its held-out decisions, write the report section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / ".guidebench" / "data" / "opt-fullauto")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "optimizers.md")
    args = parser.parse_args(argv)
    data = load_compile_data(args.data, "full_auto")
    rows, chosen = error_groups(data.trainset, data.valset)
    text = render(rows, chosen, "python -m benchmarks.fit_errors --data .guidebench/data/opt-fullauto")
    write_section(text, args.report, "fit-errors")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
