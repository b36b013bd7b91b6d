"""Loopback processes: free ports on 127.0.0.1, readiness polls, and stopping a process group.

The LM server (`guidebench.lm.server`) and the search's PostgreSQL and MLflow services
(`guidebench.search.services`) start real programs bound to 127.0.0.1 with these; they sit here, in the
lowest of the two layers, so the LM package does not import the search package.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Optional

from guidebench.errors import GuidebenchError

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when a GET on the URL answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback only)
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def log_tail(path: Optional[Path], lines: int = 20) -> str:
    """The last lines of a log file, for an error message."""
    if path is None or not Path(path).is_file():
        return ""
    text = Path(path).read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(text)


def wait_until(check: Callable[[], bool], *, what: str, timeout: float = START_TIMEOUT_S,
               process: Optional[subprocess.Popen] = None, log: Optional[Path] = None) -> None:
    """Poll `check` until it holds; fail early with the log tail if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if process is not None and process.poll() is not None:
            raise GuidebenchError(f"{what} exited with code {process.returncode} before it was ready"
                                  f"{_tail_note(log)}")
        time.sleep(0.25)
    raise GuidebenchError(f"{what} was not ready after {timeout:.0f} s{_tail_note(log)}")


def _tail_note(log: Optional[Path]) -> str:
    tail = log_tail(log)
    return f"; last lines of {log}:\n{tail}" if tail else ""


def terminate_group(process: subprocess.Popen, timeout: float = 20.0) -> None:
    """Stop a process started with `start_new_session=True` and its children (SIGTERM, then SIGKILL)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)  # the group id is the pid of the process we started
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=timeout)
