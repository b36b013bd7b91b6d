"""Optimizer recipes (one DSPy optimizer per module behind `optimizers.base.Recipe`), compile
budgets, checkpoints, dry-run estimates and the Optuna search.

    import optimizers
    optimizers.names()                          # ['labeled_fewshot', 'knn_fewshot', ...]
    recipe = optimizers.get("bootstrap_fewshot")()  # defaults; or optimizers.load(path=...)
    result = recipe.compile(program, trainset, valset, metric, optimizers.Budget(max_lm_calls=200))

Names are re-exported lazily (`runtime._lazy`): listing the recipes imports no DSPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import CompileResult, Recipe, RecipeError, RecipeSettings
    from .budget import Budget, BudgetExceeded
    from .compiled import load_compiled
    from .registry import RecipeInfo, describe, get, load, names, recipe_file

_WHERE: dict[str, str] = {
    "CompileResult": "base", "Recipe": "base", "RecipeError": "base", "RecipeSettings": "base",
    "Budget": "budget", "BudgetExceeded": "budget", "load_compiled": "compiled",
    "RecipeInfo": "registry", "describe": "registry", "get": "registry", "load": "registry", "names": "registry",
    "recipe_file": "registry",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
