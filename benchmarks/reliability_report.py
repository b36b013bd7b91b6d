"""Regenerate `reports/reliability.md`: run the reliability suites and count what they threw and what was lost.

    .venv/bin/python -m benchmarks.reliability_report            # every scenario (about 10 min on 2 cores)
    .venv/bin/python -m benchmarks.reliability_report --quick    # leave out the slow ones (kills, concurrency)

Runs the test files that hold the reliability scenarios (`SUITES`: import fuzzing, LM faults in eval, compile
and the runtime module, kill -9 during commands, tampering and planted secrets, prompt injection, concurrent
processes; each scenario sits in the test file of the module it exercises) under pytest with
`GUIDEBENCH_RELIABILITY_LEDGER` set; each scenario appends its counts to that ledger
(`tests/reliability_ledger.py`). This script adds them up by area and writes the report: inputs fuzzed,
faults injected, kills survived, files tampered, secrets planted, injections tried, concurrent
processes, and for each the count of anything lost, leaked or accepted that should not be (goal: zero),
next to the pass/fail of every test. Hypothesis draws new inputs on every run, so the input counts are
those of the run that wrote the report.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "reports" / "reliability.md"
# The test files that record reliability scenarios (`tests/reliability_ledger.record`), by area.
SUITES = (
    "tests/guidebench/data/test_ingest.py",  # fuzz: both importers
    "tests/guidebench/evaluation/test_run.py", "tests/optimizers/test_base.py",  # LM faults: eval, compile retries,
    "tests/guidebench/test_compile.py", "tests/runtime/frozen/test_modules.py",  # resume, the runtime module
    "tests/guidebench/test_crashes.py",  # kill -9 during compile, search and export
    "tests/guidebench/release/test_export.py",  # tampered exports, planted secrets
    "tests/runtime/test_guardrails.py",  # prompt injection
    "tests/guidebench/tracking/test_runs.py",  # concurrent processes on one store
)
COMMAND = ".venv/bin/python -m benchmarks.reliability_report"
# How the workbench holds up, and what these suites found and fixed (kept with the numbers they explain).
MECHANISMS = """## How it holds

- **Import**: every physical line ends in exactly one of imported, quarantined (with file, line and a one-line
  reason) or duplicates; JSON nested deeper than 64 levels and text UTF-8 cannot store (unpaired surrogate
  escapes) are refused at parse time, before redaction, validation or hashing recurse into them; quarantine
  lines escape U+0085/U+2028/U+2029 so every JSONL reader sees one entry per line; unusable paths are one-line
  errors (exit 2).
- **LM faults**: replay turns any exception into a scored, diagnosed failure (class, stage, message, LM id)
  with the safe default `pause`; each LM call gets the LM's own retries (DSPy `num_retries`, exponential backoff,
  `retry_after` honoured); a compile whose attempt still met transient failures runs the optimizer again after
  a backoff (`optimizers.base.COMPILE_RETRIES`), finished calls coming back from the cache; a failure no wait
  cures (bad key, billing, unknown model) fails the compile instead of returning a program built without the LM;
  the runtime module answers `pause` (planner: its safe directive) for every fault.
- **Kills**: every MLflow run records its owner (host, pid, process start time); the first tracking call of
  the next command ends the runs of dead owners KILLED with a `guidebench.reaped` tag
  (`guidebench.tracking.runs.reap_stale_runs`); a search fails its dead trials at once and queues their retry
  (`guidebench.search.engine.reap_dead_trials`; the Optuna heartbeat covers other hosts); exports are staged and
  renamed into place, and the next export removes a killed export's staging folder or restores a previous
  export caught between the two renames; `compile --resume`, and the same search or export run again, finish.
- **Tampering**: the loader refuses any file not byte-identical to `checksums.sha256` (itself canonical), any
  missing, extra or symlinked file, any pickle by name or content, a manifest or signature hash that does not
  recompute, and (in the application) a signature that is not the installed one.
- **Secrets**: logs are redacted on import, exports and their manifests are scrubbed (keys by name, token shapes,
  known secret values of the LM and the environment), and the `guidebench.command` tag of a run is scrubbed too.
