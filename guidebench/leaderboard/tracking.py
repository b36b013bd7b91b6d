"""Logging a leaderboard to MLflow: a parent run with the board's files, a nested run per variant.

Every number on the board can be re-derived from these runs: each variant's run holds its params
(program, package, version, origin, dataset id, split hash, LM, seed, library versions), every
metric with its interval, its cost, its comparison with the champion and the per-record results.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

from guidebench.tracking import runs as tracking
from guidebench.leaderboard.board import ScoredVariant
from guidebench.leaderboard.models import Leaderboard

RUN_TYPE = "leaderboard"
VARIANT_RUN_TYPE = "leaderboard_variant"


def _safe_key(text: str) -> str:
    """An MLflow-legal metric or param key fragment."""
    return re.sub(r"[^A-Za-z0-9_\-. /]+", "_", text)[:200]


MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store by default


def run_url(tracking_uri: str, run_id: str) -> str:
    """The MLflow UI page of a run: on the tracking server itself, else where `mlflow ui` serves by default."""
    parts = urlsplit(tracking_uri)
    if parts.scheme in ("http", "https") and parts.hostname:
        # Never copy credentials of the tracking URI into a report.
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    else:
        base = MLFLOW_UI_DEFAULT
    return f"{base}/#/runs/{run_id}"


def _finite(values: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _log_postmortem(board: Leaderboard, name: str) -> None:
    """The row's own post-mortem and, for a challenger, its slices against the champion."""
    from guidebench.tracking.postmortem import log_comparison, log_postmortem

    if board.postmortem is None:
        return
    if name in board.postmortem.rows:
        log_postmortem(board.postmortem.rows[name])
    for comparison in board.postmortem.challengers:
        if comparison.challenger == name:
            log_comparison(comparison)


def track_leaderboard(board: Leaderboard, scored: Sequence[ScoredVariant],
                      write_files: Callable[[Leaderboard], Mapping[str, Path]], *, lm: str, seed: int,
                      tracking_uri: Optional[str] = None) -> tuple[str, Mapping[str, Path]]:
    """Log the board and its variants; `write_files` writes the reports once the run id is known."""
    import mlflow

    params = tracking.run_params(program="leaderboard", dataset_id=board.dataset_id, split=board.split,
                                 split_hash=board.split_hash, lm=lm, seed=seed, kind=board.kind,
                                 variants=[row.name for row in board.rows], champion=board.champion,
                                 cost_axis=board.cost_axis, n_records=board.n_records)
    tags = {"guidebench.run_type": RUN_TYPE, "guidebench.champion": board.champion}
    by_label = {item.variant.label: item for item in scored}
    with tracking.tracked_run(dataset_id=board.dataset_id, kind=board.kind, run_name=f"leaderboard {board.split}",
                              params=params, tags=tags, tracking_uri=tracking_uri) as parent:
        board.mlflow_run_id = parent.info.run_id
        with tempfile.TemporaryDirectory(prefix="guidebench-leaderboard-") as work:
            for row in board.rows:
                item = by_label[row.name]
                manifest = item.variant.manifest
                variant_params = tracking.run_params(
                    program=manifest.entry, dataset_id=board.dataset_id, split=board.split,
                    split_hash=board.split_hash, lm=lm if item.variant.uses_lm else "none", seed=seed,
                    kind=board.kind, package=manifest.name, version=manifest.version, origin=item.variant.origin,
                    n_records=row.n, leaderboard_run_id=parent.info.run_id,
                    **(row.learned_from.params() if row.learned_from else {}))
                variant_tags = {"guidebench.run_type": VARIANT_RUN_TYPE, "guidebench.program": manifest.entry,
                                "guidebench.variant": row.name}
                with tracking.tracked_run(dataset_id=board.dataset_id, kind=board.kind, nested=True,
                                          run_name=f"leaderboard {row.name}", params=variant_params,
                                          tags=variant_tags) as run:
                    row.mlflow_run_id = run.info.run_id
                    row.mlflow_url = run_url(mlflow.get_tracking_uri(), run.info.run_id)
                    tracking.log_metrics(item.result.metrics)
                    comparison = {f"vs_champion.{name}.{key}": getattr(value, key)
                                  for name, value in row.comparisons.items()
                                  for key in ("diff", "ci_low", "ci_high", "p_value")}
                    cost = {f"cost_per_1k.{key}": value for key, value in row.cost.model_dump().items()}
                    mlflow.log_metrics(_finite({"rank": row.rank, "errors": row.errors, **cost, **comparison}))
                    results = Path(work) / f"results-{_safe_key(row.name).replace('/', '_')}.parquet"
                    item.result.to_frame().to_parquet(results, index=False)
                    mlflow.log_artifact(str(results), artifact_path="results")
                    _log_postmortem(board, row.name)
            files = write_files(board)
            tracking.log_artifacts(files, artifact_path="leaderboard")
        champion = board.row(board.champion)
        mlflow.log_metrics(_finite({"n_variants": len(board.rows), "n_records": board.n_records,
                                    **{f"champion.{k}": v.value for k, v in champion.metrics.items()
                                       if v.value is not None}}))
        return parent.info.run_id, files
