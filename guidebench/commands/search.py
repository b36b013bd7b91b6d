"""`guidebench search`: Optuna study over program variant, optimizer and its main settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from guidebench.errors import GuidebenchError
from guidebench.commands import add_api_base, add_tracking_uri


def _range(text: str, cast: type) -> tuple:
    try:
        low, high = (cast(part) for part in text.split(":", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LOW:HIGH") from None
    return low, high


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `search` subcommand."""
    parser = subparsers.add_parser(
        "search", help="search program variants, optimizers and settings with Optuna",
        description="Run (or resume) an Optuna study: each trial compiles a program variant with an optimizer "
                    "and settings drawn by a seeded TPE sampler, and is scored on the dev split in minibatches "
                    "(weak trials are pruned early). Every trial is a nested MLflow run. The study is stored in "
                    "SQLite by default, so running the command again resumes it.")
    parser.add_argument("--program-family", required=True, choices=("full_auto", "planner"), dest="family")
    parser.add_argument("--data", required=True, type=Path, metavar="DIR", help="dataset folder (train/dev/test)")
    parser.add_argument("--trials", required=True, type=int, metavar="N",
                        help="finished trials the study should hold (a resumed study runs only the missing ones)")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="Optuna storage: any SQLAlchemy URL (default sqlite under GUIDEBENCH_HOME); a shared "
                             "PostgreSQL URL lets several workers run one study")
    parser.add_argument("--study", default=None, metavar="NAME", help="study name (default <family>-<dataset id>)")
    parser.add_argument("--lm", default="local", metavar="SPEC", help="task LM (default local)")
    add_api_base(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the TPE sampler and the compiles (default 0)")
    parser.add_argument("--programs", default=None, metavar="A,B", help="program variants to search (default: all "
                                                                         "LM programs of the family)")
    parser.add_argument("--optimizers", default=None, metavar="A,B",
                        help="optimizers to search (default: labeled_fewshot,knn_fewshot,bootstrap_fewshot,"
                             "bootstrap_random_search)")
    parser.add_argument("--demos", type=lambda t: _range(t, int), default=(1, 6), metavar="LOW:HIGH",
                        help="demos per prompt (default 1:6)")
    parser.add_argument("--temperature", type=lambda t: _range(t, float), default=(0.0, 1.0), metavar="LOW:HIGH",
                        help="inference temperature (default 0:1, step 0.1)")
    parser.add_argument("--candidates", type=lambda t: _range(t, int), default=(2, 5), metavar="LOW:HIGH",
                        help="candidates for the optimizers that search (default 2:5)")
    parser.add_argument("--minibatch-size", type=int, default=8, metavar="N",
                        help="dev examples per pruning step (default 8)")
    parser.add_argument("--dev-limit", type=int, default=None, metavar="N",
                        help="score trials on a seeded subset of N labeled dev records (default: all)")
    parser.add_argument("--no-test", action="store_true",
                        help="do not re-score the best trial on the test split (it never selects on test)")
    parser.add_argument("--max-lm-calls-per-trial", type=int, default=None, metavar="N",
                        help="compile budget of each trial")
    add_tracking_uri(parser, text="MLflow tracking URI")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder (default GUIDEBENCH_HOME/searches/<study>): new or empty, or the same "
                             "study's (replaced as the search resumes); see --force")
    parser.add_argument("--force", action="store_true",
                        help="replace --out when it holds the output of another study's search")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the search and print the trials."""
    from guidebench.search.study import SearchRequest, run_search_command, summary_lines

    if args.minibatch_size < 1:
        raise GuidebenchError(f"--minibatch-size {args.minibatch_size}: must be at least 1")
    if args.dev_limit is not None and args.dev_limit < 1:
        raise GuidebenchError(f"--dev-limit {args.dev_limit}: must be at least 1")
    split = lambda text: [part.strip() for part in text.split(",") if part.strip()] if text else None  # noqa: E731
    request = SearchRequest(family=args.family, data=str(Path(args.data).resolve()), trials=args.trials,
                            storage=args.storage, study=args.study, lm=args.lm, seed=args.seed,
                            programs=split(args.programs), optimizers=split(args.optimizers), demos=args.demos,
                            temperature=args.temperature, candidates=args.candidates,
                            minibatch_size=args.minibatch_size, max_lm_calls_per_trial=args.max_lm_calls_per_trial,
                            dev_limit=args.dev_limit, rescore_test=not args.no_test,
                            tracking_uri=args.tracking_uri, out=str(args.out) if args.out else None,
                            force=args.force)
    result, out = run_search_command(request, progress=not args.no_progress)
    print("\n".join(summary_lines(result, out)))
    print(f"outputs in {out}")
    return 0
