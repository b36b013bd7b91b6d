"""CLI subcommands: every module here exposes `register(subparsers)`; `build_parser()` discovers them.

The parser is built here, below the entry point (`guidebench.cli`), so everything that needs it (the entry
point, the generated reference, the demo's in-process commands) imports it downward.
Public: `cli_reference()` (the CLI reference page, docs/cli.md, generated from the parser itself), re-exported
lazily (`runtime._lazy`).
"""

from __future__ import annotations

import argparse
import importlib
import math
import pkgutil
from argparse import ArgumentParser
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional, Union

from guidebench import __version__
from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.commands.reference import cli_reference

API_BASE_HELP = ("OpenAI-compatible server for --lm (vLLM, SGLang, llama.cpp server, Ollama; "
                 "`guidebench lm serve` for the embedded model); sets OPENAI_API_BASE for this command")


TRACKING_URI_HELP = "MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite under GUIDEBENCH_HOME)"


def add_api_base(parser: ArgumentParser) -> None:
    """The `--api-base URL` option shared by every command that takes `--lm`."""
    parser.add_argument("--api-base", default=None, metavar="URL", help=API_BASE_HELP)


def add_tracking_uri(parser: ArgumentParser, text: Optional[str] = TRACKING_URI_HELP) -> None:
    """The `--tracking-uri URI` option shared by every command that logs to MLflow (`text`: its help)."""
    parser.add_argument("--tracking-uri", default=None, metavar="URI", help=text)


CYCLES_MODEL_CHOICES = ("auto", "sim", "learned")  # evaluation.outcome_models.CYCLES_MODELS, not imported


def add_cycles_model(parser: ArgumentParser) -> None:
    """The `--cycles-model` option of the commands that score planners."""
    parser.add_argument("--cycles-model", choices=CYCLES_MODEL_CHOICES, default="auto",
                        help="what estimates a planner's improvement of the best: sim (the kernel simulator, only "
                             "for records whose packet carries a performance profile), learned (an outcome model "
                             "fit on the dataset's train and dev splits), auto (default: sim when every record carries a "
                             "profile, else learned); outputs name the one used")


def ranged(kind: Callable[[str], Union[int, float]], *, low: Optional[float] = None, high: Optional[float] = None,
           above: bool = False, below: bool = False) -> Callable[[str], Union[int, float]]:
    """An argparse `type`: `kind(text)` (int or float), finite, at least `low` (above it with `above=True`) and at
    most `high` (below it with `below=True`). Out of range, argparse refuses it in one line that gives the range,
    before the command starts."""
    word = "a whole number" if kind is int else "a number"
    if low is not None and high is not None and below:
        wanted = f"{word} {'above' if above else 'at least'} {low:g} and below {high:g}"
    elif low is not None and high is not None:
        wanted = f"{word} {'above' if above else 'from'} {low:g} {'up ' if above else ''}to {high:g}"
    elif low is not None:
        wanted = f"{word} {'above' if above else 'at least'} {low:g}"
    else:
        wanted = f"{word} {'below' if below else 'at most'} {high:g}" if high is not None else word

    def parse(text: str) -> Union[int, float]:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {word}") from None
        low_ok = low is None or (value > low if above else value >= low)
        high_ok = high is None or (value < high if below else value <= high)
        if not math.isfinite(value) or not low_ok or not high_ok:
            raise argparse.ArgumentTypeError(f"{text}: expected {wanted}")
        return value

    parse.__name__ = getattr(kind, "__name__", "value")  # argparse names the type in its own messages
    return parse


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

    def error(self, message: str) -> NoReturn:
        """One line, as every refusal of the CLI (exit 2): what is wrong and where the options are listed."""
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every discovered subcommand."""
    parser = DeferredParser(
        prog="guidebench",
        description="Train, score, rank and export the decision programs of autonomous loops.",
    )
    parser.add_argument("--version", action="version", version=f"guidebench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=DeferredParser)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


_WHERE: dict[str, str] = {"cli_reference": "reference"}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
