"""Running the demo's steps: each a real `guidebench` command in this process, timed, with its output in a log;
and the environment the commands run in (GUIDEBENCH_HOME under OUT, library logs in a file).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import shlex
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from guidebench.errors import GuidebenchError


def command_text(argv: Sequence[str]) -> str:
    """The command as a user types it."""
    return "guidebench " + shlex.join(str(a) for a in argv)


@dataclass
class StepRecord:
    """One step of the demo: what ran, how long, how it ended."""

    name: str
    commands: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # CPU time of this process: what the step costs on an idle machine
    status: str = "pending"
    log: str = ""


class StepFailed(GuidebenchError):
    """A demo step failed; the message names the step."""


class Runner:
    """Runs CLI commands in-process, echoes them, keeps their output in a log per step."""

    def __init__(self, out: Path, echo: Callable[[str], None], parser: Callable[[], argparse.ArgumentParser]) -> None:
        self.echo = echo
        self.parser = parser  # the CLI's `build_parser`, passed down by the command (the demo sits below it)
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.steps: list[StepRecord] = []
        self.current: Optional[StepRecord] = None

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[StepRecord]:
        """Time one step; any failure inside becomes a one-line StepFailed naming it."""
        record = StepRecord(name=name, log=str(self.logs / f"{len(self.steps) + 1:02d}-{_slug(name)}.log"))
        self.steps.append(record)
        self.current = record
        self.echo(f"\n== step {len(self.steps)}: {name}")
        started, cpu = time.perf_counter(), time.process_time()
        try:
            yield record
            record.status = "ok"
        except StepFailed:
            record.status = "failed"
            raise
        except KeyboardInterrupt:
            record.status = "interrupted"
            raise
        except GuidebenchError as exc:
            record.status = "failed"
            raise StepFailed(f"demo step '{name}' failed: {exc}") from None
        except Exception as exc:  # an internal error still ends the demo with one line, the traceback in the log
            import traceback

            record.status = "failed"
            with open(record.log, "a", encoding="utf-8") as handle:
                handle.write(traceback.format_exc())
            raise StepFailed(f"demo step '{name}' failed: {type(exc).__name__}: {exc} (traceback in {record.log})"
                             ) from None
        finally:
            record.seconds = round(time.perf_counter() - started, 2)
            record.cpu_seconds = round(time.process_time() - cpu, 2)
            self.current = None

    def run(self, argv: Sequence[str], *, ok: Sequence[int] = (0,)) -> int:
        """Run one `guidebench` command in-process; its stdout goes to the step's log."""
        record = self.current
        assert record is not None, "commands run inside a step"
        argv = [str(a) for a in argv]
        text = command_text(argv)
        record.commands.append(text)
        self.echo(f"$ {text}")
        refused = io.StringIO()
        try:
            with contextlib.redirect_stderr(refused):
                args = self.parser().parse_args(argv)
        except SystemExit:  # argparse refused the arguments: a bug of the demo, named as such
            last = (refused.getvalue().strip().splitlines() or ["no message"])[-1]
            raise GuidebenchError(f"`{text}` was refused by the CLI: {last}") from None
        # Line-buffered, so `tail -f` on the log follows a long step.
        with open(record.log, "a", encoding="utf-8", buffering=1) as log, contextlib.redirect_stdout(log):
            log.write(f"$ {text}\n")
            try:
                code = int(args.func(args) or 0)
            except GuidebenchError as exc:
                raise GuidebenchError(f"{exc} (command: {text}; output in {record.log})") from None
        if code not in ok:
            raise GuidebenchError(f"`{text}` exited with {code}; output in {record.log}")
        return code


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")[:60]


@contextlib.contextmanager
def demo_environment(home: Path) -> Iterator[None]:
    """GUIDEBENCH_HOME=home for the demo (restored after); warnings and library logs go to a log file."""
    import mlflow  # noqa: F401 (its loggers exist once it is imported)
    import optuna

    settings = {"GUIDEBENCH_HOME": str(home), **llama_threads(),
                # MLflow's download bars would bury the demo's own lines.
                "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    previous = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    optuna_verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    mlflow_logger = logging.getLogger("mlflow")  # MLflow's own handler on stderr, not the root's
    mlflow_handlers, mlflow_level = list(mlflow_logger.handlers), mlflow_logger.level
    file_handler = logging.FileHandler(home.parent / "logs" / "demo-library.log", encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    try:
        # Library chatter (MLflow, DSPy, Optuna warnings) would bury the demo's own lines: keep it in a file.
        for handler in handlers:
            root.removeHandler(handler)
        root.addHandler(file_handler)
        root.setLevel(logging.INFO)
        # MLflow's INFO lines go to the file as well; its warnings still show.
        console = logging.StreamHandler()
        console.setLevel(logging.WARNING)
        mlflow_logger.handlers = [file_handler, console]
        mlflow_logger.setLevel(logging.INFO)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.captureWarnings(True)
            yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(file_handler)
        file_handler.close()
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        mlflow_logger.handlers = mlflow_handlers
        mlflow_logger.setLevel(mlflow_level)
        optuna.logging.set_verbosity(optuna_verbosity)
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def llama_threads() -> dict[str, str]:
    """`GUIDEBENCH_LLAMA_THREADS` for the demo: every core (up to 4) when the machine is idle, else unchanged.

    The embedded model defaults to half the cores because spinning threads on busy cores are 3-5x
    slower; on an idle machine all cores are up to twice as fast, and the demo is LM-bound.
    """
    if os.environ.get("GUIDEBENCH_LLAMA_THREADS"):
        return {}
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: keep the default
        return {}
    return {"GUIDEBENCH_LLAMA_THREADS": str(min(cores, 4))} if cores >= 2 and load < 1.0 else {}


def share_model_files(home: Path, usual_home: Optional[Path] = None) -> Optional[Path]:
    """Link HOME/models to the usual home's model folder so the 250 MB model is assembled once per machine."""
    from guidebench.home import guidebench_home

    usual = (usual_home or guidebench_home()) / "models"
    if usual.resolve() == (home / "models").resolve():
        return None
    usual.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "models").symlink_to(usual, target_is_directory=True)
    return usual
