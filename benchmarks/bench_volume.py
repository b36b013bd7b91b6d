"""Data-volume benchmark: how import, compile, eval, leaderboard, post-mortem and off-policy estimates grow with the
logs, for both loops, on logs the project's simulators write fresh at each size (new ids: no dedup hides work).

Sizes are multiples of the committed sample: Full Auto `155 x k` sessions (the sample's 155 give 1,273 decisions),
the kernel loop `24 x k` episodes (the sample's 24 give 879 lines). Every step is the CLI a user runs, in its own
process under `/usr/bin/time -v` (wall time and peak resident memory), `--lm fake`, one `GUIDEBENCH_HOME` per size:

- Full Auto: `data import`, `compile --program full_auto.learned --optimizer fit`, `export` of that run, `eval` of the
  export on test, `postmortem --recompute` of that eval, `leaderboard` of `logged` and `full_auto.rules` on test;
- planner: `data import`, `compile --program planner.learned --optimizer fit`, `eval` of `planner.rules` on test
  (its off-policy estimates from the outcome models the compile cached).

For each step: seconds, peak MB, seconds per 1,000 records, and the growth exponent b of `seconds ~ n^b` fitted by
least squares on log-log over the sizes (b = 1: linear). The load average is read before and after each size:
the machine is shared, and a step that loses a core mid-way takes longer.

Run: `.venv/bin/python -m benchmarks.bench_volume [--sizes 1,5,10] [--work DIR]`; writes reports/scale.json,
reports/scale.md (the tables) and reports/scale.png (the curves).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
FA_SESSIONS, EX_EPISODES = 155, 24  # the sample's sizes (datasets/sample/README.md)
SEED = 41


def _guidebench() -> list[str]:
    return [sys.executable, "-m", "guidebench.cli"]


def _timed(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a command under /usr/bin/time -v: wall seconds, peak MB, its stdout."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *args], env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:5])} failed ({done.returncode}): {done.stderr[-2000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return {"seconds": round(wall, 2), "peak_mb": round(int(peak.group(1)) / 1024, 1) if peak else None,
            "stdout": done.stdout}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _count_lines(folder: Path, pattern: str) -> int:
    return sum(sum(1 for _ in path.open(encoding="utf-8")) for path in folder.glob(pattern))


def run_size(k: int, work: Path) -> dict[str, Any]:
    """Every step at k times the sample."""
    home = work / f"home-{k}"
    env = {**os.environ, "GUIDEBENCH_HOME": str(home), "PYTHONPATH": str(REPO)}
    gb = _guidebench()
    fa_logs, ex_logs = work / f"fa-logs-{k}", work / f"ex-logs-{k}"
    fa_data, ex_data = work / f"fa-data-{k}", work / f"ex-data-{k}"
    subprocess.run([*gb, "data", "simulate", "fullauto", "--runs", str(FA_SESSIONS * k), "--seed", str(SEED + k),
                    "--out", str(fa_logs)], env=env, check=True, capture_output=True)
    subprocess.run([*gb, "data", "simulate", "experiments", "--episodes", str(EX_EPISODES * k), "--seed",
                    str(SEED + k), "--out", str(ex_logs)], env=env, check=True, capture_output=True)
    n_fa = _count_lines(fa_logs, "fullauto-decisions.jsonl")
    n_ex = _count_lines(ex_logs, "episode-*/log.jsonl")
    result: dict[str, Any] = {"k": k, "fullauto_decisions": n_fa, "experiment_lines": n_ex, "load_before": _load(),
                              "steps": {}}
    steps = result["steps"]
    steps["fullauto import"] = _timed([*gb, "data", "import", str(fa_logs), "--kind", "fullauto", "--out",
                                       str(fa_data), "--no-progress"], env)
    compiled = _timed([*gb, "compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", str(fa_data),
                       "--lm", "fake", "--out", str(work / f"fa-compile-{k}"), "--no-progress"], env)
    steps["full_auto.learned compile"] = compiled
    run_id = re.search(r"MLflow run ([0-9a-f]{32})", compiled["stdout"]).group(1)
    export = work / f"fa-export-{k}"
    steps["export"] = _timed([*gb, "export", run_id, "--name", "fa-learned", "--version", "1.0.0", "--out",
                              str(export)], env)
    evaluated = work / f"fa-eval-{k}"
    steps["eval test (export)"] = _timed([*gb, "eval", "--program", str(export), "--data", str(fa_data), "--split",
                                          "test", "--lm", "fake", "--out", str(evaluated), "--no-progress"], env)
    steps["post-mortem"] = _timed([*gb, "postmortem", str(evaluated), "--recompute"], env)
    steps["leaderboard"] = _timed([*gb, "leaderboard", "--data", str(fa_data), "--split", "test", "--programs",
                                   "logged,full_auto.rules", "--no-track", "--out", str(work / f"fa-board-{k}")], env)
    steps["experiments import"] = _timed([*gb, "data", "import", str(ex_logs), "--kind", "experiments", "--out",
                                          str(ex_data), "--no-progress"], env)
    steps["planner.learned compile"] = _timed([*gb, "compile", "--program", "planner.learned", "--optimizer", "fit",
                                               "--data", str(ex_data), "--lm", "fake", "--out",
                                               str(work / f"ex-compile-{k}"), "--no-progress"], env)
    steps["off-policy (eval planner.rules)"] = _timed([*gb, "eval", "--program", "planner.rules", "--data",
                                                       str(ex_data), "--split", "test", "--lm", "fake", "--out",
                                                       str(work / f"ex-eval-{k}"), "--no-progress"], env)
    for step in steps.values():
        step.pop("stdout", None)
    result["load_after"] = _load()
    return result


FULLAUTO_STEPS = ("fullauto import", "full_auto.learned compile", "export", "eval test (export)", "post-mortem",
                  "leaderboard")


def records_of(row: dict[str, Any], step: str) -> int:
    """The records a step reads: decisions for the Full Auto steps, experiment lines for the planner's."""
    return row["fullauto_decisions"] if step in FULLAUTO_STEPS else row["experiment_lines"]


