"""One evaluation, start to finish: load a split and a program (`guidebench.evaluation.inputs`), replay, write
results (metrics, plots, post-mortem), track the run.

Used by `guidebench eval` and the baselines report; reusable by anything that needs a scored, tracked replay of one
program on one frozen split.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:  # the CLI registers `eval` without importing DSPy and SciPy (`guidebench --help`)
    from evals.replay import ReplayResult
    from runtime.provenance import OverlapCheck, Provenance

from guidebench.errors import GuidebenchError
from guidebench.evaluation.inputs import EvalData, LoadedProgram, load_eval_data, load_program


@dataclass
class EvalOutput:
    """What one evaluation produced."""

    result: ReplayResult
    data: EvalData
    program: LoadedProgram
    out_dir: Path
    files: dict[str, Path]
    run_id: Optional[str] = None
    omitted_metrics: dict[str, str] = field(default_factory=dict)
    learned_from: Optional[OverlapCheck] = None


# ----- outputs ----------------------------------------------------------------------------------

def split_metrics(result: ReplayResult) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(metrics with a value and interval, {metric: why it was left out}) for metrics.json."""
    kept: dict[str, dict[str, Any]] = {}
    omitted: dict[str, str] = {}
    for name, value in result.metrics.items():
        if value.n == 0 or value.value is None:
            omitted[name] = _why_omitted(result, name) if value.n == 0 else "undefined on these records"
        else:
            kept[name] = value.to_dict()
    return kept, omitted


def _why_omitted(result: ReplayResult, name: str) -> str:
    """Why a metric has no record: for a planner's improvement metrics, the records left out and why."""
    model = result.summary.get("cycles_model") or {}
    if result.kind == "planner" and name in IMPROVEMENT_METRICS and model.get("unscored"):
        return (f"no record has an improvement estimate by the {model.get('name')} cycles model: "
                + "; ".join(model.get("left_out_notes") or []))
    return "no record to compute it on (e.g. no outcome labels)"


IMPROVEMENT_METRICS = ("cycles_improvement", "improvement_ratio", "effect_abs_error", "effect_calibration",
                       "objective")


def name_estimator(result: ReplayResult) -> None:
    """Put the cycles model's name on the planner metrics that depend on it (metrics.json and MLflow carry it)."""
    model = result.summary.get("cycles_model")
    if result.kind != "planner" or not model:
        return
    for name in IMPROVEMENT_METRICS:
        if name in result.metrics:
            result.metrics[name] = result.metrics[name].model_copy(update={"estimator": model["name"]})


def learned_from_summary(provenance: Optional[Provenance], check: OverlapCheck) -> dict[str, Any]:
    """What summary.json says of the records a program learned from: its provenance (null: unknown), so that a
    leaderboard admitting the folder checks its own split, and this split's check."""
    # A provenance its program's fitted model contradicts is written as unknown: read back alone it would hold.
    written = None if provenance is None or provenance.contradiction else provenance.model_dump(mode="json")
    return {"provenance": written,
            "learned_from": check.model_dump(mode="json")}


def write_outputs(result: ReplayResult, out_dir: Path, extra_summary: dict[str, Any],
                  learned_from: Optional[OverlapCheck] = None, *,
                  progress: bool = False) -> tuple[dict[str, Path], dict[str, str]]:
    """metrics.json, results.parquet, summary.json, the plots and the post-mortem (with its progress bar when
    `progress`); returns (files, omitted metrics).

    When the program learned from some of the records (`learned_from`), metrics.json flags it: its
    `learned_from_overlap` entry holds their count of the `n` scored (exact: a degenerate interval).
    """
    from guidebench.evaluation.postmortem import write_postmortem
    from guidebench.evaluation.plots import offpolicy_calibration_png, replay_plots

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GuidebenchError(f"--out {out_dir}: cannot create the folder: {exc}") from exc
    metrics, omitted = split_metrics(result)
    if learned_from is not None and learned_from.overlaps:
        from evals.stats import MetricValue

        count = float(learned_from.n_overlap or 0)
        metrics["learned_from_overlap"] = MetricValue(value=count, ci_low=count, ci_high=count, method="degenerate",
                                                      n=learned_from.n_records).to_dict()
    files = {
        "metrics": out_dir / "metrics.json",
        "results": out_dir / "results.parquet",
        "summary": out_dir / "summary.json",
    }
    files["metrics"].write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    result.to_frame().to_parquet(files["results"], index=False)
    summary = {**result.summary, **extra_summary, "omitted_metrics": omitted}
    files["summary"].write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    files.update(replay_plots(result.kind, result.rows, out_dir, result.program,
                              (result.summary.get("cycles_model") or {}).get("name", "")))
    off_policy = result.summary.get("off_policy")
    if off_policy and off_policy["calibration"]["n"]:
        files["offpolicy_calibration"] = offpolicy_calibration_png(
            off_policy["calibration"], out_dir / "offpolicy_calibration.png",
            f"{result.program}: outcome model on the logged attempts")
    # postmortem.json and .md, in-sample when it is
    files.update(write_postmortem(result, out_dir, learned_from, progress=progress))
    return files, omitted


