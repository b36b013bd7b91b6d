"""Run every test module alone, each in a pytest process of its own, and list the modules that fail.

A test that passes in the suite but fails alone (or the other way round) depends on what another test
left behind or set up: an MLflow store, DSPy's configured LM, an environment variable, a cached value, the
current folder. `make test-isolated` runs this; `make test-random` is its counterpart for the order.

    python tests/setup/each_module_alone.py [--jobs N] [--logs DIR] [-- PYTEST ARGS]

Each module runs with `-n 0` (in one process, as a developer runs it); `--jobs` modules run at a time.
The output of a failing module is kept in `--logs` (default `build/isolated/`), one file per module.
Exit status: 0 when every module passes alone, 1 otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# pytest exits 5 when a module has no test left to run (e.g. every test deselected by -m): nothing failed.
_PASSED = (0, 5)


def modules(root: Path = ROOT) -> list[str]:
    """Every test module of the suite, by path relative to the repository, in a stable order."""
    return sorted(path.relative_to(root).as_posix() for path in (root / "tests").rglob("test_*.py"))


def run_alone(module: str, pytest_args: list[str], logs: Path) -> tuple[str, int, float]:
    """Run one module in a pytest process of its own; returns (module, exit status, seconds)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", module,
                           *pytest_args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in _PASSED:
        logs.mkdir(parents=True, exist_ok=True)
        (logs / (module.replace("/", "__") + ".log")).write_text(done.stdout + done.stderr, encoding="utf-8")
    return module, done.returncode, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    """Run the modules, print one line each and a summary; 1 when any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="modules run at a time (default 1)")
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "isolated",
                        help="where a failing module's output is kept (default build/isolated/)")
    parser.add_argument("pytest_args", nargs="*", help="passed to every pytest run (after `--`)")
    args = parser.parse_args(argv)
    found = modules()
    failed: list[str] = []
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for module, code, seconds in pool.map(lambda m: run_alone(m, args.pytest_args, args.logs), found):
            ok = code in _PASSED
            print(f"{'ok  ' if ok else 'FAIL'} {seconds:6.1f}s {module}" + ("" if ok else f" (exit {code})"),
                  flush=True)
            if not ok:
                failed.append(module)
    minutes = (time.monotonic() - started) / 60
    print(f"{len(found)} modules alone in {minutes:.1f} min: {len(found) - len(failed)} passed, {len(failed)} failed"
          + (f" (output in {args.logs})" if failed else ""))
    for module in failed:
        print(f"  {module}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
