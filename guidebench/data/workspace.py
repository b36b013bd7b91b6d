"""Read what an import was pointed at without leaving it, hanging on it or running out of memory on it.

The files under an imported folder are not all the user's to vouch for: a link may lead anywhere (`/etc/passwd`,
a secrets file, `/dev/zero`), a name may be a FIFO that never ends or a device that never stops. So every path
is resolved (`os.path.realpath`) and must stay inside the workspace (`workspace_root`); only regular files are
opened (checked with `stat` before the open, opened non-blocking and without following a last link, checked
again on the open descriptor), and at most `MAX_FILE_BYTES` of one are read. A path that is refused says why
with a `Refusal`: the count it adds to (`OUTSIDE`, `NOT_REGULAR`, `TOO_LARGE`; None for a plain problem such as a
missing file) and a reason for the quarantine line.
"""

from __future__ import annotations

import errno
import functools
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from guidebench.data.ingest import MAX_JSON_DEPTH

MAX_FILE_BYTES = 8 * 1024 * 1024  # the runner's packets are a few KB; a packet with full code context well under 1 MB
OUTSIDE = "archive_outside_workspace"
NOT_REGULAR = "archive_not_regular_file"
TOO_LARGE = "archive_too_large"
INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass(frozen=True)
class Refusal:
    """Why a path is not read: the count it adds to (None: only the count of what it cost) and the reason."""

    count: Optional[str]
    reason: str


def workspace_root(path: Path) -> Path:
    """The folder nothing of an import may leave: the imported folder (a file's folder); the runner's
    `experiments/` folder, or a log in it, stands for its repository (whose `.advisor/` is its archive)."""
    root = Path(path) if Path(path).is_dir() else Path(path).parent
    if root.name == "experiments":
        root = root.parent
    return Path(os.path.realpath(root))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file")):
        if test(mode):
            return name
    return "a special file"


class Workspace:
    """Containment and bounded reading under one root (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        # the folders of an archive are resolved once: `os.path.realpath` costs an lstat per path component
        self._folder = functools.lru_cache(maxsize=4096)(os.path.realpath)

    def real(self, path: Path) -> str:
        """`os.path.realpath(path)`, its folder's resolution cached (only the last component is looked at anew)."""
        folder, name = os.path.split(os.path.abspath(path))
        joined = os.path.join(self._folder(folder), name)
        try:
            if not stat.S_ISLNK(os.lstat(joined).st_mode):
                return joined
        except OSError:
            pass
        return os.path.realpath(joined)

    def inside(self, path: Path) -> bool:
        """True when `path`, every link in it resolved, is the root or below it."""
        return self._inside(self.real(path))

    def _inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self._prefix)

    def refusal(self, path: Path, folder: bool = False, limit: Optional[int] = MAX_FILE_BYTES) -> Optional[Refusal]:
        """Why `path` cannot be read as a regular file of at most `limit` bytes (or listed, `folder`), None when it
        can; opens nothing."""
        return self._check(path, folder, limit)[1]

    def _check(self, path: Path, folder: bool, limit: Optional[int]) -> tuple[str, Optional[Refusal]]:
        real = self.real(path)
        if not self._inside(real):
            return real, Refusal(OUTSIDE, "a link leading out of the imported folder: never read")
        try:
            info = os.stat(real)
        except FileNotFoundError:
            return real, Refusal(None, "a dangling link" if os.path.islink(path) else "missing")
        except OSError as exc:
            return real, Refusal(None, "a symlink loop" if exc.errno == errno.ELOOP else f"cannot read: {exc.strerror}")
        if folder:
            return real, None if stat.S_ISDIR(info.st_mode) else Refusal(None, f"{_kind(info.st_mode)}, not a folder")
        if not stat.S_ISREG(info.st_mode):
            return real, Refusal(NOT_REGULAR, f"{_kind(info.st_mode)}, not a regular file: never opened")
        if limit is not None and info.st_size > limit:
            return real, Refusal(TOO_LARGE, f"{info.st_size} bytes, over the {limit} bytes an archive file may hold: "
                                             "not read")
        return real, None

    def read_bytes(self, path: Path) -> tuple[Optional[bytes], Optional[Refusal]]:
        """The bytes of a regular file inside the workspace (at most `MAX_FILE_BYTES`), or why not."""
        real, refused = self._check(path, False, MAX_FILE_BYTES)
        if refused is not None:
            return None, refused
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:  # the resolved path: a link swapped in since the check is not followed
            fd = os.open(real, flags)
        except OSError as exc:
            return None, Refusal(None, f"cannot read: {exc.strerror or exc}")
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):  # replaced since the check
                return None, Refusal(NOT_REGULAR, f"{_kind(info.st_mode)}, not a regular file: not read")
            try:  # one byte more than it holds (and never more than the cap): a file that grew is seen
                data = handle.read(min(info.st_size, MAX_FILE_BYTES) + 1)
            except OSError as exc:
                return None, Refusal(None, f"cannot read: {exc.strerror or exc}")
        if len(data) > MAX_FILE_BYTES:  # grew since the check
            return None, Refusal(TOO_LARGE, f"over the {MAX_FILE_BYTES} bytes an archive file may hold: not read")
        return data, None

    def read_text(self, path: Path) -> tuple[Optional[str], Optional[Refusal]]:
        """The UTF-8 text of a file (as the runner reads it: strictly), or why not."""
        data, refused = self.read_bytes(path)
        if data is None:
            return None, refused
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            return None, Refusal(None, f"not UTF-8 text (byte {exc.start}: {exc.reason})")

    def listing(self, folder: Path) -> tuple[list[Path], Optional[Refusal]]:
        """The entries of a folder inside the workspace, sorted by name, or why it cannot be listed."""
        refused = self.refusal(folder, folder=True)
        if refused is not None:
            return [], refused
        try:
            return [folder / name for name in sorted(os.listdir(folder))], None
        except OSError as exc:
            return [], Refusal(None, f"cannot list: {exc.strerror or exc}")


def json_problems(value: Any) -> tuple[Optional[str], list[tuple[tuple[Any, ...], str]]]:
    """(why the parsed JSON cannot be stored at all, or None; the numbers a dataset cannot hold, by path).

    Too deep (every step after the parser recurses once per level: redaction, validation, serialisation) or
    text UTF-8 cannot hold (a lone surrogate escape) spoils the whole value; a number that is not finite (the
    runner's `json.dumps` writes NaN and Infinity) or an integer beyond 64 bits spoils only its own field."""
    numbers: list[tuple[tuple[Any, ...], str]] = []
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return f"nested deeper than {MAX_JSON_DEPTH} levels", numbers
            children = list(item.items() if isinstance(item, dict) else enumerate(item))
            for key, child in reversed(children):
                if isinstance(key, str) and not _utf8(key):
                    return "an object key holds an unpaired surrogate escape (text UTF-8 cannot store)", numbers
                stack.append((child, depth + 1, (*path, key)))
        elif isinstance(item, str) and not _utf8(item):
            return "a string holds an unpaired surrogate escape (text UTF-8 cannot store)", numbers
        elif isinstance(item, float) and not math.isfinite(item):
            numbers.append((path, f"{item!r} is not a finite number"))
        elif isinstance(item, int) and not isinstance(item, bool) and not INT64[0] <= item <= INT64[1]:
            numbers.append((path, f"{str(item)[:24]}... does not fit 64 bits"))
    return None, numbers


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = ["MAX_FILE_BYTES", "NOT_REGULAR", "OUTSIDE", "TOO_LARGE", "Refusal", "Workspace", "json_problems",
           "workspace_root"]
