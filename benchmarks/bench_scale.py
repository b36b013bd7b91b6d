"""Scale-out benchmark on the real engines: search workers on PostgreSQL, evaluation against the LM
server, and the cost of tracking a run on SQLite versus an MLflow server.

1. Trials per minute: `guidebench worker --workers W` (W = 1, 2) on one study in a throwaway
   PostgreSQL cluster, with the fake LM (what the workbench, Optuna and the database cost per trial)
   and with the embedded model (what a real trial costs). Every trial compiles `full_auto.predict`
   (labeled or KNN demos: no LM call at compile time) and scores the whole dev split (one step: no
   pruning, so trials are alike). Trials per minute count finished trials over the time from the
   first trial's start to the last one's end, taken from the study itself; the worker start-up
   (interpreter, imports, model load) is reported apart.
2. Eval throughput: `evals.replay.replay` of `full_auto.predict` (seed demos) over simulated records,
   with the embedded model in-process and behind `guidebench lm serve` (llama-cpp-python's server,
   same threads), each with 1 and 2 replay threads. DSPy's cache is off; one warm-up call first.
3. Tracking overhead: one eval-sized run (the params `guidebench eval` records, ~50 metrics with
   intervals, two artifacts) through `guidebench.tracking.runs`, into a local SQLite store, into the
   PostgreSQL store directly, and through `mlflow server` (PostgreSQL backend, local artifact root).

Run: `.venv/bin/python -m benchmarks.bench_scale [--fake-trials 8] [--local-trials 4] [--records 8]
[--runs 20] [--skip search,eval,tracking]`; results go to the `<!-- bench:scale -->` section of
reports/bench.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.report import REPORT, write_section

REPO = Path(__file__).resolve().parents[1]
MARKER = "bench:scale"
SEED = 7


# --- data -------------------------------------------------------------------------------------------


def labeled_records(n: int, seed: int = SEED) -> list[Any]:
    """n simulated decision records that carry an outcome label."""
    from benchmarks.bench_replay import simulated_records

    records = [r for r in simulated_records(4 * n, seed) if r.label is not None]
    if len(records) < n:
        raise RuntimeError(f"the simulator gave {len(records)} labeled records, {n} wanted")
    return records[:n]


def make_dataset(folder: Path, train: int, dev: int, test: int) -> Path:
    """A Full Auto dataset folder of simulated, labeled records."""
    from evals.data import save_dataset

    records = labeled_records(train + dev + test)
    save_dataset(folder, "fullauto", {"train": records[:train], "dev": records[train:train + dev],
                                      "test": records[train + dev:]})
    return folder


# --- 1. search workers --------------------------------------------------------------------------------


def _worker_home(home: Path, name: str) -> Path:
    # A home of its own per worker process (as on separate machines): DSPy's disk cache would otherwise
    # answer one worker's prompts from another's, or from the previous configuration's run.
    folder = home / name
    folder.mkdir(parents=True, exist_ok=True)
    if (home / "models").is_dir() and not (folder / "models").exists():
        (folder / "models").symlink_to(home / "models")  # the assembled model file, not a cache
    return folder


def bench_search(cluster: Any, data: Path, home: Path, lm: str, workers: int, trials: int,
                 dev: int) -> dict[str, Any]:
    """One study run by W `guidebench worker` processes; trials per minute from the study's timestamps.

    Each worker has its own home and `--seed`: with one seed the TPE sampler's start-up draws coincide
    across workers, and a shared cache would turn the second worker's trials into cache reads.
    """
    import optuna

    from guidebench.search import services

    storage = services.create_database(cluster, f"optuna_{lm}_{workers}")
    started = time.perf_counter()
    processes = []
    for index in range(workers):
        worker_home = _worker_home(home, f"search-{lm}-{workers}-{index}")
        command = [sys.executable, "-m", "guidebench.cli", "worker", "--trials", str(trials), "--seed", str(index),
                   "--program-family", "full_auto", "--data", str(data), "--lm", lm, "--programs", "full_auto.predict",
                   "--optimizers", "labeled_fewshot,knn_fewshot", "--demos", "2:4", "--temperature", "0.2:0.2",
                   "--minibatch-size", str(dev), "--storage", storage, "--study", "bench",
                   "--tracking-uri", f"sqlite:///{worker_home / 'mlflow.db'}", "--no-progress"]
        processes.append(subprocess.Popen(command, cwd=REPO, env={**os.environ, "GUIDEBENCH_HOME": str(worker_home)},
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [process.communicate()[0] for process in processes]
    wall = time.perf_counter() - started
    for process, output in zip(processes, outputs):
        if process.returncode != 0:
            raise RuntimeError(f"a worker failed ({process.returncode}):\n{output[-3000:]}")
    study = optuna.load_study(study_name="bench", storage=storage)
    done = [t for t in study.trials if t.datetime_start and t.datetime_complete and t.state.is_finished()]
    first = min(t.datetime_start for t in done)
    last = max(t.datetime_complete for t in done)
    span = (last - first).total_seconds()
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in done]
    return {"lm": lm, "workers": workers, "trials": len(done), "span_s": span,
            "trials_per_min": 60.0 * len(done) / span if span > 0 else float("nan"),
            "trial_s": statistics.mean(durations), "wall_s": wall, "startup_s": wall - span}


# --- 2. eval throughput ----------------------------------------------------------------------------------


def _replay(lm: Any, records: list[Any], threads: int) -> dict[str, Any]:
    import dspy

    import programs
    from evals.replay import replay

    with dspy.context(lm=lm):
        programs.get("full_auto.predict")(**programs.decision_inputs(records[0]))  # warm-up: load, first prompt
        result = replay(programs.get("full_auto.predict"), records, threads=threads, progress=False)
    summary = result.summary
    calls = summary["usage"]["lm_calls"]
    return {"threads": threads, "records": summary["n_records"], "wall_s": summary["wall_s"],
            "decisions_per_min": 60.0 * summary["n_records"] / summary["wall_s"],
            "s_per_call": summary["wall_s"] / calls if calls else float("nan"), "lm_calls": calls,
            "parse_failures": summary["n_parse_failures"]}


def bench_eval(home: Path, n_records: int, llama_threads: int) -> list[dict[str, Any]]:
    """In-process engine versus the LM server, each with 1 and 2 replay threads."""
    import dspy

    from evals.usage import instrument
    from guidebench.lm import server as lm_server
    from guidebench.search import services
    from guidebench.lm.factory import make_lm

    records = labeled_records(n_records, seed=SEED + 1)
    rows = []
    os.environ["GUIDEBENCH_LLAMA_THREADS"] = str(llama_threads)
    local = make_lm("local", cache=False)
    for threads in (1, 2):
        rows.append({"engine": "in-process", **_replay(local, records, threads)})
    port = services.free_port()
    record, _ = lm_server.start(port, llama_threads, home=home)
    try:
        # What `make_lm("openai/<alias>", api_base=...)` builds for the served embedded model.
        served = instrument(dspy.LM(record.lm_spec, engine=lm_server.LlamaServerEngine(record.api_base),
                                    temperature=0.2, max_tokens=512, cache=False, num_retries=0))
        for threads in (1, 2):
            rows.append({"engine": "LM server", **_replay(served, records, threads)})
    finally:
        lm_server.stop(port, home=home)
    return rows


# --- 3. tracking overhead ---------------------------------------------------------------------------------


def _eval_sized_run(folder: Path) -> tuple[dict[str, str], dict[str, Any], dict[str, Path]]:
    from guidebench.tracking import runs as tracking

    params = tracking.run_params(program="full_auto.predict", dataset_id="bench" * 8, split="test",
                                 split_hash="0" * 64, lm="local", seed=0, kind="full_auto",
                                 program_source="registry", n_records=200, threads=1, n_resamples=1000)
    metrics = {f"metric_{i:02d}": {"value": 0.5 + i / 100, "ci_low": 0.4, "ci_high": 0.6} for i in range(50)}
    folder.mkdir(parents=True, exist_ok=True)
    files = {"metrics": folder / "metrics.json", "results": folder / "results.parquet"}
    files["metrics"].write_text(json.dumps(metrics, indent=2))
    files["results"].write_bytes(os.urandom(64 * 1024))  # a results table of ~200 rows
    return params, metrics, files


def bench_tracking(uri: str, label: str, runs: int, folder: Path) -> dict[str, Any]:
    """Seconds per tracked run (after one warm-up run that creates the experiment)."""
    import mlflow

    from guidebench.tracking import runs as tracking

    params, metrics, files = _eval_sized_run(folder)
    times = []
    for index in range(runs + 1):
        started = time.perf_counter()
        with tracking.tracked_run(dataset_id="bench-tracking", kind="full_auto", run_name=f"bench {index}",
                                  params=params, tracking_uri=uri):
            tracking.log_metrics(metrics)
            tracking.log_artifacts(files)
        times.append(time.perf_counter() - started)
    mlflow.set_tracking_uri(None)
    steady = times[1:]
    return {"store": label, "runs": runs, "first_s": times[0], "mean_s": statistics.mean(steady),
            "median_s": statistics.median(steady), "max_s": max(steady)}


# --- report --------------------------------------------------------------------------------------------


def _fmt(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def render(results: dict[str, Any], meta: dict[str, Any]) -> str:
    """The report section."""
    lines = ["## Scale-out: workers, LM server, tracking server (`benchmarks/bench_scale.py`)", "",
             f"Machine: {meta['cpus']} cores, Python {meta['python']}, {meta['platform']}; load average "
             f"{meta['load_before']} before, {meta['load_after']} after (other work on the machine shows up "
             f"here). {meta['date']}.", ""]
    search = results.get("search")
    if search:
        lines += ["### Search trials per minute (PostgreSQL storage, `guidebench worker`)", "",
                  "`full_auto.predict`, labeled/KNN demos (2-4), the dev split scored whole per trial (fake LM: "
                  f"{meta['dev']} records; embedded model: {meta['local_dev']}), an MLflow nested run per trial. "
                  "W workers = W `guidebench worker` processes started together on one study, each with its own "
                  "home (DSPy cache, SQLite tracking) and `--seed`, as on W machines. Trials/min = finished trials "
                  "over first trial start to last trial end; start-up = wall time outside that span "
                  "(interpreter, imports, model load).", "",
                  "| LM | workers | dev records | trials | trials/min | mean trial s | start-up s | wall s |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for row in search:
            dev = meta["dev"] if row["lm"] == "fake" else meta["local_dev"]
            lines.append(f"| {row['lm']} | {row['workers']} | {dev} | {row['trials']} | "
                         f"{_fmt(row['trials_per_min'])} | {_fmt(row['trial_s'])} | {_fmt(row['startup_s'], 1)} | "
                         f"{_fmt(row['wall_s'], 1)} |")
        lines.append("")
    evals = results.get("eval")
    if evals:
        lines += ["### Eval throughput: in-process model vs LM server", "",
                  f"`full_auto.predict` with its seed demos over {meta['records']} simulated records, embedded "
                  f"Gemma 3 270M with {meta['llama_threads']} llama.cpp thread(s) in both cases (the in-process "
                  "default on this machine); `--threads` = replay threads. The server is `python -m "
                  "llama_cpp.server` on 127.0.0.1, driven through `/v1/completions` with the in-process prompt and "
                  "grammar fallback: both engines give the same answers (same parse failures), so the columns "
                  "compare like with like. LM calls count DSPy calls; a grammar re-decode is part of its call.", "",
                  "| engine | replay threads | decisions/min | s per LM call | LM calls | parse failures |",
                  "|---|---:|---:|---:|---:|---:|"]
        for row in evals:
            lines.append(f"| {row['engine']} | {row['threads']} | {_fmt(row['decisions_per_min'], 1)} | "
                         f"{_fmt(row['s_per_call'])} | {row['lm_calls']} | {row['parse_failures']} |")
        lines.append("")
    tracking = results.get("tracking")
    if tracking:
        lines += ["### Tracking overhead per run", "",
                  "One eval-sized run through `guidebench.tracking.runs`: ~45 params, 50 metrics with their interval "
                  "bounds (150 values), two artifacts (2 KB JSON, 64 KB table). Mean of the runs after a warm-up "
                  "run that creates the experiment (its time is the first column).", "",
                  "| store | runs | first run s | mean s/run | median s/run | max s/run |",
                  "|---|---:|---:|---:|---:|---:|"]
        for row in tracking:
            lines.append(f"| {row['store']} | {row['runs']} | {_fmt(row['first_s'], 3)} | {_fmt(row['mean_s'], 3)} | "
                         f"{_fmt(row['median_s'], 3)} | {_fmt(row['max_s'], 3)} |")
        lines.append("")
    lines += ["Raw numbers: `reports/bench_scale.json`."]
    return "\n".join(lines)


def _timed(name: str, fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    print(f"[bench_scale] {name} ...", flush=True)
    value = fn()
    print(f"[bench_scale] {name}: {time.perf_counter() - started:.0f} s", flush=True)
    return value


def main() -> int:
    """Run the benchmark and write the report section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake-trials", type=int, default=24)
    parser.add_argument("--local-trials", type=int, default=4)
    parser.add_argument("--dev", type=int, default=64, help="dev records scored per fake-LM trial")
    parser.add_argument("--local-dev", type=int, default=4, help="dev records scored per embedded-model trial")
    parser.add_argument("--records", type=int, default=8, help="records per eval measurement")
    parser.add_argument("--runs", type=int, default=20, help="tracked runs per store")
    parser.add_argument("--llama-threads", type=int, default=None,
                        help="llama.cpp threads in-process and in the server (default: the in-process default)")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: search,eval,tracking")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    if args.llama_threads is None:
        from guidebench.lm.engine import _default_threads

        args.llama_threads = _default_threads()

    from guidebench.search import services

    work = Path(args.workdir or tempfile.mkdtemp(prefix="guidebench-bench-scale-")).absolute()
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["GUIDEBENCH_HOME"] = str(home)
    meta = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_before": " ".join(f"{x:.1f}" for x in os.getloadavg()), "dev": args.dev, "local_dev": args.local_dev, "records": args.records,
            "llama_threads": args.llama_threads, "date": time.strftime("%Y-%m-%d")}
    results: dict[str, Any] = {}
    cluster = services.start_postgres(work / "postgres")
    try:
        if "search" not in skip:
            from guidebench.lm.engine import ensure_model

            ensure_model(home)  # assembled once; each worker home links to it
            rows = []
            for lm, trials, dev in (("fake", args.fake_trials, args.dev), ("local", args.local_trials, args.local_dev)):
                data = make_dataset(work / f"data-{lm}", train=16, dev=dev, test=4)
                for workers in (1, 2):
                    rows.append(_timed(f"search {lm} x{workers}",
                                       lambda: bench_search(cluster, data, home, lm, workers, trials, dev)))
            results["search"] = rows
        if "eval" not in skip:
            results["eval"] = _timed("eval", lambda: bench_eval(home, args.records, args.llama_threads))
        if "tracking" not in skip:
            rows = [_timed("tracking sqlite", lambda: bench_tracking(f"sqlite:///{work / 'mlflow.db'}",
                                                                     "SQLite file (local)", args.runs, work / "a1")),
                    _timed("tracking postgresql", lambda: bench_tracking(
                        services.create_database(cluster, "mlflow_direct"), "PostgreSQL (direct)", args.runs,
                        work / "a2"))]
            server = _timed("mlflow server start", lambda: services.start_mlflow_server(
                services.create_database(cluster, "mlflow"), work / "artifacts"))
            try:
                rows.append(_timed("tracking server", lambda: bench_tracking(
                    server.url, "mlflow server (PostgreSQL backend)", args.runs, work / "a3")))
            finally:
                services.stop_mlflow_server(server)
            results["tracking"] = rows
    finally:
        services.stop_postgres(cluster)
    meta["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    (REPO / "reports").mkdir(exist_ok=True)
    raw = REPO / "reports" / "bench_scale.json"
    previous = json.loads(raw.read_text()) if raw.exists() else {}
    merged = {**previous.get("results", {}), **results}
    raw.write_text(json.dumps({"meta": meta, "results": merged}, indent=1, default=str))
    write_section(render(merged, meta), REPORT, MARKER)
    print(render(merged, meta))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
