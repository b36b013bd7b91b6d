"""A post-mortem in the active MLflow run: its slice table as a table artifact (`mlflow.log_table`, shown in the
run's artifacts) and its counts as metrics, next to the `postmortem.json` / `.md` files an eval logs. A post-mortem
of records the program learned from sets the run's tag `<prefix>postmortem.in_sample` to its one line (and a
comparison's wins and losses are 0: it draws none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

SLICES_TABLE = "postmortem_slices.json"
IN_SAMPLE_TAG = "postmortem.in_sample"
TAG_CHARS = 5000  # MLflow's limit on a tag value
CHAMPION_TABLE = "postmortem_vs_champion.json"


def _artifact(prefix: str, name: str) -> str:
    """`name`, in the folder a metric prefix names ("test." -> "test/name")."""
    return f"{prefix.rstrip('.')}/{name}" if prefix else name


def log_postmortem(pm: Any, prefix: str = "") -> None:
    """Log a PostMortem: its table (`postmortem_slices.json`, in folder `test/` for prefix "test.") and
    `<prefix>postmortem.n_*` metrics."""
    import mlflow

    table = pm.table()
    if table:
        mlflow.log_table(data=_columns(table), artifact_file=_artifact(prefix, SLICES_TABLE))
    counts = {family: [s for s in getattr(pm, family) if not s.untested] for family in ("slices", "pairs", "groups")}
    metrics = {f"{prefix}postmortem.n_tested.{family}": len(stats) for family, stats in counts.items()}
    metrics.update({f"{prefix}postmortem.n_below.{family}": sum(s.outlier for s in stats)
                    for family, stats in counts.items()})
    mlflow.log_metrics({key: float(value) for key, value in metrics.items()})
    _tag_in_sample(pm.in_sample, prefix)


def _tag_in_sample(why: str, prefix: str) -> None:
    """Tag the run `<prefix>postmortem.in_sample` with why the records are not evidence (nothing when they may be)."""
    import mlflow

    if why:
        mlflow.set_tag(f"{prefix}{IN_SAMPLE_TAG}", why[:TAG_CHARS])


def log_comparison(comparison: Any, prefix: str = "") -> None:
    """Log a challenger's ChallengerSlices: its table (`postmortem_vs_champion.json`) and its win / loss counts."""
    import mlflow

    table = comparison.table()
    if table:
        mlflow.log_table(data=_columns(table), artifact_file=_artifact(prefix, CHAMPION_TABLE))
    mlflow.log_metrics({f"{prefix}postmortem.vs_champion.n_{verdict}": float(len(comparison.verdicts(verdict)))
                        for verdict in ("wins", "loses")})
    _tag_in_sample(comparison.in_sample, f"{prefix}vs_champion.")


def log_postmortem_file(path: Optional[Path], prefix: str = "") -> None:
    """Log the post-mortem an eval wrote (nothing when there is none, or when it records a failure or cannot be
    read: the eval's own files say why)."""
    from evals.postmortem import read_postmortem

    if path is None or not Path(path).is_file():
        return
    try:
        pm = read_postmortem(Path(path))
    except ValueError:
        return
    log_postmortem(pm, prefix)


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Rows as columns (every key of any row, None where a row lacks it): what `mlflow.log_table` takes."""
    keys: list[str] = []
    for row in rows:
        keys.extend(key for key in row if key not in keys)
    return {key: [row.get(key) for row in rows] for key in keys}
