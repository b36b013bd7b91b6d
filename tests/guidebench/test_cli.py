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


@pytest.mark.parametrize("argv", [
    ["eval", "--program", "rule", "--data", "DATA", "--out", "OUT"],
    ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data", "DATA"],
    ["search", "--program-family", "full_auto", "--data", "DATA", "--trials", "1"],
    ["leaderboard", "--data", "DATA", "--programs", "rule", "--out", "OUT"],
    ["baselines", "--fullauto", "DATA", "--out", "OUT"],
    ["promote", "MODULE", "--data", "DATA"],
    ["run-loop", "--module", "MODULE", "--out", "OUT"],
    ["demo", "--out", "OUT"],
    ["predict", "--summary", "SUMMARY"],
], ids=lambda argv: argv[0])
def test_an_empty_lm_spec_is_an_error_not_the_default_model(argv, tmp_path, monkeypatch, capsys):
    from guidebench.cli import main

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    argv = [str(tmp_path / arg.lower()) if arg.isupper() else arg for arg in argv]
    for spec in ("", "  "):
        assert main([*argv, "--lm", spec]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"guidebench: error: --lm {spec!r}: empty LM spec") and len(err.splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # nothing written, not even the home


def test_help_imports_only_what_the_parser_needs():
    """`guidebench --help` builds no pydantic model, loads no NumPy, no data importer and no LM module."""
    unwanted = ("pydantic", "numpy", "tqdm", "runtime.fullauto", "runtime.advisor", "guidebench.data",
                "guidebench.lm.engine", "guidebench.lm.server", "importlib.metadata")
    code = ("import contextlib, io, sys; from guidebench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main([])\n"
            f"print(','.join(m for m in {unwanted!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "", f"`guidebench --help` imports {loaded}"


def test_deferred_arguments_are_added_when_the_command_is_used(capsys):
    """Commands that declare their arguments late (`data simulate`, `lm`) parse and show help as before."""
    from guidebench.cli import build_parser

    args = build_parser().parse_args(["data", "simulate", "fullauto", "--out", "logs", "--runs", "3"])
    assert (args.sim_kind, args.runs, args.out) == ("fullauto", 3, "logs") and callable(args.func)
    args = build_parser().parse_args(["lm", "serve", "--port", "8123"])
    assert args.lm_action == "serve" and args.port == 8123 and callable(args.func)
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["data", "simulate", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "fullauto" in out and "experiments" in out
    with pytest.raises(SystemExit):
        build_parser().parse_args(["lm"])  # an action is required
    assert "required: ACTION" in capsys.readouterr().err
