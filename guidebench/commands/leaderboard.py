"""`guidebench leaderboard`: rank package variants on one frozen split, with intervals, significance and cost."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from guidebench.errors import GuidebenchError
from guidebench.commands import add_api_base, add_cycles_model, add_tracking_uri

SPLIT_CHOICES = ("train", "dev", "test", "all")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `leaderboard` subcommand."""
    parser = subparsers.add_parser(
        "leaderboard", help="rank program variants on one frozen split",
        description="Score every variant (registry programs, package folders, exported modules, MLflow runs, "
                    "earlier eval results of the same split) on "
                    "the identical frozen split, rank them by objective with 95% intervals, compare each with "
                    "the champion (paired test), add cost per 1,000 decisions and the Pareto front, and write "
                    "OUT/leaderboard.json, .md, .html and PNG plots (also logged to MLflow).")
    parser.add_argument("--data", required=True, type=Path, metavar="DIR",
                        help="a dataset folder, or a raw decision/experiment log (imported on the fly, ranked whole)")
    parser.add_argument("--split", choices=SPLIT_CHOICES, default=None, help="split to rank on (default test)")
    parser.add_argument("--programs", default="", metavar="A,B,...",
                        help="registry program names, comma-separated (e.g. logged,rule)")
    parser.add_argument("--packages", nargs="+", action="extend", default=[], type=Path, metavar="PATH",
                        help="package folders, exported module folders, or folders of them")
    parser.add_argument("--results", nargs="+", action="extend", default=[], type=Path, metavar="EVAL_OUT",
                        help="`guidebench eval --out` folders to rank without replaying them; refused unless "
                             "they were scored on this board's split")
    parser.add_argument("--from-mlflow", default=None, metavar="EXPERIMENT",
                        help="every finished run of this MLflow experiment (name or id) with a program state artifact")
    parser.add_argument("--eval-limit", type=int, default=None, metavar="N",
                        help="rank on the seeded subset of N records that `guidebench compile --eval-limit N` "
                             "evaluates on (so its logged results can be reused)")
    parser.add_argument("--rescore", action="store_true",
                        help="replay MLflow variants even when their run logged results on exactly this split")
    parser.add_argument("--champion", default=None, metavar="NAME",
                        help="variant every row is compared with (default: the package tagged champion, else "
                             "planner.logged on a planner board, else the first row)")
    parser.add_argument("--cost-axis", default="total_tokens",
                        choices=("total_tokens", "lm_calls", "seconds", "prompt_tokens", "completion_tokens"),
                        help="cost per 1,000 decisions used for the Pareto front (default total_tokens)")
    parser.add_argument("--lm", default=None, metavar="SPEC",
                        help="LM for variants that use one: `local` (embedded model, default) or a LiteLLM model")
    add_api_base(parser)
    parser.add_argument("--no-cache", action="store_true",
                        help="bypass DSPy's cache so costs are those of live LM calls")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="records replayed in parallel (default 1)")
    add_tracking_uri(parser)
    parser.add_argument("--no-track", action="store_true", help="do not log the board to MLflow")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the bootstrap intervals and the paired test's Monte Carlo assignments (default 0)")
    parser.add_argument("--resamples", type=int, default=1000, metavar="B", help="bootstrap resamples (default 1000)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress bar (with its ETA) per variant scored (default: when stderr is a terminal)")
    parser.add_argument("--out", required=True, type=Path, metavar="OUT",
                        help="output folder (new or empty; see --force)")
    parser.add_argument("--force", action="store_true", help="replace OUT when it holds an earlier leaderboard")
    add_cycles_model(parser)
    parser.set_defaults(func=run)


def command_line(argv: list[str]) -> str:
    """The command as typed, for the board's 'regenerate with' line."""
    return "guidebench " + " ".join(shlex.quote(a) for a in argv)


def run(args: argparse.Namespace) -> int:
    """Resolve the variants, score them on the split, write and track the board, print the ranking."""
    import tempfile

    # MLflow runs' program states are downloaded for the board's duration only: nothing is left behind
    with tempfile.TemporaryDirectory(prefix="guidebench-mlflow-") as cache:
        return _run(args, Path(cache))


