"""Output folders: the one rule every command that writes a folder follows, and how its writes stay atomic.

The rule (checked by `claim_output` before any work is done):
- a new or empty folder is used;
- a folder the same command wrote before is replaced only with `--force` (or resumed where the
  command resumes, `compile --resume`);
- any other non-empty folder, a folder inside the command's input, the input itself or a folder
  holding the input is refused with one line saying why.

A command knows its own folders by the marker file `.guidebench-output.json` (`{"command", "state",
...}`), or, for folders written before the marker existed, by the files only it writes (`WRITERS`;
never for log folders, which look the same whether simulated or real).
An export carries no marker: its manifest and checksums identify it, and a frozen module holds
nothing it does not check.

Writes are atomic: `OutputFolder.writing()` hands out a hidden sibling `.<name>.<role>-<pid>-<random>`,
and only a finished folder is renamed into place (the old one is swapped aside, then removed). A
killed command therefore leaves the old folder or none, plus a staging sibling that the next writer
of that folder removes (or, when the kill came between the two renames, puts the old folder back).
`interrupted()` recognises what a killed write left wherever a folder is read, and says which
command to run again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from guidebench.errors import GuidebenchError

MARKER_FILE = ".guidebench-output.json"
WRITING, COMPLETE, FAILED = "writing", "complete", "failed"
OLD_ROLE = "old"
_SIDE = re.compile(r"^\.(?P<name>.+)\.(?P<role>[a-z][a-z-]*)-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})$")
# Folders `evals.data.write_dataset` and the importer work in: a dataset folder holding one of them and
# no dataset.json is what an import killed before this module existed left behind.
_LEGACY_IMPORT_WORK = (".staging-", ".import-")


@dataclass(frozen=True)
class Writer:
    """A command that writes a folder: how its staging siblings are named and how its folders look."""

    command: str  # as typed after `guidebench`
    role: str  # in the names of its staging siblings
    what: str  # what its folder is, for messages
    # Files (all present) that mark its folders, also those written before the marker existed. None for
    # log folders: real logs look exactly like simulated ones, and --force must never replace real logs.
    signature: tuple[str, ...] = ()
    marker: bool = True


WRITERS: dict[str, Writer] = {writer.command: writer for writer in (
    Writer("data import", "import", "a dataset folder", ("import_report.json",)),
    Writer("data simulate fullauto", "simulate-fullauto", "a simulated Full Auto log folder"),
    Writer("data simulate experiments", "simulate-experiments", "a simulated experiment log folder"),
    Writer("eval", "eval", "an evaluation folder", ("metrics.json", "summary.json", "results.parquet")),
    Writer("compile", "compile", "a compile folder", ("compile.json", "program.json")),
    Writer("leaderboard", "leaderboard", "a leaderboard folder", ("leaderboard.json",)),
    Writer("export", "export", "an exported module", ("manifest.json", "checksums.sha256"), marker=False),
    Writer("demo", "demo", "a demo folder", (".guidebench-demo",)),
    Writer("run-loop", "run-loop", "a run-loop log folder"),
)}
_BY_ROLE = {writer.role: writer for writer in WRITERS.values()}


def writer(command: str) -> Writer:
    """The writer spec of a command."""
    return WRITERS[command]


# ----- what a folder is ----------------------------------------------------------------------------

def read_marker(folder: Path) -> Optional[dict[str, Any]]:
    """The marker of a folder a command wrote, or None."""
    try:
        marker = json.loads((Path(folder) / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("command") in WRITERS else None


def _write_marker(folder: Path, command: str, state: str, **extra: Any) -> None:
    from optimizers.liveness import owner_token

    from guidebench import __version__

    data = {"command": command, "state": state, "owner": owner_token(), "guidebench_version": __version__,
            "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **extra}
    pending = folder / f"{MARKER_FILE}.tmp"
    pending.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(pending, folder / MARKER_FILE)


def written_by(folder: Path) -> Optional[str]:
    """The command that wrote this folder (its marker, else the files only that command writes), or None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    marker = read_marker(folder)
    if marker is not None:
        return marker["command"]
    for spec in WRITERS.values():
        if spec.signature and all((folder / name).exists() for name in spec.signature):
            return spec.command
    return None


def _alive(owner: Optional[str]) -> Optional[bool]:
    from optimizers.liveness import owner_alive

    return owner_alive(owner)


def _host_pid_owner(pid: str) -> str:
    from optimizers.liveness import owner_token

    return f"{owner_token().rsplit(':', 2)[0]}:{pid}:-"


def _siblings(out: Path) -> list[tuple[Path, str, str]]:
    """(path, role, pid) of the staging and swapped-aside siblings of `out`."""
    if not out.parent.is_dir():
        return []
    found = []
    for side in sorted(out.parent.iterdir()):
        match = _SIDE.match(side.name)
        if match and match["name"] == out.name and side.is_dir() and \
                (match["role"] in _BY_ROLE or match["role"] == OLD_ROLE):
            found.append((side, match["role"], match["pid"]))
    return found