def summary_table(result: ReplayResult, omitted: dict[str, str]) -> str:
    """A plain-text table of every metric with its 95% interval and n."""
    lines = [f"{'metric':<42} {'value':>10}  {'95% interval':<23} {'n':>6}"]
    for name, value in result.metrics.items():
        if name in omitted:
            lines.append(f"{name:<42} {'n/a':>10}  {'':<23} {value.n:>6}")
            continue
        span = f"[{value.ci_low:.4f}, {value.ci_high:.4f}]" if value.ci_low is not None else \
            value.interval_text().replace("no interval: ", "")  # "too few episodes (4 < 10)"
        lines.append(f"{name:<42} {value.value:>10.4f}  {span}".ljust(78) + f" {value.n:>6}")
    s = result.summary
    lines.append("")
    lines.append(f"records {s['n_records']}, errors {s['n_errors']}, parse failures {s['n_parse_failures']}, "
                 f"labeled {s['n_labeled']}, LM calls {s['usage']['lm_calls']}, wall {s['wall_s']:.1f}s")
    if s.get("errors_by_class"):
        lines.append("errors by class: " + ", ".join(f"{k} {v}" for k, v in sorted(s["errors_by_class"].items())))
    if s.get("n_overridden") is not None:
        rules = ", ".join(f"{k} {v}" for k, v in sorted(s.get("overrides_by_rule", {}).items())) or "none"
        lines.append(f"guardrail overrides {s['n_overridden']} of {s['n_records']} ({rules})")
    if s.get("logged_enforcement_mismatches"):
        lines.append(f"note: today's guardrails would enforce differently on {s['logged_enforcement_mismatches']} "
                     "logged decisions (see replay_enforced_action in results.parquet)")
    return "\n".join(lines)


# ----- the whole evaluation ---------------------------------------------------------------------

