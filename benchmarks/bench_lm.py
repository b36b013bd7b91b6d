"""Decisions at the speed of the hardware: per-decision tokens and seconds of every LM program.

For each program, a fresh process loads the embedded model, measures the model's raw rates at its
thread count (prompt tokens/s evaluating 512 new tokens, generated tokens/s), then decides the
first N records of the test split. Per decision it records the prompt tokens evaluated (new), the
prompt tokens reused from the cache, the completion tokens and the seconds, and the efficiency
ratio `seconds / (evaluated / prompt rate + completion / generation rate)`: 1.0 means the decision
took exactly what its tokens cost; above it, time went somewhere else.

Each program runs twice, in two processes: `cold` with an empty prefix-state cache, `warm` with the
states the cold process stored (what a second command on the same machine sees). Also measured:
`guidebench --help` (a CLI that starts at once imports no DSPy, MLflow, pandas or llama.cpp).

    .venv/bin/python -m benchmarks.bench_lm [--records 20] [--planner-records 5] [--programs a,b]

Writes `reports/bench_lm.json` and the `<!-- bench:lm -->` section of `reports/bench.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from benchmarks.report import REPORT, write_section

ROOT = Path(__file__).resolve().parent.parent
JSON_OUT = ROOT / "reports" / "bench_lm.json"
MARKER = "bench:lm"
SAMPLE = ROOT / "datasets" / "sample"
# name -> (dataset kind, how the program is built)
PROGRAMS: dict[str, tuple[str, str]] = {
    "full_auto.predict": ("fullauto", "registry"),
    "full_auto.compact": ("fullauto", "registry"),
    "full_auto.predict+labeled_fewshot": ("fullauto", "labeled_fewshot"),
    "full_auto.predict+knn_fewshot": ("fullauto", "knn_fewshot"),
    "full_auto.compact+knn_fewshot": ("fullauto", "knn_fewshot"),
    "planner.predict": ("experiments", "registry"),
    "planner.compact": ("experiments", "registry"),
}
RATE_PROMPT_TOKENS = 512
RATE_GEN_TOKENS = 64


# ----- inside one worker process -------------------------------------------------------------------

def raw_rates(llama: Any) -> dict[str, float]:
    """The model's prompt-eval and generation rates at its thread count (tokens/s)."""
    rng = random.Random(0)
    words = "plan step test diff file error continue pause review token budget loop turn agent".split()
    text = " ".join(rng.choice(words) for _ in range(2 * RATE_PROMPT_TOKENS))
    tokens = llama.tokenize(text.encode(), add_bos=True, special=False)[:RATE_PROMPT_TOKENS]
    llama.reset()
    started = time.perf_counter()
    llama.eval(tokens)
    prompt_s = time.perf_counter() - started
    # Generation: sample after the evaluated prompt; no stop, no EOS early exit is likely at temperature 1.
    started = time.perf_counter()
    out = llama.create_completion(llama.detokenize(tokens).decode("utf-8", "replace"), max_tokens=RATE_GEN_TOKENS,
                                  temperature=1.0, seed=0, stop=[])
    generated = int(out["usage"]["completion_tokens"])
    gen_s = time.perf_counter() - started
    llama.reset()
    return {"prompt_tokens_per_s": round(len(tokens) / prompt_s, 1),
            "generation_tokens_per_s": round(generated / gen_s, 1), "rate_prompt_tokens": len(tokens),
            "rate_generated_tokens": generated}


def build_program(name: str, data: Path, seed: int = 0) -> Any:
    """The program a benchmark row names: a registry program, or one compiled with a no-LM optimizer."""
    import optimizers
    import programs
    from evals import metrics_fullauto
    from evals.data import load_records

    base, _, optimizer = name.partition("+")
    program = programs.get(base)
    if not optimizer:
        return program
    train = [programs.decision_example(r) for r in load_records(data, "train") if r.label is not None]
    recipe = optimizers.get(optimizer)()
    return recipe.compile(program, train, train[:10], metrics_fullauto.metric, seed=seed).program


def run_worker(name: str, data: Path, records: int) -> dict[str, Any]:
    """Load the model, measure its raw rates, decide `records` test records; one JSON row."""
    import dspy
    import programs
    from evals.data import load_records
    from evals.usage import track_calls
    from guidebench.lm.factory import make_lm

    started = time.perf_counter()
    lm = make_lm("local", cache=False)
    model = lm.engine._model()
    load_s = time.perf_counter() - started
    with model.lock:
        rates = raw_rates(model.llama)
    kind = PROGRAMS[name][0]
    program = build_program(name, data)
    to_inputs = programs.decision_inputs if kind == "fullauto" else programs.planner_inputs
    rows = []
    with dspy.context(lm=lm):
        for record in load_records(data, "test")[:records]:
            inputs = to_inputs(record if kind == "fullauto" else record.packet)
            with track_calls() as ledger:
                t0 = time.perf_counter()
                prediction = program(**inputs)
                seconds = time.perf_counter() - t0
            totals = ledger.totals()
            rows.append({"seconds": round(seconds, 3), "lm_calls": totals["lm_calls"],
                         "evaluated": totals["prompt_tokens_evaluated"], "reused": totals["prompt_tokens_reused"],
                         "completion": totals["completion_tokens"],
                         "parsed": not getattr(prediction, "parse_errors", None)})
    return {"program": name, "threads": lm.engine.n_threads, "load_s": round(load_s, 2), **rates, "decisions": rows}


# ----- the parent: one process per program and cache state -----------------------------------------

