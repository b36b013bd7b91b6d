"""Already-scored variants: `guidebench eval --out` folders, admitted to a board only on its exact split.

An eval folder holds `summary.json` (program, kind, dataset id, split, split hash, usage, wall time)
and `results.parquet` (one flattened replay row per record). The rows are read back as replay rows
and every aggregate is recomputed with the board's own bootstrap settings, so an admitted result
is ranked and compared exactly like a variant replayed on the spot, without a single LM call.
Whether it may join the board at all is decided by `leaderboard.check_same_split`.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any, Optional

from evals.replay import ReplayResult, resampling_groups, statistics
from evals.stats import bootstrap_many
from runtime.provenance import read_provenance

from guidebench import __version__
from guidebench.errors import GuidebenchError
from guidebench.leaderboard.split import FrozenSplit, ScoredVariant, SplitMismatchError, check_same_split
from guidebench.leaderboard.packages import PackageManifest, SplitRef, Variant, canonical_entry, contract_for

SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.parquet"
_NESTED = ("score.", "usage.", "error.", "slice.")


def _plain(value: Any) -> Any:
    """A parquet cell as the replay row held it: NaN in a text/None column was a None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def rows_from_frame(frame: Any) -> list[dict[str, Any]]:
    """Replay rows back from `ReplayResult.to_frame()` columns (`score.*`, `usage.*`, `slice.*`, `error.*`)."""
    rows = []
    for record in frame.to_dict(orient="records"):
        row: dict[str, Any] = {k: _plain(v) for k, v in record.items() if not k.startswith(_NESTED)}
        # Scores keep NaN: it means "does not apply to this record", which the statistics skip.
        row["scores"] = {k[len("score."):]: float(v) for k, v in record.items() if k.startswith("score.")}
        row["usage"] = {k[len("usage."):]: _plain(v) or 0 for k, v in record.items() if k.startswith("usage.")}
        slices = {k[len("slice."):]: _plain(v) for k, v in record.items() if k.startswith("slice.")}
        if slices:  # an eval written before slices has none; `evals.slices` says which are missing
            row["slices"] = slices
        error = {k[len("error."):]: _plain(v) for k, v in record.items() if k.startswith("error.")}
        row["error"] = error if error.get("class") else None
        rows.append(row)
    return rows


def read_eval_summary(folder: Path) -> dict[str, Any]:
    """An eval folder's summary.json, {} when it has none; one line naming the file when it is unreadable."""
    summary_path = Path(folder) / SUMMARY_FILE
    if not summary_path.is_file():
        return {}
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuidebenchError(f"{summary_path}: unreadable: {exc}") from exc
    if not isinstance(summary, dict):
        raise GuidebenchError(f"{summary_path}: not the summary of a guidebench eval (not a JSON object)")
    return summary


def read_eval_folder(folder: Path, *, where: str = "", summary_required: bool = True) -> tuple[dict[str, Any],
                                                                                               list[dict[str, Any]]]:
    """(summary.json, the replay rows of results.parquet) of a `guidebench eval --out` folder: the one reader of an
    eval folder's results (a board's `--results`, `guidebench postmortem`). Each problem is one line naming the file
    (GuidebenchError; `where`: the option that named the folder, e.g. "--results "). Without `summary_required`, a
    folder without summary.json reads as {} (its rows alone still say what they are)."""
    import pandas as pd

    folder = Path(folder)
    summary_path, results_path = folder / SUMMARY_FILE, folder / RESULTS_FILE
    for path in (summary_path, results_path) if summary_required else (results_path,):
        if not path.is_file():
            raise GuidebenchError(f"{where}{folder}: no {path.name}; give a `guidebench eval --out` folder")
    summary = read_eval_summary(folder)
    try:
        rows = rows_from_frame(pd.read_parquet(results_path))
    except Exception as exc:  # a damaged or foreign file: one line, not a traceback
        raise GuidebenchError(f"{results_path}: unreadable: {type(exc).__name__}: {exc}") from exc
    return summary, rows


def _entry_of(summary: dict[str, Any]) -> str:
    """The registry program of a result: `entry`, else the program name (a compile names it `<program>+<optimizer>`)."""
    import programs

    name = summary.get("entry") or summary["program"]
    if "+" in name and name not in programs.names():
        return name.split("+", 1)[0]
    return name


