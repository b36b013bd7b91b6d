"""Held-out experiment logs for the off-policy benchmark: other kernels and phases than the sample, no side file.

Each scenario is a seeded world whose hidden state decides what an attempt of each family brings, and a deployed
planner that plays it. Episodes are written as the real loop runner writes `log.jsonl` (formats.md §2.1,
§2.3.1: the full shape, keys sorted, `best_before` from the first line, "PASS correctness; cycles=N (above
target T)", `iter/NNNN-slug` branches, `notes` on every line) and nothing else: no `log.sim.jsonl`, no
performance profile. The truth, each family's expected improvement of the best and probability of a valid
attempt from the state before every iteration (Monte Carlo over `TRUTH_DRAWS` attempts), goes to `truth.jsonl`
OUTSIDE the log folder: it is for the benchmark only, never imported.

Scenarios (differently shaped on purpose: scale, what pays when, how the deployed planner chooses):
- `bounds`: a kernel at 20,000-114,000 cycles (baseline 147,734): cycles = max(load bound, critical path) +
  schedule slack. Rescheduling pays while the slack is large, then the bound that binds must be lowered; which
  bound binds flips as they are lowered. Planner: reads the state with noisy insight, follows the protocol most
  of the time.
- `fatigue`: 2,000-10,000 cycles; every family draws on a pool of its own that repeated use exhausts and that
  the other families refill in part (restructuring opens scheduling room, scheduling exposes loads, ...).
  Planner: sticky, repeats what last improved, explores one time in four.
- `seasons`: 300-1,500 cycles; which family pays depends on how far the episode has come (its share of the gap
  closed): loads first, then dependencies, then the schedule, with noise. Planner: rotates families,
  informed by the recent gains it saw. Kept untouched while the models were designed: the held-out check.
- `floor`: `bounds`, except that break_deps pays through the scheduling room it opens: its payoff shrinks with the
  slack's share of the tight bound under 12%, to nothing at the floor, and the deployed planner (which knows it)
  tries break_deps only 3% of the time once the slack is under 6% of the bound. The rule planner, near the bound,
  picks the bound-lowering family tried least: break_deps, exactly where the logs hardly hold an attempt of it
  (the extrapolation study, `benchmarks.extrapolation`, reports/extrapolation.md).
- `simearly`: the project's own simulator (`evals.sim_kernel`) and simulated planner
  (`guidebench.simulators.experiments`, with its persona: insight from the performance profile, noise,
  stickiness, compliance with the pivot protocol) earlier in the same kernel's optimization: the sample's
  starts scaled up to 20,000-114,000 cycles (baseline 147,734; `early_state`), the floors the kernel's.
  Bound lowering pays early, rescheduling late. The planner sees the profile, the log does not carry it. The
  truth is `sim_kernel.expected_improvement` of each family's plain directive from the true state.

With `--archive` (`bounds`, `floor`, `simearly`: their deployed planners decide from the profile) each episode folder
also gets the loop runner's `.advisor/` planner archive (formats.md §2.3.2), written as the runner writes it:
the packet the runner builds from the log before each attempt with the profile the planner saw, and the directive
it answered (with its own forecast). The logs and the truth are the same bytes with or without it.

    python -m benchmarks.planner_scenarios --scenario bounds --episodes 40 --seed 1 --out /tmp/bounds [--archive]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from evals import sim_kernel
from guidebench.simulators.advisor_archive import MODES
from guidebench.simulators.experiments import (entry_line, next_threshold, result_summary, simulate_episode,
                                               slugify, write_archive)
from runtime import pivot
from runtime.advisor import FAMILIES, TIMESTAMP_UTC_FORMAT

SCHEDULE, LOADS, DEPS = FAMILIES
TRUTH_DRAWS = 400
EPOCH = datetime(2025, 6, 2, 8, 0, tzinfo=timezone.utc)
CHANGES = {SCHEDULE: ("reorder bundles to fill idle slots", "software-pipeline the round loop"),
           LOADS: ("keep the top tree levels in registers", "replace scalar loads with vector loads"),
           DEPS: ("re-associate the hash chain", "interleave two batches")}
MODIFIERS = {SCHEDULE: ("list_scheduling", "slot_packing"), LOADS: ("vload", "register_reuse"),
             DEPS: ("reassociate", "tree_reduction")}


@dataclass
class State:
    """A world's hidden state: named quantities; `cycles` is what the main code takes."""

    cycles: int
    values: dict[str, float] = field(default_factory=dict)
    start: int = 0
    iteration: int = 0
    last: Optional[str] = None
    streak: int = 0


