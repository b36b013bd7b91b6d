"""The progress bar of the long evaluation steps (replay, post-mortem, off-policy estimates): tqdm with its rate
and ETA on stderr, left off when the caller turns progress off (`--no-progress`) and cleared when done."""

from __future__ import annotations

from typing import Any


def progress_bar(total: int, desc: str, enabled: bool, unit: str = "rec") -> Any:
    """A tqdm bar of `total` units (a no-op bar when not `enabled`); use it as a context manager."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, leave=False)


__all__ = ["progress_bar"]
