"""The runtime package stays the small production surface: no MLflow, Optuna or pandas in its source, and
importing it loads none of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"


def test_runtime_has_no_heavy_imports_in_source():
    for path in RUNTIME.glob("*.py"):
        text = path.read_text()
        for name in ("mlflow", "optuna", "pandas"):
            assert f"import {name}" not in text and f"from {name}" not in text, (path.name, name)


def test_importing_runtime_loads_no_heavy_modules():
    # The package and the contract/policy modules (runtime.frozen.loader, which loads DSPy, is the
    # export engineer's; the source scan above covers it).
    code = ("import sys, runtime, runtime.fullauto, runtime.advisor, runtime.guardrails, runtime.pivot, "
            "runtime.records\n"
            "print(','.join(m for m in ('mlflow', 'optuna', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=RUNTIME.parent).stdout.strip()
    assert out == ""
