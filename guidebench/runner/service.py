"""The planner service of one repository: the frozen planner stays loaded, so a planning call costs the installed
codex's start (the standard library and a socket) and the decision, not an import of DSPy per call.

`python -m guidebench.runner.service HOME` (HOME = REPO/.guidebench/runner) is started by the installed codex on
the first planning call (in its own session, its output in HOME/service.log), listens on
`runtime.runner_codex.socket_path(HOME)` and answers one call at a time:
- `{"op": "plan", "schema", "out", "prompt", "cwd", ...}` -> `{"ok": true, "message"}` or `{"ok": false, "error"}`
  (`guidebench.runner.planner.RunnerPlanner.plan`; relative paths are the caller's cwd's);
- `{"op": "status"}` -> its pid, module, calls answered and refused, sidecar lines written;
- `{"op": "stop"}` -> it writes every queued sidecar line and exits.
It exits by itself after `idle_s` without a call, and on SIGTERM, the same way (queued lines written first).
A service whose module does not load answers every call with that one line until it is stopped.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from runtime.runner_codex import receive_message, send_message, socket_path

from guidebench.errors import GuidebenchError
from guidebench.runner._base import Layout, RunnerConfig
from guidebench.runner.planner import PlanRefused, RunnerPlanner


def _say(text: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} [{os.getpid()}] {text}", flush=True)


class _Stop(Exception):
    pass


class PlannerService:
    """The loop behind the socket (see the module)."""

    def __init__(self, config: RunnerConfig, home: Path):
        self.config, self.home = config, home
        self.started = time.time()
        self.planner: Optional[RunnerPlanner] = None
        self.broken = ""
        try:
            self.planner = RunnerPlanner(config)
        except GuidebenchError as exc:
            self.broken = str(exc)
        self.sock = socket_path(home)

    def answer(self, request: Any) -> dict[str, Any]:
        """The answer to one request."""
        op = request.get("op") if isinstance(request, dict) else None
        if op == "stop":
            raise _Stop()
        if op == "status":
            planner = self.planner
            return {"ok": True, "pid": os.getpid(), "module": self.config.module_name, "broken": self.broken,
                    "calls": planner.calls if planner else 0, "refused": planner.refused if planner else 0,
                    "lines_written": planner.shadow.written if planner else 0,
                    "write_errors": planner.shadow.write_errors[-3:] if planner else [],
                    "up_s": round(time.time() - self.started, 1)}
        if op != "plan":
            return {"ok": False, "error": f"unknown request {op!r}"}
        if self.planner is None:
            return {"ok": False, "error": self.broken}
        cwd = Path(str(request.get("cwd") or "."))
        schema, out = request.get("schema"), request.get("out")
        if not out:
            return {"ok": False, "error": "no --output-last-message: nowhere to write the directive"}
        try:
            answer = self.planner.plan(out=cwd / str(out), schema_path=cwd / str(schema) if schema else None,
                                       prompt=str(request.get("prompt") or ""))
        except PlanRefused as exc:
            _say(f"refused: {exc}")
            return {"ok": False, "error": str(exc)}
        _say(answer.message)
        return {"ok": True, "message": f"guidebench planner {self.config.module_name}: {answer.message}"}

    def serve(self) -> None:
        """Answer calls until stopped or idle for `idle_s`."""
        if self.sock.exists():
            self.sock.unlink()  # a stale socket of a service that died (the start lock keeps out a live one)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.sock))
        server.listen(8)
        server.settimeout(self.config.idle_s)
        _say(f"listening on {self.sock} with {self.config.module_name}"
             + (f", candidate {self.config.candidate}" if self.config.candidate else "")
             + (f" (cannot plan: {self.broken})" if self.broken else ""))
        try:
            while True:
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    _say(f"idle for {self.config.idle_s:g} s: stopping")
                    return
                with conn:
                    conn.settimeout(60.0)
                    try:
                        request = receive_message(conn)
                        send_message(conn, self.answer(request))
                    except _Stop:
                        send_message(conn, {"ok": True, "message": "stopping"})
                        _say("stop requested")
                        return
                    except (OSError, ValueError) as exc:
                        _say(f"a call broke off: {exc}")
        finally:
            server.close()
            if self.sock.exists():
                self.sock.unlink()
            if self.planner is not None:
                self.planner.close()
            _say("stopped")


def main(argv: list[str]) -> int:
    """`python -m guidebench.runner.service HOME`."""
    home = Path(argv[0]).absolute()
    try:
        config = Layout(home.parent.parent).read()
    except GuidebenchError as exc:
        _say(str(exc))
        return 2

    def _term(signum: int, frame: Any) -> None:
        raise SystemExit(0)  # unwinds through serve()'s finally: queued lines are written

    signal.signal(signal.SIGTERM, _term)
    PlannerService(config, home).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
