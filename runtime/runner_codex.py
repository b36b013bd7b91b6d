"""The `codex` a repository's loop runner finds first on PATH once `guidebench runner install` has run.

The loop runner (`tools/loop_runner.py` of the kernel-optimization repository) plans by running
`codex exec -C ROOT -s read-only -c approval_policy="never" --color never --output-schema SCHEMA
--output-last-message OUT [-m MODEL] -` with its prompt on stdin, from ROOT, and reads OUT. This module is that
command's whole front end, and it stays light (the standard library only: no pydantic, no dspy) because every call
of the loop starts it:

- `codex login status` is answered here (the planner needs no credential);
- a `codex exec` carrying `--output-schema` is a planning call: it goes to the planner service of this repository
  (`guidebench.runner.service`, one process that keeps the frozen module loaded), started on first use, which
  decides, checks the directive against SCHEMA, writes OUT and answers with one line;
- every other call (the implementer's `codex exec`, `codex login`, `--version`, ...) is handed unchanged, by
  `execv`, to the real codex: the one named at install, else the next `codex` on PATH after this one.

A call that cannot be planned exits 2 with one line on stderr, and OUT is never written then.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

CONFIG_FILE = "runner.json"  # in REPO/.guidebench/runner/, beside service.log
SOCKET_FILE = "planner.sock"
_SOCKET_PATH_MAX = 100  # AF_UNIX paths hold about 107 bytes
START_WAIT_S = 120.0  # a cold start loads dspy and the module: seconds, and more on a busy machine
ANSWER_WAIT_S = 120.0
EXIT_CANNOT_PLAN = 2
MARKER = "guidebench-runner-codex"  # in the installed script's first lines: never hand a call to another copy
_MAX_MESSAGE = 64 * 1024 * 1024


class CannotPlan(Exception):
    """A planning call this codex cannot answer; its text is the one line the runner shows."""


def call_kind(argv: Sequence[str]) -> str:
    """`login-status`, `plan` (an `exec` with `--output-schema`) or `other` (handed to the real codex)."""
    args = list(argv)
    if args[:2] == ["login", "status"]:
        return "login-status"
    if args and args[0] == "exec" and any(a == "--output-schema" or a.startswith("--output-schema=") for a in args):
        return "plan"
    return "other"


def option(argv: Sequence[str], *names: str) -> Optional[str]:
    """The value of the last of `names` in argv (`--name VALUE` or `--name=VALUE`), None when absent."""
    found: Optional[str] = None
    args = list(argv)
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                found = args[index + 1]
            elif name.startswith("--") and arg.startswith(name + "="):
                found = arg[len(name) + 1:]
    return found


def read_config(home: Path) -> dict[str, Any]:
    """REPO/.guidebench/runner.json as `guidebench runner install` wrote it."""
    path = home / CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CannotPlan(f"{path}: not readable ({' '.join(str(exc).split())[:160]}): run `guidebench runner "
                         "install REPO --module EXPORT` again") from None
    if not isinstance(data, dict):
        raise CannotPlan(f"{path}: not a JSON object: run `guidebench runner install REPO --module EXPORT` again")
    return data


def real_codex(config: Mapping[str, Any], me: Path, path_env: Optional[str] = None) -> Optional[str]:
    """The codex every other call goes to: the one named at install, else the first `codex` on PATH that is not
    this one (nor another installed copy of it)."""
    named = config.get("codex")
    if isinstance(named, str) and named:
        return named
    mine = me.resolve()
    for folder in (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep):
        candidate = Path(folder or ".") / "codex"
        try:
            if candidate.resolve() == mine or not (candidate.is_file() and os.access(candidate, os.X_OK)):
                continue
            with candidate.open("rb") as handle:
                if MARKER.encode() in handle.read(4096):
                    continue  # another repository's planner codex: never loop through it
        except OSError:
            continue
        return str(candidate)
    return None


def send_message(conn: socket.socket, obj: Any) -> None:
    """One message of the service's protocol: 8 bytes of length, then the JSON (both ends use these two)."""
    data = json.dumps(obj).encode("utf-8")
    conn.sendall(len(data).to_bytes(8, "big") + data)


def receive_message(conn: socket.socket) -> Any:
    """One message (see `send_message`)."""
    head = _exactly(conn, 8)
    size = int.from_bytes(head, "big")
    if size > _MAX_MESSAGE:
        raise OSError(f"message of {size} bytes")
    return json.loads(_exactly(conn, size).decode("utf-8"))


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the planner service closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def socket_path(home: Path) -> Path:
    """Where the service of a repository listens: HOME/planner.sock, or a short path in the temp folder named by
    HOME's hash when that one is too long for a Unix socket."""
    own = home / SOCKET_FILE
    if len(str(own)) <= _SOCKET_PATH_MAX:
        return own
    import hashlib
    import tempfile

    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"guidebench-runner-{digest}.sock"