def _run(args: argparse.Namespace, cache: Path) -> int:
    from guidebench.leaderboard.board import run_leaderboard
    from guidebench.leaderboard.render import write_reports
    from guidebench.leaderboard.packages import resolve_variants

    if args.threads < 1:
        raise GuidebenchError(f"--threads {args.threads}: must be at least 1")
    if args.resamples < 1:
        raise GuidebenchError(f"--resamples {args.resamples}: must be at least 1")
    if args.eval_limit is not None and args.eval_limit < 1:
        raise GuidebenchError(f"--eval-limit {args.eval_limit}: must be at least 1")
    from guidebench.evaluation.inputs import DATA_WRITERS
    from guidebench.outputs import check_input, claim_output

    check_input(args.data, "--data", DATA_WRITERS, "a dataset folder or a log folder")
    for folder in args.results:
        check_input(folder, "--results", ("eval", None), "a `guidebench eval --out` folder")
    for folder in args.packages:
        check_input(folder, "--packages", ("export", None), "a package or exported module folder")
    # Checked before any scoring; the board is written aside and renamed into place.
    output = claim_output(args.out, "leaderboard", force=args.force,
                          inputs=[args.data, *args.results, *args.packages])

    def write(board) -> dict[str, Path]:
        with output.writing() as staging:
            files = write_reports(board, staging)
        return {name: Path(args.out) / Path(path).relative_to(staging) for name, path in files.items()}

    names = [name.strip() for name in args.programs.split(",") if name.strip()]
    tracking_uri = None
    if args.from_mlflow or not args.no_track:
        from guidebench.tracking import runs as tracking

        tracking_uri = tracking.configure(args.tracking_uri)
    variants = resolve_variants(names, args.packages, args.from_mlflow, tracking_uri, cache_dir=cache,
                                required=not args.results)
    lm = "none"
    if any(variant.uses_lm for variant in variants):
        lm = args.lm or "local"
        from guidebench.lm.factory import configure_lm

        configure_lm(lm, cache=not args.no_cache)
    board, scored = run_leaderboard(variants, args.data, args.split or "test", threads=args.threads,
                                    champion=args.champion, cost_axis=args.cost_axis,
                                    progress=sys.stderr.isatty() if args.progress is None else args.progress,
                                    n_resamples=args.resamples, seed=args.seed, lm=lm, results=args.results,
                                    reuse_logged=not args.rescore, eval_limit=args.eval_limit,
                                    command=command_line(["leaderboard", *_argv_of(args)]),
                                    cycles_model=args.cycles_model)
    if args.no_track:
        files = write(board)
    else:
        from guidebench.leaderboard.tracking import track_leaderboard

        _, files = track_leaderboard(board, scored, write, lm=lm, seed=args.seed, tracking_uri=tracking_uri)
    print(ranking_text(board))
    print(f"wrote {', '.join(str(files[name]) for name in ('leaderboard.json', 'leaderboard.md', 'leaderboard.html'))}")
    if board.mlflow_run_id:
        print(f"MLflow run {board.mlflow_run_id}")
    return 0


def _argv_of(args: argparse.Namespace) -> list[str]:
    """The arguments that decide the board's content, normalised (no threads, tracking or progress)."""
    argv = ["--data", str(args.data)]
    if args.split:
        argv += ["--split", args.split]
    if args.programs:
        argv += ["--programs", args.programs]
    if args.packages:
        argv += ["--packages", *map(str, args.packages)]
    if args.results:
        argv += ["--results", *map(str, args.results)]
    if args.from_mlflow:
        argv += ["--from-mlflow", args.from_mlflow]
    if args.eval_limit:
        argv += ["--eval-limit", str(args.eval_limit)]
    if args.rescore:
        argv.append("--rescore")
    if args.champion:
        argv += ["--champion", args.champion]
    if args.cost_axis != "total_tokens":
        argv += ["--cost-axis", args.cost_axis]
    if args.lm:
        argv += ["--lm", args.lm]
    if args.no_cache:
        argv.append("--no-cache")
    if args.cycles_model != "auto":
        argv += ["--cycles-model", args.cycles_model]
    argv += ["--out", str(args.out)]
    return argv


def ranking_text(board) -> str:
    """A plain-text ranking with, per row, p, n, the test used and a plain-words verdict (see render_text)."""
    from guidebench.leaderboard.render import render_text

    return render_text(board)