def _redo(command: str) -> str:
    return f"run `guidebench {command}` again"


def interrupted(path: Path, label: str = "") -> Optional[str]:
    """One line saying that `path` is what an interrupted write left (and which command to redo), or None."""
    path = Path(path)
    name = f"{label} {path}".strip()
    if path.is_dir():
        match = _SIDE.match(path.name)
        if match and match["role"] in _BY_ROLE:
            command = _BY_ROLE[match["role"]].command
            return (f"{name}: the staging folder of an interrupted `guidebench {command}`, never finished; "
                    f"{_redo(command)} for {path.parent / match['name']}")
        marker = read_marker(path)
        if marker is not None and marker.get("state") != COMPLETE:
            command = marker["command"]
            if marker.get("state") == FAILED:
                return (f"{name}: the `guidebench {command}` that wrote it failed "
                        f"({marker.get('error') or 'see its log'}); {_redo(command)} with --force")
            if _alive(marker.get("owner")):
                return f"{name}: `guidebench {command}` is still writing it; wait until it finishes"
            return f"{name}: left unfinished by an interrupted `guidebench {command}`; {_redo(command)} with --force"
        if marker is None and not (path / "dataset.json").exists() and \
                any(child.name.startswith(_LEGACY_IMPORT_WORK) for child in path.iterdir() if child.is_dir()):
            return f"{name}: a dataset folder left unfinished by an interrupted `guidebench data import`; " \
                   f"{_redo('data import')} with --force"
        return None
    if path.exists():
        return None
    sides = _siblings(path)
    staged = [(side, role, pid) for side, role, pid in sides if role != OLD_ROLE]
    for side, role, pid in sides:
        if role == OLD_ROLE:
            who = f"`guidebench {_BY_ROLE[staged[0][1]].command}`" if staged else "command"
            return (f"{name}: an interrupted {who} was replacing it (the previous folder waits in {side.name}); "
                    "run that command again to put it back and finish")
    for side, role, pid in staged:
        command = _BY_ROLE[role].command
        marker = read_marker(side)
        if _alive(marker.get("owner") if marker else _host_pid_owner(pid)):
            return f"{name}: `guidebench {command}` is still writing it (pid {pid}); wait until it finishes"
        return (f"{name}: does not exist: an interrupted `guidebench {command}` never finished writing it "
                f"(it left {side.name}); {_redo(command)}")
    return None


def check_input(path: Path, label: str, accepts: Iterable[Optional[str]], wanted: str) -> Path:
    """`path` as an input: it exists, is not what an interrupted write left, and is not another command's output.

    `accepts` lists the commands whose folders are welcome (None: a folder no command wrote, such as
    raw logs); `wanted` names what the input should be, for the message.
    """
    path = Path(path)
    why = interrupted(path, label)
    if why:
        raise GuidebenchError(why)
    if not path.exists():
        raise GuidebenchError(f"{f'{label} {path}'.strip()}: no such file or folder")
    found = written_by(path)
    if found not in set(accepts):
        name = f"{label} {path}".strip()
        if found is None:
            raise GuidebenchError(f"{name}: is not {wanted}")
        raise GuidebenchError(f"{name}: is {WRITERS[found].what} (written by `guidebench {found}`), not {wanted}")
    return path


# ----- claiming and writing an output folder ----------------------------------------------------------

