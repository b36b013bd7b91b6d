"""CLI subcommands: every module here exposes `register(subparsers)` and is discovered by the CLI."""

from argparse import ArgumentParser

API_BASE_HELP = ("OpenAI-compatible server for --lm (vLLM, SGLang, llama.cpp server, Ollama; "
                 "`guidebench lm serve` for the embedded model); sets OPENAI_API_BASE for this command")


def add_api_base(parser: ArgumentParser) -> None:
    """The `--api-base URL` option shared by every command that takes `--lm`."""
    parser.add_argument("--api-base", default=None, metavar="URL", help=API_BASE_HELP)
