"""MLflow tracking of compiles and searches (built on `guidebench.tracking.runs`).

- `compile_run`: a run in the dataset's experiment, new or resumed by run id; DSPy autologging on
  for its duration (traces of the evaluations, the optimizer's compile params, LM state and best
  program, which exercises the custom engine's `dump_state`); ends KILLED on Ctrl-C, FAILED on an
  error, so a resumable run is visibly unfinished. A process killed outright (`kill -9`) cannot end
  its run: the run carries its owner tag and the next command ends it KILLED
  (`guidebench.tracking.runs.reap_stale_runs`).
- `log_candidates`: one nested run per candidate an optimizer evaluated (score, demos, state JSON),
  plus the candidate history as JSON and a PNG on the parent.
- `track_compile`: everything a finished compile logs to its run, files and candidates included.
- `log_compile_metrics`, `log_paired`: flat metric names, intervals as `_ci_low` / `_ci_high`.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from guidebench.tracking import runs as tracking
from guidebench.errors import GuidebenchError

# What a compile's usage numbers are called in MLflow.
USAGE_KEYS: tuple[str, ...] = ("lm_calls", "prompt_tokens", "completion_tokens", "total_tokens", "cache_hits",
                               "latency_s", "prompt_tokens_evaluated", "prompt_tokens_reused")


@contextmanager
def dspy_autolog() -> Iterator[None]:
    """MLflow's DSPy autologging for the block: traces of evaluations, compile params and LM state."""
    import mlflow

    mlflow.dspy.autolog(log_traces=True, log_traces_from_compile=False, log_traces_from_eval=True,
                        log_compiles=True, log_evals=False, silent=True)
    try:
        yield
    finally:
        mlflow.dspy.autolog(disable=True, silent=True)


