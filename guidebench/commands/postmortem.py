"""`guidebench postmortem`: print the post-mortem of an earlier eval (its folder or MLflow run), or of a board."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from guidebench.commands import add_tracking_uri, ranged
from guidebench.errors import GuidebenchError
from guidebench.cluster import add_cluster_argument

RUN_ID = re.compile(r"^[0-9a-f]{32}$")
RESULTS, POSTMORTEM, BOARD = "results.parquet", "postmortem.json", "leaderboard.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `postmortem` subcommand."""
    parser = subparsers.add_parser(
        "postmortem", help="print an eval's post-mortem: slices, outliers, where a challenger wins and loses",
        description="Print the post-mortem of an earlier evaluation: its scores per slice with intervals, the "
                    "slices, pairs of slices and threads or episodes scoring significantly below the rest "
                    "(Benjamini-Hochberg), and the records whose cost lies beyond the fence; with --against, "
                    "where it wins and loses against another eval of the same records, paired by slice. "
                    "RUN_OR_DIR is an eval output folder (`guidebench eval --out`, a compile's folder: its test "
                    "split), a leaderboard folder, or an MLflow run id of one of them.")
    parser.add_argument("source", metavar="RUN_OR_DIR", help="eval, compile or leaderboard folder, or MLflow run id")
    parser.add_argument("--against", default=None, metavar="RUN_OR_DIR",
                        help="the champion's eval of the same records: compare slice by slice, paired")
    parser.add_argument("--recompute", action="store_true",
                        help="recompute from results.parquet instead of printing the stored postmortem.json")
    parser.add_argument("--min-n", type=ranged(int, low=1), default=None, metavar="N",
                        help="records a slice value needs to stand alone and to be tested (default 8; implies "
                             "--recompute)")
    parser.add_argument("--fdr", type=ranged(float, low=0, high=1, above=True, below=True), default=None, metavar="Q",
                        help="false-discovery rate of the Benjamini-Hochberg correction (default 0.05; implies "
                             "--recompute)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bar of a recomputed post-mortem or a comparison")
    add_tracking_uri(parser, "MLflow tracking URI to find a run id in (default: MLFLOW_TRACKING_URI, else sqlite "
                             "under GUIDEBENCH_HOME)")
    add_cluster_argument(parser)
    parser.set_defaults(func=run)


# ----- finding the eval ---------------------------------------------------------------------------

def _local(source: str, tracking_uri: Optional[str], work: Path, option: str) -> Path:
    """A folder for a path, or the downloaded artifacts of an MLflow run."""
    path = Path(source)
    if path.exists():
        return path.parent if path.is_file() else path
    if not RUN_ID.match(source):
        raise GuidebenchError(f"{option} {source}: no such folder, and not an MLflow run id (32 hex digits)")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from guidebench.tracking import runs as tracking

    uri = tracking.configure(tracking_uri)
    target = work / source
    target.mkdir(parents=True)
    try:
        tracking.download_artifact(MlflowClient(tracking_uri=uri), source, "", target)
    except MlflowException as exc:
        raise GuidebenchError(f"{option} {source}: not a run of {uri}: {str(exc).splitlines()[0]}") from None
    return target


def _eval_folder(folder: Path, option: str, source: str) -> tuple[Path, Optional[str]]:
    """(the eval folder, a note) in a folder: itself, a compile's `test`, or a board (`leaderboard.json`)."""
    for candidate, note in ((folder, None), (folder / "test", f"{source}: a compile's folder, its test split"),
                            (folder / "leaderboard", None)):
        if any((candidate / name).is_file() for name in (RESULTS, POSTMORTEM, BOARD)):
            return candidate, note
    raise GuidebenchError(f"{option} {source}: no {RESULTS}, {POSTMORTEM} or {BOARD} in it; give a `guidebench "
                          "eval --out` folder, a compile or leaderboard folder, or the MLflow run id of one")


def _rows(folder: Path) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]]:
    """(kind, program, replay rows, summary) of an eval folder, read as a board reads one (`read_eval_folder`)."""
    from guidebench.leaderboard.results import read_eval_folder

    summary, rows = read_eval_folder(folder, summary_required=False)
    first = rows[0] if rows else {}
    kind = summary.get("kind") or ("full_auto" if "enforced_action" in first else
                                   "planner" if "directive" in first else None)
    if kind not in ("full_auto", "planner") or "record_id" not in first:
        raise GuidebenchError(f"{folder / RESULTS}: not the per-record results of a guidebench eval (no record_id, "
                              f"or kind {kind!r} unknown)")
    return kind, str(summary.get("program") or folder.name), rows, summary


