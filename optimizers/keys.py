"""The one spelling rule of recipe names: `MIPROv2`, `mipro_v2` and `miprov2` name the same recipe.

Its own module so the registry (which imports no DSPy) and the `Recipe` base share it without importing
each other.
"""

from __future__ import annotations


def recipe_key(name: str) -> str:
    """The name lowered, with everything but letters and digits dropped."""
    return "".join(ch for ch in str(name).lower() if ch.isalnum())