Step = Callable[[State, str, random.Random], tuple[bool, Optional[int], State]]


# ----- the worlds -------------------------------------------------------------------------------------------

def _attempt(rng: random.Random, p_valid: float) -> tuple[bool, bool, bool, bool]:
    """(valid, correct, tests unchanged, scope ok) of one attempt."""
    correct = rng.random() < p_valid
    tests = rng.random() >= 0.02
    scope = rng.random() >= 0.03
    return correct and tests and scope, correct, tests, scope


def bounds_start(rng: random.Random) -> State:
    start = rng.randint(20_000, 114_000)
    tight = start * rng.uniform(0.45, 0.7)
    other = tight * rng.uniform(0.8, 0.98)
    load, cp = (tight, other) if rng.random() < 0.5 else (other, tight)
    return State(cycles=start, start=start, values={"load": load, "cp": cp, "slack": start - tight,
                                                    "load_floor": 0.3 * tight, "cp_floor": 0.3 * tight})


def bounds_step(state: State, family: str, rng: random.Random) -> tuple[float, State]:
    """(new cycles, new state) if the attempt is kept; the change itself, before validity."""
    v = dict(state.values)
    tight = max(v["load"], v["cp"])
    dud = rng.random() < 0.25
    if family == SCHEDULE:
        floor = 0.01 * tight
        share = 0.0 if dud else rng.betavariate(2, 4) * (0.9 if v["slack"] > 0.08 * tight else 0.25)
        v["slack"] = max(floor, v["slack"] - share * (v["slack"] - floor) + rng.gauss(0.0, 0.002 * tight))
    else:
        key = "load" if family == LOADS else "cp"
        share = 0.0 if dud else rng.betavariate(2, 5) * 0.6
        drop = share * (v[key] - v[f"{key}_floor"])
        v[key] -= drop
        new_tight = max(v["load"], v["cp"])
        v["slack"] += (tight - new_tight) * rng.uniform(0.05, 0.3) + abs(rng.gauss(0.0, 0.003 * tight))
    cycles = round(max(v["load"], v["cp"]) + v["slack"])
    return cycles, replace(state, values=v)


BOUNDS_VALID = {SCHEDULE: 0.88, LOADS: 0.8, DEPS: 0.72}


def fatigue_start(rng: random.Random) -> State:
    start = rng.randint(2_000, 10_000)
    pools = {f: rng.uniform(0.02, 0.12) for f in FAMILIES}
    rich = rng.choice(FAMILIES)
    pools[rich] = rng.uniform(0.15, 0.3)
    return State(cycles=start, start=start, values={f: p * start for f, p in pools.items()})


FATIGUE_VALID = {SCHEDULE: 0.85, LOADS: 0.78, DEPS: 0.8}
REFILL = {SCHEDULE: {LOADS: 0.25, DEPS: 0.1}, LOADS: {DEPS: 0.3, SCHEDULE: 0.15}, DEPS: {SCHEDULE: 0.35, LOADS: 0.05}}


