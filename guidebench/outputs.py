"""Output folders: the one rule every command that writes a folder follows, and how its writes stay atomic.

The rule (checked by `claim_output` before any work is done):
- a new or empty folder is used;
- a folder the same command wrote before is replaced only with `--force` (or resumed where the
  command resumes: `compile --resume`, a `search` of the same study), and only when it holds
  nothing but what that command recorded writing: a folder holding any other file is refused with
  one line naming those files, with or without `--force`, so `--force` never deletes a user's file;
- any other non-empty folder, a folder inside the command's input, the input itself or a folder
  holding the input is refused with one line saying why.

What a command wrote is its record, never a file name: the marker `.guidebench-output.json`
(`{"command", "state", "files", ...}`) lists every file and folder the command wrote (`files`,
folders ending in "/"), written when the folder is finished. An export carries no marker, since a
frozen module holds nothing its checksums do not cover: its `manifest.json` (a frozen-module
manifest, by content) says it is an export, and its record is what its `checksums.sha256` lists of
the files the frozen-module format names (program.json, manifest.json, knn.json, the dsrs/
manifest and hub file): a file a user added, even listed in checksums recomputed by hand, is not
the export's. A folder whose marker lists nothing (written before the list existed, or an
in-place write that was killed) cannot be told from a user's files and is never replaced.

Writes are atomic: `OutputFolder.writing()` hands out a hidden sibling `.<name>.<role>-<pid>-<random>`,
and only a finished folder is renamed into place (the old one is swapped aside, checked once more
for files it does not record, then removed). Keeping a user's files in a folder replaced whole would
mean copying them into the new one, where they could collide with what it writes, so the rule
refuses instead. A killed command therefore leaves the old folder or none, plus a staging sibling
that the next writer of that folder removes (or, when the kill came between the two renames, puts
the old folder back). `interrupted()` recognises what a killed write left wherever a folder is
read, and says which command to run again.

A command that writes one file (`baselines`' report) follows the same rule through `claim_file`:
its first line is a mark naming the command, a new path is written, a file it wrote before is
replaced only with `--force`, and any other file is never overwritten.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from guidebench.errors import GuidebenchError

MARKER_FILE = ".guidebench-output.json"
_PENDING_MARKER = f"{MARKER_FILE}.tmp"
WRITING, COMPLETE, FAILED = "writing", "complete", "failed"
OLD_ROLE = "old"
_SIDE = re.compile(r"^\.(?P<name>.+)\.(?P<role>[a-z][a-z-]*)-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})$")
# Folders `evals.data.write_dataset` and the importer work in: a dataset folder holding one of them and
# no dataset.json is what an import killed before this module existed left behind.
_LEGACY_IMPORT_WORK = (".staging-", ".import-")
# Keys only a frozen module's manifest.json holds (runtime.frozen.manifest.FrozenManifest).
_EXPORT_MANIFEST_KEYS = frozenset({"format_version", "entry", "compatible_with", "signature_hash"})
_SHOWN = 3  # foreign files named in a refusal


@dataclass(frozen=True)
class Writer:
    """A command that writes a folder: how its staging siblings are named and what its folders are."""

    command: str  # as typed after `guidebench`
    role: str  # in the names of its staging siblings
    what: str  # what its folder is, for messages
    marker: bool = True  # False: the export, whose checksums are its record


WRITERS: dict[str, Writer] = {writer.command: writer for writer in (
    Writer("data import", "import", "a dataset folder"),
    Writer("data simulate fullauto", "simulate-fullauto", "a simulated Full Auto log folder"),
    Writer("data simulate experiments", "simulate-experiments", "a simulated experiment log folder"),
    Writer("eval", "eval", "an evaluation folder"),
    Writer("compile", "compile", "a compile folder"),
    Writer("leaderboard", "leaderboard", "a leaderboard folder"),
    Writer("export", "export", "an exported module", marker=False),
    Writer("demo", "demo", "a demo folder"),
    Writer("run-loop", "run-loop", "a run-loop log folder"),
    Writer("search", "search", "a search folder"),
    Writer("shadow report", "shadow-report", "a shadow report folder"),
    Writer("plan-loop", "plan-loop", "a plan-loop log folder"),
    Writer("shadow planner-report", "planner-report", "a planner gate report folder"),
)}
_BY_ROLE = {writer.role: writer for writer in WRITERS.values()}


def writer(command: str) -> Writer:
    """The writer spec of a command."""
    return WRITERS[command]


# ----- what a folder is and what its writer recorded ----------------------------------------------------

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
    pending = folder / _PENDING_MARKER
    pending.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(pending, folder / MARKER_FILE)


def _is_export(folder: Path) -> bool:
    """True when `folder` holds a frozen module's manifest (told by its content, never by its name)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and _EXPORT_MANIFEST_KEYS <= set(manifest)


