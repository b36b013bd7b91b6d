"""Calibration and speed of `guidebench monitor` on simulated logs (reports/monitor.md).

No-change A/A: each Full Auto repetition writes a workspace of sessions drawn at random, without replacement, from a
pool of simulated sessions (the simulator's noisy deployed policy, one seed per session: simulating costs more than
monitoring, so each session is simulated once), and each planner repetition a fresh planner log (episodes of
`simulate_episode` with an honest logged-propensity sidecar), runs the monitor over it (the first --reference
records make the baselines, the rest are watched at every record), and counts a false alarm when any metric alarms.
The stated rate is alpha (0.05) per monitor, all metrics together.

Planted changes: the monitor reads a log up to the change point (one pass), then the changed part (a second pass);
the delay is the alarm's start minus the metric's records before the change, in that metric's records (the changed
part is three times as long as the unchanged one, so a slow alarm still has records to fire on):
- guardrails tightened: the later sessions run with min_confidence 0.8 (and no_progress_limit 2);
- label mix shifted: the later sessions come from a world with more blockers, approvals and failures;
- planner persona swapped: a diligent planner (compliance 0.9) writes the log, then one that ignores the pivot
  protocol (compliance 0.05, sticky) takes over;
- a sidecar that lies: it states 0.8 for its greedy family but the loop always tries that family.

Run: `python benchmarks/bench_monitor.py --out reports/monitor.json` (`--reps 200` by default; `--quick` for a small
version). Keep the logs small: each repetition is simulated in-process and read from a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runtime.advisor import FAMILIES  # noqa: E402
from runtime.fullauto import GuardrailConfig  # noqa: E402

from guidebench.data.fullauto_writer import write_workspace  # noqa: E402
from guidebench.monitor.run import run_pass  # noqa: E402
from guidebench.simulators.experiments import PlannerPersona, sample_persona, simulate_episode  # noqa: E402
from guidebench.simulators.fullauto import FullAutoSimulator, SimRun  # noqa: E402
from guidebench.simulators.fullauto_world import SimConfig  # noqa: E402

TIGHT = GuardrailConfig(min_confidence=0.8, max_turns=200, no_progress_limit=2)
SHIFTED = SimConfig(p_fail=0.08, p_interrupt=0.08, p_approval=0.25, p_tool_input=0.15, p_blocker=0.2)
DILIGENT = PlannerPersona(compliance=0.9, insight=0.7, stickiness=0.2, risk_weights=(0.5, 1.0, 0.7))
CARELESS = PlannerPersona(compliance=0.05, insight=0.0, stickiness=0.95, risk_weights=(0.2, 1.0, 1.0))


def tightened_runs(seed: int, n: int, start: int = 0):
    """Sessions played under the tightened guardrail config."""
    simulator = FullAutoSimulator(seed)
    for index in range(start, start + n):
        episode = simulator.episode(index)
        episode.guardrails = TIGHT
        episode.run_file = episode.run_file.model_copy(update={"min_confidence": TIGHT.min_confidence,
                                                               "no_progress_limit": TIGHT.no_progress_limit,
                                                               "max_turns": TIGHT.max_turns, "max_tokens": None})
        while not episode.done:
            episode.step(episode.deployed_decision())
        yield SimRun(episode.run_file, episode.decision_lines, episode.raw_lines, episode.events, episode.labels)


def write_fast(folder: Path, runs) -> None:
    """The workspace files the statistics read (decisions, raw answers, labels, run files), in the real writer's
    line shapes, without the per-run events files (the monitor only counts those): the A/A repetitions write
    thousands of workspaces, and one events file per run is most of `write_workspace`'s time."""
    from guidebench.simulators import fullauto_logs as logs

    (folder / "runs").mkdir(parents=True, exist_ok=True)
    with open(folder / "fullauto-decisions.jsonl", "w") as decisions, \
            open(folder / "fullauto-decisions-raw.jsonl", "w") as raw, open(folder / "labels.jsonl", "w") as labels:
        for run in runs:
            decisions.writelines(logs.line_text(logs.decision_line(line)) for line in run.decisions)
            raw.writelines(logs.line_text(logs.raw_line(line)) for line in run.raw)
            labels.writelines(json.dumps(item.as_dict(), separators=(",", ":")) + "\n" for item in run.labels)
            for run_file in run.run_files():
                (folder / "runs" / f"{run_file.run_id}.json").write_text(logs.run_file_text(run_file))


