"""The `guidebench` command line: the parser of `guidebench.commands`, run with one-line errors."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

from guidebench.commands import build_parser
from guidebench.errors import GuidebenchError, check_interrupted, remembered_interrupts, write_refused_line
from guidebench.home import guidebench_home
from guidebench.tracking.runs import quiet_mlflow


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
        raise GuidebenchError(f"--lm {spec!r}: empty LM spec; give `local` (the embedded model), `fake` or a "
                              "LiteLLM model string such as openai/gpt-4o-mini, or leave --lm out for the default")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script."""
    logging.basicConfig(level=os.environ.get("GUIDEBENCH_LOG_LEVEL", "WARNING"),
                        format="%(levelname)s %(name)s: %(message)s")
    # Ctrl-C is caught from the first import a command makes, and one a library swallowed still ends it with 130.
    with remembered_interrupts():
        try:
            code = _run(argv)
            check_interrupted()
            return code
        except KeyboardInterrupt:
            print("guidebench: interrupted", file=sys.stderr)
            return 130


def _run(argv: Optional[Sequence[str]]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or arguments refused in one line: its code, for in-process callers
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        _check_lm_spec(getattr(args, "lm", None))
        with _api_base(getattr(args, "api_base", None)), quiet_mlflow():
            return int(args.func(args) or 0)
    except GuidebenchError as exc:
        check_interrupted()
        print(f"guidebench: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a clear line for the user, the traceback kept for the bug report
        check_interrupted()
        refused = write_refused_line(exc)  # a full disk is the machine's, not a bug: no traceback to keep
        if refused:
            print(f"guidebench: error: {refused}", file=sys.stderr)
            return 2
        if args.debug:
            raise
        log = guidebench_home() / "last-error.log"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc())
            where = f" (traceback in {log})"
        except OSError:
            where = ""
        print(f"guidebench: error: {type(exc).__name__}: {exc}{where}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
