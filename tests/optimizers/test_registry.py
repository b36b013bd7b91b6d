"""optimizers.registry: recipe files are the documented defaults; YAML overrides and clear errors."""

from __future__ import annotations

import pytest

import optimizers
from optimizers.base import RecipeError


def test_recipe_files_are_the_documented_defaults():
    for name in optimizers.names():
        path = optimizers.recipe_file(name)
        recipe = optimizers.load(path=path)
        assert type(recipe) is optimizers.get(name)
        assert recipe.settings.model_dump() == recipe.defaults()
        assert path.read_text(encoding="utf-8") == recipe.render_toml(), f"{path} is stale: re-render it"


def test_recipe_file_yaml_overrides_and_errors(tmp_path):
    good = tmp_path / "knn.yaml"
    good.write_text("optimizer: KNNFewShot\nsettings:\n  k: 5\n  vectorizer: hashing\n")
    recipe = optimizers.load(path=good)
    assert recipe.name == "knn_fewshot" and recipe.settings.k == 5 and recipe.settings.vectorizer == "hashing"
    bad = tmp_path / "bad.toml"
    bad.write_text('optimizer = "bootstrap_fewshot"\n[settings]\nmax_demos = 3\n')
    with pytest.raises(RecipeError, match=r"bad\.toml.*'max_demos'"):
        optimizers.load(path=bad)
    with pytest.raises(RecipeError, match="recipe is for"):
        optimizers.load(name="copro", path=good)
    with pytest.raises(RecipeError, match="unknown optimizer"):
        optimizers.get("adamw")


def test_describe_reads_what_the_recipe_classes_say():
    """`guidebench optimizers` lists from the recipe files' headers: the same names, classes and summaries."""
    infos = optimizers.describe()
    assert [info.name for info in infos] == optimizers.names()
    for info in infos:
        recipe = optimizers.get(info.name)
        assert (info.dspy_name, info.summary) == (recipe.dspy_name, recipe.summary)
        assert optimizers.get(recipe.dspy_name) is recipe
