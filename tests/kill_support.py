"""Children a test kills on purpose: a temp folder of their own, and a command paused where the kill lands.

A process killed with SIGKILL (or interrupted while it cleans up) cannot remove the temporary folders its
libraries made (an MLflow artifact's `TempDir`, a `TemporaryDirectory` of DSPy, datasets or llama.cpp).
In the session's temp root (tests/conftest.py), such a folder fails the footprint check, at random, since
it depends on where the kill lands. So every child a test kills or interrupts writes its temporary files
under a folder the test owns (TMPDIR), which `child_temp` removes on the way out, killed or not.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Optional

DRIVER = Path(__file__).resolve().parent / "crash_driver.py"
REPO = Path(__file__).resolve().parents[1]


@contextmanager
def child_temp(env: Optional[Mapping[str, str]] = None, *, under: Optional[Path] = None) -> Iterator[dict[str, str]]:
    """`env` (default: this process's) with TMPDIR set to a new folder of this test; removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="child-tmp-", dir=under or _outside_session_root()))
    try:
        yield {**(os.environ if env is None else env), "TMPDIR": str(folder)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def started_with(tmpdir: str) -> Iterator[None]:
    """Processes started in the block (a server that reads this process's environment) inherit TMPDIR=`tmpdir`;
    this process keeps its own temp folder, pinned before TMPDIR changes."""
    tempfile.gettempdir()
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tmpdir
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous


def _outside_session_root() -> str:
    """pytest's own temp root (the system's), where a folder left by an error of the test itself is pruned."""
    return os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()


def guidebench_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `guidebench` child: its home, this checkout on the path, warnings off."""
    return {**os.environ, "GUIDEBENCH_HOME": str(home), "PYTHONWARNINGS": "ignore",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **extra}


def kill_at(stage: str, argv: list, cwd: Path, env: Mapping[str, str], timeout: float = 300.0) -> int:
    """Run `guidebench ARGV` under tests/crash_driver.py until it pauses at `stage`, SIGKILL it; its pid.

    The child runs with a temp folder of its own (`child_temp`), removed once it is dead."""
    marker = cwd / f"paused-{stage.replace(':', '-')}-{time.monotonic_ns()}"
    with child_temp(env) as child_env:
        process = subprocess.Popen([sys.executable, str(DRIVER), stage, str(marker), "--", *map(str, argv)],
                                   cwd=cwd, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        try:
            _wait_for_marker(process, marker, stage, timeout)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)
            process.stdout.close()
    assert process.returncode == -signal.SIGKILL, process.returncode
    return process.pid


def _wait_for_marker(process: subprocess.Popen, marker: Path, stage: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if process.poll() is not None:
            raise AssertionError(f"the command ended before {stage} (exit {process.returncode}):\n"
                                 f"{process.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the command did not reach {stage} in {timeout:.0f} s")
        time.sleep(0.1)