def append_workspace(target: Path, source: Path) -> None:
    """Append a workspace's logs to another's (what the runtime appending more sessions looks like)."""
    for name in ("fullauto-decisions.jsonl", "fullauto-decisions-raw.jsonl", "labels.jsonl"):
        with open(target / name, "ab") as out:
            out.write((source / name).read_bytes())
    for file in (source / "runs").iterdir():
        destination = target / "runs" / file.name
        if destination.exists():
            with open(destination, "ab") as out:
                out.write(file.read_bytes())
        else:
            shutil.copy(file, destination)


def sidecar_lines(entries: list[dict], rng: random.Random, lie: bool, start: int) -> list[str]:
    """planner-decisions.jsonl lines for log entries: greedy stated at 0.8, the others 0.1. Honest: the greedy family
    is the one tried with probability 0.8 (so the tried family follows the stated probabilities); lying: always."""
    lines = []
    for offset, entry in enumerate(entries):
        tried = (entry.get("strategy_tags") or [None])[0]
        if tried not in FAMILIES:
            continue
        greedy = tried if lie or rng.random() < 0.8 else rng.choice([f for f in FAMILIES if f != tried])
        probabilities = {f: (0.8 if f == greedy else 0.1) for f in FAMILIES}
        lines.append(json.dumps({"schema_version": 1, "timestamp": "2025-03-03T08:00:00Z",
                                 "iteration_id": start + offset, "packet_hash": f"{start + offset:064x}",
                                 "module": {"name": "p", "version": "0.1.0", "entry": "planner.rules",
                                            "checksum": "0" * 64},
                                 "exploration": {"policy": "epsilon_greedy", "epsilon": 0.3},
                                 "probabilities": probabilities, "family": tried, "greedy_family": greedy}))
    return lines


def planner_log(seed: int, episodes: int, start: int = 0, persona=None, lie: bool = False) -> tuple[str, list[str]]:
    """A loop's log text (episodes one after the other, iteration ids running on) and its sidecar lines. One deployed
    planner writes the whole log: one persona (drawn from the seed unless given) plans every episode."""
    rng = random.Random(f"sidecar:{seed}:{start}")
    persona = persona or sample_persona(random.Random(f"persona:{seed}"))
    text, side, iteration = [], [], start
    for index in range(episodes):
        episode = simulate_episode(seed, start + index, persona=persona)
        entries = []
        for entry in episode.entries:
            iteration += 1
            entries.append({**entry, "iteration_id": iteration})
        text += [json.dumps(e, sort_keys=True) + "\n" for e in entries]
        side += sidecar_lines(entries, rng, lie, iteration - len(entries) + 1)
    return "".join(text), [line + "\n" for line in side]


def first_alarm(result) -> list[str]:
    return sorted(a.metric for a in result.alarms)


def session_pool(size: int) -> list:
    """`size` sessions of the simulator's deployed policy, each its own seed: the population the A/A logs are
    drawn from (simulating a session costs more than monitoring it, so each is simulated once)."""
    return [FullAutoSimulator(10_000 + index).play(0) for index in range(size)]


def aa_fullauto(rep: int, sessions: int, reference: int, work: Path, pool: list) -> dict:
    """One A/A log: `sessions` sessions drawn without replacement from the pool, in a random order."""
    folder = work / f"fa-{rep}"
    write_fast(folder, random.Random(f"aa:{rep}").sample(pool, sessions))
    result = run_pass(folder, None, reference=reference, state_file=work / f"fa-{rep}.state.json")
    watched = {k: m.n for k, m in result.state.metrics.items()}
    shutil.rmtree(folder)
    return {"alarms": first_alarm(result), "records": result.state.records, "watched": watched}


def episode_pool(size: int) -> list[tuple[str, list[str]]]:
    """`size` episodes of one deployed planner (DILIGENT), each its own seed, with their sidecar lines."""
    return [planner_log(20_000 + index, 1, persona=DILIGENT) for index in range(size)]


def renumbered(pool: list[tuple[str, list[str]]], rng: random.Random, episodes: int) -> tuple[str, list[str]]:
    """Episodes drawn without replacement from the pool, one after the other, iteration ids running on."""
    text, side, iteration = [], [], 0
    for log, lines in rng.sample(pool, episodes):
        ids = {}
        for line in log.splitlines():
            entry = json.loads(line)
            iteration += 1
            ids[entry["iteration_id"]] = iteration
            text.append(json.dumps({**entry, "iteration_id": iteration}, sort_keys=True) + "\n")
        for line in lines:
            data = json.loads(line)
            side.append(json.dumps({**data, "iteration_id": ids[data["iteration_id"]]}) + "\n")
    return "".join(text), side


