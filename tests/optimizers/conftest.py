"""Fixtures shared by the optimizer tests."""

from __future__ import annotations

import dspy
import pytest

from guidebench.lm.factory import make_lm


@pytest.fixture
def fake():
    """The deterministic fake LM as DSPy's LM for the test (uncached, so calls are counted)."""
    lm = make_lm("fake", cache=False)
    with dspy.context(lm=lm):
        yield lm
