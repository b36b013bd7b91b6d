"""The llama.cpp state of a prompt's constant prefix, kept on disk so a new process skips it.

Inside one process llama-cpp-python already reuses the longest common token prefix of the
previous call. A new process (a CLI run, a search worker, a test) would re-read the whole
instruction and demo prefix, ~2,000 tokens at ~200-300 tokens/s on 2 cores. This cache stores the
KV-cache state of such a prefix under `<GUIDEBENCH_HOME>/prefix-cache/`, keyed by the model file,
the llama.cpp build, the context size and the prefix tokens, and restores it instead.

A prefix is stored the second time it is seen, in this process or an earlier one (an empty
marker file remembers the first sighting): a prefix seen once (a KNN program's per-input demos)
is not worth ~18 KB per token on disk, while a command that decides one record (a planner compile
scored on one record per split) still gets its prefix stored for the next command. The folder is kept under a size cap by
evicting the least recently used states. A state is written aside and renamed into place, and its
header repeats the tokens it holds, so a torn or mismatched file is never loaded.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import struct
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

logger = logging.getLogger(__name__)

MAGIC = b"GBPFX1\n"
MIN_PREFIX_TOKENS = 128  # shorter prefixes cost less than a second to evaluate: not worth a file
DEFAULT_CAP_BYTES = 2 << 30
MAX_MARKERS = 10_000  # first-sighting markers kept (empty files), the oldest pruned beyond this
_HEADER = struct.Struct("<II")  # header JSON length, token count


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PrefixStateCache:
    """Saves and restores the llama.cpp state of constant prompt prefixes under one folder."""

    def __init__(self, folder: Path, identity: str, *, cap_bytes: int = DEFAULT_CAP_BYTES,
                 min_tokens: int = MIN_PREFIX_TOKENS) -> None:
        self.folder = Path(folder)
        self.identity = identity  # model hash, llama.cpp version and context size
        self.cap_bytes = int(cap_bytes)
        self.min_tokens = int(min_tokens)
        self._seen: Counter[str] = Counter()

    def key(self, tokens: Sequence[int]) -> str:
        """The file key of a prefix: identity and tokens hashed."""
        digest = hashlib.sha256(self.identity.encode())
        digest.update(struct.pack(f"<{len(tokens)}i", *tokens))
        return digest.hexdigest()[:32]

    def path(self, key: str) -> Path:
        """Where the state of a key lives."""
        return self.folder / f"{key}.state"

    def restore(self, llama: Any, prefix: Sequence[int]) -> int:
        """Load the stored state of `prefix` into `llama`; the number of tokens restored (0 if none)."""
        if len(prefix) < self.min_tokens:
            return 0
        path = self.path(self.key(prefix))
        try:
            data = path.read_bytes()
        except OSError:
            return 0
        tokens, state = _unpack(data)
        if tokens is None or list(tokens) != list(prefix):
            logger.warning("ignoring prefix state %s: it does not hold the expected tokens", path)
            return 0
        import llama_cpp

        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_set_data(llama._ctx.ctx, buffer, len(state)) != len(state):
            llama.reset()  # a failed load may leave the KV cache half written
            logger.warning("llama.cpp refused prefix state %s; evaluating the prefix instead", path)
            return 0
        llama.input_ids[: len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        llama._requires_eval = True  # the logits of a restored state are not for sampling
        os.utime(path)  # least recently used eviction reads mtimes
        return len(tokens)

    def note(self, prefix: Sequence[int]) -> bool:
        """Count one sighting of `prefix`; True when it should now be stored (second sighting, no file yet)."""
        if len(prefix) < self.min_tokens:
            return False
        key = self.key(prefix)
        self._seen[key] += 1
        if self._seen[key] > 1 or self.path(key).exists():
            return self._seen[key] == 2 and not self.path(key).exists()
        marker = self.folder / "seen" / key
        if marker.exists():
            return True  # an earlier process saw it once: this is its second sighting
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            self._prune_markers()
        except OSError:
            pass
        return False

    def store(self, llama: Any, prefix: Sequence[int]) -> Optional[Path]:
        """Cut `llama`'s KV cache back to `prefix` (it must hold it) and write that state to disk."""
        import llama_cpp

        n = len(prefix)
        if llama.n_tokens < n or common_prefix(llama.input_ids[:n].tolist(), prefix) != n:
            return None
        # The next record differs after the prefix anyway: dropping the rest costs nothing.
        llama._ctx.kv_cache_seq_rm(-1, n, -1)
        llama.n_tokens = n
        llama._requires_eval = True
        size = llama_cpp.llama_state_get_size(llama._ctx.ctx)
        buffer = (ctypes.c_uint8 * int(size))()
        written = int(llama_cpp.llama_state_get_data(llama._ctx.ctx, buffer, size))
        if written <= 0 or written > int(size):
            return None
        path = self.path(self.key(prefix))
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
        try:
            with partial.open("wb") as out:
                out.write(_pack_header(self.identity, prefix))
                out.write(memoryview(buffer)[:written])
            os.replace(partial, path)
        except OSError as exc:  # a full disk costs speed, never a decision
            logger.warning("cannot store prefix state %s: %s", path, exc)
            partial.unlink(missing_ok=True)
            return None
        self._evict()
        return path

    def _prune_markers(self) -> None:
        markers = list((self.folder / "seen").iterdir())
        if len(markers) > MAX_MARKERS:
            markers.sort(key=lambda p: p.stat().st_mtime)
            for marker in markers[: len(markers) - MAX_MARKERS]:
                marker.unlink(missing_ok=True)

    def _evict(self) -> None:
        files = sorted(self.folder.glob("*.state"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        while files and total > self.cap_bytes:
            oldest = files.pop(0)
            total -= oldest.stat().st_size
            oldest.unlink(missing_ok=True)


def _pack_header(identity: str, tokens: Sequence[int]) -> bytes:
    header = json.dumps({"identity": identity}).encode()
    return MAGIC + _HEADER.pack(len(header), len(tokens)) + header + struct.pack(f"<{len(tokens)}i", *tokens)


def _unpack(data: bytes) -> tuple[Optional[tuple[int, ...]], bytes]:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _HEADER.size:
        return None, b""
    offset = len(MAGIC)
    header_len, n_tokens = _HEADER.unpack_from(data, offset)
    offset += _HEADER.size + header_len
    end = offset + 4 * n_tokens
    if end > len(data):
        return None, b""
    return struct.unpack_from(f"<{n_tokens}i", data, offset), data[end:]