def aa_planner(rep: int, episodes: int, reference: int, work: Path, pool: list) -> dict:
    folder = work / f"pl-{rep}" / "experiments"
    folder.mkdir(parents=True)
    text, side = renumbered(pool, random.Random(f"aa-planner:{rep}"), episodes)
    (folder / "log.jsonl").write_text(text)
    (folder / "planner-decisions.jsonl").write_text("".join(side))
    result = run_pass(folder.parent, None, reference=reference, state_file=work / f"pl-{rep}.state.json")
    watched = {k: m.n for k, m in result.state.metrics.items()}
    shutil.rmtree(folder.parent)
    return {"alarms": first_alarm(result), "records": result.state.records, "watched": watched}


def delays(before: dict, result) -> dict:
    """Each alarm's start in records after the change (its metric's count before the change subtracted)."""
    return {a.metric: a.started_n - before.get(a.metric, 0) for a in result.alarms}


def planted_fullauto(rep: int, kind: str, sessions: int, reference: int, work: Path) -> dict:
    folder, later = work / f"pf-{kind}-{rep}", work / f"pf-{kind}-{rep}-later"
    write_fast(folder, FullAutoSimulator(30_000 + rep).runs(sessions))
    state = work / f"pf-{kind}-{rep}.state.json"
    first = run_pass(folder, None, reference=reference, state_file=state)
    before = {k: m.n for k, m in first.state.metrics.items()}
    runs = (tightened_runs(40_000 + rep, 3 * sessions) if kind == "guardrails_tightened" else
            FullAutoSimulator(40_000 + rep, SHIFTED).runs(3 * sessions))
    write_fast(later, runs)
    append_workspace(folder, later)
    second = run_pass(folder, None, reference=reference, state_file=state)
    shutil.rmtree(folder), shutil.rmtree(later)
    return {"alarms_before_change": first_alarm(first), "delays": delays(before, second)}


def planted_planner(rep: int, kind: str, episodes: int, reference: int, work: Path) -> dict:
    folder = work / f"pp-{kind}-{rep}" / "experiments"
    folder.mkdir(parents=True)
    text, side = planner_log(50_000 + rep, episodes, persona=DILIGENT)
    (folder / "log.jsonl").write_text(text)
    (folder / "planner-decisions.jsonl").write_text("".join(side))
    state = work / f"pp-{kind}-{rep}.state.json"
    first = run_pass(folder.parent, None, reference=reference, state_file=state)
    before = {k: m.n for k, m in first.state.metrics.items()}
    start = sum(1 for _ in text.splitlines())
    persona, lie = (CARELESS, False) if kind == "persona_swapped" else (DILIGENT, True)
    more, more_side = planner_log(60_000 + rep, 3 * episodes, start=start, persona=persona, lie=lie)
    with open(folder / "log.jsonl", "a") as out:
        out.write(more)
    with open(folder / "planner-decisions.jsonl", "a") as out:
        out.write("".join(more_side))
    second = run_pass(folder.parent, None, reference=reference, state_file=state)
    shutil.rmtree(folder.parent)
    return {"alarms_before_change": first_alarm(first), "delays": delays(before, second)}


def speed(decisions: int, work: Path) -> dict:
    """Seconds for one pass over `decisions` new decisions (with their raw lines, labels, runs and events)."""
    folder = work / "speed"
    simulator, runs, total = FullAutoSimulator(77), [], 0
    index = 0
    while total < decisions:
        run = simulator.play(index)
        runs.append(run)
        total += len(run.decisions)
        index += 1
    write_workspace(folder, runs, progress=False)
    state = work / "speed.state.json"
    run_pass(folder, None, reference=500, state_file=state)  # the reference window and support: a first pass
    later = work / "speed-later"
    write_workspace(later, FullAutoSimulator(78).runs(index), progress=False)
    new = sum(1 for _ in open(later / "fullauto-decisions.jsonl"))
    append_workspace(folder, later)
    started, cpu = time.perf_counter(), time.process_time()
    run_pass(folder, None, reference=500, state_file=state)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"new_decisions": new, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
            "loadavg": open("/proc/loadavg").read().split()[:3]}


