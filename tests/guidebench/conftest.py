"""Fixtures shared by the application's tests."""

from __future__ import annotations

from typing import Iterator

import dspy
import pytest


@pytest.fixture
def restore_lm() -> Iterator[None]:
    """The commands configure DSPy's LM globally; put the previous one back after the test."""
    previous = dspy.settings.lm
    yield
    dspy.configure(lm=previous)