def fatigue_step(state: State, family: str, rng: random.Random) -> tuple[float, State]:
    v = dict(state.values)
    tired = 0.55 ** (state.streak if state.last == family else 0)
    share = 0.0 if rng.random() < 0.2 else rng.betavariate(2, 3) * 0.5 * tired
    gain = share * v[family]
    v[family] -= gain
    for other, part in REFILL[family].items():
        v[other] += part * gain
    noise = rng.gauss(0.0, 0.002 * state.cycles)
    return round(state.cycles - gain + (abs(noise) if gain == 0 else noise)), replace(state, values=v)


def seasons_start(rng: random.Random) -> State:
    start = rng.randint(300, 1_500)
    return State(cycles=start, start=start, values={"floor": start * rng.uniform(0.55, 0.75),
                                                    "phase_shift": rng.uniform(-0.08, 0.08)})


SEASONS_VALID = {SCHEDULE: 0.9, LOADS: 0.75, DEPS: 0.82}


def seasons_power(state: State, family: str) -> float:
    v = state.values
    closed = (state.start - state.cycles) / max(1.0, state.start - v["floor"]) + v["phase_shift"]
    center = {LOADS: 0.1, DEPS: 0.4, SCHEDULE: 0.7}[family]
    return 0.05 + 0.3 * math.exp(-((closed - center) / 0.17) ** 2)


def seasons_step(state: State, family: str, rng: random.Random) -> tuple[float, State]:
    gap = state.cycles - state.values["floor"]
    share = 0.0 if rng.random() < 0.2 else rng.betavariate(2, 4) * 2 * seasons_power(state, family)
    noise = rng.gauss(0.0, 0.003 * state.cycles)
    return round(state.cycles - share * gap + (abs(noise) if share == 0 else noise)), state


FLOOR_NEAR = 0.06  # slack / tight bound under which the `floor` kernel is near its floor
FLOOR_FADE = 0.12  # slack share at and above which break_deps pays in full
FLOOR_DEPS_RATE = 0.03  # how often the `floor` planner still tries break_deps near the floor


def floor_near(state: State) -> bool:
    """Whether a `floor` (or `bounds`) state is near its floor: the slack under FLOOR_NEAR of the tight bound."""
    v = state.values
    return v["slack"] <= FLOOR_NEAR * max(v["load"], v["cp"])


def floor_step(state: State, family: str, rng: random.Random) -> tuple[float, State]:
    """`bounds_step`, except that break_deps pays through the scheduling room it opens: its payoff shrinks in
    proportion to the slack's share of the tight bound under FLOOR_FADE, to nothing at the floor."""
    cycles, after = bounds_step(state, family, rng)
    if family != DEPS:
        return cycles, after
    v = state.values
    fade = min(1.0, v["slack"] / max(v["load"], v["cp"]) / FLOOR_FADE)
    kept = dict(after.values)
    kept["cp"] = v["cp"] - fade * (v["cp"] - after.values["cp"])  # the bound falls by the faded share only
    kept["slack"] = v["slack"] + fade * (after.values["slack"] - v["slack"])
    return round(max(kept["load"], kept["cp"]) + kept["slack"]), replace(after, values=kept)


@dataclass(frozen=True)
class World:
    """One scenario: how an episode starts, what an attempt does, how valid each family is."""

    name: str
    start: Callable[[random.Random], State]
    change: Callable[[State, str, random.Random], tuple[float, State]]
    p_valid: dict[str, float]
    iterations: tuple[int, int]


WORLDS = {
    "bounds": World("bounds", bounds_start, bounds_step, BOUNDS_VALID, (28, 44)),
    "fatigue": World("fatigue", fatigue_start, fatigue_step, FATIGUE_VALID, (24, 40)),
    "seasons": World("seasons", seasons_start, seasons_step, SEASONS_VALID, (26, 42)),
    "floor": World("floor", bounds_start, floor_step, BOUNDS_VALID, (28, 44)),
}