def written_by(folder: Path) -> Optional[str]:
    """The command that wrote this folder (its marker; an export by its manifest), or None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    marker = read_marker(folder)
    if marker is not None:
        return marker["command"]
    return "export" if _is_export(folder) else None


def _walk(folder: Path, keep: Optional[set[str]] = None) -> Iterator[str]:
    """Relative POSIX paths under `folder`, folders ending in "/" (a symlink is an entry, never entered);
    with `keep`, only the folders in it are entered. The marker itself is left out."""
    for directory, subdirs, files in os.walk(folder):
        base = Path(directory)
        prefix = "" if base == folder else base.relative_to(folder).as_posix() + "/"
        entered = []
        for name in sorted(subdirs):
            if (base / name).is_symlink():
                yield prefix + name
            else:
                yield prefix + name + "/"
                if keep is None or prefix + name + "/" in keep:
                    entered.append(name)
        subdirs[:] = entered
        for name in sorted(files):
            if prefix or name not in (MARKER_FILE, _PENDING_MARKER):
                yield prefix + name


def _entries(folder: Path) -> list[str]:
    """What a command wrote into `folder`, for its marker's `files` (sorted)."""
    return sorted(_walk(folder))


def recorded(folder: Path) -> Optional[set[str]]:
    """What the command that wrote `folder` recorded writing there (the folders holding it included), or None
    when it recorded nothing: no marker, a marker without a list, or an export whose checksums do not parse."""
    folder = Path(folder)
    marker = read_marker(folder)
    if marker is not None:
        files = marker.get("files")
        if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
            return None
        names = set(files)
    elif _is_export(folder):
        from runtime.checksums import read_checksums
        from runtime.frozen.manifest import CHECKSUMS_FILE, FrozenModuleError

        try:
            names = {*read_checksums(folder), CHECKSUMS_FILE} & _export_layout(folder)
        except FrozenModuleError:
            return None
    else:
        return None
    for name in list(names):
        parts = name.rstrip("/").split("/")
        names.update("/".join(parts[:depth]) + "/" for depth in range(1, len(parts)))
    return names


def _export_layout(folder: Path) -> set[str]:
    """The files the frozen-module format names for this export (runtime.frozen.manifest): a file a user added is
    not among them even when the checksums were recomputed to list it, so --force never removes it."""
    from runtime.frozen.manifest import (CHECKSUMS_FILE, DSRS_HUB_DIR, DSRS_MANIFEST_FILE, KNN_FILE, MANIFEST_FILE,
                                         PROGRAM_FILE)

    names = {PROGRAM_FILE, MANIFEST_FILE, KNN_FILE, CHECKSUMS_FILE, DSRS_MANIFEST_FILE}
    try:
        hub = json.loads((folder / DSRS_MANIFEST_FILE).read_text(encoding="utf-8"))
        names.add(f"{DSRS_HUB_DIR}/{hub['signature_name']}/{hub['compiled_id']}.json")
    except (OSError, ValueError, TypeError, KeyError):
        pass  # no hub file can be told apart: whatever is there is not counted as the export's
    return names


def foreign_files(folder: Path) -> Optional[list[str]]:
    """The files and folders in `folder` its writer did not record writing (outermost only), or None when
    it recorded nothing; [] for an empty folder."""
    folder = Path(folder)
    known = recorded(folder)
    if known is None:
        return None if any(_walk(folder)) else []
    return sorted(entry for entry in _walk(folder, keep=known) if entry not in known)


