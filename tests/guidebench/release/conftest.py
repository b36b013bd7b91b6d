"""Fixtures shared by the release tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from frozen_support import export_program


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """An export of `full_auto.predict` with its demos (never modified: tests work on copies)."""
    return export_program("full_auto.predict", tmp_path_factory.mktemp("pristine") / "mod").path