def attempt(world: World, state: State, family: str, rng: random.Random) -> tuple[dict[str, Any], State]:
    """One attempt: its measured facts and the state after it (a valid attempt below the best is kept)."""
    valid, correct, tests, scope = _attempt(rng, world.p_valid[family])
    measured_on_failure = rng.random() < 0.3
    cycles, after = world.change(state, family, rng)
    cycles = max(1, int(cycles))
    kept = valid and cycles < state.cycles
    new = replace(after, cycles=cycles) if kept else replace(state)
    new.iteration = state.iteration + 1
    new.streak = state.streak + 1 if state.last == family else 1
    new.last = family
    facts = {"valid": valid, "correct": correct, "tests": tests, "scope": scope,
             "cycles": cycles if (correct or measured_on_failure) and tests and scope else None}
    return facts, new


def truth(world: World, state: State, seed: int) -> dict[str, dict[str, float]]:
    """Each family's expected improvement of the best (cycles) and P(valid), over TRUTH_DRAWS seeded attempts."""
    gains, valid = {}, {}
    for family in FAMILIES:
        rng = random.Random(f"truth-{seed}-{family}")
        total = ok = 0.0
        for _ in range(TRUTH_DRAWS):
            facts, after = attempt(world, state, family, rng)
            total += state.cycles - after.cycles
            ok += facts["valid"]
        gains[family], valid[family] = total / TRUTH_DRAWS, ok / TRUTH_DRAWS
    return {"expected_improvement": gains, "p_valid": valid}


# ----- the deployed planners --------------------------------------------------------------------------------

def protocol_families(history: list[dict[str, Any]], best: int) -> list[str]:
    """The families a protocol-abiding planner may choose (blocked out; a required pivot leaves the current)."""
    constraints = pivot.family_constraints(history)
    allowed = constraints.families_for_next()
    must, _ = pivot.pivot_required(history, None, None, tag_best=best)
    if must and constraints.current_family in allowed and len(allowed) > 1:
        allowed.remove(constraints.current_family)
    return allowed


def _recent_gain(history: list[dict[str, Any]], family: str) -> float:
    gains = [max(0, -(e["delta_vs_best"] or 0)) / e["best_before"] for e in history[-8:]
             if e["strategy_tags"][0] == family and e["valid"] and e["delta_vs_best"] is not None]
    return sum(gains) / len(gains) if gains else 0.01


def choose(world: World, state: State, history: list[dict[str, Any]], best: int, rng: random.Random,
           persona: dict[str, float], known: dict[str, float]) -> str:
    """The deployed planner's family for the next attempt."""
    pool = protocol_families(history, best) if rng.random() < persona["compliance"] else list(FAMILIES)
    if world.name == "floor" and floor_near(state) and rng.random() >= FLOOR_DEPS_RATE:
        pool = [f for f in pool if f != DEPS] or [f for f in FAMILIES if f != DEPS]  # it knows DEPS fades there
    if world.name in ("bounds", "floor"):
        scores = {f: persona["insight"] * known[f] / max(1e-9, max(known.values())) + rng.random() * 0.8
                  for f in FAMILIES}
    elif world.name == "fatigue":
        last_win = next((e["strategy_tags"][0] for e in reversed(history) if e.get("new_best")), None)
        if rng.random() < 0.25 or last_win is None:
            return rng.choice(pool)
        scores = {f: (1.0 if f == last_win else 0.0) + rng.random() * 0.3 for f in FAMILIES}
    else:
        scores = {f: _recent_gain(history, f) * persona["insight"] * 20 + rng.random()
                  + (0.6 if f != (history[-1]["strategy_tags"][0] if history else None) else 0.0) for f in FAMILIES}
    return max(pool, key=lambda f: (scores[f], -FAMILIES.index(f)))


# ----- the log ---------------------------------------------------------------------------------------------