def ideal_seconds(row: dict[str, Any], rates: dict[str, Any]) -> float:
    """What a decision's tokens cost at the model's raw rates."""
    return row["evaluated"] / rates["prompt_tokens_per_s"] + row["completion"] / rates["generation_tokens_per_s"]


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Medians over the decisions (first included) and the efficiency ratio."""
    rows = result["decisions"]
    ideal = sum(ideal_seconds(row, result) for row in rows)
    seconds = sum(row["seconds"] for row in rows)
    return {
        "n": len(rows), "median_s": round(statistics.median(r["seconds"] for r in rows), 2),
        "first_s": rows[0]["seconds"], "mean_s": round(seconds / len(rows), 2),
        "evaluated": round(statistics.mean(r["evaluated"] for r in rows)),
        "reused": round(statistics.mean(r["reused"] for r in rows)),
        "completion": round(statistics.mean(r["completion"] for r in rows)),
        "lm_calls": round(statistics.mean(r["lm_calls"] for r in rows), 2),
        "parsed": sum(r["parsed"] for r in rows),
        "floor_s": round(ideal / len(rows), 2),  # what its tokens cost at the raw rates, per decision
        "efficiency": round(seconds / ideal, 2) if ideal else None,
    }


def _worker(name: str, data: Path, records: int, cache_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "GUIDEBENCH_PREFIX_CACHE": str(cache_dir)}
    with tempfile.TemporaryDirectory(prefix="guidebench-bench-lm-") as tmp:
        out = Path(tmp) / "row.json"
        subprocess.run([sys.executable, "-m", "benchmarks.bench_lm", "--worker", name, "--data", str(data),
                        "--records", str(records), "--json", str(out)], check=True, cwd=ROOT, env=env)
        return json.loads(out.read_text())


CLI_REPEATS = 7


def cli_start_seconds(repeats: int = CLI_REPEATS) -> float:
    """Median wall time of `guidebench --help` in a new process (after one run that writes the bytecode cache)."""
    exe = Path(sys.executable).with_name("guidebench")
    # as a user runs it: bytecode is written once and read after (some shells set PYTHONDONTWRITEBYTECODE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([str(exe), "--help"], check=True, capture_output=True, env=env)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([str(exe), "--help"], check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 2)


def import_samples(folder: Path) -> dict[str, Path]:
    """The committed sample logs imported into `folder` (one dataset per kind)."""
    from guidebench.data.pipeline import import_logs

    data = {}
    for kind in ("fullauto", "experiments"):
        out = folder / kind
        import_logs(SAMPLE / kind, kind, out, progress=False)
        data[kind] = out
    return data


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The Markdown section."""
    lines = [
        "## Embedded LM: tokens and seconds per decision (`benchmarks/bench_lm.py`)",
        "",
        f"`{meta['command']}` on {meta['machine']}, {meta['date']}; load average {meta['load_start']} at the start "
        f"and {meta['load_end']} at the end. The first N records of each sample test split, each program in a new "
        "process: **cold** with an empty prefix-state cache, **warm** restoring the states the cold process "
        "stored. Seconds per decision include the first record. Raw rates are measured in the same process at "
        "the same thread count; the token-rate floor is what a decision's tokens cost at those rates (evaluated / "
        "prompt rate + completion / generation rate), and efficiency = seconds / floor.",
        "",
        "| program | cache | n | median s | mean s | floor s | first s | evaluated | reused | completion | LM calls "
        "| parsed | prompt tok/s | gen tok/s | threads | efficiency |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        s = result["summary"]
        lines.append(
            f"| `{result['program']}` | {result['cache']} | {s['n']} | {s['median_s']} | {s['mean_s']} | "
            f"{s['floor_s']} | {s['first_s']} | "
            f"{s['evaluated']} | {s['reused']} | {s['completion']} | {s['lm_calls']} | {s['parsed']}/{s['n']} | "
            f"{result['prompt_tokens_per_s']} | {result['generation_tokens_per_s']} | {result['threads']} | "
            f"{s['efficiency']} |")
    lines += ["", f"`guidebench --help`: {meta['cli_help_s']} s (median of {CLI_REPEATS} new processes, bytecode "
              "cached).", ""]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """Run the benchmark (or, with --worker, one program in this process)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--records", type=int, default=20, help="Full Auto decisions per program")
    parser.add_argument("--planner-records", type=int, default=5, help="planner directives per program")
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated rows to run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=JSON_OUT)
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    if args.worker:
        args.json.write_text(json.dumps(run_worker(args.worker, args.data, args.records)))
        return 0
    import programs

    names = [n for n in args.programs.split(",") if n]
    missing = [n for n in names if n not in PROGRAMS or n.split("+")[0] not in programs.names()]
    names = [n for n in names if n not in missing]
    meta = {"command": "python -m benchmarks.bench_lm " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d %H:%M"), "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "skipped": missing}
    results = []
    with tempfile.TemporaryDirectory(prefix="guidebench-bench-lm-") as tmp:
        data = import_samples(Path(tmp) / "data")
        for name in names:
            kind = PROGRAMS[name][0]
            records = args.records if kind == "fullauto" else args.planner_records
            cache_dir = Path(tmp) / "prefix-cache" / name
            for cache in ("cold", "warm"):
                result = _worker(name, data[kind], records, cache_dir)
                result.update(cache=cache, summary=summarize(result))
                results.append(result)
                print(f"{name} [{cache}]: {result['summary']}", flush=True)
    meta["cli_help_s"] = cli_start_seconds()
    meta["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    write_section(render(results, meta), args.report, MARKER)
    print(f"wrote {args.json} and the {MARKER} section of {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
