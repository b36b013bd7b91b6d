"""The direction of imports (the top of docs/architecture.md): every import, read from the source's AST.

Every `import` and `from ... import` statement counts wherever it is written: at module level, inside a
function (a lazy import is still a dependency), under `if TYPE_CHECKING:` (an annotation names the layer it
depends on). A package's lazy re-export table (`_WHERE = {name: submodule}`, `runtime._lazy.lazy_exports`)
counts as what it stands for: `from guidebench.lm import make_lm` is an import of `guidebench.lm.factory`,
and a package's own `__init__.py` naming its submodules (in `_WHERE`, under TYPE_CHECKING or at once) is the
package's face, not an edge. Dynamic imports by a name built at run time (the registries' import paths, the
CLI's command discovery) are plug-in points and not read here.

Two orders are checked, as docs/architecture.md writes them (a module imports its own layer and those to its
left, never one to its right):
- top level: runtime -> signatures -> programs -> evals -> optimizers -> guidebench;
- inside guidebench/: `GUIDEBENCH_ORDER` below (the services, then the use cases, then the commands);
and no circle between modules anywhere in the project's packages.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first: a module may import its own layer and any layer before it, never one after it.
TOP_ORDER = ("runtime", "signatures", "programs", "evals", "optimizers", "guidebench")

# Inside guidebench/, lowest first; one entry per top-level module or subpackage of guidebench/, each a tier
# (names in one tuple share a tier and must not import each other). Keep in step with docs/architecture.md.
GUIDEBENCH_ORDER: tuple[tuple[str, ...], ...] = (
    ("errors", "home"),       # the error every layer raises; the one home folder
    ("cluster",),             # where independent units run: this process or a cluster engine's workers,
    ("outputs",),             # services: output folders and report files that never replace a user's files,
    ("simulators",),          #   seeded simulators that write logs in the real writers' shapes,
    ("data",),                #   log import (and the redaction tracking applies),
    ("tracking",),            #   MLflow,
    ("lm",),                  #   LMs, what their calls cost (and the loopback processes of the LM server and
                              #   search's services),
    ("evaluation",),          # use cases, each above those it runs: one program's eval (its plots, post-mortem,
                              #   and a planner dataset's outcome models),
    ("compile",),             #   one compile,
    ("leaderboard",),         #   the leaderboard (its variants, scored on one split),
    ("baselines", "release"), #   the baselines, export and promotion,
    ("runner", "monitor"),    #   a frozen planner in front of the real loop runner; watching the promoted champion,
    ("search",),              #   the Optuna search (compiles and scores trials),
    ("demo",),                #   the guided demo (runs the commands it is handed)
    ("commands",),            # one module per CLI command, and the parser that gathers them
    ("cli",),                 # the entry point
)


@dataclass(frozen=True)
class Import:
    """One import edge: the importing module, the imported module, where it is written."""

    source: str
    target: str
    path: str
    line: int


def module_name(path: Path, root: Path) -> str:
    """`guidebench/lm/factory.py` -> `guidebench.lm.factory`; a package's `__init__.py` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path) -> dict[str, Path]:
    """Every module of the project's packages (the layers), by dotted name."""
    found: dict[str, Path] = {}
    for package in TOP_ORDER:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def _where_table(tree: ast.Module) -> dict[str, str]:
    """A package's lazy re-export table, `_WHERE = {name: submodule}`, or {} when it has none.

    The table is built from constants (`dict.fromkeys`, comprehensions over a `_EXPORTS` dict), so the
    module-level assignments are run on their own, without the package's imports.
    """
    namespace: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            try:
                exec(compile(ast.Module(body=[node], type_ignores=[]), "<_WHERE>", "exec"), namespace)
            except Exception:  # an assignment that needs an import (e.g. `lazy_exports(...)`) is not the table
                continue
    table = namespace.get("_WHERE", {})
    return dict(table) if isinstance(table, dict) else {}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a `from ... import` names (relative imports resolved against `module`)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class _Package:
    """What `from <package> import name` resolves to: a submodule, a lazy or eager re-export, or the package."""

    def __init__(self, name: str, tree: ast.Module, modules: dict[str, Path]) -> None:
        self.name = name
        self.where = _where_table(tree)
        self.eager: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    self.eager[alias.asname or alias.name] = node.module
        self.modules = modules

    def resolve(self, attribute: str) -> str:
        """The module that defines `attribute` of this package."""
        if f"{self.name}.{attribute}" in self.modules:
            return f"{self.name}.{attribute}"
        if attribute in self.where:
            return f"{self.name}.{self.where[attribute]}"
        if self.eager.get(attribute, "").startswith(self.name + "."):
            return self.eager[attribute]
        return self.name


def collect_imports(root: Path) -> list[Import]:
    """Every import between the project's modules, with lazy re-exports resolved to their submodules."""
    modules = project_modules(root)
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for name, path in modules.items()}
    packages = {name: _Package(name, trees[name], modules) for name, path in modules.items() if path.name == "__init__.py"}
    edges: list[Import] = []
    for source, tree in trees.items():
        path = modules[source]
        is_package = path.name == "__init__.py"
        rel = str(path.relative_to(root))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, source, is_package)
                for alias in node.names:
                    targets.append(packages[base].resolve(alias.name) if base in packages else base)
            for target in targets:
                target = _project_module(target, modules)
                if target is None or target == source:
                    continue
                if is_package and target.startswith(source + "."):
                    continue  # a package's face naming its own submodules
                edges.append(Import(source, target, rel, node.lineno))
        if is_package:
            for submodule in packages[source].where.values():
                if f"{source}.{submodule}" not in modules:
                    edges.append(Import(source, f"{source}.{submodule}", rel, 0))  # a stale table is an error
    return edges