def entry(iteration: int, clock: datetime, family: str, facts: dict[str, Any], best_before: int,
          target: Optional[int], rng: random.Random, shas: tuple[str, str]) -> dict[str, Any]:
    """The runner's line for one attempt (the full shape, as `record` writes it)."""
    skip = [reason for reason, bad in (("tests changed", not facts["tests"]), ("scope violation", not facts["scope"]))
            if bad]
    correctness = None if skip else facts["correct"]
    cycles = None if skip else facts["cycles"]
    valid = bool(correctness is True and not skip)
    modifiers = [m for m in MODIFIERS[family] if rng.random() < 0.5]
    objective = f"Reach {target} cycles or fewer (best {best_before})" if target else f"Beat {best_before} cycles"
    stray = "tests/submission_tests.py"
    return {
        "base_branch": "opt/best", "base_sha": shas[0], "best_before": best_before,
        "branch": f"iter/{iteration:04d}-{slugify('auto')}", "change_summary": [rng.choice(CHANGES[family])],
        "correctness_pass": correctness, "cycles": cycles,
        "delta_vs_best": None if cycles is None else cycles - best_before,
        "files_changed": ["perf_takehome.py"] + ([stray] if not facts["tests"] else []),
        "head_sha": shas[1], "hypothesis": f"A {family.split(':')[1]} change lowers the cycle count.",
        "iteration_id": iteration, "merged_to_main": False,
        "new_best": bool(valid and cycles is not None and cycles < best_before), "notes": objective,
        "result_summary": result_summary(correctness, cycles, target, skip),
        "scope_disallowed_files": [] if facts["scope"] else ["problem.py"], "scope_forbidden_files": [],
        "scope_ok": facts["scope"], "strategy_tags": [family, *modifiers],
        "tests_diff_empty": facts["tests"],
        "threshold_met": bool(target is not None and valid and cycles is not None and cycles <= target),
        "timestamp_utc": clock.strftime(TIMESTAMP_UTC_FORMAT), "valid": valid,
    }


def bounds_profile(state: State) -> dict[str, Any]:
    """The runner's `performance_profile` of a `bounds` state: the load bound is the resource bound (the other
    engines' work is a fixed share of it), the critical path the other, the schedule estimate the cycles."""
    load, cp = round(state.values["load"]), round(state.values["cp"])
    engines = {"load": load, "valu": round(0.55 * load), "alu": round(0.3 * load), "store": round(0.1 * load),
               "flow": round(0.05 * load)}
    limits = {"load": 2, "valu": 6, "alu": 12, "store": 2, "flow": 1}
    tight = max(load, cp)
    return {"task_counts_by_engine": {e: c * limits[e] for e, c in engines.items()}, "min_cycles_by_engine": engines,
            "resource_lb_cycles": load, "cp_lb_cycles": cp, "tight_lb_cycles": tight,
            "schedule_cycles_estimate": state.cycles, "schedule_slack_pct": round((state.cycles - tight) / tight, 6)}


def directive_of(line: dict[str, Any], known: dict[str, float], rng: random.Random) -> dict[str, Any]:
    """The directive the deployed planner answered for a logged attempt: its family, modifiers and changes, and
    its forecast (a noisy read of what the family truly brings)."""
    family = line["strategy_tags"][0]
    return {"objective": line["notes"], "primary_hypothesis": line["hypothesis"], "strategy_family": family,
            "strategy_modifiers": line["strategy_tags"][1:4], "risk": "Medium",
            "expected_effect_cycles": -round(known[family] * rng.uniform(0.6, 1.4)),
            "change_summary": list(line["change_summary"]),
            "step_plan": ["Implement the change in perf_takehome.py", "Run the submission tests", "Measure cycles"],
            "validation": {"commands": ["python tests/submission_tests.py"],
                           "pass_criteria": ["correctness passes", "cycles below the best"]},
            "next_packet_requests": [], "did_web_search": False}


