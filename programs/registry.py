"""Registry of named decision programs: `get(name)` builds a fresh `dspy.Module`."""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

ProgramKind = Literal["full_auto", "planner"]
KINDS: tuple[str, ...] = ("full_auto", "planner")

# Modules imported on first use of the registry; each registers its programs at import time.
_BUILTIN_MODULES: tuple[str, ...] = ("programs.catalog",)


class UnknownProgramError(LookupError):
    """No program is registered under that name."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else "unknown program"


class LazyFactory:
    """A factory named by its import path (`"programs.full_auto:FullAutoPredict"`), imported on the first call,
    so listing the registry (`guidebench programs`) imports no program module and no DSPy."""

    def __init__(self, path: str) -> None:
        module, _, attribute = path.partition(":")
        if not module or not attribute:
            raise ValueError(f"factory path must be 'module:attribute', got {path!r}")
        self.path = path
        self._target: Callable[[], Any] | None = None

    def __call__(self) -> Any:
        if self._target is None:
            module, _, attribute = self.path.partition(":")
            self._target = getattr(importlib.import_module(module), attribute)
        return self._target()

    def __repr__(self) -> str:
        return f"LazyFactory({self.path!r})"


@dataclass(frozen=True)
class ProgramSpec:
    """What a registered program is and how to build it."""

    name: str
    kind: ProgramKind
    uses_lm: bool
    description: str
    factory: Callable[[], Any] = field(repr=False, compare=False)
    aliases: tuple[str, ...] = ()
    trained: bool = False  # has a part fit on a dataset (the `fit` recipe), so it is compiled even without an LM

    @property
    def compilable(self) -> bool:
        """True when compiling changes the program: it calls an LM or fits a model on data."""
        return self.uses_lm or self.trained

    def build(self) -> Any:
        """A fresh instance of the program."""
        return self.factory()


_lock = threading.RLock()
_specs: dict[str, ProgramSpec] = {}
_aliases: dict[str, str] = {}
_loaded = False


def register(
    name: str,
    factory: Callable[[], Any] | str,
    *,
    kind: ProgramKind,
    uses_lm: bool,
    description: str,
    aliases: tuple[str, ...] | list[str] = (),
    replace: bool = False,
    trained: bool = False,
) -> ProgramSpec:
    """Register a program factory (a callable, or its `"module:attribute"` path, imported on first use) under a
    stable name (and optional aliases); returns its spec."""
    if kind not in KINDS:
        raise ValueError(f"program kind must be one of {KINDS}, got {kind!r}")
    if not name or not isinstance(name, str):
        raise ValueError("program name must be a non-empty string")
    if isinstance(factory, str):
        factory = LazyFactory(factory)
    if not callable(factory):
        raise TypeError(f"factory of program {name!r} is not callable")
    spec = ProgramSpec(name=name, kind=kind, uses_lm=uses_lm, description=description,
                       factory=factory, aliases=tuple(aliases), trained=trained)
    with _lock:
        if not replace:
            if name in _specs:
                raise ValueError(f"program {name!r} is already registered; pass replace=True to override it")
            for key in (name, *spec.aliases):
                owner = _aliases.get(key)
                if owner is not None and owner != name:
                    raise ValueError(f"name {key!r} is already an alias of program {owner!r}")
            for alias in spec.aliases:
                if alias in _specs:
                    raise ValueError(f"alias {alias!r} is already a program name")
        _specs[name] = spec
        for alias in spec.aliases:
            _aliases[alias] = name
    return spec


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        _loaded = True  # set first: the imported modules call register(), which may call back here
        for module in _BUILTIN_MODULES:
            importlib.import_module(module)


def resolve(name: str) -> str:
    """The canonical program name for a name or alias."""
    _ensure_loaded()
    with _lock:
        if name in _specs:
            return name
        if name in _aliases:
            return _aliases[name]
        known = ", ".join(sorted(_specs))
    raise UnknownProgramError(f"unknown program {name!r}; known programs: {known}")


def spec(name: str) -> ProgramSpec:
    """The spec of a program, by name or alias."""
    canonical = resolve(name)
    with _lock:
        return _specs[canonical]


def get(name: str) -> Any:
    """A fresh instance of the named program (a `dspy.Module`)."""
    return spec(name).build()


def names(kind: ProgramKind | None = None) -> list[str]:
    """Registered program names (canonical, sorted), optionally of one kind."""
    _ensure_loaded()
    with _lock:
        return sorted(name for name, item in _specs.items() if kind is None or item.kind == kind)


def specs(kind: ProgramKind | None = None) -> list[ProgramSpec]:
    """Registered specs, sorted by name, optionally of one kind."""
    return [spec(name) for name in names(kind)]
