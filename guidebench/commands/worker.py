"""`guidebench worker`: search workers sharing one Optuna study through a database (`--storage`)."""

from __future__ import annotations

import argparse


def _search_parser() -> argparse.ArgumentParser:
    """The `search` command's parser: a worker takes exactly the same arguments."""
    from guidebench.commands import search

    actions = argparse.ArgumentParser(add_help=False).add_subparsers()
    search.register(actions)
    return actions.choices["search"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `worker` subcommand."""
    parser = subparsers.add_parser(
        "worker", parents=[_search_parser()], conflict_handler="resolve",
        help="run search workers that share one Optuna study through --storage",
        description="Start N search workers (processes) on one Optuna study stored in a shared database, e.g. "
                    "--storage postgresql+psycopg2://user@host/db. Arguments are those of `guidebench search`. "
                    "Start more workers on other machines with the same command and --storage. A killed worker's "
                    "trial is marked failed and retried; the study stays usable and the same command resumes it.")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="worker processes on this machine (default 1)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the workers and say how the study ended."""
    from guidebench.commands import search
    from guidebench.errors import GuidebenchError
    from guidebench.search.workers import run_pool
    from guidebench.tracking.runs import guidebench_home

    if not args.storage:
        raise GuidebenchError("guidebench worker needs --storage: a database every worker reaches, e.g. "
                              "postgresql+psycopg2://user@127.0.0.1:5432/optuna (or sqlite:///FILE on one machine)")
    report = run_pool(args, args.workers, home=guidebench_home(), run=search.run)
    codes = ", ".join(f"worker {index}: {code}" for index, code in sorted(report.exit_codes.items()))
    print(f"study {report.study}: {report.finished} of {report.target} trials finished ({codes})")
    if not report.ok:
        print("the study is short of --trials: run the same command again to resume it")
        return 1
    return 0
