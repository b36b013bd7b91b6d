"""Replay benchmark: workbench overhead per record, and warm-cache re-evaluation time.

1. Overhead: `full_auto.predict` answered by a zero-latency fake LM (a fixed, well-formed
   completion returned at once, DSPy cache off) over simulated decision records. The same calls
   are timed bare (program only) and through `evals.replay.replay` (inputs, usage ledger,
   guardrails, per-record scores, feedback, row building); the difference per record is the
   workbench's overhead. The bootstrap aggregation (1,000 resamples of every metric) is timed apart,
   since it is paid once per evaluation, not per record.
2. Warm cache: an LM that takes a fixed latency per call (a stand-in for a real model) with
   DSPy's cache on in a fresh folder. The first replay fills the cache; the second replays the
   unchanged program on the same records. Reported as a fraction of the first run, with the
   memory+disk cache (same process) and with the disk cache only (as a new process would see it).
   `--local` adds the same measurement with the embedded Gemma model on a few records.

Run: `python -m benchmarks.bench_replay [--records N] [--latency-ms L] [--local]`; results go to
the `<!-- bench:replay -->` section of reports/bench.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import threading
import time
from typing import Any, Optional

import dspy
from dspy.clients.engines.base import validate_request
from dspy.lm15 import Message, Request, Response, TextPart, Usage, response_to_events

import programs
from evals.replay import replay
from guidebench.simulators.fullauto import FullAutoSimulator
from evals.usage import instrument
from runtime import DecisionRecord, GuidanceDecision
from runtime.records import LoggedDecision

from benchmarks.report import REPORT, write_section

MARKER = "bench:replay"
ANSWER = ("[[ ## action ## ]]\ncontinue\n\n[[ ## next_input ## ]]\nRun the failing test again and fix it.\n\n"
          "[[ ## reason ## ]]\nTests still fail but the diff makes progress.\n\n[[ ## confidence ## ]]\n0.8\n\n"
          "[[ ## completed ## ]]\n")


class FixedAnswerEngine:
    """DSPy engine answering every request with the same completion after a fixed latency."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Response:
        """The fixed answer (after the latency)."""
        validate_request(request)
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            self.calls += 1
        return Response(id=f"fixed-{self.calls}", model=request.model, message=Message.assistant([TextPart(ANSWER)]),
                        finish_reason="stop", usage=Usage(input_tokens=300, output_tokens=30))

    def stream(self, request: Request) -> Any:
        """One final chunk."""
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release."""

    def dump_state(self) -> dict[str, Any]:
        """JSON state."""
        return {"latency_s": self.latency_s}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "FixedAnswerEngine":
        """Rebuild from `dump_state()`."""
        return cls(float((state or {}).get("latency_s", 0.0)))


def simulated_records(n: int, seed: int = 0) -> list[DecisionRecord]:
    """At least n decision records of simulated runs (configs of the runs, true labels)."""
    records: list[DecisionRecord] = []
    simulator = FullAutoSimulator(seed)
    index = 0
    while len(records) < n:
        run = simulator.play(index)
        index += 1
        config = run.run_file.guardrail_config()
        # a session's runs each count sequence ids from 1 (orphans use 0): a label is its run's and turn's
        labels = {(label.run_id, label.sequence_id, label.turn_id): label.label for label in run.labels}
        for line in run.decisions:
            records.append(DecisionRecord.build(
                line.summary, config, run_id=line.run_id, sequence_id=line.sequence_id, guardrail=line.guardrail,
                logged=LoggedDecision(action=line.action, confidence=line.confidence, model_action=line.model_action(),
                                      model_confidence=line.model_confidence()),
                label=labels.get((line.run_id, line.sequence_id, line.summary.turn_id))))
    return records[:n]


def _lm(latency_s: float, cache: bool) -> dspy.LM:
    return instrument(dspy.LM("bench/fixed", engine=FixedAnswerEngine(latency_s), cache=cache, num_retries=0))


class FixedDecisionProgram:
    """A program that answers at once without any LM: what replay costs around a program."""

    program_name = "fixed"

    def __call__(self, **inputs: Any) -> dspy.Prediction:
        decision = GuidanceDecision(action="continue", confidence=0.8, next_input="Run the failing test again.")
        return dspy.Prediction(decision=decision, action=decision.action, confidence=decision.confidence,
                               next_input=decision.next_input, reason="", parse_errors=[])


def measure_overhead(records: list[DecisionRecord], repeats: int) -> dict[str, float]:
    """Per-record milliseconds (best of `repeats`: the least disturbed by other load) and aggregation seconds."""
    program = programs.get("full_auto.zeroshot")
    inputs = [programs.decision_inputs(r) for r in records]
    bare, looped, aggregate, fixed = [], [], [], []
    with dspy.context(lm=_lm(0.0, cache=False)):
        program(**inputs[0])  # warm-up: imports, adapter set-up
        for _ in range(repeats):
            started = time.perf_counter()
            for item in inputs:
                program(**item)
            bare.append((time.perf_counter() - started) / len(records))
            started = time.perf_counter()
            result = replay(program, records, progress=False)
            total = time.perf_counter() - started
            looped.append(result.summary["wall_s"] / len(records))
            aggregate.append(total - result.summary["wall_s"])
            assert result.summary["n_parse_failures"] == 0, "the fixed answer must parse"
            fixed.append(replay(FixedDecisionProgram(), records, progress=False).summary["wall_s"] / len(records))
    return {"program_only_ms": 1000 * min(bare), "replay_ms": 1000 * min(looped),
            "difference_ms": 1000 * (min(looped) - min(bare)), "overhead_ms": 1000 * min(fixed),
            "aggregate_s": min(aggregate)}


def measure_warm_cache(records: list[DecisionRecord], lm_factory, program_name: str) -> dict[str, float]:
    """First replay (cache filled) against re-evaluations with memory+disk cache and disk cache only."""
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as folder:
        dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=folder)
        try:
            lm = lm_factory()
            with dspy.context(lm=lm):
                first = _timed(lambda: replay(programs.get(program_name), records, progress=False))
                warm = _timed(lambda: replay(programs.get(program_name), records, progress=False))
                dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=folder)
                disk = _timed(lambda: replay(programs.get(program_name), records, progress=False))
        finally:
            dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True)
    return {"first_s": first[0], "warm_s": warm[0], "disk_s": disk[0],
            "warm_fraction": warm[0] / first[0], "disk_fraction": disk[0] / first[0],
            "first_hits": first[1], "warm_hits": warm[1], "calls": first[2]}


def _timed(run) -> tuple[float, int, int]:
    started = time.perf_counter()
    result = run()
    usage = result.summary["usage"]
    return time.perf_counter() - started, int(usage["cache_hits"]), int(usage["lm_calls"])


def _local_lm():
    from guidebench.lm.factory import make_lm

    return make_lm("local", cache=True)


def render(n: int, repeats: int, overhead: dict, cache: dict, latency_ms: float, local: Optional[dict],
           local_n: int, load: tuple[float, float]) -> str:
    """The Markdown section."""
    lines = [
        "## Replay: workbench overhead and warm-cache re-evaluation",
        "",
        f"`python -m benchmarks.bench_replay --records {n}` on {platform.machine()}, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}. Simulated decision records "
        "(`guidebench.simulators.fullauto`, seed 0), one thread, best of "
        f"{repeats} repeats; load average {load[0]:.1f} at the start and {load[1]:.1f} at the end on "
        f"{os.cpu_count()} cores (other work shared the machine: absolute times are upper bounds).",
        "",
        "| per decision record | ms |",
        "|---|---:|",
        f"| **workbench overhead**: replay around a program that answers at once (inputs, usage ledger, "
        f"guardrails, per-record scores, feedback, row) | **{overhead['overhead_ms']:.2f}** |",
        f"| `full_auto.zeroshot` with a zero-latency fake LM, program alone (DSPy adapter + call) | "
        f"{overhead['program_only_ms']:.2f} |",
        f"| the same through `replay` | {overhead['replay_ms']:.2f} |",
        f"| difference (overhead measured around a real DSPy program) | {overhead['difference_ms']:.2f} |",
        "",
        f"Aggregation (bootstrap, 1,000 resamples of every metric, {n} records): "
        f"{overhead['aggregate_s']:.2f} s per evaluation, paid once.",
        "",
        f"| warm cache, `full_auto.zeroshot` on {n} records, LM latency {latency_ms:g} ms/call | seconds | "
        "fraction of first run |",
        "|---|---:|---:|",
        f"| first run (cache empty, {cache['calls']} LM calls) | {cache['first_s']:.2f} | 1.00 |",
        f"| re-run, memory + disk cache ({cache['warm_hits']} hits) | {cache['warm_s']:.2f} | "
        f"{cache['warm_fraction']:.3f} |",
        f"| re-run, disk cache only (as a new process) | {cache['disk_s']:.2f} | {cache['disk_fraction']:.3f} |",
        "",
        f"A re-evaluated record costs {1000 * cache['warm_s'] / max(1, cache['calls']):.1f} ms with a warm cache, "
        "most of it DSPy formatting the prompt that keys the cache (compare the program alone above); the "
        "fraction shrinks as the LM gets slower (the embedded model takes seconds per call).",
    ]
    if local:
        lines += [
            "",
            f"| embedded Gemma 3 270M, `full_auto.predict` on {local_n} records | seconds | fraction of first run |",
            "|---|---:|---:|",
            f"| first run ({local['calls']} LM calls, {local['first_hits']} cache hits) | {local['first_s']:.1f} | "
            "1.00 |",
            f"| re-run, memory + disk cache | {local['warm_s']:.2f} | {local['warm_fraction']:.4f} |",
            f"| re-run, disk cache only | {local['disk_s']:.2f} | {local['disk_fraction']:.4f} |",
        ]
    lines += ["", "Speed is measured here, never asserted in tests."]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """Run the benchmark and write its section of reports/bench.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--local", action="store_true", help="also measure the embedded model's warm cache")
    parser.add_argument("--local-records", type=int, default=8)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    records = simulated_records(args.records)
    overhead = measure_overhead(records, args.repeats)
    cache = measure_warm_cache(records, lambda: _lm(args.latency_ms / 1000.0, cache=True), "full_auto.zeroshot")
    local = measure_warm_cache(records[: args.local_records], _local_lm, "full_auto.predict") if args.local else None
    text = render(len(records), args.repeats, overhead, cache, args.latency_ms, local, args.local_records,
                  (load_start, os.getloadavg()[0]))
    print(text)
    if not args.no_write:
        write_section(text, REPORT, MARKER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
