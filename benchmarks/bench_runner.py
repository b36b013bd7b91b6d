"""One planning call of the loop runner answered by an installed planner, process start included.

A kernel repository (a git checkout in the runner's layout) gets `guidebench runner install` of an exported,
exploring `planner.rules` (with `--candidate`: a second export shadowing it); each call is the runner's own
`codex exec ... --output-schema SCHEMA --output-last-message OUT -` (argv, stdin, cwd, env as
tests/runner_support.py restates them from the runner), timed from the spawn of the installed codex to its exit
(what the runner waits for). The first call starts the planner service (timed apart: `cold`); the rest are
answered by it. Calls of the two settings alternate. Writes reports/runner.md (and prints it).

    .venv/bin/python -m benchmarks.bench_runner [--calls 40]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "runner.md"
sys.path.insert(0, str(ROOT / "tests"))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def _loadavg() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run(calls: int) -> str:
    from frozen_support import export_program
    from runner_support import kernel_repo, planning_call, runner_env, wait_for_lines, write_plan_artifacts
    from runtime.exploration import ExplorationSettings

    from guidebench.runner import install, uninstall

    before = _loadavg()
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.environ["GUIDEBENCH_HOME"] = str(tmp / "home")
        explore = ExplorationSettings(policy="epsilon", epsilon=0.2, floor=0.05, seed=0)
        deployed = export_program("planner.rules", tmp / "deployed", name="deployed", exploration=explore).path
        candidate = export_program("planner.rules", tmp / "candidate", name="candidate").path
        settings = {"no candidate": None, "with candidate": candidate}
        repos = {}
        for label, cand in settings.items():
            repo = kernel_repo(tmp / label.replace(" ", "-"))
            layout = install(repo, deployed, candidate=cand).layout
            repos[label] = (repo, runner_env(repo, layout.bin))
        times: dict[str, list[float]] = {label: [] for label in settings}
        cold: dict[str, float] = {}
        try:
            for index in range(calls + 1):
                for label, (repo, env) in repos.items():
                    _, schema, out, prompt = write_plan_artifacts(repo, index + 1)
                    t0 = time.perf_counter()
                    proc = planning_call(repo, env, schema, out, prompt)
                    seconds = time.perf_counter() - t0
                    if proc.returncode != 0:
                        raise SystemExit(f"{label}: call {index + 1} failed: {proc.stderr.strip()}")
                    if index == 0:
                        cold[label] = seconds
                    else:
                        times[label].append(seconds)
            for label, (repo, _) in repos.items():
                lines = wait_for_lines(repo / "experiments" / "planner-decisions.jsonl", calls + 1)
                if len(lines) != calls + 1:
                    raise SystemExit(f"{label}: {len(lines)} sidecar lines for {calls + 1} calls")
        finally:
            for repo, _ in repos.values():
                uninstall(repo)
        for label, values in times.items():
            ms = [1000 * v for v in values]
            rows.append(f"| {label} | {len(ms)} | {1000 * cold[label]:.0f} | {statistics.median(ms):.0f} | "
                        f"{_quantile(ms, 0.95):.0f} | {max(ms):.0f} |")
    took = time.perf_counter() - started
    return "\n".join([
        "# One planning call of the loop runner, answered by an installed planner",
        "",
        f"Command: `.venv/bin/python -m benchmarks.bench_runner --calls {calls}` ({took:.0f} s). Machine: "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}. Load average (1, 5, 15 "
        f"min) before: {before}; after: {_loadavg()} (the machine was shared: other work ran beside it).",
        "",
        "Each call is the runner's `codex exec -C ROOT -s read-only -c approval_policy=\"never\" --color never "
        "--output-schema SCHEMA --output-last-message OUT -` with its prompt on stdin, timed from the spawn of the "
        "installed codex to its exit: the codex's start (the standard library), the call to the planner service, "
        "the packet read and checked, the decision of an exported, exploring `planner.rules` (epsilon 0.2, floor "
        "0.05), the directive checked against the schema and written. The sidecar line (and the candidate's choice, "
        "in its own process) is written after the answer. `cold`: the first call, which starts the service "
        "(DSPy and the module load); n: the calls after it, the two settings alternating. Times in ms.",
        "",
        "| setting | n | cold | p50 | p95 | max |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"Every call's sidecar line was written ({calls + 1} per setting).",
    ]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="calls per setting after the first (default 40)")
    args = parser.parse_args()
    text = run(args.calls)
    REPORT.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