def evaluate(program: str, data: Path, *, split: Optional[str] = None, lm: Optional[str] = None,
             threads: int = 1, out_dir: Path, tracking_uri: Optional[str] = None, track: bool = True,
             progress: bool = True, seed: int = 0, n_resamples: int = 1000,
             run_name: Optional[str] = None, max_records: Optional[int] = None, cache: bool = True,
             force: bool = False, cycles_model: str = "auto") -> EvalOutput:
    """Replay a program on a split, write OUT/metrics.json and OUT/results.parquet, log the run to MLflow.

    With `cache` off the LM answers every call afresh, so the cost metrics are the uncached cost.
    OUT follows `guidebench.outputs`: checked before any replay, written aside, renamed into place.
    A planner's improvement is estimated by `cycles_model` (`evaluation.outcome_models.cycles_for`), and its
    choices get off-policy estimates whenever the dataset's outcome model can be fit.
    """
    from guidebench.lm.cost import Scoring, announce
    from guidebench.outputs import claim_output

    if threads < 1:
        raise GuidebenchError(f"--threads {threads}: must be at least 1")
    output_dir = claim_output(Path(out_dir), "eval", force=force,
                              inputs=[Path(data)] + ([Path(program)] if Path(program).is_dir() else []))
    work = Path(tempfile.mkdtemp(prefix="guidebench-eval-"))
    try:
        eval_data = load_eval_data(Path(data), split, work, max_records=max_records)
        if not eval_data.records:
            raise GuidebenchError(f"--data {data}: split {eval_data.split!r} has no records")
        loaded = load_program(program)
        if loaded.kind != eval_data.kind:
            raise GuidebenchError(f"--program {program} is a {loaded.kind} program but {data} holds "
                                  f"{eval_data.kind} records")
        lm_spec = "none"
        if loaded.uses_lm:
            lm_spec = lm or "local"
            from guidebench.lm.factory import configure_lm

            configure_lm(lm_spec, cache=cache)
            announce(lm_spec, [Scoring(loaded.name, loaded.program, eval_data.records, loaded.kind)])
        from runtime.provenance import check_overlap

        learned = check_overlap(loaded.provenance, eval_data.records, dataset_id=eval_data.dataset_id,
                                split=eval_data.split)
        cycles = None
        if eval_data.kind == "planner":
            from guidebench.evaluation.outcome_models import cycles_for

            cycles = cycles_for(cycles_model, eval_data.records, eval_data.dataset_dir, split=eval_data.split,
                                seed=seed)
            eval_data.notes.extend(cycles.notes)
        started = time.time()
        from evals.tasks import distributed, using

        if loaded.uses_lm and distributed():  # the LM is configured in this process, not on a cluster's workers
            eval_data.notes.append("a program that calls an LM replays in this process, not on the cluster")
        with using(None) if loaded.uses_lm else contextlib.nullcontext():
            result = scored_replay(loaded.program, eval_data.records, cycles, name=loaded.name, seed=seed,
                                   threads=threads, progress=progress, n_resamples=n_resamples)
        eval_data.notes.extend((result.summary.get("cycles_model") or {}).get("left_out_notes", []))
        extra = {"dataset_id": eval_data.dataset_id, "split": eval_data.split, "split_hash": eval_data.split_hash,
                 "data": str(data), "data_source": eval_data.source, "lm_spec": lm_spec,
                 "program_source": loaded.source, "started_at": started, "notes": eval_data.notes,
                 "lm_cache": cache, **learned_from_summary(loaded.provenance, learned),
                 **loaded.details}
        with output_dir.writing() as staging:
            files, omitted = write_outputs(result, staging, extra, learned, progress=progress)
            output = EvalOutput(result=result, data=eval_data, program=loaded, out_dir=staging, files=files,
                                omitted_metrics=omitted, learned_from=learned)
            if track:
                output.run_id = track_eval(output, lm_spec=lm_spec, seed=seed, tracking_uri=tracking_uri,
                                           run_name=run_name)
                summary = json.loads(files["summary"].read_text(encoding="utf-8"))
                summary["mlflow_run_id"] = output.run_id
                files["summary"].write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n",
                                            encoding="utf-8")
        output.out_dir = Path(out_dir)
        output.files = {name: Path(out_dir) / path.relative_to(staging) for name, path in files.items()}
        return output
    finally:
        shutil.rmtree(work, ignore_errors=True)


def planner_cycles(kind: str, choice: str, records: Sequence[Any], dataset_dir: Path, *, split: str,
                   seed: int) -> Any:
    """The cycles model a planner's scores use on these records (`evaluation.outcome_models.CyclesChoice`, its
    notes printed once), or None for Full Auto."""
    if kind != "planner":
        return None
    from guidebench.evaluation.outcome_models import cycles_for

    cycles = cycles_for(choice, records, dataset_dir, split=split, seed=seed)
    for note in cycles.notes:
        print(f"note: {note}")
    return cycles


def metrics_for(kind: str, cycles: Any = None) -> tuple[Any, Any]:
    """(metric, feedback metric) an optimizer selects with: a planner's on its cycles model."""
    from evals import metrics_fullauto, metrics_planner

    if kind == "planner":
        return metrics_planner.metrics_with(cycles.model if cycles is not None else None)
    return metrics_fullauto.metric, metrics_fullauto.gepa_metric


def scored_replay(program: Any, records: Sequence[Any], cycles: Any, *, name: str, seed: int, threads: int = 1,
                  progress: bool = True, n_resamples: int = 1000) -> ReplayResult:
    """`evals.replay.replay` with the planner's cycles model, then its off-policy estimates (`add_offpolicy`)."""
    from evals.replay import replay

    result = replay(program, records, threads=threads, progress=progress, n_resamples=n_resamples, seed=seed,
                    name=name, cycles_model=cycles.model if cycles is not None else None)
    if cycles is not None:
        add_offpolicy(result, records, cycles, program=name, seed=seed,
                      replays_log=bool(result.summary.get("replays_log")), progress=progress)
    return result