def _project_module(name: str, modules: dict[str, Path]) -> str | None:
    """The project module `name` is (or lies in), None for a third-party or standard-library module."""
    if name.split(".")[0] not in TOP_ORDER:
        return None
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def top_rank(module: str) -> int:
    """The module's top-level layer, lowest 0."""
    return TOP_ORDER.index(module.split(".")[0])


def guidebench_rank(module: str) -> int | None:
    """The module's tier inside guidebench/ (lowest 0); None for the package's own `__init__`."""
    parts = module.split(".")
    if parts[0] != "guidebench" or len(parts) == 1:
        return None
    for rank, tier in enumerate(GUIDEBENCH_ORDER):
        if parts[1] in tier:
            return rank
    raise AssertionError(f"guidebench.{parts[1]} has no place in GUIDEBENCH_ORDER (tests/test_layers.py)")


def upward_imports(edges: list[Import]) -> list[str]:
    """Every import that runs against an order, one line each: `path:line: source imports target (why)`."""
    found: list[str] = []
    for edge in sorted(set(edges), key=lambda e: (e.path, e.line, e.target)):
        if top_rank(edge.target) > top_rank(edge.source):
            found.append(f"{edge.path}:{edge.line}: {edge.source} imports {edge.target} (top level: "
                         f"{edge.source.split('.')[0]} sits below {edge.target.split('.')[0]})")
            continue
        low, high = guidebench_rank(edge.source), guidebench_rank(edge.target)
        if low is None or high is None:
            continue
        same_unit = edge.source.split(".")[1] == edge.target.split(".")[1]
        if high > low or (high == low and not same_unit):
            found.append(f"{edge.path}:{edge.line}: {edge.source} imports {edge.target} (inside guidebench/: "
                         f"{edge.source.split('.')[1]} may not import {edge.target.split('.')[1]})")
    return found


def circles(edges: list[Import]) -> list[list[str]]:
    """Every circle of module imports (the strongly connected components of two or more modules)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_runs_back_up() -> None:
    assert upward_imports(collect_imports(ROOT)) == []


def test_no_circles_between_modules() -> None:
    assert circles(collect_imports(ROOT)) == []


def test_every_guidebench_unit_has_a_place() -> None:
    units = {path.stem if path.is_file() else path.name for path in (ROOT / "guidebench").iterdir()
             if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").exists()}
    placed = {name for tier in GUIDEBENCH_ORDER for name in tier}
    assert units == placed


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A copy of the project's packages with `files` written over it."""
    for package in TOP_ORDER:
        for path in (ROOT / package).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    for rel, text in files.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_planted_upward_import_fails(tmp_path: Path) -> None:
    # Inside a function, through a lazy re-export: the check still sees runtime reaching up to guidebench.
    root = _plant(tmp_path / "top", {"runtime/planted.py": "def f():\n    from guidebench.lm import make_lm\n"})
    assert upward_imports(collect_imports(root)) == [
        "runtime/planted.py:2: runtime.planted imports guidebench.lm.factory (top level: runtime sits below guidebench)"]
    # Under TYPE_CHECKING, inside guidebench/: lm (a service) reaching up to search (a use case).
    root = _plant(tmp_path / "inner", {"guidebench/lm/planted.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from guidebench.search import workers\n")})
    assert upward_imports(collect_imports(root)) == [
        "guidebench/lm/planted.py:3: guidebench.lm.planted imports guidebench.search.workers "
        "(inside guidebench/: lm may not import search)"]


def test_a_planted_circle_fails(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"evals/planted_a.py": "from evals import planted_b\n",
                             "evals/planted_b.py": "import evals.planted_a\n"})
    assert circles(collect_imports(root)) == [["evals.planted_a", "evals.planted_b"]]


def test_relative_imports_resolve(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"runtime/planted.py": "from ..guidebench import errors\n"})
    ups = upward_imports(collect_imports(root))
    assert ups == ["runtime/planted.py:1: runtime.planted imports guidebench.errors (top level: runtime sits below guidebench)"]


def test_the_documented_orders_are_the_checked_ones() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "`" + " -> ".join(TOP_ORDER) + "`" in text
    flat = " ".join(text.split())
    inner = " -> ".join(", ".join(tier) for tier in GUIDEBENCH_ORDER)
    assert f"`{inner}`" in flat


def test_no_submodule_shadows_a_name_its_package_exports() -> None:
    # Importing `pkg.x` sets the attribute `x` of `pkg`: a module named like a lazily exported name (say
    # `optimizers/names.py` beside `optimizers.names()`) would replace that name once anything imports it.
    modules = project_modules(ROOT)
    clashes = []
    for name, path in modules.items():
        if path.name == "__init__.py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            clashes += [f"{name}.{export}" for export in _where_table(tree) if f"{name}.{export}" in modules]
    assert clashes == []
