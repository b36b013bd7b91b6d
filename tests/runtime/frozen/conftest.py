"""Fixtures shared by the frozen-module tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from frozen_support import export_program


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """An export of the uncompiled `full_auto.predict` (never modified: tests work on copies)."""
    out = tmp_path_factory.mktemp("pristine") / "X"
    export_program("full_auto.predict", out)
    return out