def _named(entries: Sequence[str]) -> str:
    shown = ", ".join(entries[:_SHOWN])
    return shown + (f" and {len(entries) - _SHOWN} more" if len(entries) > _SHOWN else "")


def _unrecorded(name: str, command: Optional[str], foreign: Optional[Sequence[str]]) -> str:
    """The one-line refusal for a folder `command` wrote that holds files it did not record (None: any file)."""
    who = f"`guidebench {command}`" if command else "the command that wrote it"
    if foreign is None:
        return (f"{name}: {who} left no readable list of the files it wrote there (written by an older guidebench, "
                "killed while writing in place, or an export whose checksums.sha256 does not parse), so they cannot "
                "be told from yours: refusing to replace it; move out what you keep and remove the folder, or choose "
                "a new or empty folder")
    return (f"{name}: holds {_named(foreign)}, which {who} did not write; --force replaces only what it wrote: "
            "move them out of the folder, or choose a new or empty folder")


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
            if recorded(path) is None:  # killed while writing in place: what it wrote is not listed
                return (f"{name}: left unfinished by an interrupted `guidebench {command}`, which recorded no list "
                        f"of its files; remove the folder and {_redo(command)}")
            return f"{name}: left unfinished by an interrupted `guidebench {command}`; {_redo(command)} with --force"
        if marker is None and not (path / "dataset.json").exists() and \
                any(child.name.startswith(_LEGACY_IMPORT_WORK) for child in path.iterdir() if child.is_dir()):
            return f"{name}: a dataset folder left unfinished by an interrupted `guidebench data import`; " \
                   f"remove it and {_redo('data import')}"
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


def _set_aside(out: Path, name: str) -> Optional[Path]:
    """Rename an existing output aside for removal, after checking once more that it holds only what its writer
    recorded (a file put there since the check would otherwise go with it); None when there is none."""
    if not out.exists():
        return None
    old = _side_name(out, OLD_ROLE)
    os.rename(out, old)
    foreign = foreign_files(old)
    if foreign != []:
        os.rename(old, out)
        raise GuidebenchError(_unrecorded(name, written_by(out), foreign))
    return old


def _replace_folder(staged: Path, out: Path) -> None:
    """Rename the finished folder into place; an existing one is swapped aside, then removed."""
    old = _set_aside(out, str(out))
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
    # Marker entries of a command that resumes: an earlier output whose marker has them is taken without --force.
    resume: dict[str, Any] = field(default_factory=dict)

    def _resumes(self, marker: Optional[Mapping[str, Any]]) -> bool:
        return bool(self.resume) and marker is not None and all(marker.get(k) == v for k, v in self.resume.items())

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
            foreign = foreign_files(out)
            if foreign != []:
                raise GuidebenchError(_unrecorded(name, found, foreign))
            if not self.force and not self._resumes(marker):
                how = " (or --resume)" if self.writer.command == "compile" and not self.resume else ""
                earlier = "".join(f" ({key} {marker[key]})" for key in self.resume if marker and key in marker)
                this = "".join(f" ({key} {value})" for key, value in self.resume.items())
                raise GuidebenchError(f"{name}: the output of an earlier `guidebench {found}`{earlier} already exists"
                                      f"{f', not of this one{this}' if this else ''}; pass --force{how} to replace it")
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
                _write_marker(staging, self.writer.command, WRITING, **self.resume)
            yield staging
            self.check()  # the folder may have changed while the command worked
            _commit(self, staging)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    @contextmanager
    def in_place(self) -> Iterator[Path]:
        """Write straight into the output, marked unfinished until the block ends (for a command whose files
        record their own absolute paths, so that a folder written aside could not be moved into place).

        Its files are listed in the marker when the block ends, also when it fails or is interrupted; only a
        command killed outright leaves its folder without the list."""
        recover_interrupted(self.path)
        old = _set_aside(self.path, f"{self.label} {self.shown}".strip())
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        try:
            self.path.mkdir(parents=True)
        except OSError as exc:
            raise GuidebenchError(f"{self.shown}: cannot create the {self.label} folder: {exc.strerror or exc}") \
                from None
        command = self.writer.command
        _write_marker(self.path, command, WRITING, **self.resume)
        try:
            yield self.path
        except BaseException as exc:
            error = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            _write_marker(self.path, command, FAILED, error=error, files=_entries(self.path), **self.resume)
            raise
        _write_marker(self.path, command, COMPLETE, files=_entries(self.path), **self.resume)