def exponent(points: list[tuple[int, float]]) -> float | None:
    """b of seconds ~ n^b, least squares on log-log (None with fewer than two sizes)."""
    import numpy as np

    if len(points) < 2:
        return None
    n, s = (np.log(np.asarray(values, dtype=float)) for values in zip(*points))
    return round(float(np.polyfit(n, s, 1)[0]), 2)


def render(rows: list[dict[str, Any]], command: str) -> str:
    steps = list(rows[0]["steps"])
    lines = ["# Scale: cost against the volume of logs", "",
             f"Reproduce: `{command}` (2 shared cores; `--lm fake`; each step is the CLI in its own process).", "",
             "| size | Full Auto decisions | experiment lines | load average before | after |",
             "|---:|---:|---:|---|---|"]
    for row in rows:
        lines.append(f"| {row['k']}x | {row['fullauto_decisions']:,} | {row['experiment_lines']:,} | "
                     f"{row['load_before']} | {row['load_after']} |")
    lines += ["", "| step | " + " | ".join(f"{row['k']}x s (peak MB)" for row in rows)
              + " | s per 1,000 records (largest) | growth exponent b |",
              "|---|" + "---:|" * (len(rows) + 2)]
    for step in steps:
        cells = [f"{row['steps'][step]['seconds']} ({row['steps'][step]['peak_mb']})" for row in rows]
        last = rows[-1]
        per = 1000 * last["steps"][step]["seconds"] / records_of(last, step)
        b = exponent([(records_of(row, step), row["steps"][step]["seconds"]) for row in rows])
        lines.append(f"| {step} | " + " | ".join(cells) + f" | {per:.2f} | {b if b is not None else 'n/a'} |")
    lines += ["", "Read b with the load average beside it: at these sizes a step's fixed cost (a new interpreter, its imports, "
              "the MLflow store) is most of its time, and the other jobs on the two cores came and went between sizes, so "
              "b below 1 (even below 0) says the part that grows with the records is small next to them, not that cost "
              "falls. Seconds per 1,000 records at the largest size is the figure to multiply by a year of logs.", ""]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(12, 5))
    for step in rows[0]["steps"]:
        n = [records_of(row, step) for row in rows]
        time_axis.loglog(n, [row["steps"][step]["seconds"] for row in rows], marker="o", label=step)
        memory_axis.semilogx(n, [row["steps"][step]["peak_mb"] for row in rows], marker="o", label=step)
    time_axis.set(xlabel="records (decisions or experiment lines)", ylabel="wall seconds",
                  title="time against volume (log-log: slope 1 is linear)")
    memory_axis.set(xlabel="records", ylabel="peak resident MB", title="peak memory against volume")
    time_axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,5,10", help="multiples of the sample (default 1,5,10)")
    parser.add_argument("--work", help="folder for logs, datasets and homes (default: a new temporary folder)")
    parser.add_argument("--rows", help="write the report from the size lines an earlier run printed (a JSON object a "
                                       "line) instead of running: the sizes that finished before it was stopped")
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="guidebench-volume-"))
    rows = []
    if args.rows:
        lines = Path(args.rows).read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.startswith('{"k"')]
        args.sizes = ",".join(str(row["k"]) for row in rows)
    for k in () if args.rows else (int(v) for v in args.sizes.split(",")):
        rows.append(run_size(k, work))
        print(json.dumps(rows[-1]), flush=True)
    command = "python -m benchmarks.bench_volume --sizes " + args.sizes
    (REPORTS / "scale.json").write_text(json.dumps({"command": command, "sizes": rows}, indent=2) + "\n",
                                        encoding="utf-8")
    (REPORTS / "scale.md").write_text(render(rows, command), encoding="utf-8")
    plot(rows, REPORTS / "scale.png")
    print(f"wrote {REPORTS / 'scale.md'}, scale.json and scale.png (work folder {work})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
