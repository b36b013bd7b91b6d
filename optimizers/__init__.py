"""Optimizer recipes (one DSPy optimizer per module behind `optimizers.base.Recipe`), compile
budgets, checkpoints, dry-run estimates and the Optuna search.

    import optimizers
    optimizers.names()                          # ['labeled_fewshot', 'knn_fewshot', ...]
    recipe = optimizers.get("bootstrap_fewshot")()  # defaults; or optimizers.load(path=...)
    result = recipe.compile(program, trainset, valset, metric, optimizers.Budget(max_lm_calls=200))
"""

from .base import CompileResult, Recipe, RecipeError, RecipeSettings
from .budget import Budget, BudgetExceeded
from .compiled import load_compiled
from .registry import get, load, names, recipe_file

__all__ = ["Budget", "BudgetExceeded", "CompileResult", "Recipe", "RecipeError", "RecipeSettings", "get",
           "load", "load_compiled", "names", "recipe_file"]
