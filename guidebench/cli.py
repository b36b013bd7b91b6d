"""The `guidebench` command line: the parser of `guidebench.commands`, run with one-line errors.

This module imports nothing of the workbench at its top: the console script imports it, and everything else
is imported inside `main()`, where a Ctrl-C is caught. So a Ctrl-C in the first tenths of a second, while
the modules load, ends the command as one later does: rc 130 and one line, no traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional, Sequence

if TYPE_CHECKING:
    import argparse

INTERRUPTED = "guidebench: interrupted"


def build_parser() -> "argparse.ArgumentParser":
    """The CLI's parser (`guidebench.commands.build_parser`, imported here when first needed)."""
    from guidebench.commands import build_parser as build

    return build()


@contextmanager
def _api_base(url: Optional[str]) -> Iterator[None]:
    # `--api-base` reaches every LM the command builds (and the workers it starts) the way LiteLLM
    # reads it: OPENAI_API_BASE. Restored afterwards, since tests call `main()` in-process.
    if not url:
        yield
        return
    before = os.environ.get("OPENAI_API_BASE")
    os.environ["OPENAI_API_BASE"] = url
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("OPENAI_API_BASE", None)
        else:
            os.environ["OPENAI_API_BASE"] = before


def _check_lm_spec(spec: Optional[str]) -> None:
    # An empty `--lm` (an unset shell variable) must not fall back to the default model unannounced.
    if spec is not None and not spec.strip():
        from guidebench.errors import GuidebenchError

        raise GuidebenchError(f"--lm {spec!r}: empty LM spec; give `local` (the embedded model), `fake` or a "
                              "LiteLLM model string such as openai/gpt-4o-mini, or leave --lm out for the default")


@contextmanager
def _interruptible() -> Iterator[None]:
    # A command started with SIGINT ignored (a shell without job control starts background commands so) takes it
    # as every command does (`guidebench.errors.remembered_interrupts`), also while that module loads.
    ignored = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script."""
    try:
        with _interruptible():
            return _main(argv)
    except KeyboardInterrupt:  # also one raised while the modules below load
        print(INTERRUPTED, file=sys.stderr)
        return 130


def _main(argv: Optional[Sequence[str]]) -> int:
    import logging

    from guidebench.errors import check_interrupted, remembered_interrupts

    logging.basicConfig(level=os.environ.get("GUIDEBENCH_LOG_LEVEL", "WARNING"),
                        format="%(levelname)s %(name)s: %(message)s")
    # Ctrl-C is caught from the first import a command makes, and one a library swallowed still ends it with 130.
    with remembered_interrupts():
        code = _run(argv)
        check_interrupted()
        return code


def _run(argv: Optional[Sequence[str]]) -> int:
    from guidebench.errors import run_reporting
    from guidebench.home import guidebench_home

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or arguments refused in one line: its code, for in-process callers
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return run_reporting(lambda: _call(args), prefix="guidebench", debug=args.debug,
                         error_log=lambda: guidebench_home() / "last-error.log")


def _call(args: "argparse.Namespace") -> Optional[int]:
    from evals.progress import quiet_bars

    from guidebench.tracking.runs import quiet_mlflow

    _check_lm_spec(getattr(args, "lm", None))
    # --no-progress reaches the bars no flag is passed to (the outcome fit's) as well
    with _api_base(getattr(args, "api_base", None)), quiet_mlflow(), quiet_bars(getattr(args, "no_progress", False)), \
            _cluster(args):
        return args.func(args)


@contextmanager
def _cluster(args: "argparse.Namespace") -> Iterator[None]:
    """A command with `--cluster` runs its units on that cluster (`guidebench.cluster`); others as they are."""
    if not hasattr(args, "cluster"):
        yield
        return
    from guidebench.cluster import cluster_address, session

    shown = sys.stderr.isatty() and not getattr(args, "no_progress", False) and \
        getattr(args, "progress", None) is not False
    with session(cluster_address(args.cluster), progress=shown):
        yield


if __name__ == "__main__":
    sys.exit(main())
