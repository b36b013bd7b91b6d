"""The monitor's state file under GUIDEBENCH_HOME: loaded at the start of a run, replaced atomically at its end.

A run reads the logs from the stored offsets, updates the running statistics in memory and only then writes the
new state (a temporary file, fsync, rename). A run killed at any point leaves the previous state whole: the next
run reads the same records again from the same offsets and counts each once. One run at a time per state file
(an exclusive lock; a second run is refused in one line).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from guidebench.errors import GuidebenchError
from guidebench.home import guidebench_home
from guidebench.monitor._base import STATE_VERSION, LoopKind, MonitorState

MONITOR_DIR = "monitor"


def state_path(logs: Path, module_digest: str, loop: LoopKind, home: Optional[Path] = None) -> Path:
    """The state file of a monitor: one per (logs folder, champion, loop)."""
    key = hashlib.sha256(f"{Path(logs).resolve()}\0{module_digest}\0{loop}".encode()).hexdigest()[:16]
    return (home or guidebench_home()) / MONITOR_DIR / f"{loop}-{key}.json"


def load_state(path: Path) -> Optional[MonitorState]:
    """The stored state, None when there is none yet; a state that cannot be read is an error that says what to do."""
    if not path.is_file():
        return None
    try:
        state = _read(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError) as exc:
        raise GuidebenchError(f"monitor state {path} cannot be read ({str(exc).splitlines()[0]}); move it away and "
                              "run again with --reset to start over") from None
    if state.version != STATE_VERSION:
        raise GuidebenchError(f"monitor state {path} has version {state.version}, this monitor writes "
                              f"{STATE_VERSION}: run again with --reset")
    return state


def _read(text: str) -> MonitorState:
    """The state from its JSON; a state holding an escaped lone surrogate (see `save_state`) is read by `json`, which
    accepts it where pydantic's parser does not."""
    try:
        return MonitorState.model_validate_json(text)
    except ValidationError:
        return MonitorState.model_validate(json.loads(text))


def save_state(path: Path, state: MonitorState) -> None:
    """Replace the state file atomically (temporary file in the same folder, fsync, rename, fsync the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # the same JSON as json.dumps of model_dump(mode="json"), at a fifth of its cost
        data = state.model_dump_json()
    except (PydanticSerializationError, UnicodeEncodeError):  # a lone surrogate from a log (\ud800) has no UTF-8
        data = json.dumps(state.model_dump(mode="python"), separators=(",", ":"), default=to_jsonable_python)
    handle, temp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the state's lock for a run; refuse when another run holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GuidebenchError(f"another monitor run holds {path}; wait for it to end (or stop its --every "
                                  "loop)") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
