"""`guidebench baselines`: score the baseline programs on the sample data and write reports/baselines.md."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from guidebench.baselines import (
    DEFAULT_EXPERIMENTS,
    DEFAULT_PLANNER_MAX_RECORDS,
    DEFAULT_FULLAUTO,
    DEFAULT_REPORT,
    FULLAUTO_PROGRAMS,
    PLANNER_PROGRAMS,
    run_baselines,
)
from guidebench.commands import add_api_base, add_tracking_uri


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `baselines` subcommand."""
    parser = subparsers.add_parser(
        "baselines", help="score the baselines on the sample data and write reports/baselines.md",
        description="Evaluate the baseline programs (logged, rule, always-continue and the uncompiled "
                    "full_auto.predict; planner.rules and planner.predict) on the sample data's split, track "
                    "every run in MLflow and write the Markdown report.")
    parser.add_argument("--fullauto", type=Path, default=DEFAULT_FULLAUTO, metavar="DIR",
                        help="Full Auto dataset folder or raw workspace log (default: datasets/sample/fullauto)")
    parser.add_argument("--experiments", type=Path, default=DEFAULT_EXPERIMENTS, metavar="DIR",
                        help="experiments dataset folder or raw logs (default: datasets/sample/experiments)")
    parser.add_argument("--split", choices=("train", "dev", "test", "all"), default="test")
    parser.add_argument("--lm", default="local", metavar="SPEC", help="LM of the LM programs (default: local)")
    add_api_base(parser)
    parser.add_argument("--threads", type=int, default=1, metavar="N")
    parser.add_argument("--fullauto-max-records", type=int, default=None, metavar="N",
                        help="score only the first N Full Auto records of the split (default: all)")
    parser.add_argument("--planner-max-records", type=int, default=DEFAULT_PLANNER_MAX_RECORDS, metavar="N",
                        help=f"score only the first N planner records (default {DEFAULT_PLANNER_MAX_RECORDS}: the "
                             "uncompiled planner takes about a minute per directive on the embedded model)")
    parser.add_argument("--fullauto-programs", type=_names, default=list(FULLAUTO_PROGRAMS), metavar="A,B")
    parser.add_argument("--planner-programs", type=_names, default=list(PLANNER_PROGRAMS), metavar="A,B")
    parser.add_argument("--no-cache", action="store_true",
                        help="call the LM afresh (DSPy cache off) so that the cost columns are the uncached cost")
    add_tracking_uri(parser, text=None)
    parser.add_argument("--no-track", action="store_true", help="do not log the runs to MLflow")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_REPORT,
                        help="report path (default: reports/baselines.md): a new file, or see --force")
    parser.add_argument("--force", action="store_true",
                        help="replace --out when it is a report an earlier `guidebench baselines` wrote (never "
                             "another file)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the baselines and write the report."""
    from guidebench.errors import GuidebenchError

    if args.threads < 1:
        raise GuidebenchError(f"--threads {args.threads}: must be at least 1")
    for flag, value in (("--fullauto-max-records", args.fullauto_max_records),
                        ("--planner-max-records", args.planner_max_records)):
        if value is not None and value < 1:
            raise GuidebenchError(f"{flag} {value}: must be at least 1")
    extra = sys.argv[2:] if sys.argv[1:2] == ["baselines"] else []
    command = " ".join(["guidebench", "baselines", *(shlex.quote(a) for a in extra)])
    path = run_baselines(fullauto=args.fullauto, experiments=args.experiments, split=args.split, lm=args.lm,
                         threads=args.threads, tracking_uri=args.tracking_uri, track=not args.no_track, out=args.out,
                         fullauto_programs=args.fullauto_programs, planner_programs=args.planner_programs,
                         fullauto_max_records=args.fullauto_max_records,
                         planner_max_records=args.planner_max_records, progress=not args.no_progress,
                         command=command, cache=not args.no_cache, force=args.force)
    print(f"wrote {path}")
    return 0
