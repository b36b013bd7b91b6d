"""Integrity of a frozen-module folder: `checksums.sha256` over every file, and no pickle anywhere.

The checksums file is in `sha256sum` format (`<hex>  <path>`, sorted by path, one trailing
newline) and must be byte-for-byte that canonical rendering, so that a changed byte in the
checksums file itself is caught too.
"""

from __future__ import annotations

import hashlib
import os
import pickletools
import re
from pathlib import Path

from .frozen.manifest import CHECKSUMS_FILE, FrozenModuleError

PICKLE_SUFFIXES: tuple[str, ...] = (".pkl", ".pickle", ".joblib", ".dill", ".pt", ".pth", ".npy", ".npz")
_LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")
_READ_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_READ_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def module_checksum(root: str | os.PathLike) -> str:
    """A frozen module's identity: SHA-256 of its `checksums.sha256` (which covers every other file)."""
    return file_sha256(Path(root) / CHECKSUMS_FILE)


def render_checksums(digests: dict[str, str]) -> str:
    """The canonical checksums text for {relative path: sha256}."""
    return "".join(f"{digests[path]}  {path}\n" for path in sorted(digests))


def looks_like_pickle(path: Path) -> bool:
    """True when the file is named or built like a pickle (its opcodes parse up to STOP)."""
    if path.suffix.lower() in PICKLE_SUFFIXES:
        return True
    with open(path, "rb") as handle:
        try:
            # genops only decodes opcodes: it never builds objects or runs code.
            for opcode, _arg, _pos in pickletools.genops(handle):
                if opcode.name == "STOP":
                    return True
        except Exception:  # not a well-formed opcode stream: not a pickle
            return False
    return False


def folder_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file under root; refuses symlinks and special files."""
    found: list[str] = []
    for directory, subdirs, files in os.walk(root, followlinks=False):
        base = Path(directory)
        for name in sorted(subdirs):
            if (base / name).is_symlink():
                raise FrozenModuleError(f"symlink not allowed: {(base / name).relative_to(root).as_posix()}")
        for name in sorted(files):
            path = base / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                raise FrozenModuleError(f"symlink not allowed: {relative}")
            if not path.is_file():
                raise FrozenModuleError(f"not a regular file: {relative}")
            found.append(relative)
    return sorted(found)


def write_checksums(root: Path) -> dict[str, str]:
    """Hash every file under root (refusing pickles) and write `checksums.sha256`."""
    digests: dict[str, str] = {}
    for relative in folder_files(root):
        if relative == CHECKSUMS_FILE:
            continue
        if looks_like_pickle(root / relative):
            raise FrozenModuleError(f"pickle found: {relative} (a frozen module never holds a pickle)")
        digests[relative] = file_sha256(root / relative)
    (root / CHECKSUMS_FILE).write_text(render_checksums(digests), encoding="utf-8")
    return digests


def read_checksums(root: Path) -> dict[str, str]:
    """Parse `checksums.sha256`, requiring its canonical form and safe relative paths."""
    path = root / CHECKSUMS_FILE
    if not path.is_file():
        raise FrozenModuleError(f"missing {CHECKSUMS_FILE}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise FrozenModuleError(f"{CHECKSUMS_FILE} is not UTF-8 text") from None
    digests: dict[str, str] = {}
    for number, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), start=1):
        match = _LINE.match(line)
        if not match:
            raise FrozenModuleError(f"{CHECKSUMS_FILE} line {number} is malformed (want '<sha256 hex>  <path>')")
        digest, relative = match.groups()
        parts = relative.split("/")
        if relative.startswith("/") or "\\" in relative or any(p in ("", ".", "..") for p in parts):
            raise FrozenModuleError(f"{CHECKSUMS_FILE} line {number} has an unsafe path {relative!r}")
        if relative == CHECKSUMS_FILE or relative in digests:
            raise FrozenModuleError(f"{CHECKSUMS_FILE} line {number} lists {relative!r} twice or lists itself")
        digests[relative] = digest
    if not digests:
        raise FrozenModuleError(f"{CHECKSUMS_FILE} lists no file")
    if render_checksums(digests) != text:
        raise FrozenModuleError(f"{CHECKSUMS_FILE} is not in canonical form (sorted lines, one trailing newline)")
    return digests


def verify_folder(root: Path) -> dict[str, str]:
    """Check no pickle, every listed file present, no unlisted file, every digest equal."""
    listed = read_checksums(root)
    present = [p for p in folder_files(root) if p != CHECKSUMS_FILE]
    for relative in present:
        if looks_like_pickle(root / relative):
            raise FrozenModuleError(f"pickle found: {relative} (a frozen module never holds a pickle)")
    missing = sorted(set(listed) - set(present))
    if missing:
        raise FrozenModuleError(f"missing file: {missing[0]} (listed in {CHECKSUMS_FILE})"
                                + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    extra = sorted(set(present) - set(listed))
    if extra:
        raise FrozenModuleError(f"unlisted file: {extra[0]} (not in {CHECKSUMS_FILE})"
                                + (f" and {len(extra) - 1} more" if len(extra) > 1 else ""))
    for relative in sorted(listed):
        actual = file_sha256(root / relative)
        if actual != listed[relative]:
            raise FrozenModuleError(f"checksum mismatch: {relative} (sha256 {actual[:12]}... but "
                                    f"{CHECKSUMS_FILE} lists {listed[relative][:12]}...)")
    return listed
