"""Where the trained model loses: the post-mortem of its out-of-fold decisions on train + dev, against `logged`.

The `fit` recipe scores every labeled turn test does not hold once, by a model fit without that turn's
thread (`optimizers.fitting`, cross-validation). This report runs the workbench's post-mortem
(`evals.postmortem`) on those held-out decisions: the slices, pairs of slices and threads where the model
scores significantly below its other turns, and, paired on the same turns, the slices where it wins and loses
against what `logged` (the deployed policy) dispatched. It reads no test record.

    python -m benchmarks.fit_errors --data .guidebench/data/opt-fullauto
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from benchmarks.report import write_section
from evals.data import group_of
from evals.metrics_fullauto import COST, metric, outcome_from_example, score_outcome
from evals.postmortem import ChallengerSlices, PostMortem, compare_slices, post_mortem
from evals.slices import slice_values
from guidebench.evaluation.compile_inputs import load_compile_data
from guidebench.evaluation.postmortem import comparison_lines, outlier_lines
from optimizers.fitting import FitSettings, fit_model
from programs.results import decision_prediction
from runtime.trained import decision_of

ROOT = Path(__file__).resolve().parents[1]
MODEL = "full_auto.learned (out of fold)"


def _row(record: Any, example: Any, prediction: Any) -> dict[str, Any]:
    """A replay-shaped row of one decision on a record: its scores and the record's slices."""
    outcome = outcome_from_example(example, prediction)
    return {"record_id": record.record_id, "group_id": group_of(record), "label_action": example.action,
            "enforced_action": outcome.enforced.action, "scores": score_outcome(outcome),
            "slices": slice_values(record, "full_auto"), "usage": {}, "latency_s": None}


def held_out_rows(trainset: Sequence[Any], valset: Sequence[Any],
                  records: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(the fit's held-out rows, `logged`'s rows on the same turns, the fit's choice)."""
    import programs

    outcome = fit_model(trainset, valset, metric, FitSettings())
    logged = programs.get("logged")
    model_rows, logged_rows = [], []
    for example, probabilities in outcome.held_out:
        record = records[example.record_id]
        inputs = example.inputs().toDict()
        model_rows.append(_row(record, example, decision_prediction(decision_of(probabilities, inputs, COST))))
        try:
            logged_rows.append(_row(record, example, logged(**inputs)))
        except ValueError:  # a turn logged without its decision: nothing to pair it with
            logged_rows.append(dict(model_rows[-1], scores={"objective": math.nan}))
    return model_rows, logged_rows, outcome.chosen


def analyse(trainset: Sequence[Any], valset: Sequence[Any], records: Mapping[str, Any], *,
            n_resamples: int = 1000) -> tuple[PostMortem, ChallengerSlices, dict[str, Any]]:
    """The held-out decisions' post-mortem, their slices against `logged`, and the fit's choice."""
    model_rows, logged_rows, chosen = held_out_rows(trainset, valset, records)
    pm = post_mortem("full_auto", model_rows, program=MODEL, n_resamples=n_resamples)
    against = compare_slices(model_rows, logged_rows, "full_auto", challenger=MODEL, champion="logged",
                             n_resamples=n_resamples)
    return pm, against, chosen


def render(pm: PostMortem, against: ChallengerSlices, chosen: dict[str, Any], command: str) -> str:
    """The report section: the slices below the rest, then the slices against `logged`."""
    lines = [
        "### Where the trained model loses (out of fold, train + dev; no test record read)",
        "",
        f"`{command}`: the post-mortem of the fit's own held-out decisions ({chosen['selected_on']}, C = "
        f"{chosen['C']}, class weight {chosen['class_weight']}), n = {pm.n_records}, objective "
        f"{pm.overall.value:.3f} [{pm.overall.ci_low:.3f}, {pm.overall.ci_high:.3f}]. Test: {pm.test}.",
        "",
        "#### Below the model's other turns", "",
        *outlier_lines(pm), "",
        *comparison_lines(against, "####"),
    ]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """Fit with the recipe's defaults, run the post-mortem of its held-out decisions, write the report section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / ".guidebench" / "data" / "opt-fullauto")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "optimizers.md")
    args = parser.parse_args(argv)
    data = load_compile_data(args.data, "full_auto")
    records = {r.record_id: r for split in ("train", "dev") for r in data.records_of(split)}
    pm, against, chosen = analyse(data.trainset, data.valset, records)
    text = render(pm, against, chosen, "python -m benchmarks.fit_errors --data .guidebench/data/opt-fullauto")
    write_section(text, args.report, "fit-errors")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