def episode(world: World, seed: int, index: int,
            plans: Optional[list[dict[str, Any]]] = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(log entries, truth lines) of one episode; `plans` (a list) collects what the runner's archive keeps of each
    iteration's plan (goal, target, profile, directive: `bounds` only), from a stream of its own."""
    setup = random.Random(f"{world.name}-{seed}-{index}")
    state = world.start(setup)
    persona = {"compliance": setup.uniform(0.6, 0.95), "insight": setup.uniform(0.2, 1.0)}
    climbs = setup.random() < 0.7
    count = setup.randint(*world.iterations)
    clock = EPOCH + timedelta(hours=9 * index)
    main_sha = f"{setup.getrandbits(160):040x}"
    history: list[dict[str, Any]] = []
    lines: list[dict[str, Any]] = []
    for iteration in range(1, count + 1):
        rng = random.Random(f"{world.name}-{seed}-{index}-{iteration}")
        best = state.cycles
        target = next_threshold(best) if climbs else None
        known = truth(world, state, seed * 100_003 + index * 1_009 + iteration)
        profile = bounds_profile(state) if plans is not None and world.name in ("bounds", "floor") else None
        family = choose(world, state, history, best, rng, persona, known["expected_improvement"])
        before = state
        facts, state = attempt(world, state, family, rng)
        clock += timedelta(minutes=rng.randint(8, 50))
        head = f"{rng.getrandbits(160):040x}"
        line = entry(iteration, clock, family, facts, best, target, rng, (main_sha, head))
        if line["new_best"]:
            main_sha = head
        history.append(line)
        near = {"near_floor": floor_near(before), "cp_binds": before.values["cp"] >= before.values["load"]} \
            if world.name == "floor" else {}  # where the extrapolation study splits
        lines.append({"iteration_id": iteration, "best_before": best, "logged_family": family, **known, **near})
        if plans is not None:
            forecast = random.Random(f"plan-{world.name}-{seed}-{index}-{iteration}")
            plans.append({"goal": "threshold" if target else "best", "threshold_target": target, "profile": profile,
                          "directive": directive_of(line, known["expected_improvement"], forecast)})
    return history, lines


# ----- simearly: the project's own simulator, earlier in the kernel's optimization -----------------------------

SIMEARLY = "simearly"
EARLY_START = (20_000, 114_000)  # cycles at an episode's start (the kernel's published baseline is 147,734)
EARLY_OTHER_ENGINES = (0.3, 0.6)  # the other engines' scale-up, as a share of the loads' and critical path's
EARLY_ROLLOUTS = 200


def early_state(rng: random.Random) -> sim_kernel.KernelState:
    """The sample's start (`sim_kernel.initial_state`) earlier in the optimization: its loads, critical path and
    slack times the factor that puts its cycles within EARLY_START, the other engines' work times 30-60% of that
    factor (early code is dominated by its loads and its dependency chain; scaled like them, the vector work binds
    a third into an episode and no family lowers it again). The floors stay the kernel's."""
    base = sim_kernel.initial_state(rng)
    scale = rng.randint(*EARLY_START) / base.cycles
    rest = scale * rng.uniform(*EARLY_OTHER_ENGINES)
    counts = {engine: round(count * (scale if engine == "load" else rest))
              for engine, count in base.task_counts.items()}
    cp = round(base.cp_lb_cycles * scale)
    tight = sim_kernel.KernelState(task_counts=counts, cp_lb_cycles=cp, cycles=1).tight_lb_cycles
    return sim_kernel.KernelState(task_counts=counts, cp_lb_cycles=cp, cycles=tight + round(base.slack_cycles * scale))


def plain_p_valid(family: str) -> float:
    """P(valid) of a family's plain directive (Medium risk, no modifier) in the simulator."""
    return ((1 - sim_kernel.FAILURE_BASE[family]) * (1 - sim_kernel.P_TESTS_CHANGED)
            * (1 - sim_kernel.P_SCOPE_VIOLATION))


def simearly_episode(seed: int, index: int, rollouts: int = EARLY_ROLLOUTS,
                     plans: Optional[list[dict[str, Any]]] = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(log entries, truth lines) of one simulated episode from an early state; its side file is dropped (`plans`,
    a list, collects what the runner's archive keeps: the side file's goal and profile, the planner's directive)."""
    simulated = simulate_episode(seed, index, start=early_state)
    if plans is not None:
        plans += [{"goal": side["goal"], "threshold_target": side["threshold_target"],
                   "profile": side["performance_profile"], "directive": directive}
                  for side, directive in zip(simulated.side["iterations"], simulated.directives)]
    lines = []
    for entry, side in zip(simulated.entries, simulated.side["iterations"]):
        state = sim_kernel.state_from_profile(side["performance_profile"])
        iteration = entry["iteration_id"]
        gains = {f: sim_kernel.expected_improvement(state, {"strategy_family": f}, rollouts=rollouts,
                                                    seed=sim_kernel.derive_seed("truth", seed, index, iteration))
                 for f in FAMILIES}
        lines.append({"iteration_id": iteration, "best_before": state.cycles,
                      "logged_family": entry["strategy_tags"][0], "expected_improvement": gains,
                      "p_valid": {f: plain_p_valid(f) for f in FAMILIES}})
    return simulated.entries, lines


SCENARIOS = (*WORLDS, SIMEARLY)


ARCHIVED = ("bounds", "floor", SIMEARLY)  # the scenarios whose deployed planner decides from the profile


def write_plans(folder: Path, name: str, history: list[dict[str, Any]], plans: list[dict[str, Any]], mode: str) -> int:
    """The episode's `.advisor/` as the loop runner keeps it (`guidebench.simulators.advisor_archive`): the packet
    the runner builds from the log before each attempt, the profile and the directive; returns the plans written."""
    from guidebench.data.planner_packets import runner_packets

    lines = [entry_line(e) for e in history]
    packets = runner_packets(history, lines, [(p["goal"], p["threshold_target"]) for p in plans])
    return write_archive(folder, name, history, packets, [p["directive"] for p in plans],
                         [p["profile"] for p in plans], mode)


def write(scenario: str, episodes: int, seed: int, out: Path, archive: bool = False) -> dict[str, Any]:
    """OUT/logs/episode-NNNN/log.jsonl (what is imported) and OUT/truth.jsonl (the benchmark's truth); with
    `archive` (`bounds`, `simearly`) each episode folder also gets the runner's `.advisor/` planner archive, in a
    mode drawn per episode (manual, codex or codex_api). The logs and the truth are the same bytes either way."""
    if archive and scenario not in ARCHIVED:
        raise SystemExit(f"--archive: only {', '.join(ARCHIVED)} have a performance profile to archive")
    logs = out / "logs"
    truth_lines = []
    entries = archived = 0
    for index in range(episodes):
        plans: Optional[list[dict[str, Any]]] = [] if archive else None
        history, known = (simearly_episode(seed, index, plans=plans) if scenario == SIMEARLY
                          else episode(WORLDS[scenario], seed, index, plans=plans))
        folder = logs / f"episode-{index:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "log.jsonl").write_text("".join(entry_line(e) + "\n" for e in history), encoding="utf-8")
        if plans is not None:
            mode = random.Random(f"mode-{scenario}-{seed}-{index}").choice(MODES)
            archived += write_plans(folder, f"{scenario}-{seed}-{index:04d}", history, plans, mode)
        truth_lines += [{"log": f"episode-{index:04d}/log.jsonl", **line} for line in known]
        entries += len(history)
    (out / "truth.jsonl").write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in truth_lines),
                                     encoding="utf-8")
    return {"scenario": scenario, "episodes": episodes, "entries": entries, "seed": seed, "logs": str(logs),
            "truth": str(out / "truth.jsonl"), "archived_plans": archived}


def main(argv: Optional[list[str]] = None) -> int:
    """Write one scenario's logs and truth."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--archive", action="store_true", help="also write each episode's .advisor/ planner archive")
    args = parser.parse_args(argv)
    print(json.dumps(write(args.scenario, args.episodes, args.seed, args.out, archive=args.archive)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
