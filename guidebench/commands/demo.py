"""`guidebench demo`: the main job end to end on the committed sample logs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from guidebench.commands import add_api_base

DEFAULT_OUT = Path("out") / "demo"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `demo` subcommand."""
    parser = subparsers.add_parser(
        "demo", help="run the whole story on the sample logs: import, baselines, compile, search, "
                     "leaderboard, export, promote, closed loop",
        description="Import the committed sample logs, score the baselines, fit a decision model on the logs, "
                    "compile a cascade that hands the turns it is unsure of to the embedded model and a planner, "
                    "run a small Optuna search, rank everything on leaderboards, export the best compiled Full "
                    "Auto variant, promote it through the gates, load it with the runtime and let it drive "
                    "simulated runs. Every step is a guidebench command, printed as you would type it. Writes "
                    "OUT/demo_summary.json.")
    parser.add_argument("--quick", action="store_true",
                        help="the same steps on less data and fewer LM calls (about 3 minutes on 2 cores)")
    parser.add_argument("--lm", default="local", metavar="SPEC",
                        help="task LM: `local` (embedded Gemma 3 270M, default), `fake` (deterministic, for a "
                             "dry run of the plumbing) or a LiteLLM model string")
    add_api_base(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                        help=f"output folder, new or empty (default {DEFAULT_OUT}; see --force)")
    parser.add_argument("--force", action="store_true", help="replace DIR when it holds an earlier demo")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; a failed step ends it with one line naming the step."""
    from guidebench.commands import build_parser
    from guidebench.demo import DemoOptions, run_demo

    progress = not args.no_progress and sys.stderr.isatty()
    run_demo(DemoOptions(out=args.out, quick=args.quick, lm=args.lm, progress=progress, force=args.force), build_parser)
    return 0