def _side_name(out: Path, role: str) -> Path:
    """A hidden sibling of `out` owned by this process: `.<name>.<role>-<pid>-<random>`."""
    return out.with_name(f".{out.name}.{role}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def recover_interrupted(out: Path) -> list[str]:
    """Tidy what a write killed mid-way left next to `out`; returns what was done.

    Staging folders of dead processes are removed; a previous folder that was swapped aside but never
    replaced (killed between the two renames) is put back, so `out` is always whole or absent.
    """
    done: list[str] = []
    for side, role, pid in _siblings(Path(out)):
        marker = read_marker(side)
        owner = marker.get("owner") if marker and role != OLD_ROLE else _host_pid_owner(pid)
        if _alive(owner) is not False:
            continue
        if role == OLD_ROLE and not out.exists():
            os.rename(side, out)
            done.append(f"restored the previous folder from {side.name}")
        else:
            shutil.rmtree(side, ignore_errors=True)
            done.append(f"removed {side.name} left by an interrupted write")
    return done


def _replace_folder(staged: Path, out: Path) -> None:
    """Rename the finished folder into place; an existing one is swapped aside, then removed."""
    old: Optional[Path] = None
    if out.exists():
        old = _side_name(out, OLD_ROLE)
        os.rename(out, old)
    try:
        os.rename(staged, out)
    except OSError:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _related(out: Path, inputs: Sequence[Path]) -> Optional[str]:
    target = out.resolve()
    for item in inputs:
        source = Path(item).resolve()
        if target == source:
            return f"is the input {item} itself; choose a folder outside it"
        if source.is_dir() and target.is_relative_to(source):
            return f"is inside the input {item}; choose a folder outside it"
        if source.is_relative_to(target) and target.exists():
            return f"holds the input {item}; choose a folder that does not"
    if target == Path.cwd().resolve():
        return "is the current folder; give a folder to create (e.g. a new sub-folder)"
    return None


def _is_empty(folder: Path) -> bool:
    return not any(folder.iterdir())


@dataclass
class OutputFolder:
    """An output folder a command may write: checked by `claim_output`, written by `writing()`."""

    path: Path  # absolute
    shown: str  # as the user gave it, for messages
    writer: Writer
    label: str
    force: bool
    inputs: tuple[Path, ...]

    def check(self) -> None:
        """Apply the rule to the folder as it is now; raises GuidebenchError with one line."""
        out, name = self.path, f"{self.label} {self.shown}".strip()
        why = _related(out, self.inputs)
        if why:
            raise GuidebenchError(f"{name}: {why}")
        if out.exists() and not out.is_dir():
            raise GuidebenchError(f"{self.shown}: {self.label} must be a directory, not a file; choose a new or "
                                  "empty folder")
        if not out.exists():
            ancestor = out.parent
            while not ancestor.exists():
                ancestor = ancestor.parent
            if not ancestor.is_dir():
                raise GuidebenchError(f"{self.shown}: cannot create the {self.label} folder: {ancestor} is a file")
            return
        if _is_empty(out):
            return
        marker = read_marker(out)
        if marker is not None and marker.get("state") == WRITING and _alive(marker.get("owner")):
            raise GuidebenchError(f"{name}: `guidebench {marker['command']}` is still writing it; wait until it "
                                  "finishes or choose another folder")
        found = written_by(out)
        if found == self.writer.command:
            if not self.force:
                how = " (or --resume)" if self.writer.command == "compile" else ""
                raise GuidebenchError(f"{name}: the output of an earlier `guidebench {found}` already exists; "
                                      f"pass --force{how} to replace it")
            return
        other = f" (it holds the output of `guidebench {found}`)" if found else ""
        raise GuidebenchError(f"{name}: exists, holds other files and is not {self.writer.what}{other}; "
                              "refusing to replace it: choose a new or empty folder")

    def final(self, path: Path, staging: Path) -> Path:
        """Where a path under the staging folder ends up once renamed into place."""
        return self.path / Path(path).relative_to(staging)

    @contextmanager
    def writing(self) -> Iterator[Path]:
        """A fresh staging folder beside the output, renamed into place when the block ends without error."""
        recover_interrupted(self.path)
        staging = _side_name(self.path, self.writer.role)
        try:
            staging.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
        except OSError as exc:
            raise GuidebenchError(f"{self.shown}: cannot create the {self.label} folder: {exc.strerror or exc}") \
                from None
        try:
            if self.writer.marker:
                _write_marker(staging, self.writer.command, WRITING)
            yield staging
            self.check()  # the folder may have changed while the command worked
            _commit(self, staging)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    @contextmanager
    def in_place(self) -> Iterator[Path]:
        """Write straight into the output, marked unfinished until the block ends (for a command whose files
        record their own absolute paths, so that a folder written aside could not be moved into place)."""
        recover_interrupted(self.path)
        if self.path.exists():
            shutil.rmtree(self.path)
        try:
            self.path.mkdir(parents=True)
        except OSError as exc:
            raise GuidebenchError(f"{self.shown}: cannot create the {self.label} folder: {exc.strerror or exc}") \
                from None
        _write_marker(self.path, self.writer.command, WRITING)
        try:
            yield self.path
        except Exception as exc:
            _write_marker(self.path, self.writer.command, FAILED, error=str(exc).splitlines()[0][:200] if str(exc)
                          else type(exc).__name__)
            raise
        _write_marker(self.path, self.writer.command, COMPLETE)


def _commit(output: OutputFolder, staging: Path) -> None:
    """Mark the staged folder finished and rename it into place."""
    if output.writer.marker:
        _write_marker(staging, output.writer.command, COMPLETE)
    _replace_folder(staging, output.path)


def claim_output(out: Path, command: str, *, force: bool = False, inputs: Iterable[Optional[Path]] = (),
                 label: str = "--out") -> OutputFolder:
    """Check `out` for `command` before any work: refused with one line unless the rule allows it."""
    output = OutputFolder(path=Path(out).absolute(), shown=str(out), writer=WRITERS[command], label=label,
                          force=force, inputs=tuple(Path(item) for item in inputs if item is not None))
    recover_interrupted(output.path)
    output.check()
    return output


__all__ = ["MARKER_FILE", "OutputFolder", "WRITERS", "Writer", "check_input", "claim_output", "interrupted",
           "read_marker", "recover_interrupted", "written_by"]