def _commit(output: OutputFolder, staging: Path) -> None:
    """Mark the staged folder finished, listing what it holds, and rename it into place."""
    if output.writer.marker:
        _write_marker(staging, output.writer.command, COMPLETE, files=_entries(staging), **output.resume)
    _replace_folder(staging, output.path)


def claim_output(out: Path, command: str, *, force: bool = False, inputs: Iterable[Optional[Path]] = (),
                 label: str = "--out", resume: Optional[Mapping[str, Any]] = None) -> OutputFolder:
    """Check `out` for `command` before any work: refused with one line unless the rule allows it.

    `resume` (marker entries, e.g. a search's study) lets a command that resumes take its own earlier
    output without --force; the entries are written into the new marker.
    """
    output = OutputFolder(path=Path(out).absolute(), shown=str(out), writer=WRITERS[command], label=label,
                          force=force, inputs=tuple(Path(item) for item in inputs if item is not None),
                          resume=dict(resume or {}))
    recover_interrupted(output.path)
    output.check()
    return output


# ----- one output file --------------------------------------------------------------------------------

def _file_mark(command: str) -> str:
    """The first line of a file `command` writes (an HTML comment: invisible in rendered Markdown)."""
    return f"<!-- written by `guidebench {command}`; it replaces this file only with --force -->"


@dataclass
class OutputFile:
    """A file a command may write: checked by `claim_file`, written whole by `write()`."""

    path: Path
    command: str
    label: str
    force: bool

    def check(self) -> None:
        """Apply the rule to the path as it is now; raises GuidebenchError with one line."""
        name = f"{self.label} {self.path}"
        if self.path.is_dir():
            raise GuidebenchError(f"{name}: is a folder; give the path of a file to write")
        if not self.path.exists():
            ancestor = self.path.parent
            while not ancestor.exists():
                ancestor = ancestor.parent
            if not ancestor.is_dir():
                raise GuidebenchError(f"{name}: cannot create the file: {ancestor} is a file")
            return
        try:
            with open(self.path, encoding="utf-8") as handle:
                first = handle.readline().rstrip("\n")
        except (OSError, UnicodeDecodeError):
            first = ""
        if first != _file_mark(self.command):
            raise GuidebenchError(f"{name}: exists and was not written by `guidebench {self.command}`; refusing to "
                                  "overwrite it: choose another path")
        if not self.force:
            raise GuidebenchError(f"{name}: the report of an earlier `guidebench {self.command}` already exists; "
                                  "pass --force to replace it")

    def write(self, text: str) -> Path:
        """Write `text` (after the mark line) through a hidden sibling renamed into place; returns the path."""
        self.check()  # the path may have changed while the command worked
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staged = self.path.with_name(f".{self.path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        try:
            staged.write_text(f"{_file_mark(self.command)}\n{text}", encoding="utf-8")
            os.replace(staged, self.path)
        finally:
            staged.unlink(missing_ok=True)
        return self.path


def claim_file(path: Path, command: str, *, force: bool = False, label: str = "--out") -> OutputFile:
    """Check the file `path` for `command` before any work: a new file, or with `force` one the command wrote."""
    output = OutputFile(path=Path(path), command=command, label=label, force=force)
    output.check()
    return output


__all__ = ["MARKER_FILE", "OutputFile", "OutputFolder", "WRITERS", "Writer", "check_input", "claim_file",
           "claim_output", "foreign_files", "interrupted", "read_marker", "recorded", "recover_interrupted",
           "written_by"]
