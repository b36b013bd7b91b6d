"""What a shadow candidate costs the deployed loop: the deployed decision's time with no shadow, with a quick shadow,
with a CPU-bound one, and with one that spins until it is killed, each beside the same deployed module.

The deployed program is an exported `full_auto.learned` module fit on the committed sample (`--deployed rules`:
`full_auto.rules`), called as production calls it (`module(summary,
config)`: guardrails and the decision record included), and the loop appends the record to its log; after each
decision the loop hands the logged line to
`ShadowRunner.submit` and waits `--gap-ms` (a real loop runs an agent turn there). Modes:
- `none`: no shadow;
- `quick`: the same rules module shadowing (its own process);
- `cpu`: a candidate that runs pure Python for `--spin-ms` per turn, then decides (its own process);
- `hang`: a candidate that spins until it is killed at its 0.2 s deadline, then replaced (its own process);
- `thread`: the `cpu` candidate on a thread of the deployed process, which is how `ShadowRunner` ran candidates
  before (reproduced here: one worker thread calling it), for comparison.
Modes alternate in `--rounds` rounds (each a fresh runner and `--turns` decisions, the first 20 not counted), so a
change of the machine's load falls on every mode alike. Times are the deployed decision alone and the whole turn
(decision + submit). Writes reports/shadow_latency.md.

    .venv/bin/python -m benchmarks.shadow_latency [--turns 400 --rounds 4 --gap-ms 2 --spin-ms 50]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

REPORT = Path(__file__).resolve().parents[1] / "reports" / "shadow_latency.md"
WARMUP = 20
MODES = ("none", "quick", "cpu", "hang", "thread")


def _learned(work: Path) -> Path:
    """`full_auto.learned` fit on the committed sample's train and dev splits (one grid point), exported."""
    import json

    import programs
    from evals import metrics_fullauto
    from evals.data import load_records
    from guidebench.cli import main as cli
    from guidebench.release.export import export_frozen, source_from_registry
    from optimizers.fitting import FitSettings, fit_model

    data = work / "sample-data"
    root = Path(__file__).resolve().parents[1]
    if cli(["data", "import", str(root / "datasets" / "sample" / "fullauto"), "--kind", "fullauto", "--out", str(data),
            "--no-progress"]) != 0:
        raise SystemExit("the committed sample did not import")
    examples = {split: [programs.decision_example(r) for r in load_records(data, split) if r.label is not None]
                for split in ("train", "dev")}
    program = programs.get("full_auto.learned")
    program.trained_model.set_model(fit_model(examples["train"], examples["dev"], metrics_fullauto.metric,
                                              FitSettings(C=(2.0,), class_weight=("none",), folds=0)).model)
    state = work / "learned.json"
    state.write_text(json.dumps(program.dump_state()), encoding="utf-8")
    return export_frozen(source_from_registry("full_auto.learned", state), name="learned", version="1.0.0",
                         out=work / "learned").path


def _rules(folder: Path) -> Any:
    import programs
    from runtime import load_frozen

    return load_frozen(folder, program=programs.spec("full_auto.rules").factory, inputs=programs.decision_inputs)