# ----- the command --------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    """Print the post-mortem (and, with --against, the slice-by-slice comparison)."""
    work = Path(tempfile.mkdtemp(prefix="guidebench-postmortem-"))
    try:
        folder, note = _eval_folder(_local(args.source, args.tracking_uri, work, "RUN_OR_DIR"), "RUN_OR_DIR",
                                    args.source)
        if (folder / BOARD).is_file() and not (folder / RESULTS).is_file():
            return _print_board(folder / BOARD, args)
        pm = _postmortem(folder, args)
        comparison = None
        if args.against:
            other, _ = _eval_folder(_local(args.against, args.tracking_uri, work, "--against"), "--against",
                                    args.against)
            comparison = _compare(folder, other, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"postmortem": pm.model_dump(mode="json"),
                          "against": comparison.model_dump(mode="json") if comparison else None}, indent=2))
        return 0
    from guidebench.evaluation.postmortem import comparison_lines, render_markdown

    if note:
        print(f"note: {note}")
    if pm.missing_slices:
        print(f"note: these results carry no {', '.join(pm.missing_slices)} (written before post-mortems); "
              "re-run the eval to slice by them")
    print(render_markdown(pm), end="")
    if comparison is not None:
        print("\n" + "\n".join(comparison_lines(comparison)))
    return 0


def _postmortem(folder: Path, args: argparse.Namespace) -> Any:
    """The stored post-mortem when it can be printed as it is, else one computed from results.parquet; in-sample
    when the eval's summary.json says the program learned from some of its records (also one stored before)."""
    from evals.postmortem import FDR, MIN_N, post_mortem, read_postmortem

    from guidebench.evaluation.postmortem import summary_in_sample
    from guidebench.leaderboard.results import read_eval_summary

    stored = folder / POSTMORTEM
    if stored.is_file() and not (args.recompute or args.min_n or args.fdr):
        try:
            pm = read_postmortem(stored)
            pm.in_sample = pm.in_sample or summary_in_sample(read_eval_summary(folder))
            return pm
        except ValueError as exc:
            if not (folder / RESULTS).is_file():
                raise GuidebenchError(str(exc)) from None
            print(f"note: {exc}; recomputed from {RESULTS}")
    kind, program, rows, summary = _rows(folder)
    return post_mortem(kind, rows, program=program, min_n=args.min_n or MIN_N, fdr=args.fdr or FDR,
                       seed=int(summary.get("seed", 0) or 0), n_resamples=int(summary.get("n_resamples", 1000) or 1000),
                       in_sample=summary_in_sample(summary), progress=not args.no_progress)


def _compare(folder: Path, other: Path, args: argparse.Namespace) -> Any:
    from evals.postmortem import FDR, MIN_N, compare_slices

    from guidebench.evaluation.postmortem import summary_in_sample

    kind, program, rows, summary = _rows(folder)
    other_kind, champion, champion_rows, other_summary = _rows(other)
    in_sample = next((f"{name}: {why}" for name, why in ((program, summary_in_sample(summary)),
                                                         (champion, summary_in_sample(other_summary))) if why), "")
    if other_kind != kind:
        raise GuidebenchError(f"--against {args.against}: a {other_kind} eval, {args.source} is a {kind} eval")
    try:
        return compare_slices(rows, champion_rows, kind, challenger=program, champion=champion,
                              min_n=args.min_n or MIN_N, fdr=args.fdr or FDR, seed=int(summary.get("seed", 0) or 0),
                              n_resamples=int(summary.get("n_resamples", 1000) or 1000), in_sample=in_sample,
                              progress=not args.no_progress)
    except ValueError as exc:
        raise GuidebenchError(f"--against {args.against}: {exc}") from None


def _print_board(path: Path, args: argparse.Namespace) -> int:
    from guidebench.leaderboard.models import Leaderboard
    from guidebench.leaderboard.postmortem import markdown_lines

    try:
        board = Leaderboard.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuidebenchError(f"{path}: not a leaderboard of this version: {str(exc).splitlines()[0]}") from None
    if board.postmortem is None:
        raise GuidebenchError(f"{path}: this board was written before post-mortems; run `guidebench leaderboard` "
                              "again to get them")
    if args.against or args.recompute or args.min_n or args.fdr:
        raise GuidebenchError(f"{path}: a board's post-mortem is printed as it was computed; --against, "
                              "--recompute, --min-n and --fdr take an eval folder")
    if args.json:
        print(board.postmortem.model_dump_json(indent=2))
    else:
        print("\n".join(markdown_lines(board.postmortem)).rstrip())
    return 0
