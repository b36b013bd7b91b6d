"""The `guidebench` command line: discovers subcommands in `guidebench.commands`."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Sequence

from guidebench import __version__, commands
from guidebench.errors import GuidebenchError
from guidebench.home import guidebench_home


class DeferredParser(argparse.ArgumentParser):
    """A (sub)command parser that can add arguments on first use: when it parses or shows its help.

    A command whose arguments need a heavy import to declare (the simulators' options, the LM server's
    defaults) defers them with `parser.defer(add)`, so `guidebench --help` and every other command
    register it without that import. Every parser the CLI builds below the top level is one of these.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._deferred: list[Callable[[argparse.ArgumentParser], None]] = []
        super().__init__(*args, **kwargs)

    def defer(self, add: Callable[[argparse.ArgumentParser], None]) -> None:
        """Run `add(self)` before this parser is first used."""
        self._deferred.append(add)

    def _complete(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """Add the deferred arguments, then parse."""
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        """Add the deferred arguments, then format the help."""
        self._complete()
        return super().format_help()

    def format_usage(self) -> str:
        """Add the deferred arguments, then format the usage."""
        self._complete()
        return super().format_usage()


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every discovered subcommand."""
    parser = argparse.ArgumentParser(
        prog="guidebench",
        description="Train, score, rank and export the decision programs of autonomous loops.",
    )
    parser.add_argument("--version", action="version", version=f"guidebench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=DeferredParser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


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
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        _check_lm_spec(getattr(args, "lm", None))
        with _api_base(getattr(args, "api_base", None)):
            return int(args.func(args) or 0)
    except GuidebenchError as exc:
        print(f"guidebench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("guidebench: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a clear line for the user, the traceback kept for the bug report
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
