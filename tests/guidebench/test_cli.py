"""guidebench.cli: registering every command (what `guidebench --help` does) imports no heavy library."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("dspy", "mlflow", "pandas", "llama_cpp", "optuna", "scipy", "datasets")


@pytest.mark.parametrize("argv", [[], ["programs"], ["optimizers"]])
def test_help_and_listings_import_no_heavy_library(argv):
    """`guidebench --help`, `guidebench programs` and `guidebench optimizers` start at once."""
    code = ("import contextlib, io, sys; from guidebench.cli import build_parser, main\n"
            f"argv = {argv!r}\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    build_parser() if not argv else main(argv)\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "", f"`guidebench {' '.join(argv) or '--help'}` imports {loaded}"


def test_help_lists_every_command():
    from guidebench.cli import build_parser

    text = build_parser().format_help()
    for command in ("data", "eval", "compile", "leaderboard", "export", "demo", "search", "lm"):
        assert command in text
