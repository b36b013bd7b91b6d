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
least squares on log-log over the sizes (b = 1: linear), the same for CPU seconds and peak memory, and the peak MB
per 1,000 more records between the smallest and the largest size. The load average is read before and after each
step: the machine is shared, and a step that loses a core mid-way takes longer.

Each step's CPU seconds (user + system) are reported beside its wall time: on a shared machine the wall time
depends on the other jobs, the CPU time much less.

Progress and resuming: every step prints a line when it starts (with the time the previous size's seconds per
record predict for it) and when it ends. Everything lives in the work folder (`--work`, kept): the logs of each size,
its datasets and outputs, and `state.json` with every finished step's figures. Run the same command again after an
interruption and finished sizes and steps are taken from it as they are (an interrupted step is run again; an
interrupted import resumes from its finished shards); `--redo` runs everything again.

A step whose processes together hold more than `--max-rss-mb` (default 3072: the issue's 3 GB) is stopped and
reported as such, and the steps that read its output are skipped: the shared machine never meets its OOM killer.

Run: `.venv/bin/python -m benchmarks.bench_volume [--sizes 1,10,100] [--work DIR] [--report-dir DIR]`; writes
scale.json, the `bench:volume` section of scale.md (the rest of the page is kept) and scale.png under
`--report-dir` (default reports/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from benchmarks.report import section, write_section

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
MARKER = "bench:volume"
FA_SESSIONS, EX_EPISODES = 155, 24  # the sample's sizes (datasets/sample/README.md)
SEED = 41
# The goal sizes, 250,000 decisions and 100,000 experiment lines: the simulators write about 8.47 decisions a
# session and 35.9 lines an episode (100x: 131,276 decisions from 15,500 sessions, 86,213 lines from 2,400 episodes).
GOAL = "goal"
GOAL_SESSIONS, GOAL_EPISODES, GOAL_SEED = 29_600, 2_800, 1041
_TIME_FIELDS = {"user": r"User time \(seconds\): ([\d.]+)", "system": r"System time \(seconds\): ([\d.]+)",
                "peak_kb": r"Maximum resident set size \(kbytes\): (\d+)"}


def _guidebench() -> list[str]:
    return [sys.executable, "-m", "guidebench.cli"]


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _processes() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, resident pages)} of every process, from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[int(entry)] = (int(fields[1]), int(fields[21]))
    return found


def _tree(root: int, processes: dict[int, tuple[int, int]]) -> set[int]:
    """A process and all its descendants (/usr/bin/time, the CLI, `datasets`' workers)."""
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, (ppid, _) in processes.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return tree


def _tree_rss_mb(root: int) -> float:
    """Resident MB of a process and all its descendants."""
    processes = _processes()
    pages = sum(processes[pid][1] for pid in _tree(root, processes) if pid in processes)
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _kill_tree(root: int) -> None:
    """SIGKILL a step's processes (the ones this benchmark started) and wait until they are gone."""
    import signal

    pids = _tree(root, _processes())
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids - {root}):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _timed(args: list[str], env: dict[str, str], budget_mb: Optional[float] = None) -> dict[str, Any]:
    """Run a command under /usr/bin/time -v: wall and CPU seconds, peak MB, the load average around it, its stdout.

    With `budget_mb`, the step's processes together are watched every half second and killed when they hold more
    (its figures then say `over_budget`): a step that would not fit must not push the shared machine into the OOM
    killer."""
    load_before = _load()
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(["/usr/bin/time", "-v", *args], env=env, stdout=out, stderr=err, text=True,
                                   cwd=REPO)
        watched = 0.0
        while process.poll() is None:
            time.sleep(0.5)
            if budget_mb is not None:
                watched = max(watched, _tree_rss_mb(process.pid))
                if watched > budget_mb:
                    _kill_tree(process.pid)
                    process.wait()
                    return {"over_budget": True, "seconds": round(time.perf_counter() - started, 2),
                            "peak_mb": round(watched, 1), "budget_mb": budget_mb, "load_before": load_before,
                            "load_after": _load(), "stdout": ""}
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:5])} failed ({process.returncode}): {stderr[-2000:]}")
    found = {key: re.search(pattern, stderr) for key, pattern in _TIME_FIELDS.items()}
    cpu = sum(float(found[key].group(1)) for key in ("user", "system") if found[key])
    peak = found["peak_kb"]
    return {"seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
            "peak_mb": round(int(peak.group(1)) / 1024, 1) if peak else None, "processes_peak_mb": round(watched, 1),
            "load_before": load_before, "load_after": _load(), "stdout": stdout}