def ask(sock: Path, request: Mapping[str, Any], timeout: float = ANSWER_WAIT_S) -> dict[str, Any]:
    """Send one request to the planner service at `sock` and return its answer (OSError when none listens)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(sock))
        send_message(conn, request)
        answer = receive_message(conn)
    if not isinstance(answer, dict):
        raise CannotPlan("the planner service answered something that is not an object")
    return answer


def start_service(config: Mapping[str, Any], home: Path) -> subprocess.Popen:
    """Start the repository's planner service in its own session (it outlives this call; it stops after
    `idle_s` without calls, or on `guidebench runner stop`)."""
    log = (home / "service.log").open("ab")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(config.get("project", "")), env.get("PYTHONPATH", "")) if p)
    try:
        return subprocess.Popen([str(config.get("python") or sys.executable), "-m", "guidebench.runner.service",
                                 str(home)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(home.parent.parent),
                                env=env, start_new_session=True, close_fds=True)
    finally:
        log.close()


def plan(config: Mapping[str, Any], home: Path, request: Mapping[str, Any]) -> dict[str, Any]:
    """Ask the service, starting it when none answers (one start: a second caller waits for the same socket)."""
    sock = socket_path(home)
    try:
        return ask(sock, request)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    except OSError as exc:
        raise CannotPlan(f"the planner service at {sock} did not answer: {exc}") from None
    lock_path = home / "service.lock"
    with lock_path.open("a+") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return ask(sock, request)
        except (FileNotFoundError, ConnectionRefusedError):
            service = start_service(config, home)
        wait = float(config.get("start_wait_s") or START_WAIT_S)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                return ask(sock, request)
            except (FileNotFoundError, ConnectionRefusedError):
                if service.poll() is not None:  # it died starting: say why now, not after the whole wait
                    raise CannotPlan(f"the planner service exited (code {service.returncode}) while starting: "
                                     f"{_log_tail(home / 'service.log')} (log: {home / 'service.log'})") from None
    tail = _log_tail(home / "service.log")
    raise CannotPlan(f"the planner service did not start within {wait:g} s" + (f": {tail}" if tail else "")
                     + f" (log: {home / 'service.log'})")


def _log_tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def login_status(config: Mapping[str, Any]) -> str:
    """The answer to `codex login status`: the runner's API-key check reads "Logged in using an API key"."""
    module = config.get("module_name") or "a frozen planner"
    return (f"Logged in using an API key - none: planning calls are answered by the guidebench planner {module} "
            "(no credential; other calls go to the real codex)")


def main(argv: Sequence[str], home: Path, me: Path) -> int:
    """The installed codex: answer, plan, or hand the call to the real codex."""
    kind = call_kind(argv)
    try:
        config = read_config(home)
    except CannotPlan as exc:
        if kind == "other":
            config = {}
        else:
            print(f"codex (guidebench planner): {exc}", file=sys.stderr)
            return EXIT_CANNOT_PLAN
    if kind == "login-status":
        print(login_status(config))
        return 0
    if kind == "other":
        target = real_codex(config, me)
        if target is None:
            print("codex (guidebench planner): no real codex found later on PATH for `codex "
                  f"{' '.join(argv[:2])}`: install it, or run `guidebench runner install REPO --module EXPORT "
                  "--codex PATH`", file=sys.stderr)
            return 127
        os.execv(target, [target, *argv])
    prompt = "" if sys.stdin is None or sys.stdin.closed else sys.stdin.read()
    request = {"op": "plan", "argv": list(argv), "cwd": os.getcwd(), "prompt": prompt,
               "schema": option(argv, "--output-schema"), "out": option(argv, "--output-last-message", "-o"),
               "root": option(argv, "-C", "--cd")}
    try:
        answer = plan(config, home, request)
    except CannotPlan as exc:
        print(f"codex (guidebench planner): {exc}", file=sys.stderr)
        return EXIT_CANNOT_PLAN
    if not answer.get("ok"):
        print(f"codex (guidebench planner): {answer.get('error') or 'the planner gave no directive'}", file=sys.stderr)
        return EXIT_CANNOT_PLAN
    print(answer.get("message") or "")
    return 0


__all__ = ["CannotPlan", "MARKER", "ask", "call_kind", "login_status", "main", "option", "real_codex",
           "receive_message", "send_message", "socket_path"]