class Spinner:
    """The rules module behind a candidate that runs pure Python for `spin_s` per call (None: until killed)."""

    def __init__(self, folder: Path, spin_s: Optional[float]):
        self.folder, self.spin_s = folder, spin_s
        self.module = _rules(folder)
        self.manifest, self.path = self.module.manifest, self.module.path

    def __getstate__(self) -> dict[str, Any]:
        return {"folder": self.folder, "spin_s": self.spin_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"], state["spin_s"])

    def decide(self, summary: Any, config: Any) -> Any:
        until = time.perf_counter() + (self.spin_s if self.spin_s is not None else 1e9)
        total = 0
        while time.perf_counter() < until:
            total += sum(range(200))
        return self.module.decide(summary, config)


class _ThreadShadow:
    """The former design, reduced to its cost: the candidate called on a thread of the deployed process."""

    def __init__(self, candidate: Any):
        self.candidate, self.jobs = candidate, queue.Queue()
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            if self.jobs.qsize() < 256:
                self.candidate.decide(*job)

    def submit(self, line: Any, config: Any) -> None:
        self.jobs.put((line.summary.as_turn_summary(), config))

    def close(self) -> None:
        while not self.jobs.empty():
            try:
                self.jobs.get_nowait()
            except queue.Empty:
                break
        self.jobs.put(None)
        self.thread.join()


def _sessions(n: int) -> list[tuple[Any, Any, Any]]:
    """(decision line, its summary, the run's config) of simulated sessions, n of them."""
    from guidebench.simulators.fullauto import FullAutoSimulator

    simulator, found, index = FullAutoSimulator(5), [], 0
    while len(found) < n:
        run = simulator.play(index)
        config = run.run_file.guardrail_config()
        found += [(line, line.summary.as_turn_summary(), config) for line in run.decisions]
        index += 1
    return found[:n]


def _rss_kb(pid: Optional[int]) -> Optional[int]:
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _shadow(mode: str, folder: Path, log_dir: Path, spin_s: float) -> Any:
    import programs
    from runtime.shadow import ShadowRunner

    if mode == "none":
        return None
    if mode == "thread":
        return _ThreadShadow(Spinner(folder, spin_s))
    if mode == "quick":
        return ShadowRunner(folder, log_dir, deadline_s=5.0, program=programs.spec("full_auto.rules").factory,
                            inputs=programs.decision_inputs)
    candidate = Spinner(folder, spin_s if mode == "cpu" else None)
    return ShadowRunner(candidate, log_dir, deadline_s=5.0 if mode == "cpu" else 0.2)


def _block(mode: str, module: Any, turns: list, folder: Path, log_dir: Path, spin_s: float,
           gap_s: float) -> dict[str, Any]:
    shadow = _shadow(mode, folder, log_dir, spin_s)
    decisions, whole, rss = [], [], None
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / "fullauto-decisions.jsonl", "a", encoding="utf-8")
    try:
        for index, (line, summary, config) in enumerate(turns):
            started = time.perf_counter()
            record = module(summary, config).record
            log.write(record.model_dump_json() + "\n")  # the loop logs its decision line (the GIL is let go here)
            log.flush()
            decided = time.perf_counter()
            if shadow is not None:
                shadow.submit(line, config)
            done = time.perf_counter()
            if index >= WARMUP:
                decisions.append(decided - started)
                whole.append(done - started)
            if index == len(turns) // 2:
                rss = _rss_kb(getattr(shadow, "pid", None))
            time.sleep(gap_s)
    finally:
        log.close()
        counts = {}
        if shadow is not None:
            if mode == "thread":
                shadow.close()
            else:
                shadow.close(10)  # what is still queued then is written as not run
                counts = dict(shadow.counts)
    return {"decisions": decisions, "whole": whole, "rss_kb": rss, "counts": counts, "why": _timeouts(log_dir)}


def _timeouts(log_dir: Path) -> dict[str, int]:
    """The timeout lines of a block's sidecar by reason: hung (killed), behind (not run), closed (not run)."""
    import json

    found: dict[str, int] = {}
    path = log_dir / "shadow-decisions.jsonl"
    for text in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        line = json.loads(text)
        if line["status"] == "timeout":
            why = line["error"]
            key = "behind" if "already waiting" in why else "closed" if "closed" in why else "no answer"
            found[key] = found.get(key, 0) + 1
    return found


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gap-ms", type=float, default=2.0)
    parser.add_argument("--spin-ms", type=float, default=50.0)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--deployed", choices=("learned", "rules"), default="learned",
                        help="the deployed module: full_auto.learned fit on the committed sample, or full_auto.rules")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    from guidebench.release.export import export_frozen, source_from_registry

    modes = [m for m in args.modes.split(",") if m]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="shadow-bench-") as tmp:
        folder = export_frozen(source_from_registry("full_auto.rules"), name="rules", version="1.0.0",
                               out=Path(tmp) / "rules").path
        from guidebench.release.export import load_exported

        deployed = _learned(Path(tmp)) if args.deployed == "learned" else folder
        module, turns = load_exported(deployed), _sessions(args.turns)
        results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
        started = time.perf_counter()
        for round_ in range(args.rounds):
            order = modes[round_ % len(modes):] + modes[:round_ % len(modes)]
            for mode in order:
                log_dir = Path(tmp) / f"{mode}-{round_}"
                results[mode].append(_block(mode, module, turns, folder, log_dir, args.spin_ms / 1000,
                                            args.gap_ms / 1000))
                print(f"round {round_ + 1} {mode}: p95 {_ms(results[mode][-1]['decisions'], 0.95):.3f} ms",
                      flush=True)
        seconds = time.perf_counter() - started
    load_after = os.getloadavg()
    text = _report(results, args, load_before, load_after, seconds)
    print(text)
    if not args.no_write:
        REPORT.write_text(text, encoding="utf-8")
    return 0