def _count_lines(folder: Path, pattern: str) -> int:
    total = 0
    for path in folder.glob(pattern):
        with path.open("rb") as handle:
            total += sum(1 for _ in handle)
    return total


@dataclass(frozen=True)
class Step:
    """One timed CLI step: its name, the records it reads (`fullauto` or `experiments`), its output, its argv."""

    name: str
    loop: str
    out: str  # the folder it writes under the size's folder ("" for none)
    argv: Callable[["Size"], list[str]]
    needs: tuple[str, ...] = ()  # steps whose output it reads (besides the import of its loop)


@dataclass
class Size:
    """One size's folders and the figures of its finished steps (kept in `state.json`)."""

    k: int | str  # a multiple of the sample, or GOAL
    root: Path
    state: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.k}x" if isinstance(self.k, int) else str(self.k)

    @property
    def simulated(self) -> tuple[int, int, int]:
        """Full Auto sessions, episodes and the seed the size's logs are simulated with."""
        if self.k == GOAL:
            return GOAL_SESSIONS, GOAL_EPISODES, GOAL_SEED
        return FA_SESSIONS * int(self.k), EX_EPISODES * int(self.k), SEED + int(self.k)

    def path(self, name: str) -> Path:
        return self.root / name

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "GUIDEBENCH_HOME": str(self.path("home")), "PYTHONPATH": str(REPO)}

    def save(self) -> None:
        pending = self.path("state.json.tmp")
        pending.write_text(json.dumps(self.state, indent=2) + "\n", encoding="utf-8")
        os.replace(pending, self.path("state.json"))

    def run_id(self) -> str:
        return self.state["steps"]["full_auto.learned compile"]["run_id"]


def _gb(*args: Any) -> list[str]:
    return [*_guidebench(), *map(str, args)]


STEPS: tuple[Step, ...] = (
    Step("fullauto import", "fullauto", "fa-data", lambda s: _gb(
        "data", "import", s.path("fa-logs"), "--kind", "fullauto", "--out", s.path("fa-data"), "--no-progress")),
    Step("full_auto.learned compile", "fullauto", "fa-compile", lambda s: _gb(
        "compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", s.path("fa-data"), "--lm", "fake",
        "--out", s.path("fa-compile"), "--no-progress"), ("fullauto import",)),
    Step("export", "fullauto", "fa-export", lambda s: _gb(
        "export", s.run_id(), "--name", "fa-learned", "--version", "1.0.0", "--out", s.path("fa-export")),
        ("full_auto.learned compile",)),
    Step("eval test (export)", "fullauto", "fa-eval", lambda s: _gb(
        "eval", "--program", s.path("fa-export"), "--data", s.path("fa-data"), "--split", "test", "--lm", "fake",
        "--out", s.path("fa-eval"), "--no-progress"), ("export",)),
    Step("post-mortem", "fullauto", "", lambda s: _gb("postmortem", s.path("fa-eval"), "--recompute"),
         ("eval test (export)",)),
    Step("leaderboard", "fullauto", "fa-board", lambda s: _gb(
        "leaderboard", "--data", s.path("fa-data"), "--split", "test", "--programs", "logged,full_auto.rules",
        "--no-track", "--out", s.path("fa-board")), ("fullauto import",)),
    Step("experiments import", "experiments", "ex-data", lambda s: _gb(
        "data", "import", s.path("ex-logs"), "--kind", "experiments", "--out", s.path("ex-data"), "--no-progress")),
    Step("planner.learned compile", "experiments", "ex-compile", lambda s: _gb(
        "compile", "--program", "planner.learned", "--optimizer", "fit", "--data", s.path("ex-data"), "--lm", "fake",
        "--out", s.path("ex-compile"), "--no-progress"), ("experiments import",)),
    Step("off-policy (eval planner.rules)", "experiments", "ex-eval", lambda s: _gb(
        "eval", "--program", "planner.rules", "--data", s.path("ex-data"), "--split", "test", "--lm", "fake", "--out",
        s.path("ex-eval"), "--no-progress"), ("experiments import",)),
)
FULLAUTO_STEPS = tuple(step.name for step in STEPS if step.loop == "fullauto")


