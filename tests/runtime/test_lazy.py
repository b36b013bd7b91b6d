"""Every package's public names resolve through its lazy `__init__`, and nothing else does."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["runtime", "runtime.frozen", "evals", "programs", "optimizers", "guidebench", "guidebench.commands", "guidebench.lm", "guidebench.tracking",
            "guidebench.leaderboard", "guidebench.release", "guidebench.search", "guidebench.simulators"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves(name):
    package = importlib.import_module(name)
    assert package.__all__, f"{name} exports nothing"
    for public in package.__all__:
        value = getattr(package, public)
        assert not isinstance(value, type(package)), f"{name}.{public} is a module, not the public object"
    assert sorted(dir(package)) == sorted(package.__all__)


def test_an_unknown_name_is_an_attribute_error():
    package = importlib.import_module("guidebench.search")
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        package.nope  # noqa: B018


def test_a_submodule_is_still_imported_through_its_package():
    from evals import compare, metrics_fullauto, replay

    assert callable(compare) and replay.__name__ == "evals.replay" and callable(replay.replay)
    assert callable(metrics_fullauto.metric)