def add_offpolicy(result: ReplayResult, records: Sequence[Any], cycles: Any, *, program: str, seed: int,
                  replays_log: bool = False, progress: bool = False) -> None:
    """The cycles model's name on the metrics, and the off-policy estimates in the summary (when models exist;
    `progress`: a bar with its ETA over the records the outcome model predicts for)."""
    from guidebench.evaluation.outcome_models import offpolicy_summary

    if result.summary.get("cycles_model") is None:
        result.summary["cycles_model"] = {"name": cycles.name, "estimator": cycles.estimator}
    result.summary["cycles_model"]["notes"] = list(cycles.notes)
    if cycles.models is not None:
        result.summary["off_policy"] = offpolicy_summary(records, result.rows, cycles.models, program=program,
                                                         seed=seed, replays_log=replays_log, progress=progress)
        flagged = set(result.summary["off_policy"]["extrapolation"]["records"])
        for row in result.rows:  # each record's estimate says whether it rests on the outcome model alone
            row["offpolicy_extrapolated"] = row.get("record_id") in flagged
    name_estimator(result)


def track_eval(output: EvalOutput, *, lm_spec: str, seed: int, tracking_uri: Optional[str],
               run_name: Optional[str] = None) -> str:
    """Log one evaluation to MLflow (params, metrics with intervals, artifacts); returns the run id."""
    from guidebench.tracking import runs as tracking
    from guidebench.tracking.postmortem import log_postmortem_file

    result, data = output.result, output.data
    params = tracking.run_params(program=output.program.name, dataset_id=data.dataset_id, split=data.split,
                                 split_hash=data.split_hash, lm=lm_spec, seed=seed, kind=result.kind,
                                 program_source=output.program.source, n_records=result.n,
                                 threads=result.summary.get("threads", 1), n_resamples=result.summary["n_resamples"],
                                 **cycles_params(result),
                                 **(output.learned_from.params() if output.learned_from else {}))
    tags = {"guidebench.run_type": "eval", "guidebench.program": output.program.name}
    with tracking.tracked_run(dataset_id=data.dataset_id, kind=result.kind, params=params, tags=tags,
                              run_name=run_name or f"eval {output.program.name} {data.split}",
                              tracking_uri=tracking_uri) as run:
        tracking.log_metrics(result.metrics)
        s = result.summary
        counts = {"n_records": s["n_records"], "n_errors": s["n_errors"], "n_parse_failures": s["n_parse_failures"],
                  "n_labeled": s["n_labeled"], "wall_s": s["wall_s"], **{f"usage.{k}": v for k, v in s["usage"].items()},
                  "learned_from_overlap": output.learned_from.n_overlap if output.learned_from else None}
        import mlflow

        mlflow.log_metrics({k: float(v) for k, v in counts.items() if isinstance(v, (int, float)) and not
                            (isinstance(v, float) and math.isnan(v))})
        mlflow.log_metrics(offpolicy_metrics(result))
        tracking.log_artifacts(output.files)
        log_postmortem_file(output.files.get("postmortem"))  # its slice table and counts
        return run.info.run_id


def cycles_params(result: ReplayResult) -> dict[str, str]:
    """MLflow params naming the planner's cycles model and the off-policy estimator (empty for Full Auto)."""
    model = result.summary.get("cycles_model")
    if not model:
        return {}
    params = {"cycles_model": model["name"], "cycles_estimator": model["estimator"]}
    if result.summary.get("off_policy"):
        params["offpolicy_estimator"] = result.summary["off_policy"]["headline"]
    return params


def offpolicy_metrics(result: ReplayResult) -> dict[str, float]:
    """Flat MLflow metrics of the off-policy estimates: `offpolicy.<estimator>[_ci_low|_ci_high|_ess]`."""
    flat: dict[str, float] = {}
    for name, estimate in ((result.summary.get("off_policy") or {}).get("estimates") or {}).items():
        flat[f"offpolicy.{name}_ess"] = float(estimate["ess"])
        for suffix, key in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            if estimate[key] is not None:
                flat[f"offpolicy.{name}{suffix}"] = float(estimate[key])
    return flat


def metric_names(kind: str) -> Sequence[str]:
    """The metric names a replay of this kind reports (quality, then cost)."""
    from evals import metrics_fullauto, metrics_planner
    from evals.replay import COST_METRICS

    quality = metrics_fullauto.METRIC_NAMES + ("logged_agreement",) if kind == "full_auto" else \
        metrics_planner.METRIC_NAMES
    return (*quality, *COST_METRICS)