def _row(mode: str, blocks: list[dict[str, Any]], base: list[float]) -> str:
    decisions = [v for block in blocks for v in block["decisions"]]
    whole = [v for block in blocks for v in block["whole"]]
    per_round = ", ".join(f"{_ms(block['decisions'], 0.95):.2f}" for block in blocks)
    rss = [block["rss_kb"] for block in blocks if block["rss_kb"]]
    counts: dict[str, int] = {}
    for block in blocks:
        for key, value in block["counts"].items():
            counts[key] = counts.get(key, 0) + value
    why: dict[str, int] = {}
    for block in blocks:
        for key, value in block.get("why", {}).items():
            why[key] = why.get(key, 0) + value
    shown = ", ".join(f"{k} {counts[k]}" for k in ("ok", "timeout", "restarts") if counts.get(k)) or "-"
    if why:
        shown += " (timeouts: " + ", ".join(f"{k} {v}" for k, v in sorted(why.items())) + ")"
    delta = f"{_ms(decisions, 0.95) - _ms(base, 0.95):+.2f}" if base and mode != "none" else ""
    memory = f"{statistics.median(rss) / 1024:.0f} MB" if rss else "-"
    return (f"| {mode} | {len(decisions)} | {_ms(decisions, 0.5):.2f} | {_ms(decisions, 0.95):.2f} | {delta} | "
            f"{_ms(decisions, 0.99):.2f} | {1000 * max(decisions):.2f} | {_ms(whole, 0.95):.2f} | {per_round} | "
            f"{memory} | {shown} |")


def _paired(results: dict[str, list[dict[str, Any]]], mode: str) -> str:
    """The mode's p95 minus no shadow's, round by round (each round ran both, close in time), and their median."""
    if "none" not in results or mode not in results:
        return ""
    diffs = [_ms(a["decisions"], 0.95) - _ms(b["decisions"], 0.95) for a, b in zip(results[mode], results["none"])]
    return (f"- `{mode}` - `none`, p95 by round: {', '.join(f'{d:+.2f}' for d in diffs)} ms; median "
            f"{statistics.median(diffs):+.2f} ms.")


def _report(results: dict[str, list[dict[str, Any]]], args: Any, before: tuple, after: tuple,
            seconds: float) -> str:
    import platform

    base = [v for block in results.get("none", []) for v in block["decisions"]]
    rows = [_row(mode, blocks, base) for mode, blocks in results.items()]
    command = (f".venv/bin/python -m benchmarks.shadow_latency --turns {args.turns} --rounds {args.rounds} "
               f"--gap-ms {args.gap_ms:g} --spin-ms {args.spin_ms:g} --deployed {args.deployed}")
    fitted = " (fit on the committed sample)" if args.deployed == "learned" else ""
    return "\n".join([
        "# What a shadow candidate costs the deployed decision",
        "",
        f"Command: `{command}` ({seconds:.0f} s). Machine: {os.cpu_count()} cores "
        f"({len(os.sched_getaffinity(0))} usable), Python {platform.python_version()}, {platform.machine()}. "
        f"Load average (1, 5, 15 min) before: {before[0]:.2f}, {before[1]:.2f}, {before[2]:.2f}; "
        f"after: {after[0]:.2f}, {after[1]:.2f}, {after[2]:.2f} (the machine was shared: other work ran beside it).",
        "",
        f"The deployed decision: an exported `full_auto.{args.deployed}` module{fitted} called as production calls it "
        "(decision, guardrails, decision record), and the record appended to the loop's log; after each decision "
        f"the loop submits its logged line to the shadow, then waits {args.gap_ms:g} ms. `quick`: `full_auto.rules` "
        f"shadowing; `cpu`: a candidate running pure Python for {args.spin_ms:g} ms per turn; `hang`: one that spins "
        "until it is killed at its 0.2 s deadline and replaced; `thread`: the `cpu` candidate on a thread of the "
        "deployed process, as `ShadowRunner` ran it before. Times in ms over every round "
        f"({args.rounds} rounds of {args.turns} turns, the first {WARMUP} of each not counted, modes alternating).",
        "",
        "| shadow | n | p50 | p95 | p95 - none | p99 | max | turn p95 (decision + submit) | p95 per round | "
        "shadow process RSS | shadow lines |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *[line for line in (_paired(results, mode) for mode in results if mode != "none") if line],
        "",
        "Timeouts: `no answer` (the call passed its deadline; a hung process is killed and replaced), `behind` (not "
        "run: 256 decisions already waiting) and `closed` (not run: still queued when the block closed its runner "
        "after 10 s). This loop decides every few ms, far faster than a real one (an agent turn between decisions), "
        "and the shadow's process runs at the lowest priority, so on a busy machine a shadow falls behind it.",
        "",
    ])


if __name__ == "__main__":
    sys.exit(main())
