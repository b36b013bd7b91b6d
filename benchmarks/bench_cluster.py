"""Cluster benchmark: the data path in one process against a Dask distributed cluster of 1 and 2 workers, on the
same logs (`benchmarks.bench_volume`'s simulated sizes), with the outputs checked equal; and the compile's peak
memory at a few sizes.

For each engine (`one process`; `dask, N worker(s)`: `dask scheduler` plus N `dask worker` processes on
127.0.0.1, one thread each, started as its users start them) the CLI steps a user runs, each in its own process
under `/usr/bin/time -v` (`benchmarks.bench_volume._timed`): `data import` of both loops, `eval` of
`planner.rules` on the kernel loop's test split (replay, off-policy bootstrap), `eval` of `full_auto.rules` on
Full Auto's test split and `postmortem --recompute` of it (the resamples). The wall time is the figure to read: the
workers' CPU is in their own processes, not in the command's. Each cluster step's outputs are compared with one
process's (dataset ids, split files, report, quarantines; metrics and rows but the timings).

Then `compile --program full_auto.learned --optimizer fit` at each `--compile-sizes` size: its peak resident memory
and what its reservoir kept (`compile.json`'s `fit_sample`).

Run: `.venv/bin/python -m benchmarks.bench_cluster [--size 10] [--compile-sizes 1,10] [--work DIR]`; writes the
`bench:cluster` section of reports/scale.md (the rest of the page kept) and reports/scale-cluster.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from benchmarks.bench_volume import GOAL, REPO, REPORTS, Size, _gb, _load, _logs, _say, _sizes, _timed
from benchmarks.report import section, write_section

MARKER = "bench:cluster"
STEPS = ("fullauto import", "experiments import", "eval planner.rules", "eval full_auto.rules", "post-mortem")


def _dask() -> list[str]:
    script = Path(sys.executable).with_name("dask")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "dask"]


@contextmanager
def cluster(folder: Path, workers: int, env: dict[str, str]) -> Iterator[str]:
    """`dask scheduler` and `workers` `dask worker` processes on 127.0.0.1; its address; all stopped at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "scheduler.json"
    file.unlink(missing_ok=True)
    processes = []
    try:
        processes.append(subprocess.Popen(_dask() + ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                                     "--no-dashboard", "--scheduler-file", str(file)],
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
        while not file.is_file() or not file.read_text(encoding="utf-8").strip():
            time.sleep(0.2)
        address = json.loads(file.read_text(encoding="utf-8"))["address"]
        for number in range(workers):
            processes.append(subprocess.Popen(
                _dask() + ["worker", address, "--nthreads", "1", "--no-dashboard", "--memory-limit", "0",
                           "--local-directory", str(folder / f"worker{number}")],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        import distributed

        with distributed.Client(address, timeout=120, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _argv(step: str, size: Size, tag: str) -> list[str]:
    out = size.path(f"{tag}")
    return {
        "fullauto import": _gb("data", "import", size.path("fa-logs"), "--kind", "fullauto", "--out",
                               out / "fa-data", "--no-progress"),
        "experiments import": _gb("data", "import", size.path("ex-logs"), "--kind", "experiments", "--out",
                                  out / "ex-data", "--no-progress"),
        "eval planner.rules": _gb("eval", "--program", "planner.rules", "--data", out / "ex-data", "--split", "test",
                                  "--no-track", "--no-progress", "--out", out / "ex-eval"),
        "eval full_auto.rules": _gb("eval", "--program", "full_auto.rules", "--data", out / "fa-data", "--split",
                                    "test", "--no-track", "--no-progress", "--out", out / "fa-eval"),
        "post-mortem": _gb("postmortem", out / "fa-eval", "--recompute", "--json", "--no-progress"),
    }[step]


def _digest(*parts: Any) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in ("latency_s", "latency_s_per_decision", "wall_s",
                                                                     "started_at", "data", "out", "created_at",
                                                                     "from_cache")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def outputs_of(step: str, folder: Path, stdout: str) -> str:
    """A digest of what the step wrote that must not depend on the engine (timings and paths left out)."""
    if step.endswith("import"):
        data = folder / ("fa-data" if step.startswith("fullauto") else "ex-data")
        report = _clean(json.loads((data / "import_report.json").read_text(encoding="utf-8")))
        info = _clean(json.loads((data / "dataset.json").read_text(encoding="utf-8")))
        arrows = [path.read_bytes() for split in ("train", "dev", "test") for path in sorted((data / split).glob("*.arrow"))]
        quarantine = (data / "quarantine.jsonl").read_bytes()
        return _digest(report, info, quarantine, *arrows)
    if step.startswith("eval"):
        import pandas as pd

        out = folder / ("ex-eval" if "planner" in step else "fa-eval")
        rows = pd.read_parquet(out / "results.parquet")
        rows = rows.drop(columns=[name for name in rows.columns if "latency" in name])
        return _digest(_clean(json.loads((out / "metrics.json").read_text(encoding="utf-8"))),
                       _clean(json.loads((out / "summary.json").read_text(encoding="utf-8"))),
                       rows.to_json(orient="records").encode())
    postmortem = json.loads(stdout)
    postmortem.pop("cost", None)  # its outliers are latencies, which no two runs share
    return _digest(_clean(postmortem))


def run_engines(size: Size, workers: list[int]) -> dict[str, Any]:
    """Every step in one process, then on a cluster of each size in `workers`."""
    results: dict[str, Any] = {}
    for engine in [0, *workers]:
        name = "one process" if engine == 0 else f"dask, {engine} worker(s)"
        tag = f"engine-{engine}"
        shutil.rmtree(size.path(tag), ignore_errors=True)
        env = size.env
        figures: dict[str, Any] = {}
        with (cluster(size.path(f"cluster-{engine}"), engine, env) if engine else _nothing()) as address:
            for step in STEPS:
                argv = _argv(step, size, tag) + (["--cluster", address] if address else [])
                _say(f"{size.label}: {name}: {step}")
                timed = _timed(argv, env)
                timed["outputs"] = outputs_of(step, size.path(tag), timed.pop("stdout"))
                figures[step] = timed
                _say(f"{size.label}: {name}: {step} {timed['seconds']:.1f} s (load {timed['load_after'][0]})")
        results[name] = figures
    return results


@contextmanager
def _nothing() -> Iterator[Optional[str]]:
    yield None


def compile_peaks(sizes: list[int | str], work: Path) -> list[dict[str, Any]]:
    """`compile --program full_auto.learned --optimizer fit` at each size: peak MB and the reservoir's summary."""
    rows = []
    for k in sizes:
        size = Size(k, work / f"size-{k}", {"k": k, "steps": {}})
        size.root.mkdir(parents=True, exist_ok=True)
        _logs(size)
        data = size.path("engine-0") / "fa-data"
        if not (data / "dataset.json").is_file():
            shutil.rmtree(data, ignore_errors=True)
            _timed(_gb("data", "import", size.path("fa-logs"), "--kind", "fullauto", "--out", data, "--no-progress"),
                   size.env)
        out = size.path("fa-compile")
        shutil.rmtree(out, ignore_errors=True)
        _say(f"{size.label}: compile")
        timed = _timed(_gb("compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", data, "--lm",
                           "fake", "--out", out, "--no-progress"), size.env, 3072)
        timed.pop("stdout", None)
        if (out / "compile.json").is_file():
            summary = json.loads((out / "compile.json").read_text(encoding="utf-8"))
            timed["fit_sample"] = summary["compile"].get("fit_sample")
            timed["test_objective"] = summary["test"].get("objective")
        rows.append({"k": k, "decisions": size.state["fullauto_decisions"], **timed})
        _say(f"{size.label}: compile {timed['seconds']:.1f} s, peak {timed.get('peak_mb')} MB")
    return rows


def render(size: Size, engines: dict[str, Any], compiles: list[dict[str, Any]], command: str) -> str:
    lines = [f"Command: `{command}` (load average 1/5/15 min when it ended: {' / '.join(map(str, _load()))}; "
             f"2 cores shared with other jobs).", "",
             f"### One process against a Dask cluster, {size.label} the sample ({size.state['fullauto_decisions']:,} "
             f"decisions, {size.state['experiment_lines']:,} lines)", "",
             "| step | " + " | ".join(engines) + " | same outputs |", "|---|" + "---|" * (len(engines) + 1)]
    for step in STEPS:
        cells = [f"{figures[step]['seconds']:.1f} s (load {figures[step]['load_before'][0]})"
                 for figures in engines.values()]
        same = len({figures[step]["outputs"] for figures in engines.values()}) == 1
        lines.append(f"| {step} | " + " | ".join(cells) + f" | {'yes' if same else 'NO'} |")
    lines += ["", "Seconds are wall time of the command (the cluster's workers run in their own processes); "
              "`load` is the 1-minute load average when the step started. Outputs are compared but for timings "
              "(latencies, the post-mortem's latency outliers) and whether the outcome models came from the "
              "home's cache (the first engine fits them).", ""]
    if compiles:
        lines += ["### The compile's peak (full_auto.learned, fit)", "",
                  "| size | decisions | seconds | peak MB | fit sample (kept of seen) |", "|---|---|---|---|---|"]
        for row in compiles:
            sample = row.get("fit_sample") or {}
            peak = "over 3072" if row.get("over_budget") else row.get("peak_mb")
            lines.append(f"| {row['k']}x | {row['decisions']:,} | {row['seconds']:.1f} | {peak} | "
                         f"{sample.get('kept', '-')} of {sample.get('seen', '-')} |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="10", help="multiple of the sample (or `goal`) for the engines (default 10)")
    parser.add_argument("--workers", default="1,2", help="cluster sizes to run (default 1,2)")
    parser.add_argument("--compile-sizes", default="1,10", help="sizes of the compile's peak (default 1,10; '' none)")
    parser.add_argument("--work", help="folder for logs and outputs (default: a new temporary folder)")
    parser.add_argument("--report-dir", default=str(REPORTS))
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="guidebench-cluster-"))
    k = args.size if args.size == GOAL else int(args.size)
    size = Size(k, work / f"size-{k}", {"k": k, "steps": {}})
    size.root.mkdir(parents=True, exist_ok=True)
    _logs(size)
    engines = run_engines(size, [int(n) for n in args.workers.split(",") if n.strip()])
    compiles = compile_peaks(_sizes(args.compile_sizes), work) if args.compile_sizes.strip() else []
    command = (f"python -m benchmarks.bench_cluster --size {args.size} --workers {args.workers} "
               f"--compile-sizes {args.compile_sizes}")
    folder = Path(args.report_dir)
    (folder / "scale-cluster.json").write_text(json.dumps({"command": command, "engines": engines,
                                                           "compiles": compiles}, indent=2) + "\n", encoding="utf-8")
    page = folder / "scale.md"
    write_section(render(size, engines, compiles, command), page, MARKER) if page.is_file() else \
        page.write_text(section(render(size, engines, compiles, command), MARKER) + "\n", encoding="utf-8")
    _say(f"wrote {page} ({MARKER}) and scale-cluster.json; work folder {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
