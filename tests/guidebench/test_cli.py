"""guidebench.cli: registering every command (what `guidebench --help` does) imports no heavy library; a command
prints nothing of MLflow's own logging."""

from __future__ import annotations

import os
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


def _compile_argv(data, out) -> list[str]:
    return ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data", str(data),
            "--lm", "fake", "--no-progress", "--out", str(out)]


def test_a_first_command_on_a_new_store_prints_nothing_of_mlflow(tmp_path, monkeypatch, capsys, restore_lm, request):
    """MLflow loaded already, at INFO (as its import leaves it): a command's first open of a store stays quiet."""
    import logging

    import mlflow  # noqa: F401 (loaded before the command, as in a test run or the demo)

    from guidebench.cli import main
    from optimizer_support import make_dataset

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_LOGGING_LEVEL", raising=False)
    mlflow_logger = logging.getLogger("mlflow")
    request.addfinalizer(lambda level=mlflow_logger.level: mlflow_logger.setLevel(level))
    mlflow_logger.setLevel(logging.INFO)
    data = make_dataset(tmp_path / "data", train=4, dev=2, test=2)
    assert main(_compile_argv(data, tmp_path / "out")) == 0
    err = capsys.readouterr().err
    assert "mlflow" not in err.lower() and (tmp_path / "home" / "mlflow.db").is_file()
    # and it stays quiet until the process exits (MLflow flushes its trace queue at exit)
    assert mlflow_logger.getEffectiveLevel() == logging.WARNING and "MLFLOW_LOGGING_LEVEL" not in os.environ


def test_a_fresh_process_prints_nothing_of_mlflow_up_to_its_exit(tmp_path):
    """A new store and MLflow imported during the command: no "Creating initial MLflow database tables", no
    "Flushing the async trace logging queue" after the last line."""
    from optimizer_support import make_dataset

    data = make_dataset(tmp_path / "data", train=4, dev=2, test=2)
    env = {key: value for key, value in os.environ.items() if not key.startswith("MLFLOW_")}
    done = subprocess.run([sys.executable, "-m", "guidebench.cli", *_compile_argv(data, tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**env, "GUIDEBENCH_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "" and "MLflow run" in done.stdout
