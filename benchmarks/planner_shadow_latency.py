"""What a CPU-bound planner candidate costs the deployed planner's decision under `PlannerShadow`.

The deployed planner is an exported, exploring `planner.rules` module; the loop calls `PlannerShadow.decide(packet,
iteration)` (the deployed decision plus queueing its sidecar line) on packets of simulated episodes, then waits
`--gap-ms`. Modes:
- `none`: no candidate;
- `process`: a candidate that runs pure Python for `--spin-ms` per packet, then decides: in its own process, as
  `PlannerShadow` runs candidates now;
- `thread`: the same candidate on a worker thread of the deployed process, as `PlannerShadow` ran it before
  (reproduced here: one thread calling it on the packets handed to it).
Both candidate modes let at most `--pending` packets wait (the rest are not run), so a block ends quickly. Modes
alternate in `--rounds` rounds of `--turns` decisions (the first 20 of each not counted). Writes
reports/planner_shadow_latency.md.

    .venv/bin/python -m benchmarks.planner_shadow_latency [--turns 300 --rounds 3 --gap-ms 2 --spin-ms 50]
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

REPORT = Path(__file__).resolve().parents[1] / "reports" / "planner_shadow_latency.md"
WARMUP = 20
MODES = ("none", "process", "thread")


class Spinning:
    """The exported planner whose `decide` first runs pure Python for `spin_s` (a CPU-bound candidate); sent to the
    shadow's process by pickling (the module is loaded again there)."""

    def __init__(self, folder: Path, spin_s: float):
        from benchmarks.planner_explore import _load

        self.folder, self.spin_s = Path(folder), spin_s
        self.module = _load(self.folder)
        self.manifest, self.path = self.module.manifest, self.module.path

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "module"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from benchmarks.planner_explore import _load

        self.__dict__.update(state)
        self.module = _load(self.folder)

    def decide(self, packet: Any) -> Any:
        until = time.perf_counter() + self.spin_s
        while time.perf_counter() < until:
            pass
        return self.module.decide(packet)


def _packets(deployed: Any, n: int, work: Path) -> list[Any]:
    """`n` packets the deployed planner sees on simulated episodes."""
    from guidebench.release.planner_loop import run_planner_episode

    collected: list[Any] = []

    class Collect:
        def decide(self, packet: Any, iteration: int) -> Any:
            collected.append(packet)
            return deployed.decide(packet)

    index = 0
    while len(collected) < n:
        run_planner_episode(Collect(), 7, index, work / f"e{index}")
        index += 1
    return collected[:n]


def _block(mode: str, deployed: Any, candidate: Spinning, packets: list, log_dir: Path, gap_s: float,
           pending: int) -> list[float]:
    """One round of one mode: the deployed decision's seconds per packet."""
    from runtime.planner_shadow import PlannerShadow

    stop, jobs = object(), queue.Queue()

    def old_worker() -> None:  # the previous design: the candidate called on a thread of this process
        while (packet := jobs.get()) is not stop:
            candidate.decide(packet)

    worker = threading.Thread(target=old_worker, daemon=True) if mode == "thread" else None
    if worker is not None:
        worker.start()
    times = []
    with PlannerShadow(deployed, log_dir, candidate=candidate if mode == "process" else None,
                       max_pending=pending) as shadow:
        for i, packet in enumerate(packets):
            started = time.perf_counter()
            shadow.decide(packet, i)
            times.append(time.perf_counter() - started)
            if worker is not None and jobs.qsize() < pending:
                jobs.put(packet)
            time.sleep(gap_s)
    if worker is not None:
        while not jobs.empty():
            jobs.get_nowait()
        jobs.put(stop)
        worker.join()
    return times[WARMUP:]


def _ms(values: list[float], q: float) -> float:
    return 1e3 * statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap-ms", type=float, default=2.0)
    parser.add_argument("--spin-ms", type=float, default=50.0)
    parser.add_argument("--pending", type=int, default=8)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # frozen_support exports the module
    from benchmarks.planner_explore import _export, _load

    before, started = os.getloadavg(), time.perf_counter()
    results: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        folder = _export(Path(tmp))
        deployed = _load(folder)
        candidate = Spinning(folder, args.spin_ms / 1e3)
        packets = _packets(deployed, args.turns, Path(tmp) / "episodes")
        for r in range(args.rounds):
            for mode in MODES:
                results[mode].append(_block(mode, deployed, candidate, packets, Path(tmp) / f"{mode}-{r}",
                                            args.gap_ms / 1e3, args.pending))
                print(f"round {r + 1} {mode}: p95 {_ms(results[mode][-1], 95):.3f} ms", flush=True)
    text = _report(results, args, before, os.getloadavg(), time.perf_counter() - started)
    print(text)
    if not args.no_write:
        REPORT.write_text(text, encoding="utf-8")
    return 0


def _report(results: dict[str, list[list[float]]], args: Any, before: tuple, after: tuple, seconds: float) -> str:
    command = (f".venv/bin/python -m benchmarks.planner_shadow_latency --turns {args.turns} --rounds {args.rounds} "
               f"--gap-ms {args.gap_ms:g} --spin-ms {args.spin_ms:g} --pending {args.pending}")
    rows = []
    for mode, blocks in results.items():
        values = [v for block in blocks for v in block]
        rows.append(f"| {mode} | {len(values)} | {_ms(values, 50):.3f} | {_ms(values, 95):.3f} | "
                    f"{_ms(values, 99):.3f} | {1e3 * max(values):.3f} | "
                    + ", ".join(f"{_ms(b, 95):.3f}" for b in blocks) + " |")
    return "\n".join([
        "# What a CPU-bound planner candidate costs the deployed planner decision",
        "",
        f"Command: `{command}` ({seconds:.0f} s). Machine: {os.cpu_count()} cores "
        f"({len(os.sched_getaffinity(0))} usable), Python {platform.python_version()}, {platform.machine()}. "
        f"Load average (1, 5, 15 min) before: {before[0]:.2f}, {before[1]:.2f}, {before[2]:.2f}; "
        f"after: {after[0]:.2f}, {after[1]:.2f}, {after[2]:.2f} (the machine was shared: other work ran beside it).",
        "",
        "The deployed decision: `PlannerShadow.decide` with an exported, exploring `planner.rules` module (decision "
        f"plus queueing its sidecar line) on packets of simulated episodes, then a {args.gap_ms:g} ms wait. `none`: no "
        f"candidate; `process`: a candidate running pure Python for {args.spin_ms:g} ms per packet in its own process "
        "(how `PlannerShadow` runs it now, at nice 19); `thread`: the same candidate on a thread of the deployed "
        f"process (how it ran before). At most {args.pending} packets wait for the candidate. Times in ms over every "
        f"round ({args.rounds} rounds of {args.turns} decisions, the first {WARMUP} of each not counted, modes "
        "alternating); n is the number of decisions counted.",
        "",
        "| candidate | n | p50 | p95 | p99 | max | p95 per round |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Without a candidate the shadow's writer thread builds and appends each line right beside the next decision; "
        "with a candidate in its own process that thread mostly waits on the pipe, which is the likely reason `none` "
        "can show a higher p95 than `process` (not measured apart here). What the change is for: `thread` against "
        "`process`, the same candidate, on a thread of the deployed process or in its own.",
        "",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