def summarise(rows: list[dict], name: str) -> dict:
    alarmed = [r for r in rows if r["alarms"]]
    by_metric: dict[str, int] = {}
    for r in alarmed:
        for m in r["alarms"]:
            by_metric[m] = by_metric.get(m, 0) + 1
    from scipy.stats import beta

    k, n = len(alarmed), len(rows)
    high = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    low = float(beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    return {"loop": name, "reps": n, "false_alarms": k, "rate": k / n, "ci95": [round(low, 4), round(high, 4)],
            "by_metric": by_metric, "mean_records": statistics.mean(r["records"] for r in rows),
            "mean_watched": {m: round(statistics.mean(r["watched"][m] for r in rows), 1) for m in rows[0]["watched"]}}


def detection(rows: list[dict], metrics: tuple[str, ...]) -> dict:
    out = {"reps": len(rows), "false_alarms_before_change": sum(bool(r["alarms_before_change"]) for r in rows)}
    for metric in metrics:
        found = [r["delays"][metric] for r in rows if metric in r["delays"]]
        out[metric] = {"detected": len(found), "median_delay": statistics.median(found) if found else None,
                       "delays_min_max": [min(found), max(found)] if found else None}
    anything = [min(r["delays"].values()) for r in rows if r["delays"]]
    out["any_metric"] = {"detected": len(anything), "median_delay": statistics.median(anything) if anything else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--planted-reps", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=150,
                        help="Full Auto sessions per A/A log (about 8 decisions each)")
    parser.add_argument("--planted-sessions", type=int, default=80,
                        help="Full Auto sessions before a planted change (three times as many after it)")
    parser.add_argument("--pool", type=int, default=2000,
                        help="simulated Full Auto sessions the A/A logs are drawn from")
    parser.add_argument("--episode-pool", type=int, default=300,
                        help="simulated planner episodes the A/A logs are drawn from")
    parser.add_argument("--episodes", type=int, default=30, help="planner episodes per A/A log (24-48 attempts each)")
    parser.add_argument("--planted-episodes", type=int, default=14,
                        help="planner episodes before a planted change (three times as many after it)")
    parser.add_argument("--speed", type=int, default=10_000,
                        help="new decisions for the speed measurement (0: skip)")
    parser.add_argument("--quick", action="store_true", help="a small version (tests)")
    parser.add_argument("--only", choices=("aa_fullauto", "aa_planner", "planted", "speed"), action="append",
                        help="run only these parts (repeatable; default all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.reps, args.planted_reps, args.sessions, args.episodes, args.speed = min(args.reps, 5), 1, 60, 14, 0
        args.pool, args.episode_pool, args.planted_sessions, args.planted_episodes = 120, 30, 60, 14
    reference = {"full_auto": 250, "planner": 400}
    results: dict = {"command": " ".join(["python", *sys.argv]), "alpha": 0.05, "reference": reference,
                     "loadavg_start": open("/proc/loadavg").read().split()[:3]}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-monitor-") as temp:
        work = Path(temp)
        parts = set(args.only or ("aa_fullauto", "aa_planner", "planted", "speed"))
        results["aa"] = []
        if "aa_fullauto" in parts:
            pool = session_pool(args.pool)
            fa = [aa_fullauto(r, args.sessions, reference["full_auto"], work, pool) for r in range(args.reps)]
            results["aa"].append(summarise(fa, "full_auto"))
        if "aa_planner" in parts:
            pool = episode_pool(args.episode_pool)
            pl = [aa_planner(r, args.episodes, reference["planner"], work, pool) for r in range(args.reps)]
            results["aa"].append(summarise(pl, "planner"))
        print(json.dumps(results["aa"], indent=1), flush=True)
        planted = {}
        for kind in ("guardrails_tightened", "label_mix_shifted") if "planted" in parts else ():
            rows = [planted_fullauto(r, kind, args.planted_sessions, reference["full_auto"], work)
                    for r in range(args.planted_reps)]
            planted[kind] = detection(rows, ("override_rate", "out_of_support", "label_share.continue",
                                             "action_share.pause",
                                             "action_share.continue", "objective", "accuracy"))
        for kind in ("persona_swapped", "sidecar_lies") if "planted" in parts else ():
            rows = [planted_planner(r, kind, args.planted_episodes, reference["planner"], work)
                    for r in range(args.planted_reps)]
            planted[kind] = detection(rows, ("pivot_compliance", "validity_rate", "improvement",
                                             "sidecar_calibration"))
        results["planted"] = planted
        print(json.dumps(planted, indent=1), flush=True)
        if args.speed and "speed" in parts:
            results["speed"] = speed(args.speed, work)
            print(json.dumps(results["speed"]), flush=True)
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
