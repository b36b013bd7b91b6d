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


# ----- the two ends a command does not choose: a full disk, Ctrl-C ----------------------------------------

@pytest.mark.parametrize("argv, full", [
    (["eval", "--program", "rule", "--data", "DATA", "--split", "test", "--out", "OUT", "--no-progress"], "metrics.json"),
    (["leaderboard", "--data", "DATA", "--programs", "rule", "--out", "OUT", "--no-track"], "leaderboard.md"),
], ids=lambda value: value[0] if isinstance(value, list) else None)
def test_a_full_disk_is_one_line_naming_the_file_not_a_bare_os_error(argv, full, tmp_path, monkeypatch, capsys):
    import errno
    from pathlib import Path

    from guidebench.cli import main
    from optimizer_support import make_dataset

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data = make_dataset(tmp_path / "data", train=4, dev=2, test=4)
    write_text = Path.write_text

    def disk_full(self, *args, **kwargs):
        if self.name == full:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full)
    out = tmp_path / "out"
    assert main([str(data) if arg == "DATA" else str(out) if arg == "OUT" else arg for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("guidebench: error: cannot write ") and len(err.splitlines()) == 1, err
    assert f"{full}: the disk is full (No space left on device), not a fault of the input; free some space" in err
    assert not out.exists()


SEARCH = ["search", "--program-family", "full_auto", "--trials", "2", "--lm", "fake", "--optimizers",
          "labeled_fewshot", "--programs", "full_auto.predict", "--no-progress", "--no-test"]


def test_a_ctrl_c_a_library_swallows_still_stops_the_search_with_130(tmp_path, monkeypatch, capsys):
    # A KeyboardInterrupt can be lost on its way up (one raised in a class body's __set_name__ becomes a
    # RuntimeError that an `except Exception` around an optional import takes); the search must stop all the same.
    import signal

    import optuna

    from guidebench.cli import main
    from guidebench.search import study
    from optimizer_support import make_dataset, tracking_uri

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    data, uri = make_dataset(tmp_path / "data", train=8, dev=4, test=4), tracking_uri(tmp_path)
    announce = study.announce_search

    def swallowing(*args, **kwargs):
        line = announce(*args, **kwargs)
        try:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C, delivered while a library runs ...
        except BaseException:  # ... that takes every exception
            pass
        return line

    monkeypatch.setattr(study, "announce_search", swallowing)
    before = signal.getsignal(signal.SIGINT)
    assert main([*SEARCH, "--data", str(data), "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "guidebench: interrupted"
    storage = f"sqlite:///{tmp_path / 'home' / 'optuna.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    assert summary.n_trials == 0  # stopped before its first trial, not run to the end
    assert signal.getsignal(signal.SIGINT) is before  # the handler main() found is back


@pytest.mark.parametrize("started_with", ["default", "ignored"])
def test_ctrl_c_in_the_first_moments_of_a_search_ends_it_with_130_and_one_line(tmp_path, started_with):
    # The command's own process, interrupted as soon as main() builds the parser (the imports, the study and the
    # MLflow store follow); SIGINT is sent again until the process reacts, as a user presses Ctrl-C again.
    # "ignored": started as a shell without job control starts a background command, SIGINT ignored; SIGINT still
    # stops it (DSPy's parallel evaluation would take it later on anyway, and a worker supervisor relies on it).
    import os
    import signal

    from kill_support import child_temp
    from optimizer_support import make_dataset, tracking_uri

    def start() -> None:
        if started_with == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    data, uri = make_dataset(tmp_path / "data", train=8, dev=4, test=4), tracking_uri(tmp_path)
    argv = [*SEARCH, "--data", str(data), "--tracking-uri", uri, "--out", str(tmp_path / "out")]
    child = ("import sys\nimport guidebench.cli as cli\nbuild = cli.build_parser\n"
             "def announced():\n    print('ready', flush=True)\n    return build()\n"
             f"cli.build_parser = announced\nsys.exit(cli.main({argv!r}))\n")
    # A second Ctrl-C can land in a library's clean-up: the child's temporary folders go to one of this test's.
    with child_temp({**os.environ, "GUIDEBENCH_HOME": str(tmp_path / "home")}) as env:
        process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env, preexec_fn=start)
        try:
            assert process.stdout.readline() == "ready\n"
            while process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    continue
            err = process.stderr.read()
        finally:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "guidebench: interrupted" and "Traceback" not in err, err


@pytest.mark.parametrize("started_with", ["default", "ignored"])
@pytest.mark.parametrize("loading", ["guidebench.errors", "guidebench.commands", "guidebench.tracking.runs"])
def test_ctrl_c_while_the_modules_load_is_one_line_and_130(loading, started_with):
    # The console script imports guidebench.cli and calls main(); a Ctrl-C while main() imports the workbench
    # (here: when `loading` is imported) ends the command like a later one: rc 130, one line, no traceback; also
    # in a command started with SIGINT ignored (as a background command of a shell without job control).
    import os
    import signal

    def start() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN if started_with == "ignored" else signal.SIG_DFL)

    child = ("import signal, sys\n"
             "class Interrupting:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             f"        if name == {loading!r}:\n"
             "            signal.raise_signal(signal.SIGINT)\n"
             "        return None\n"
             "from guidebench.cli import main\n"
             "assert not [m for m in sys.modules if m.startswith('guidebench.') and m != 'guidebench.cli'], 'loaded'\n"
             "sys.meta_path.insert(0, Interrupting())\n"
             "sys.exit(main(['programs']))\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, preexec_fn=start)
    assert (done.returncode, done.stderr, done.stdout) == (130, "guidebench: interrupted\n", ""), done.stderr


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


def test_no_progress_quiets_every_bar_the_command_makes(monkeypatch, tmp_path):
    """`--no-progress` reaches the bars no flag is passed to (the outcome fit's): they stay off for the command, and
    only for it."""
    from evals import progress
    from guidebench.commands import postmortem

    seen = []
    monkeypatch.setattr(postmortem, "run", lambda args: seen.append(progress.auto_disable()) or 0)
    from guidebench.cli import main

    assert main(["postmortem", str(tmp_path), "--no-progress"]) == 0
    assert main(["postmortem", str(tmp_path)]) == 0
    assert seen == [True, None] and progress.auto_disable() is None
