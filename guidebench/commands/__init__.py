"""CLI subcommands: every module here exposes `register(subparsers)` and is discovered by the CLI.

Public: `cli_reference()` (the CLI reference page, docs/cli.md, generated from the parser itself), re-exported
lazily (`runtime._lazy`): `reference` imports `guidebench.cli`, which imports this package first.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.commands.reference import cli_reference

API_BASE_HELP = ("OpenAI-compatible server for --lm (vLLM, SGLang, llama.cpp server, Ollama; "
                 "`guidebench lm serve` for the embedded model); sets OPENAI_API_BASE for this command")


def add_api_base(parser: ArgumentParser) -> None:
    """The `--api-base URL` option shared by every command that takes `--lm`."""
    parser.add_argument("--api-base", default=None, metavar="URL", help=API_BASE_HELP)


_WHERE: dict[str, str] = {"cli_reference": "reference"}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
