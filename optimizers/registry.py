"""The optimizer recipes by name: `names()`, `get(name)`, `load(name_or_file)`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .base import Recipe, RecipeError, read_recipe_file, _norm
from .bootstrap_fewshot import BootstrapFewShotRecipe
from .bootstrap_random_search import RandomSearchRecipe
from .copro import COPRORecipe
from .gepa import GEPARecipe
from .knn_fewshot import KNNFewShotRecipe
from .labeled_fewshot import LabeledFewShotRecipe
from .miprov2 import MIPROv2Recipe
from .simba import SIMBARecipe

# Cheapest first: the order `guidebench optimizers` lists them in.
RECIPES: tuple[type[Recipe], ...] = (
    LabeledFewShotRecipe, KNNFewShotRecipe, BootstrapFewShotRecipe, RandomSearchRecipe,
    MIPROv2Recipe, COPRORecipe, SIMBARecipe, GEPARecipe,
)
_BY_KEY: dict[str, type[Recipe]] = {}
for _recipe in RECIPES:
    _BY_KEY[_norm(_recipe.name)] = _recipe
    _BY_KEY[_norm(_recipe.dspy_name)] = _recipe


def names() -> list[str]:
    """Registry names of every recipe, cheapest first."""
    return [recipe.name for recipe in RECIPES]


def get(name: str) -> type[Recipe]:
    """The recipe class for a registry name or DSPy class name (case and punctuation ignored)."""
    recipe = _BY_KEY.get(_norm(name))
    if recipe is None:
        raise RecipeError(f"unknown optimizer {name!r}; choose one of: {', '.join(names())}")
    return recipe


def recipe_file(name: str) -> Path:
    """The packaged recipe file with the documented defaults of a recipe."""
    return Path(__file__).parent / "recipes" / f"{get(name).name}.toml"


def load(name: Optional[str] = None, path: Optional[str | Path] = None) -> Recipe:
    """A recipe from a file (whose 'optimizer' field names it), a name (defaults), or both (they must agree)."""
    if path is None:
        if name is None:
            raise RecipeError("name an optimizer or a recipe file")
        return get(name)()
    data = read_recipe_file(path)
    named = data.get("optimizer") or name
    if named is None:
        raise RecipeError(f"{path}: field 'optimizer' is missing (and no optimizer was named)")
    if name is not None and get(name) is not get(named):
        raise RecipeError(f"{path}: the recipe is for {named!r} but the optimizer asked for is {name!r}")
    return get(named).from_mapping(data, source=str(path))
