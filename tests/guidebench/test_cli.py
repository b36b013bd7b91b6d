"""guidebench.cli: registering every command (what `guidebench --help` does) imports no heavy library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("dspy", "mlflow", "pandas", "llama_cpp", "optuna", "scipy", "datasets")


def test_help_imports_no_heavy_library():
    code = ("import sys; from guidebench.cli import build_parser; build_parser(); "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "", f"`guidebench --help` imports {loaded}"


def test_help_lists_every_command():
    from guidebench.cli import build_parser

    text = build_parser().format_help()
    for command in ("data", "eval", "compile", "leaderboard", "export", "demo", "search", "lm"):
        assert command in text