@contextmanager
def compile_run(*, dataset_id: str, kind: str, run_name: str, params: Mapping[str, str],
                tags: Mapping[str, str], tracking_uri: Optional[str] = None,
                resume_run_id: Optional[str] = None, autolog: bool = True) -> Iterator[Any]:
    """Start (or resume) a tracked run; the status says how it ended (FINISHED, FAILED, KILLED)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    tracking.ensure_experiment(dataset_id, kind, tracking_uri)
    try:
        if resume_run_id:
            run = mlflow.start_run(run_id=resume_run_id)
            mlflow.set_tags(tracking.owner_tags())  # this process owns the run now
        else:
            run = mlflow.start_run(run_name=run_name, tags={"guidebench.kind": kind, "guidebench.dataset_id": dataset_id,
                                                             **tags, **tracking.owner_tags()})
            mlflow.log_params(dict(params))
    except MlflowException as exc:
        raise GuidebenchError(f"tracking: cannot start the run: {exc.message}") from exc
    status = "FINISHED"
    try:
        if autolog:
            with dspy_autolog():
                yield run
        else:
            yield run
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except BaseException:
        status = "FAILED"
        raise
    finally:
        mlflow.end_run(status=status)


def log_numbers(values: Mapping[str, Any], prefix: str = "") -> None:
    """Log the finite numbers of a mapping as metrics (booleans as 0/1)."""
    import mlflow

    flat = {}
    for key, value in values.items():
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (int, float)) and math.isfinite(float(value)):
            flat[f"{prefix}{key}"] = float(value)
    if flat:
        mlflow.log_metrics(flat)


def log_split_metrics(metrics: Mapping[str, Any], split: str) -> None:
    """Every eval metric of a split with its interval: `<split>.<metric>`, `_ci_low`, `_ci_high`."""
    tracking.log_metrics(metrics, prefix=f"{split}.")


def log_paired(diffs: Mapping[str, Any], prefix: str) -> None:
    """Paired differences (`diff`, `ci_low`, `ci_high`, `p_value`) as `<prefix><metric>_diff...`."""
    import mlflow

    flat: dict[str, float] = {}
    for name, value in diffs.items():
        data = value.to_dict() if hasattr(value, "to_dict") else dict(value)
        for key, suffix in (("diff", "_diff"), ("ci_low", "_diff_ci_low"), ("ci_high", "_diff_ci_high"),
                            ("p_value", "_diff_p_value")):
            number = data.get(key)
            if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
                flat[f"{prefix}{name}{suffix}"] = float(number)
    if flat:
        mlflow.log_metrics(flat)


def log_candidates(candidates: Sequence[Any], out_dir: Path, *, optimizer: str) -> dict[str, Path]:
    """Nested run per candidate (params, score, state JSON) and the history JSON + PNG on the parent run."""
    import mlflow

    out_dir.mkdir(parents=True, exist_ok=True)
    history = [c.summary() for c in candidates]
    files = {"candidates": out_dir / "candidates.json"}
    files["candidates"].write_text(json.dumps(history, indent=2, default=str) + "\n", encoding="utf-8")
    if candidates:
        files["candidates_png"] = candidate_plot(history, out_dir / "candidates.png", optimizer)
    for candidate in candidates:
        with mlflow.start_run(run_name=f"candidate {candidate.index}", nested=True,
                              tags={"guidebench.run_type": "candidate"}):
            mlflow.log_params({"candidate.index": candidate.index, "candidate.n_demos": candidate.n_demos,
                               "candidate.instructions_hash": candidate.instructions_hash,
                               "candidate.n_examples": candidate.n_examples, "optimizer": optimizer,
                               "candidate.note": candidate.note or "-"})
            mlflow.log_metrics({"score": float(candidate.score), "wall_s": float(candidate.wall_s)})
            mlflow.log_dict(candidate.state, "program_state.json")
    for path in files.values():
        mlflow.log_artifact(str(path))
    return files


def track_compile(outcome: Any, *, optimizer: str) -> None:
    """Log a finished compile (`guidebench.compile.CompileOutcome`) to the active run: usage, wall time, the
    learned-from overlap, dev/test/baseline metrics, the paired comparison, the post-mortem, files, candidates."""
    import mlflow

    from guidebench.tracking.postmortem import log_postmortem_file

    results = {**outcome.replays, "paired": outcome.paired}
    compile_summary = outcome.summary["compile"]
    usage = compile_summary.get("usage", {})
    log_numbers({k: usage.get(k) for k in USAGE_KEYS}, prefix="compile.")
    log_numbers({"wall_s": compile_summary.get("wall_s"),
                                  "stopped_by_budget": bool(compile_summary.get("stopped_by_budget")),
                                  "n_candidates": compile_summary.get("n_candidates"),
                                  "demo_count": compile_summary.get("demo_count")}, prefix="compile.")
    mlflow.set_tag("guidebench.stopped_by_budget", str(bool(compile_summary.get("stopped_by_budget"))).lower())
    if compile_summary.get("stop_reason"):
        mlflow.set_tag("guidebench.stop_reason", compile_summary["stop_reason"])
    mlflow.set_tag("guidebench.kept", compile_summary.get("kept", ""))
    for split, check in outcome.summary["learned_from"].items():
        log_numbers({"learned_from_overlap": check["n_overlap"]}, prefix=f"{split}.")
    for split in ("dev", "test"):
        log_split_metrics(results[split].metrics, split)
        log_numbers(results[split].summary.get("usage", {}), prefix=f"{split}.usage.")
        log_numbers({"wall_s": results[split].summary.get("wall_s")}, prefix=f"{split}.")
    log_split_metrics(results["baseline"].metrics, "baseline.test")
    log_paired(results["paired"]["metrics"], prefix="test.vs_baseline.")
    log_postmortem_file(outcome.files.get("test.postmortem"), prefix="test.")
    log_numbers({"wall_s": outcome.summary["wall_s"]}, prefix="total.")
    for key, path in outcome.files.items():
        if key == "compile" or not Path(path).is_file():
            continue
        folder = key.split(".", 1)[0] if "." in key else None
        mlflow.log_artifact(str(path), artifact_path=folder)
    log_candidates(outcome.candidates, outcome.out_dir, optimizer=optimizer)


def candidate_plot(history: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Score of every evaluated candidate in order, marker size by examples scored."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [row["index"] for row in history]
    ys = [row["score"] for row in history]
    sizes = [12 + 4 * math.sqrt(max(1, row.get("n_examples", 1))) for row in history]
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.scatter(xs, ys, s=sizes, alpha=0.7)
    best = max(range(len(history)), key=lambda i: (history[i].get("n_examples", 0), ys[i], -xs[i]))
    ax.scatter([xs[best]], [ys[best]], s=sizes[best] * 1.6, facecolors="none", edgecolors="red", label="kept")
    ax.set_xlabel("candidate (evaluation order)")
    ax.set_ylabel("mean objective")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"{title}: candidate history", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