def records_of(row: dict[str, Any], step: str) -> int:
    """The records a step reads: decisions for the Full Auto steps, experiment lines for the planner's."""
    return row["fullauto_decisions"] if step in FULLAUTO_STEPS else row["experiment_lines"]


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _logs(size: Size) -> None:
    """Simulate the size's logs once (a `.done` file says they are complete)."""
    sessions, episodes, seed = size.simulated
    for loop, args in (("fa-logs", ["data", "simulate", "fullauto", "--runs", sessions]),
                       ("ex-logs", ["data", "simulate", "experiments", "--episodes", episodes])):
        folder, done = size.path(loop), size.path(f"{loop}.done")
        if done.is_file():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        _say(f"{size.label}: simulating {loop}")
        subprocess.run(_gb(*args, "--seed", seed, "--out", folder), env=size.env, check=True,
                       capture_output=True)
        done.write_text("complete\n", encoding="utf-8")
    if "fullauto_decisions" not in size.state:
        size.state["fullauto_decisions"] = _count_lines(size.path("fa-logs"), "**/fullauto-decisions.jsonl")
        size.state["experiment_lines"] = _count_lines(size.path("ex-logs"), "episode-*/log.jsonl")
        size.save()


def _expected(step: Step, size: Size, earlier: list[dict[str, Any]]) -> str:
    """What the last finished size's seconds per record predict for this step (linear growth)."""
    for row in reversed(earlier):
        figures = row["steps"].get(step.name)
        if _usable(figures):
            seconds = figures["seconds"] * records_of(size.state, step.name) / records_of(row, step.name)
            return f", about {seconds:.0f} s if it grows linearly from {_label(row)}"
    return ""


def _usable(figures: Optional[dict[str, Any]]) -> bool:
    return figures is not None and "cpu_seconds" in figures


def _label(row: dict[str, Any]) -> str:
    return f"{row['k']}x" if isinstance(row["k"], int) else str(row["k"])


