"""Program helpers the recipes share: the labeled demos an instruction optimizer starts from, a saved state
restored into a copy, and the seeding of the global generators some DSPy optimizers draw from.
"""

from __future__ import annotations

import json
import random
from typing import Any, Mapping, Sequence

import dspy
import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's and NumPy's global generators (some DSPy optimizers draw from them)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))


def restore_program(program: dspy.Module, state: Mapping[str, Any]) -> dspy.Module:
    """A copy of program with a saved state loaded."""
    restored = program.deepcopy()
    restored.load_state(json.loads(json.dumps(state)))
    return restored


def with_labeled_demos(program: dspy.Module, trainset: Sequence[dspy.Example], k: int, seed: int) -> dspy.Module:
    """The program with k seeded labeled demos per predictor (what instruction optimizers start from).

    The embedded base model only answers in the expected format with demos in the prompt, so an
    instruction optimizer starting from a zero-shot program would score every candidate 0.
    """
    if k <= 0:
        return program
    pool = list(trainset)
    random.Random(seed).shuffle(pool)
    return dspy.LabeledFewShot(k=k).compile(program, trainset=pool, sample=False)
