"""The round trip on a scratch clone of the real loop runner's repository, unattended.

Clones SOURCE (the runner's repository: its real `tools/loop_runner.py`, kernel and submission tests) into a
temporary folder with a bare copy as its origin, installs an exported, exploring `planner.rules` (and a second
export as the candidate), then runs `--codex` iterations of `codex-plan` + `record` and `--manual` iterations of
`manual-pack` + `guidebench runner plan` + commit + `manual-apply` + `record`, and imports the clone with
`guidebench data import`. Prints, and with `--report` appends to reports/runner.md, what the runner accepted and
what the import joined.

    .venv/bin/python -m benchmarks.runner_roundtrip [--source /work/.mirror/meppum+original_performance_takehome/repo]
        [--codex 12 --manual 2] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
MIRROR = "/work/.mirror/meppum+original_performance_takehome/repo"


def _run(cmd: list[str], cwd: Path, env: dict) -> tuple[int, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True, check=False, timeout=900)
    return proc.returncode, time.perf_counter() - t0, (proc.stderr or proc.stdout).strip().splitlines()[-1:]


def roundtrip(source: str, codex: int, manual: int) -> list[str]:
    from frozen_support import export_program
    from runner_support import git, runner_env
    from runtime.exploration import ExplorationSettings

    from guidebench.data import import_logs
    from guidebench.runner import install, plan_packet, uninstall

    out: list[str] = []
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.environ["GUIDEBENCH_HOME"] = str(tmp / "home")
        subprocess.run(["git", "clone", "-q", "--bare", source, str(tmp / "origin.git")], check=True)
        subprocess.run(["git", "clone", "-q", str(tmp / "origin.git"), str(tmp / "kernel")], check=True)
        work = tmp / "kernel"
        git(work, "config", "user.email", "roundtrip@example.invalid")
        git(work, "config", "user.name", "roundtrip")
        explore = ExplorationSettings(policy="epsilon", epsilon=0.2, floor=0.05, seed=0)
        deployed = export_program("planner.rules", tmp / "deployed", name="deployed", exploration=explore).path
        candidate = export_program("planner.rules", tmp / "candidate", name="candidate").path
        layout = install(work, deployed, candidate=candidate).layout
        env = runner_env(work, layout.bin, PYTHONDONTWRITEBYTECODE="1")
        runner = [sys.executable, "tools/loop_runner.py"]
        steps: list[tuple[str, int, float, list[str]]] = []
        try:
            for i in range(codex):
                steps.append(("codex-plan", *_run(runner + ["codex-plan", "--goal", "best", "--slug", "rt",
                                                            "--no-pull", "--code-context", "none"], work, env)))
                steps.append(("record", *_run(runner + ["record"], work, env)))
            for i in range(manual):
                steps.append(("manual-pack", *_run(runner + ["manual-pack", "--goal", "best", "--slug", "hand",
                                                             "--no-pull", "--code-context", "none"], work, env)))
                t0 = time.perf_counter()
                plan_packet(work / "planner_packets" / "packet.json", deployed,
                            work / "planner_packets" / "directive.json")
                steps.append(("runner plan", 0, time.perf_counter() - t0, []))
                git(work, "add", "planner_packets/directive.json")
                git(work, "commit", "-q", "-m", "planner directive")
                steps.append(("manual-apply", *_run(runner + ["manual-apply", "--no-pull"], work, env)))
                steps.append(("record", *_run(runner + ["record"], work, env)))
        finally:
            uninstall(work)
        report = import_logs(work, "experiments", tmp / "data", progress=False).model_dump()
        sidecar = (work / "experiments" / "planner-decisions.jsonl").read_text().splitlines()
        log = (work / "experiments" / "log.jsonl").read_text().splitlines()
        accepted = {name: sum(1 for s in steps if s[0] == name and s[1] == 0) for name, *_ in steps}
        total = {name: sum(1 for s in steps if s[0] == name) for name, *_ in steps}
        seconds = {name: sum(s[2] for s in steps if s[0] == name) / max(1, total[name]) for name in total}
        failures = [f"{s[0]}: {s[3]}" for s in steps if s[1] != 0]
        candidates = sum(1 for line in sidecar if json.loads(line).get("candidate", {}).get("status") == "ok")
        out += [f"Command: `.venv/bin/python -m benchmarks.runner_roundtrip --source {source} --codex {codex} "
                f"--manual {manual}` ({time.perf_counter() - started:.0f} s). Load average before: {load_before}; "
                f"after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}.", "",
                "| step | ran | exit 0 | mean s |", "|---|---|---|---|",
                *[f"| {name} | {total[name]} | {accepted[name]} | {seconds[name]:.1f} |" for name in total], "",
                f"Log lines: {len(log)}; sidecar lines: {len(sidecar)} ({candidates} with the candidate's choice); "
                f"import: {report['imported']} records, archive_joined {report['archive_joined']}, planner_joined "
                f"{report['planner_joined']}, quarantined {report['quarantined']}, side_quarantined "
                f"{report['side_quarantined']}.",
                *([f"Steps that did not exit 0 (record exits 1 for an attempt that is not valid): "
                   f"{'; '.join(failures)}"] if failures else [])]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=MIRROR, help="the loop runner's repository to clone")
    parser.add_argument("--codex", type=int, default=12, help="codex-plan + record iterations (default 12)")
    parser.add_argument("--manual", type=int, default=2, help="manual iterations (default 2)")
    parser.add_argument("--report", action="store_true", help="append the result to reports/runner.md")
    args = parser.parse_args()
    lines = roundtrip(args.source, args.codex, args.manual)
    text = "\n".join(["", "## The round trip on a scratch clone of the real loop runner", "", *lines]) + "\n"
    print(text)
    if args.report:
        with (ROOT / "reports" / "runner.md").open("a", encoding="utf-8") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