def run_size(k: int | str, work: Path, earlier: list[dict[str, Any]], redo: bool = False,
             budget_mb: Optional[float] = None) -> dict[str, Any]:
    """Every step at k times the sample (or the goal sizes); steps finished by an earlier run of the same work folder
    are kept."""
    root = work / f"size-{k}"
    root.mkdir(parents=True, exist_ok=True)
    state_file = root / "state.json"
    state = json.loads(state_file.read_text(encoding="utf-8")) if state_file.is_file() and not redo else {}
    size = Size(k, root, {"k": k, "steps": {}, **state})
    _logs(size)
    for number, step in enumerate(STEPS, start=1):
        if step.name in size.state["steps"]:
            continue
        missing = [need for need in step.needs if not _usable(size.state["steps"].get(need))]
        if missing:
            size.state["steps"][step.name] = {"skipped": f"needs {missing[0]}"}
            size.save()
            _say(f"{size.label}: {step.name} skipped: {missing[0]} did not finish within the memory budget")
            continue
        if step.out:
            shutil.rmtree(size.path(step.out), ignore_errors=True)  # what an interrupted run of this step wrote
        records = records_of(size.state, step.name)
        expected = _expected(step, size, earlier)
        _say(f"{size.label}: step {number}/{len(STEPS)} {step.name} on {records:,} records{expected}")
        figures = _timed(step.argv(size), size.env, budget_mb)
        stdout = figures.pop("stdout")
        if figures.get("over_budget"):
            size.state["steps"][step.name] = figures
            size.save()
            _say(f"{size.label}: {step.name} stopped after {figures['seconds']:.0f} s: its processes held "
                 f"{figures['peak_mb']:.0f} MB, over the {budget_mb:.0f} MB budget")
            continue
        if step.name == "full_auto.learned compile":
            figures["run_id"] = re.search(r"MLflow run ([0-9a-f]{32})", stdout).group(1)
        size.state["steps"][step.name] = figures
        size.save()
        _say(f"{size.label}: {step.name} took {figures['seconds']:.1f} s (CPU {figures['cpu_seconds']:.1f} s), peak "
             f"{figures['peak_mb']} MB, load {figures['load_after'][0]}")
    return size.state


def exponent(points: list[tuple[int, float]]) -> Optional[float]:
    """b of y ~ n^b, least squares on log-log (None with fewer than two sizes)."""
    import numpy as np

    if len(points) < 2:
        return None
    n, s = (np.log(np.asarray(values, dtype=float)) for values in zip(*points))
    return round(float(np.polyfit(n, s, 1)[0]), 2)


def _loads(row: dict[str, Any]) -> str:
    values = [value for step in row["steps"].values() if "load_before" in step
              for value in (step["load_before"][0], step["load_after"][0])]
    return f"{min(values)}-{max(values)}" if values else "n/a"


def _cell(figures: Optional[dict[str, Any]]) -> str:
    if figures is None:
        return "not run"
    if figures.get("over_budget"):
        return (f"stopped at {figures['peak_mb']:.0f} MB after {figures['seconds']:.0f} s "
                f"(budget {figures['budget_mb']:.0f})")
    if "skipped" in figures:
        return f"skipped ({figures['skipped']})"
    return f"{figures['seconds']} / {figures['cpu_seconds']} ({figures['peak_mb']})"


def _memory_slope(first: dict[str, Any], last: dict[str, Any], step: str) -> str:
    """Peak MB per 1,000 more records between the smallest and the largest size (the fixed part left out)."""
    more = records_of(last, step) - records_of(first, step)
    if more <= 0:
        return "n/a"
    return f"{1000 * (last['steps'][step]['peak_mb'] - first['steps'][step]['peak_mb']) / more:.2f}"