def load_eval_result(folder: Path, *, board: Optional[SplitRef] = None, n_resamples: int = 1000,
                     seed: int = 0) -> ScoredVariant:
    """A scored variant from an eval output folder (the split it was scored on comes with it).

    A summary without a split hash is identified by its dataset id and split name when they are the
    board's: the dataset id is the hash of every split hash, so it pins the split's hash too.
    """
    folder = Path(folder)
    summary_path = folder / SUMMARY_FILE
    summary, rows = read_eval_folder(folder, where="--results ")
    notes = [f"scored earlier by `guidebench eval` ({folder}); not replayed here"]
    if not summary.get("split_hash") and board is not None and summary.get("dataset_id") == board.dataset_id \
            and summary.get("split") == board.split:
        summary["split_hash"] = board.split_hash
        notes.append("its summary has no split hash; the split is identified by the dataset id and split name")
    missing = [k for k in ("program", "kind", "dataset_id", "split", "split_hash") if not summary.get(k)]
    if missing:
        raise GuidebenchError(f"{summary_path}: missing {', '.join(missing)}: cannot tell which split it was "
                              "scored on, so it cannot join any board")
    kind = summary["kind"]
    metrics = bootstrap_many(statistics(kind, rows), len(rows), n_resamples=n_resamples, seed=seed,
                             groups=resampling_groups(kind, rows))
    keep = ("usage", "wall_s", "threads", "n_errors", "errors_by_class", "logged_enforcement_mismatches", "lm",
            "cycles_model")
    result = ReplayResult(kind=kind, program=summary["program"], rows=rows, metrics=metrics,
                          summary={k: summary[k] for k in keep if k in summary})
    entry = canonical_entry(_entry_of(summary), f"{summary_path}: field program")
    manifest = PackageManifest(name=summary["program"].replace(" ", "-"), version=__version__, entry=entry,
                               compatible_with=contract_for(entry), tags=["eval-results"],
                               description=f"scored by guidebench eval into {folder}")
    try:
        provenance = read_provenance(summary)  # the program's, as the evaluation recorded it (absent: unknown)
    except ValueError as exc:
        raise GuidebenchError(f"{summary_path}: {exc}") from None
    variant = Variant(label=summary["program"], manifest=manifest, origin=f"results:{folder}",
                      details={"mlflow_run_id": summary.get("mlflow_run_id")}, provenance=provenance)
    split = SplitRef(dataset_id=summary["dataset_id"], split=summary["split"], split_hash=summary["split_hash"])
    return ScoredVariant(variant=variant, result=result, split=split, notes=notes)


def cycles_mismatch(item: ScoredVariant, cycles: Any) -> Optional[str]:
    """Why a planner result cannot join a board whose cycles model is `cycles` (None: it can): another model, or
    the same one fit differently (another dataset, split hashes, settings or seed). One line naming both."""
    if cycles is None or item.result.kind != "planner":
        return None
    used = item.result.summary.get("cycles_model") or {}
    name = used.get("name")
    if name is None:
        return (f"{item.variant.label} ({item.variant.origin}) names no cycles model (scored before models were "
                f"named), this board uses {cycles.name}: re-evaluate it with --cycles-model {cycles.name}")
    if name != cycles.name:
        return (f"{item.variant.label} ({item.variant.origin}) was scored with cycles model {name}, this board "
                f"uses {cycles.name}: re-evaluate it with --cycles-model {cycles.name}, or build the board with "
                f"--cycles-model {name}")
    theirs, ours = used.get("fit_key"), getattr(cycles.model, "fit_key", None)
    if theirs and ours and theirs != ours:
        return (f"{item.variant.label} ({item.variant.origin}) was scored with a {name} model fit {theirs}, this "
                f"board's is fit {ours} (another dataset, splits, settings or seed): re-evaluate it here")
    return None


def reusable_result(variant: Variant, split: FrozenSplit, *, lm: str, tracking_uri: Optional[str] = None,
                    n_resamples: int = 1000, seed: int = 0, cycles: Any = None) -> tuple[Optional[ScoredVariant], str]:
    """The results an MLflow compile run logged for this exact split, if they may stand in for a replay.

    Returns (scored variant, why) or (None, why not): the results must come from the same dataset id,
    split hash and records, from the same LM as the board's and (a planner's) the same cycles model;
    otherwise the variant is replayed.
    """
    artifact = (variant.details.get("result_artifacts") or {}).get(split.ref.split)
    run_id = variant.details.get("mlflow_run_id")
    if not artifact or not run_id:
        return None, "no logged results for this split"
    from mlflow.tracking import MlflowClient

    from guidebench.tracking.runs import download_artifact

    with tempfile.TemporaryDirectory(prefix="guidebench-results-") as work:
        local = download_artifact(MlflowClient(tracking_uri=tracking_uri), run_id, artifact, work)
        loaded = load_eval_result(Path(local), board=split.ref, n_resamples=n_resamples, seed=seed)
        lm_spec = json.loads((Path(local) / SUMMARY_FILE).read_text(encoding="utf-8")).get("lm_spec") or ""
    if lm_spec != lm:
        return None, f"its logged {split.ref.split} results used LM {lm_spec!r}, this board uses {lm!r}"
    try:
        check_same_split([loaded], split.ref, split.record_ids)
    except SplitMismatchError as exc:
        return None, f"its logged results do not match this board ({exc})"
    mismatch = cycles_mismatch(loaded, cycles)
    if mismatch:
        return None, f"its logged results used another cycles model ({mismatch})"
    note = (f"scores are the {split.ref.split}-split results logged by MLflow run {run_id} (same dataset, split "
            f"hash, records and LM); not replayed here")
    return ScoredVariant(variant=variant, result=loaded.result, split=loaded.split, notes=[note]), note
