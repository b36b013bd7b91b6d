"""Who owns a long-running piece of work (a tracked run, a search trial), and is that process alive?

A process killed with `kill -9` gets no chance to say it stopped: its MLflow run stays RUNNING and
its Optuna trial RUNNING. Work therefore records `owner_token()` (host, pid and the process's start
time) when it starts, and the next command on the same host asks `owner_alive(token)`:
- False: that process is certainly gone (no such pid, a zombie, or the pid now belongs to a process
  started at another time);
- True: it is still running;
- None: this process cannot tell (another host, or a token it cannot read) and must leave it alone.
"""

from __future__ import annotations

import os
import socket
from typing import Optional

_NO_START = "-"


def _stat_fields(pid: int) -> Optional[list[bytes]]:
    """Fields 3.. of /proc/<pid>/stat (state first), or None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
    return data[data.rindex(b")") + 2:].split()


def process_start(pid: int) -> Optional[str]:
    """The start time of a process in clock ticks since boot (Linux), None when unknown."""
    fields = _stat_fields(pid)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


def owner_token(pid: Optional[int] = None) -> str:
    """`<host>:<pid>:<start ticks>` of a process (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start(pid) or _NO_START}"


def owner_alive(token: Optional[str]) -> Optional[bool]:
    """Whether the process of a token still runs: True, False (certainly gone) or None (cannot tell)."""
    if not token or token.count(":") < 2:
        return None
    host, pid_text, start = token.rsplit(":", 2)
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        pass
    except OSError:
        return None
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no /proc: the pid exists, which is all we can tell
    if fields[0] == b"Z":  # killed, not yet collected by its parent
        return False
    if start != _NO_START and len(fields) > 19 and fields[19].decode() != start:
        return False  # the pid was reused by a newer process
    return True


__all__ = ["owner_alive", "owner_token", "process_start"]
