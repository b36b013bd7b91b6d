"""Every fixture a test asks for is in reach of the test alone: in its own file, or in a conftest.py of its folder
or a folder above it. pytest loads a folder's conftest.py only for the test paths under it, so a fixture another
folder's conftest.py defines works in a whole-suite run and fails ("fixture 'x' not found") when the test's file
is given beside other paths, or alone. Read from the AST: no test runs."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _fixtures(tree: ast.Module) -> set[str]:
    """The names of the module's `@pytest.fixture` functions."""
    def is_fixture(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return isinstance(target, ast.Attribute) and target.attr == "fixture"

    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any(is_fixture(d) for d in node.decorator_list)}


def _asked(tree: ast.Module) -> set[str]:
    """The argument names of the module's tests and fixtures (parametrized names included: filtered later)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (node.name.startswith("test_") or _fixtures(ast.Module([node], []))):
            names |= {arg.arg for arg in node.args.args + node.args.kwonlyargs}
    return names


def out_of_reach(tests: Path) -> list[str]:
    """`path: fixture (defined in ...)` for each fixture a test file asks for that only another folder defines."""
    defined = {path.parent: _fixtures(ast.parse(path.read_text(encoding="utf-8")))
               for path in tests.rglob("conftest.py")}
    problems = []
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        reach = _fixtures(tree).union(*(names for folder, names in defined.items() if folder in path.parents))
        for name in sorted(_asked(tree) - reach):
            owners = [str(folder.relative_to(tests.parent)) for folder, names in defined.items() if name in names]
            if owners:
                problems.append(f"{path.relative_to(tests.parent)}: {name} (defined in {', '.join(owners)})")
    return problems


def test_every_fixture_a_test_asks_for_is_in_its_conftest_path() -> None:
    assert out_of_reach(TESTS) == []


def test_a_fixture_of_another_folder_is_found(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef shared():\n    yield\n")
    (tmp_path / "a" / "test_one.py").write_text("def test_one(shared, tmp_path):\n    pass\n")
    (tmp_path / "b" / "test_two.py").write_text("def test_two(shared):\n    pass\n")
    assert out_of_reach(tmp_path) == [f"{tmp_path.name}/b/test_two.py: shared (defined in {tmp_path.name}/a)"]
