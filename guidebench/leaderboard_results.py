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
from pathlib import Path
from typing import Any

from evals.replay import ReplayResult, statistics
from evals.stats import bootstrap_many

from . import __version__
from .errors import GuidebenchError
from .leaderboard import ScoredVariant
from .packages import PackageManifest, SplitRef, Variant, canonical_entry, contract_for

SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.parquet"
_NESTED = ("score.", "usage.", "error.")


def _plain(value: Any) -> Any:
    """A parquet cell as the replay row held it: NaN in a text/None column was a None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def rows_from_frame(frame: Any) -> list[dict[str, Any]]:
    """Replay rows back from `ReplayResult.to_frame()` columns (`score.*`, `usage.*`, `error.*`)."""
    rows = []
    for record in frame.to_dict(orient="records"):
        row: dict[str, Any] = {k: _plain(v) for k, v in record.items() if not k.startswith(_NESTED)}
        # Scores keep NaN: it means "does not apply to this record", which the statistics skip.
        row["scores"] = {k[len("score."):]: float(v) for k, v in record.items() if k.startswith("score.")}
        row["usage"] = {k[len("usage."):]: _plain(v) or 0 for k, v in record.items() if k.startswith("usage.")}
        error = {k[len("error."):]: _plain(v) for k, v in record.items() if k.startswith("error.")}
        row["error"] = error if error.get("class") else None
        rows.append(row)
    return rows


def load_eval_result(folder: Path, *, n_resamples: int = 1000, seed: int = 0) -> ScoredVariant:
    """A scored variant from an eval output folder (the split it was scored on comes with it)."""
    import pandas as pd

    folder = Path(folder)
    summary_path, results_path = folder / SUMMARY_FILE, folder / RESULTS_FILE
    for path in (summary_path, results_path):
        if not path.is_file():
            raise GuidebenchError(f"--results {folder}: no {path.name}; give a `guidebench eval --out` folder")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuidebenchError(f"{summary_path}: unreadable: {exc}") from exc
    missing = [k for k in ("program", "kind", "dataset_id", "split", "split_hash") if not summary.get(k)]
    if missing:
        raise GuidebenchError(f"{summary_path}: missing {', '.join(missing)}: cannot tell which split it was "
                              "scored on, so it cannot join any board")
    try:
        rows = rows_from_frame(pd.read_parquet(results_path))
    except Exception as exc:
        raise GuidebenchError(f"{results_path}: unreadable: {type(exc).__name__}: {exc}") from exc
    kind = summary["kind"]
    metrics = bootstrap_many(statistics(kind, rows), len(rows), n_resamples=n_resamples, seed=seed)
    keep = ("usage", "wall_s", "threads", "n_errors", "errors_by_class", "logged_enforcement_mismatches", "lm")
    result = ReplayResult(kind=kind, program=summary["program"], rows=rows, metrics=metrics,
                          summary={k: summary[k] for k in keep if k in summary})
    entry = canonical_entry(summary.get("entry") or summary["program"], f"{summary_path}: field program")
    manifest = PackageManifest(name=summary["program"].replace(" ", "-"), version=__version__, entry=entry,
                               compatible_with=contract_for(entry), tags=["eval-results"],
                               description=f"scored by guidebench eval into {folder}")
    variant = Variant(label=summary["program"], manifest=manifest, origin=f"results:{folder}",
                      details={"mlflow_run_id": summary.get("mlflow_run_id")})
    split = SplitRef(dataset_id=summary["dataset_id"], split=summary["split"], split_hash=summary["split_hash"])
    return ScoredVariant(variant=variant, result=result, split=split,
                         notes=[f"scored earlier by `guidebench eval` ({folder}); not replayed here"])
