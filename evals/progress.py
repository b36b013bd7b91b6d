"""The progress bar of the long evaluation steps (replay, post-mortem, off-policy estimates): tqdm with its rate
and ETA on stderr, left off when the caller turns progress off (`--no-progress`) and cleared when done."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

_quiet = False  # a command runs with --no-progress: bars no flag reaches stay off too


def progress_bar(total: int, desc: str, enabled: bool, unit: str = "rec") -> Any:
    """A tqdm bar of `total` units (a no-op bar when not `enabled`); use it as a context manager."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled or _quiet, leave=False)


@contextmanager
def quiet_bars(quiet: bool = True) -> Iterator[None]:
    """Inside, with `quiet`, every bar stays off, also those made deep in a fit that no `progress` flag reaches (the
    outcome fit's): a command's `--no-progress`. The setting before is restored on leaving."""
    global _quiet
    before, _quiet = _quiet, quiet or _quiet
    try:
        yield
    finally:
        _quiet = before


def auto_disable() -> Optional[bool]:
    """tqdm's `disable` for a bar shown on a terminal only: True under `quiet_bars`, else None (tqdm: off when its
    stream is not a terminal)."""
    return True if _quiet else None


__all__ = ["auto_disable", "progress_bar", "quiet_bars"]
