"""What the reliability suites did, counted for `reports/reliability.md`.

When `GUIDEBENCH_RELIABILITY_LEDGER` names a file (set by `benchmarks/reliability_report.py`), each
suite appends one JSON line per scenario it ran: the area (fuzz, faults, crashes, tamper, secrets,
injection, concurrency), the test, and its counts — what was thrown at the workbench and how much of
it was lost (goal: zero). Without the variable nothing is written and the tests run as usual.
"""

from __future__ import annotations

import json
import os
from typing import Any

LEDGER_ENV = "GUIDEBENCH_RELIABILITY_LEDGER"


def record(area: str, **counts: Any) -> None:
    """Append one scenario's counts to the ledger (a no-op unless the report asked for it)."""
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"area": area, "test": test, **counts}, sort_keys=True, default=str) + "\n")
