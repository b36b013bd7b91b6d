"""Lazy re-exports for package `__init__` files: a name is imported from its module on first use.

A package lists `_WHERE = {public name: submodule}` and ends with
`__getattr__, __dir__ = lazy_exports(__name__, _WHERE)` (PEP 562), so `import guidebench.search` costs
nothing until a name is used, while `from guidebench.search import run_pool` still works.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` that import each public name from its submodule."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__
