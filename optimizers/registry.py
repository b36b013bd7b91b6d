"""The optimizer recipes by name: `names()`, `get(name)`, `load(name_or_file)`, `describe()`.

Each recipe is named by its import path and imported on first use; `describe()` reads what
`guidebench optimizers` lists from the packaged recipe files (whose headers the recipe classes
render, checked by `tests/optimizers/test_registry.py`), so listing them imports no DSPy.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Optional

from .keys import recipe_key

if TYPE_CHECKING:
    from .base import Recipe

# Cheapest first: the order `guidebench optimizers` lists them in.
_RECIPES: dict[str, str] = {
    "fit": "optimizers.fit:FitRecipe",
    "labeled_fewshot": "optimizers.labeled_fewshot:LabeledFewShotRecipe",
    "knn_fewshot": "optimizers.knn_fewshot:KNNFewShotRecipe",
    "bootstrap_fewshot": "optimizers.bootstrap_fewshot:BootstrapFewShotRecipe",
    "bootstrap_random_search": "optimizers.bootstrap_random_search:RandomSearchRecipe",
    "miprov2": "optimizers.miprov2:MIPROv2Recipe",
    "copro": "optimizers.copro:COPRORecipe",
    "simba": "optimizers.simba:SIMBARecipe",
    "gepa": "optimizers.gepa:GEPARecipe",
}
RECIPES_DIR = Path(__file__).parent / "recipes"


class RecipeInfo(NamedTuple):
    """What `guidebench optimizers` lists of a recipe."""

    name: str
    dspy_name: str
    summary: str


def _load_class(name: str) -> type["Recipe"]:
    module, _, attribute = _RECIPES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def names() -> list[str]:
    """Registry names of every recipe, cheapest first."""
    return list(_RECIPES)


def describe() -> list[RecipeInfo]:
    """Name, DSPy class and one-line summary of every recipe, cheapest first, from the recipe files' headers."""
    infos = []
    for name in _RECIPES:
        first, second = recipe_file(name).read_text(encoding="utf-8").splitlines()[:2]
        dspy_name = first.removeprefix("# ").split(" (", 1)[0]
        infos.append(RecipeInfo(name, dspy_name, second.removeprefix("# ").removesuffix(".")))
    return infos


def get(name: str) -> type["Recipe"]:
    """The recipe class for a registry name or DSPy class name (case and punctuation ignored)."""
    key = recipe_key(name)
    for known in _RECIPES:
        if recipe_key(known) == key:
            return _load_class(known)
    for known in _RECIPES:  # a DSPy class name: import the recipes to read theirs
        recipe = _load_class(known)
        if recipe_key(recipe.dspy_name) == key:
            return recipe
    from .recipe_files import RecipeError

    raise RecipeError(f"unknown optimizer {name!r}; choose one of: {', '.join(names())}")


def recipe_file(name: str) -> Path:
    """The packaged recipe file with the documented defaults of a recipe."""
    key = recipe_key(name)
    canonical = next((known for known in _RECIPES if recipe_key(known) == key), None) or get(name).name
    return RECIPES_DIR / f"{canonical}.toml"


def load(name: Optional[str] = None, path: Optional[str | Path] = None) -> "Recipe":
    """A recipe from a file (whose 'optimizer' field names it), a name (defaults), or both (they must agree)."""
    from .recipe_files import RecipeError, read_recipe_file

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