def render(rows: list[dict[str, Any]], command: str) -> str:
    steps = [step.name for step in STEPS]
    lines = ["# Scale: cost against the volume of logs", "",
             f"Reproduce: `{command}` (2 shared cores; `--lm fake`; each step is the CLI in its own process).", "",
             "| size | Full Auto decisions | experiment lines | load average (1 min) during the steps |",
             "|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {_label(row)} | {row['fullauto_decisions']:,} | {row['experiment_lines']:,} | {_loads(row)} |")
    lines += ["", "Wall seconds, CPU seconds (user + system) and peak resident MB of each step:", "",
              "| step | " + " | ".join(f"{_label(row)} wall s / CPU s (peak MB)" for row in rows)
              + " | wall s per 1,000 records (largest) | CPU s per 1,000 | MB per 1,000 more | b (wall) | b (CPU) | "
                "b (peak MB) |",
              "|---|" + "---:|" * (len(rows) + 6)]
    for step in steps:
        cells = [_cell(row["steps"].get(step)) for row in rows]
        usable = [row for row in rows if _usable(row["steps"].get(step))]
        if usable:
            last = usable[-1]
            n = records_of(last, step) / 1000
            figures = [f"{last['steps'][step][key] / n:.2f}" for key in ("seconds", "cpu_seconds")]
            figures.append(_memory_slope(usable[0], last, step))
        else:
            figures = ["n/a"] * 3
        growth = [exponent([(records_of(row, step), row["steps"][step][key]) for row in usable])
                  for key in ("seconds", "cpu_seconds", "peak_mb")]
        lines.append(f"| {step} | " + " | ".join(cells) + " | " + " | ".join(figures) + " | "
                     + " | ".join("n/a" if b is None else str(b) for b in growth) + " |")
    lines += ["", "b is the exponent of `y ~ n^b` fitted on log-log over the sizes (1: linear). Read it with the load "
              "average beside it: at small sizes a step's fixed cost (a new interpreter, its imports, the MLflow "
              "store) is most of its time, so b below 1 says the part that grows with the records is small next to "
              "it, not that cost falls; CPU seconds move less with the other jobs than wall seconds. Seconds per "
              "1,000 records at the largest size is the figure to multiply by a year of logs."]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(12, 5))
    for step in (step.name for step in STEPS):
        usable = [row for row in rows if _usable(row["steps"].get(step))]
        n = [records_of(row, step) for row in usable]
        time_axis.loglog(n, [row["steps"][step]["seconds"] for row in usable], marker="o", label=step)
        memory_axis.semilogx(n, [row["steps"][step]["peak_mb"] for row in usable], marker="o", label=step)
    time_axis.set(xlabel="records (decisions or experiment lines)", ylabel="wall seconds",
                  title="time against volume (log-log: slope 1 is linear)")
    memory_axis.set(xlabel="records", ylabel="peak resident MB", title="peak memory against volume")
    time_axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_reports(rows: list[dict[str, Any]], command: str, folder: Path) -> None:
    """scale.json, the generated section of scale.md (the rest of the page kept), scale.png."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scale.json").write_text(json.dumps({"command": command, "sizes": rows}, indent=2) + "\n",
                                       encoding="utf-8")
    page = folder / "scale.md"
    if page.is_file():
        write_section(render(rows, command), page, MARKER)
    else:
        page.write_text(section(render(rows, command), MARKER) + "\n", encoding="utf-8")
    plot(rows, folder / "scale.png")


def _sizes(text: str) -> list[int | str]:
    """Multiples in increasing order, the goal sizes last."""
    values = [value.strip() for value in text.split(",") if value.strip()]
    return sorted(int(value) for value in values if value != GOAL) + [GOAL] * (GOAL in values)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="multiples of the sample, and `goal` for the issue's "
                        "goal sizes (250,000 decisions, 100,000 lines) (default 1,10,100)")
    parser.add_argument("--work", help="folder for logs, datasets, homes and state.json; run again with the same "
                                       "folder to resume (default: a new temporary folder)")
    parser.add_argument("--redo", action="store_true", help="run every step again, also the finished ones")
    parser.add_argument("--max-rss-mb", type=float, default=3072,
                        help="stop a step whose processes hold more resident memory (default 3072, the issue's 3 GB; "
                             "0: no limit); the steps that need its output are skipped")
    parser.add_argument("--report-dir", default=str(REPORTS), help="where scale.md/json/png go (default reports/)")
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="guidebench-volume-"))
    _say(f"work folder {work} (run again with --work {work} to resume)")
    rows: list[dict[str, Any]] = []
    for k in _sizes(args.sizes):
        rows.append(run_size(k, work, rows, redo=args.redo, budget_mb=args.max_rss_mb or None))
        print(json.dumps(rows[-1]), flush=True)
    command = "python -m benchmarks.bench_volume --sizes " + args.sizes
    write_reports(rows, command, Path(args.report_dir))
    _say(f"wrote {Path(args.report_dir) / 'scale.md'}, scale.json and scale.png (work folder {work})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