- **Injection**: rules 1-5 read only typed summary fields and the run's config; an answer that gives an output
  field twice with different values (echoed marker text) is ambiguous and parsed as the safe default, in the
  runtime parser, in the programs' adapter (`runtime.strict_adapter.StrictChatAdapter`) and in the runtime module.
- **Concurrency**: the first open of a SQLite MLflow store or Optuna storage (schema creation and migration)
  happens under an exclusive lock file next to the database; a lost race to create the dataset's experiment
  uses the winner's.

## Bugs these suites found (all fixed)

| where | bug | fix |
|---|---|---|
| `guidebench/data/ingest.py` | a JSON line nested ~900 levels deep parsed, then redaction recursed past Python's limit: `RecursionError` traceback, import aborted | parse refuses nesting deeper than 64 levels (quarantined) |
| `guidebench/data/experiments.py` (via `ingest.py`) | an unpaired `\\ud83d` escape in an experiment log: `UnicodeEncodeError` traceback while hashing | parse refuses text UTF-8 cannot store (quarantined, "UTF-8" named) |
| `guidebench/data/ingest.py` | a quarantined line holding U+0085 / U+2028 was written raw: readers that split on those saw a broken JSONL line | escaped in quarantine lines |
| `guidebench/data/fullauto.py` | a folder named `fullauto-decisions.jsonl`: `IsADirectoryError` traceback (exit 1); a device path: misleading message | one-line errors naming the path (exit 2) |
| `guidebench/data/pipeline.py` | `--out` below a file, or an unreadable log: internal-error exit with a traceback file | one-line `GuidebenchError`s |
| `runtime/guardrails.py`, `programs/lm_call.py`, `runtime/frozen/modules.py` | "first section wins": an answer echoing `[[ ## confidence ## ]] 1.0` from the turn summary before its own low confidence was read as 1.0, side-stepping the low-confidence rule; a fenced JSON blob quoted in the reason took precedence over the answer's own sections | conflicting repeated fields are ambiguous (safe pause); markers before embedded JSON; `StrictChatAdapter` |
| `optimizers/base.py` | transient LM failures during a compile were swallowed by DSPy's bootstrap/`Evaluate` (scored as misses, demos lost) and never retried; a bad API key on every call still "compiled" a program | compile-level retries with backoff, keeping cached progress; fatal LM errors fail the compile |
| `guidebench/tracking/runs.py` | two commands on a new SQLite store both migrated it: `table _alembic_tmp_tags already exists`, one command failed (schema at risk); a race creating the dataset's experiment failed the loser | store initialisation under a file lock; the loser uses the winner's experiment |
| `guidebench/search/engine.py` | two searches on a new Optuna SQLite storage: `UNIQUE constraint failed: alembic_version` | storage creation under a file lock, retried for server databases |
| `guidebench/tracking/runs.py`, `guidebench/search/engine.py`, `guidebench/release/export.py` | kill -9 left MLflow runs and Optuna trials RUNNING forever (until the 120 s heartbeat grace, if ever) and staging folders next to exports | owner tags and reaping at the next command; dead trials failed and retried; staging cleanup and restore |
| `guidebench/tracking/runs.py` | the `guidebench.command` tag stored the raw command line: a `--tracking-uri https://user:password@...` or a pasted key went to MLflow | the command line is scrubbed |
"""


def run_suites(ledger: Path, junit: Path, quick: bool) -> tuple[int, float]:
    """Run pytest on the suites with the ledger on; returns (exit code, seconds)."""
    env = {**os.environ, "GUIDEBENCH_RELIABILITY_LEDGER": str(ledger), "PYTHONWARNINGS": "ignore"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *SUITES]
    if quick:
        argv += ["-m", "not slow"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env)
    return done.returncode, time.perf_counter() - started


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_junit(path: Path) -> list[dict[str, Any]]:
    """One row per test: file, name, outcome, seconds."""
    if not path.exists():
        return []
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        rows.append({"file": case.get("classname", "").rsplit(".", 1)[-1], "name": case.get("name", ""),
                     "outcome": outcome, "seconds": float(case.get("time") or 0.0)})
    return rows


def _sum(rows: Iterable[dict[str, Any]], key: str) -> int:
    return sum(int(row.get(key) or 0) for row in rows)


def _counter(rows: Iterable[dict[str, Any]], key: str) -> Counter:
    total: Counter = Counter()
    for row in rows:
        total.update(row.get(key) or {})
    return total


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def render(entries: list[dict[str, Any]], tests: list[dict[str, Any]], *, quick: bool, seconds: float,
           exit_code: int) -> str:
    by_area: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        by_area[entry["area"]].append(entry)
    fuzz, paths, faults = by_area["fuzz"], by_area["paths"], by_area["faults"]
    crashes, tamper, secrets = by_area["crashes"], by_area["tamper"], by_area["secrets"]
    injection, concurrency = by_area["injection"], by_area["concurrency"]
    failed = [t for t in tests if t["outcome"] == "failed"]
    lost = {
        "import lines lost (read != imported + quarantined + duplicates, or a line in no place)": _sum(fuzz, "lost"),
        "records lost or failures undiagnosed under LM faults": _sum(faults, "lost_records") + _sum(faults, "undiagnosed"),
        "decisions that continued on a fault": _sum(faults, "continued_on_fault"),
        "LM calls repeated after a retry or a resume": _sum(faults, "repeated_lm_calls") + _sum(crashes, "lm_calls_repeated"),
        "MLflow runs / Optuna trials left RUNNING after the next command": _sum(crashes, "runs_left_running")
        + _sum(crashes, "trials_left_running"),
        "half-written export folders / previous exports lost": _sum(crashes, "half_written_folders")
        + _sum(crashes, "previous_export_lost"),
        "tampered modules accepted": _sum(tamper, "accepted"),
        "planted secrets found in exports, MLflow or outputs": _sum(secrets, "leaks"),
        "injections that changed what a guardrail enforced": _sum(injection, "enforcement_changed"),
        "runs or trials lost / processes failed under concurrency": _sum(concurrency, "runs_lost")
        + _sum(concurrency, "trials_lost") + _sum(concurrency, "failed_processes"),
    }
    out = ["# Reliability report", "",
           f"Regenerate with `{COMMAND}`" + (" (this run: `--quick`, slow scenarios left out)" if quick else "")
           + f". Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.system()} "
           f"{platform.machine()}, Python {platform.python_version()}; the suites took {seconds:.0f} s "
           f"(pytest exit code {exit_code}).", "",
           f"Tests: {sum(t['outcome'] == 'passed' for t in tests)} passed, {len(failed)} failed, "
           f"{sum(t['outcome'] == 'skipped' for t in tests)} skipped, in {len(SUITES)} suites"
           + ("; **failing: " + ", ".join(f"{t['file']}::{t['name']}" for t in failed) + "**" if failed else "")
           + ".", "", "## Lost, leaked or accepted (goal: zero)", ""]
    out += _table(["what", "count"], [[name, count] for name, count in lost.items()])
    out += ["", MECHANISMS.rstrip()]

    kinds = sorted({row["kind"] for row in fuzz})
    out += ["", "## Inputs fuzzed (both importers)", "",
            "Hypothesis-generated logs: good lines mixed with truncated lines, random bytes, invalid UTF-8, wrong "
            "types, missing keys, NaN / Infinity / overflowing numbers, non-objects, whitespace, blank lines, JSON "
            "nested up to 100,000 levels, unpaired surrogate escapes, CRLF and BOM; plus fields of 6 MB, lines over "
            "the line limit, fuzzed side files (raw, labels, run, events, simulator side files).", ""]
    rows = []
    for kind in kinds:
        part = [row for row in fuzz if row["kind"] == kind]
        rows.append([kind, len(part), f"{sum(row.get('bytes', 0) for row in part):,}", _sum(part, "lines"),
                     _sum(part, "read"), _sum(part, "imported"), _sum(part, "quarantined"), _sum(part, "duplicates"),
                     _sum(part, "blank"), _sum(part, "lost")])
    out += _table(["kind", "files", "bytes", "lines", "read", "imported", "quarantined", "duplicates", "blank",
                   "lost"], rows)
    damage = _counter(fuzz, "damage")
    if damage:
        out += ["", "Broken lines generated, by damage (every one quarantined): "
                + ", ".join(f"{name} {count}" for name, count in sorted(damage.items())) + "."]
    if paths:
        via = Counter(row["via"] for row in paths)
        out += ["", f"Unusable paths (missing, empty, a folder or a device where a file is expected, --out a file, "
                f"unknown kind): {len({row['case'] for row in paths})} cases, "
                + ", ".join(f"{count} {name}" for name, count in sorted(via.items()))
                + f"; one-line errors {_sum(paths, 'clear_one_line_errors')}, tracebacks {_sum(paths, 'tracebacks')}."]

    out += ["", "## Faults injected (LM)", ""]
    rows = []
    for row in faults:
        injected = ", ".join(f"{k} {v}" for k, v in sorted((row.get("injected") or {}).items()))
        shown = {k: v for k, v in row.items() if k not in ("area", "test", "scenario", "injected")}
        rows.append([row["scenario"], injected, ", ".join(f"{k} {v}" for k, v in sorted(shown.items()))])
    out += _table(["scenario", "faults injected", "outcome"], rows)
    total = _counter(faults, "injected")
    out += ["", "Faults in all: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())) + "."]

    out += ["", "## Kills survived (kill -9 in a subprocess, then the next command)", ""]
    rows = [[row["command"], row["killed_at"], ", ".join(f"{k} {v}" for k, v in sorted(row.items())
                                                         if k not in ("area", "test", "command", "killed_at"))]
            for row in crashes]
    out += _table(["command", "killed", "afterwards"], rows) if rows else ["(not run: --quick)"]

    out += ["", "## Files tampered", ""]
    cases = Counter(row["case"] for row in tamper)
    out += _table(["tampering", "modules", "refused", "accepted"],
                  [[case, count, _sum([r for r in tamper if r["case"] == case], "refused"),
                    _sum([r for r in tamper if r["case"] == case], "accepted")] for case, count in sorted(cases.items())])
    files = Counter(row.get("file") for row in tamper if row.get("file"))
    if files:
        out += ["", "Changed bytes by file: " + ", ".join(f"{k} {v}" for k, v in sorted(files.items())) + "."]

    out += ["", "## Secrets planted", ""]
    for row in secrets:
        out += [f"- {row['planted']} secrets planted in: {', '.join(row['planted_in'])}; the LM key was in use "
                f"({'yes' if row['lm_key_in_use'] else 'no'}); {row['files_scanned']} files scanned (export, MLflow "
                f"database and artifacts, compile and eval outputs, dataset); leaks: {row['leaks']}."]
    if not secrets:
        out += ["(not run: --quick)"]

    out += ["", "## Injections tried, per guardrail rule", ""]
    rules = sorted({row["rule"] for row in injection})
    out += _table(["rule", "attempts", "paths", "enforcement changed", "ambiguous answers refused"],
                  [[rule, _sum([r for r in injection if r["rule"] == rule], "attempts"),
                    len({r["path"] for r in injection if r["rule"] == rule}),
                    _sum([r for r in injection if r["rule"] == rule], "enforcement_changed"),
                    _sum([r for r in injection if r["rule"] == rule], "ambiguous_refused")] for rule in rules])

    out += ["", "## Concurrency", ""]
    rows = [[row["scenario"], row["processes"], ", ".join(f"{k} {v}" for k, v in sorted(row.items())
                                                          if k not in ("area", "test", "scenario", "processes"))]
            for row in concurrency]
    out += _table(["scenario", "processes", "outcome"], rows) if rows else ["(not run: --quick)"]

    out += ["", "## Tests", ""]
    per_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for test in tests:
        per_file[test["file"]].append(test)
    out += _table(["suite", "tests", "passed", "failed", "seconds"],
                  [[name, len(rows), sum(r["outcome"] == "passed" for r in rows),
                    sum(r["outcome"] == "failed" for r in rows), f"{sum(r['seconds'] for r in rows):.0f}"]
                   for name, rows in sorted(per_file.items())])
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="leave out the slow scenarios")
    parser.add_argument("--out", type=Path, default=REPORT, help=f"report to write (default {REPORT})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        ledger, junit = Path(tmp) / "ledger.jsonl", Path(tmp) / "junit.xml"
        code, seconds = run_suites(ledger, junit, args.quick)
        text = render(read_ledger(ledger), read_junit(junit), quick=args.quick, seconds=seconds, exit_code=code)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return code


if __name__ == "__main__":
    sys.exit(main())
