"""Seeded episodes of the kernel-optimization loop: a simulated planner plays `evals.sim_kernel`.

Each episode starts from `sim_kernel.initial_state` and runs 24-48 iterations. Before every
iteration the simulated planner sees what a real one sees (its own log so far, the performance
profile, the goal) and emits a full `OptimizationDirective`:

- it scores the families from the profile (slack favours `family:schedule`, a binding load
  bound `family:reduce_loads`, a binding critical path `family:break_deps`) weighted by its
  `insight`, plus noise and a `stickiness` bias towards the family it is on;
- with probability `compliance` it obeys the pivot protocol (`runtime.pivot`): blocked families
  are excluded, a required pivot leaves the current family, near the bound only
  reduce_loads/break_deps remain, recovery mode forces Low risk; otherwise it ignores it, so
  protocol compliance varies across and within episodes;
- 70% of episodes have the goal `threshold`: the target is the highest published threshold
  below the current best (the loop climbs them), `best` once none is left; the others aim at
  `best` throughout (aspiration = best - 1);
- `expected_effect_cycles` is the planner's (noisy) guess of the change of cycles, negative for
  fewer cycles, the same sign convention as `delta_vs_best`.

The environment then applies the directive and the loop runner's log line is written as the real
runner's `record` writes it (formats.md §2.1, §2.3.1: `json.dumps(entry, sort_keys=True)`, non-ASCII
escaped, `%Y-%m-%dT%H:%M:%SZ`): branches `iter/NNNN-slug`, `merged_to_main` false (the runner never
merges; the best lives on its branch and a `best/*` tag, and the next iteration builds on it),
`notes` the directive's objective on every line, and its `result_summary` wording: "PASS
correctness; cycles=N (above target T)", "PASS correctness; cycles=N", "FAIL correctness;
cycles=N", "FAIL correctness; cycles unavailable", or "SKIP benchmark; tests changed, scope
violation" (then neither correctness nor cycles are measured). The episode's start is the best of
an earlier loop, known from its `best/*` tag: `best_before` (the runner's best of the log and the
tags) carries it from the first line on. Some episodes use the older short shape (no
scope/correctness/best_before/new_best/threshold_met, no notes; `strategy_tags[0]` is a legacy tag,
not a family). Next to every `log.jsonl` a side file `log.sim.jsonl` records the goal and the
performance profile before each iteration (line 1: the episode header with `format` and
`episode_id`; then one line per iteration), which `guidebench.data.experiments` attaches to the
packets. Planner and environment draw from separate streams seeded by (seed, episode,
iteration), so episode k is the same bytes whatever the number of episodes.
"""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict

from runtime import pivot
from runtime.advisor import FAMILIES, THRESHOLDS, TIMESTAMP_UTC_FORMAT, OptimizationDirective, PerformanceProfile

from guidebench.simulators.advisor_archive import MODES, runner_packet, write_plan
from evals.sim_kernel import (
    BREAK_DEPS,
    FAMILY_TECHNIQUES,
    NEAR_BOUND_SLACK,
    REDUCE_LOADS,
    SCHEDULE,
    AttemptOutcome,
    KernelState,
    apply_directive,
    derive_seed,
    initial_state,
    performance_profile,
)

SIDE_FILE_SUFFIX = ".sim.jsonl"
SIDE_FILE_FORMAT = "guidebench.sim_experiments/v1"
TIMESTAMP_FORMAT = TIMESTAMP_UTC_FORMAT
EPOCH = datetime(2025, 3, 3, 8, 0, tzinfo=timezone.utc)
OLD_SHAPE_KEYS = ("base_branch", "base_sha", "branch", "change_summary", "cycles", "delta_vs_best", "files_changed",
                  "head_sha", "hypothesis", "iteration_id", "merged_to_main", "result_summary",
                  "strategy_tags", "tests_diff_empty", "timestamp_utc", "valid")
# `--slug` of the runner's plan commands (default "auto"), slugified into the branch name
SLUGS = ("auto", "auto", "auto", "next", "next", "kernel")
DIRTY_NOTE = "working tree dirty (uncommitted changes); head_sha refers to last commit"
# Nothing is merged to main: each iteration branches from the rolling best branch the runner keeps
# (`ensure-best`), which moves to a new best's head; the older runner branched from main.
BEST_BRANCH = "opt/best"
LEGACY_TAGS = {SCHEDULE: "sched", REDUCE_LOADS: "loads", BREAK_DEPS: "deps"}
VALIDATION = {"commands": ["python tests/submission_tests.py", "git diff --exit-code origin/main -- tests/"],
              "pass_criteria": ["all submission tests pass", "cycles below the current best",
                                "tests/ unchanged"]}

_HYPOTHESES = {
    SCHEDULE: ("The schedule leaves {slack} cycles above the {tight}-cycle bound; packing independent ops into "
               "idle slots should recover part of it.",
               "Bundles are under-filled around the hash rounds; a list scheduler over a wider window should "
               "close some of the {slack}-cycle slack."),
    REDUCE_LOADS: ("Loads need {load} cycles at 2 per cycle; vector loads and reuse of tree levels cut that bound.",
                   "Repeated scalar loads of the same tree nodes keep the load engine at {load} cycles; hoisting "
                   "and register reuse remove them."),
    BREAK_DEPS: ("The critical path is {cp} cycles; re-associating the hash chain shortens it.",
                 "Batches wait on one long dependency chain ({cp} cycles); interleaving them and a tree "
                 "reduction break it up."),
}
_CHANGES = {
    SCHEDULE: ("reorder bundles to fill idle alu/valu slots", "software-pipeline the round loop",
               "unroll the inner loop by two", "move address arithmetic off the critical slots"),
    REDUCE_LOADS: ("replace scalar loads with vload of 8 lanes", "keep the top tree levels in registers",
                   "hoist loop-invariant loads out of the round loop", "reuse loaded node values across batches"),
    BREAK_DEPS: ("re-associate the hash combine steps", "interleave two batches to hide latency",
                 "turn the serial reduction into a tree", "compute both branch sides and select"),
}


def next_threshold(best: int) -> Optional[int]:
    """The published threshold a threshold-goal loop aims at next: the highest one below the best."""
    below = [t for t in THRESHOLDS if t < best]
    return max(below) if below else None


class PlannerPersona(BaseModel):
    """How a simulated planner behaves: protocol compliance, use of the profile, habits, risk appetite."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compliance: float
    insight: float
    stickiness: float
    risk_weights: tuple[float, float, float]


class SimulatedEpisode(BaseModel):
    """One episode: the log entries (dicts, loop-runner shape) and its side file."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    old_shape: bool
    entries: list[dict[str, Any]]
    side: dict[str, Any]
    directives: list[dict[str, Any]] = []  # the planner's directive before each entry (what the archive keeps)

    @property
    def best_cycles(self) -> int:
        """Best cycles at the end of the episode (start cycles when nothing improved)."""
        return self.side["final_best_cycles"]

    def log_text(self) -> str:
        """The episode's `log.jsonl` text."""
        return "".join(entry_line(entry) + "\n" for entry in self.entries)

    def side_text(self) -> str:
        """The side file's text: the header line, then one line per iteration."""
        header = {key: value for key, value in self.side.items() if key != "iterations"}
        lines = [header, *self.side["iterations"]]
        return "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)


def entry_line(entry: dict[str, Any]) -> str:
    """One log line as the loop runner writes it: `json.dumps(entry, sort_keys=True)` (non-ASCII escaped)."""
    return json.dumps(entry, sort_keys=True)


def sample_persona(rng: random.Random) -> PlannerPersona:
    """A planner for one episode."""
    appetite = rng.random()
    return PlannerPersona(
        compliance=round(rng.uniform(0.4, 0.98), 3),
        insight=round(rng.uniform(0.0, 1.0), 3),
        stickiness=round(rng.uniform(0.0, 0.6), 3),
        risk_weights=(round(1.0 - appetite, 3), 1.0, round(0.2 + appetite, 3)),
    )


def _family_scores(state: KernelState) -> dict[str, float]:
    """What the profile says each family is worth now, about [0, 1.2]."""
    tight = state.tight_lb_cycles
    by_engine = state.min_cycles_by_engine
    others = {"load": max([state.cp_lb_cycles] + [c for e, c in by_engine.items() if e != "load"]),
              "cp": state.resource_lb_cycles}

    def lowering(bound: int, rest: int) -> float:
        if bound >= tight:
            return 0.5 + min(0.5, (bound - rest) / 30)
        return 0.3 if bound >= 0.97 * tight else 0.1

    near = state.slack_fraction <= NEAR_BOUND_SLACK
    return {
        SCHEDULE: 0.1 if near else min(1.2, state.slack_fraction / 0.08),
        REDUCE_LOADS: lowering(by_engine["load"], others["load"]),
        BREAK_DEPS: lowering(state.cp_lb_cycles, others["cp"]),
    }


def _candidates(history: list[dict[str, Any]], profile: PerformanceProfile, target: Optional[int],
                tag_best: Optional[int] = None) -> list[str]:
    """Families a protocol-abiding planner may choose next (`tag_best`: the best/* tags' best)."""
    constraints = pivot.family_constraints(history)
    allowed = constraints.families_for_next()
    must_pivot, reasons = pivot.pivot_required(history, profile, target, tag_best=tag_best)
    if must_pivot and constraints.current_family in allowed and len(allowed) > 1:
        allowed.remove(constraints.current_family)
    if any(r.startswith("near_bound") for r in reasons):
        lowering = [f for f in allowed if f in (REDUCE_LOADS, BREAK_DEPS)]
        allowed = lowering or allowed
    return allowed


def _modifiers(family: str, rng: random.Random) -> list[str]:
    count = rng.choice((0, 1, 1, 2, 2, 3))
    chosen: list[str] = []
    for _ in range(count):
        pool_family = family if rng.random() < 0.8 else rng.choice(FAMILIES)
        technique = rng.choice(FAMILY_TECHNIQUES[pool_family])
        if technique not in chosen:
            chosen.append(technique)
    return chosen


def plan_directive(history: list[dict[str, Any]], state: KernelState, target: Optional[int],
                   persona: PlannerPersona, rng: random.Random) -> OptimizationDirective:
    """The simulated planner's directive for the next iteration."""
    profile = performance_profile(state)
    informed = _family_scores(state)
    current = pivot.family_of(history[-1]) if history else None
    scores = {f: persona.insight * informed[f] + (1 - persona.insight) * rng.random() + rng.gauss(0.0, 0.1)
              + (persona.stickiness if f == current else 0.0) for f in FAMILIES}
    obeys = rng.random() < persona.compliance
    # the runner's best is the log's and the best/* tags' (the current best is always a tag's or the log's)
    pool = _candidates(history, profile, target, state.cycles) if obeys else list(FAMILIES)
    family = max(pool, key=lambda f: (scores[f], -FAMILIES.index(f)))
    recovery = pivot.invalid_streak(history) >= pivot.INVALID_STREAK
    risk = "Low" if obeys and recovery else rng.choices(("Low", "Medium", "High"), weights=persona.risk_weights)[0]
    modifiers = _modifiers(family, rng)
    guess = informed[family] * {SCHEDULE: 0.3 * state.slack_cycles, REDUCE_LOADS: 40, BREAK_DEPS: 40}[family]
    expected = -max(1, round(guess * rng.uniform(0.4, 1.8)))
    goal_cycles = target if target is not None else state.cycles - 1
    fill = {"slack": state.slack_cycles, "tight": state.tight_lb_cycles,
            "load": state.min_cycles_by_engine["load"], "cp": state.cp_lb_cycles}
    changes = rng.sample(_CHANGES[family], rng.randint(1, 3))
    steps = ["profile the current kernel and note the binding bound", *[f"implement: {c}" for c in changes],
             "run the submission tests and record cycles"]
    return OptimizationDirective(
        objective=f"Reach {goal_cycles} cycles or fewer (best {state.cycles})",
        primary_hypothesis=rng.choice(_HYPOTHESES[family]).format(**fill),
        strategy_family=family, strategy_modifiers=modifiers, risk=risk, expected_effect_cycles=expected,
        change_summary=changes, step_plan=steps, validation=VALIDATION,
        next_packet_requests=["performance_profile"] if rng.random() < 0.3 else [],
        did_web_search=rng.random() < 0.1,
    )


def slugify(text: str) -> str:
    """The runner's `_slugify`: lower case, runs of other characters as one dash."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", text.strip().lower())).strip("-")
    return slug or "auto"


def result_summary(correctness: Optional[bool], cycles: Optional[int], target: Optional[int],
                   skip_reasons: list[str]) -> str:
    """The runner's `result_summary` of an attempt (its exact wording)."""
    if skip_reasons:
        return "SKIP benchmark; " + ", ".join(skip_reasons)
    if correctness is True and cycles is not None:
        if target is not None and cycles > target:
            return f"PASS correctness; cycles={cycles} (above target {target})"
        return f"PASS correctness; cycles={cycles}"
    if correctness is False and cycles is not None:
        return f"FAIL correctness; cycles={cycles}"
    if correctness is False:
        return "FAIL correctness; cycles unavailable"
    return f"UNKNOWN correctness; cycles={cycles}" if cycles is not None else "UNKNOWN correctness; cycles unavailable"


def log_entry(iteration_id: int, timestamp: datetime, directive: OptimizationDirective, outcome: AttemptOutcome,
              shas: tuple[str, str], target: Optional[int], rng: random.Random, old_shape: bool,
              slug: str = "auto") -> dict[str, Any]:
    """The loop runner's log line for one attempt (formats.md §2.1, §2.3.1), in the full or the older short shape.

    As the runner's `record`: with tests changed or a scope violation the benchmark is skipped (no
    correctness, no cycles); `best_before` is the best before the attempt (log and best/* tags),
    `delta_vs_best` is measured whenever cycles are, `merged_to_main` is false.
    """
    family = directive.strategy_family
    skip = [reason for reason, bad in (("tests changed", not outcome.tests_diff_empty),
                                       ("scope violation", not outcome.scope_ok)) if bad]
    correctness: Optional[bool] = None if skip else outcome.correctness_pass
    cycles = None if skip else outcome.cycles
    valid = bool(correctness is True and not skip)
    best_before = outcome.best_before
    new_best = bool(valid and cycles is not None and cycles < best_before)
    notes = directive.objective if rng.random() >= 0.04 else f"{DIRTY_NOTE} | {directive.objective}"
    entry: dict[str, Any] = {
        "base_branch": BEST_BRANCH, "base_sha": shas[0], "best_before": best_before,
        "branch": f"iter/{iteration_id:04d}-{slugify(slug)}",
        "change_summary": list(directive.change_summary), "correctness_pass": correctness, "cycles": cycles,
        "delta_vs_best": None if cycles is None else cycles - best_before,
        "files_changed": list(outcome.files_changed), "head_sha": shas[1],
        "hypothesis": directive.primary_hypothesis, "iteration_id": iteration_id,
        "merged_to_main": False, "new_best": new_best, "notes": notes,
        "result_summary": result_summary(correctness, cycles, target, skip),
        "scope_disallowed_files": list(outcome.scope_disallowed_files),
        "scope_forbidden_files": list(outcome.scope_forbidden_files), "scope_ok": outcome.scope_ok,
        "strategy_tags": [family, *directive.strategy_modifiers][:4], "tests_diff_empty": outcome.tests_diff_empty,
        "threshold_met": bool(target is not None and valid and cycles is not None and cycles <= target),
        "timestamp_utc": timestamp.strftime(TIMESTAMP_FORMAT), "valid": valid,
    }
    if not old_shape:
        return entry
    legacy = LEGACY_TAGS[family]
    entry["strategy_tags"] = ([legacy, *directive.strategy_modifiers] if rng.random() < 0.5
                              else [*directive.strategy_modifiers, legacy])[:4]
    return {**{k: v for k, v in entry.items() if k in OLD_SHAPE_KEYS}, "base_branch": "main"}


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def simulate_episode(seed: int, index: int, *, old_shape: bool = False, iterations: Optional[int] = None,
                     start: Callable[[random.Random], KernelState] = initial_state,
                     persona: Optional[PlannerPersona] = None) -> SimulatedEpisode:
    """Episode `index` of a seed: the planner plays the kernel environment for 24-48 iterations.

    `start` draws the first state from the episode's setup stream (the sample's `initial_state` unless given,
    e.g. an earlier phase of the same kernel's optimization); `persona` replaces the drawn planner (the draw is
    still made, so the rest of the episode's streams stay the same)."""
    setup = random.Random(derive_seed("episode", seed, index))
    state = start(setup)
    drawn = sample_persona(setup)
    persona = persona if persona is not None else drawn
    count = iterations if iterations is not None else setup.randint(24, 48)
    climbs_thresholds = setup.random() < 0.7
    clock = EPOCH + timedelta(hours=7 * index, minutes=setup.randint(0, 300))
    main_sha = _sha(setup)
    episode_id = f"sim-{seed}-{index:04d}"
    slug = random.Random(derive_seed("slug", seed, index)).choice(SLUGS)
    start_cycles = state.cycles
    history: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    directives: list[dict[str, Any]] = []
    iterations_side: list[dict[str, Any]] = []
    for iteration_id in range(1, count + 1):
        planner_rng = random.Random(derive_seed("planner", seed, index, iteration_id))
        env_rng = random.Random(derive_seed("env", seed, index, iteration_id))
        target = next_threshold(state.cycles) if climbs_thresholds else None
        iterations_side.append({"iteration_id": iteration_id, "goal": "best" if target is None else "threshold",
                                "threshold_target": target,
                                "performance_profile": performance_profile(state).model_dump(mode="json")})
        directive = plan_directive(history, state, target, persona, planner_rng)
        outcome = apply_directive(state, directive, env_rng)
        clock += timedelta(minutes=planner_rng.randint(6, 45), seconds=planner_rng.randint(0, 59))
        head_sha = _sha(planner_rng)
        entry = log_entry(iteration_id, clock, directive, outcome, (main_sha, head_sha), target, planner_rng,
                          old_shape, slug)
        # The protocol is about the family the planner chose, so the planner's own memory keeps it.
        history.append({**entry, "strategy_tags": [directive.strategy_family, *directive.strategy_modifiers]})
        entries.append(entry)
        directives.append(directive.model_dump(mode="json"))
        if outcome.new_best:
            main_sha = head_sha
        state = outcome.state_after
    side = {"format": SIDE_FILE_FORMAT, "episode_id": episode_id, "seed": seed, "index": index,
            "old_shape": old_shape, "persona": persona.model_dump(mode="json"), "start_cycles": start_cycles,
            "final_best_cycles": state.cycles, "climbs_thresholds": climbs_thresholds,
            "iterations": iterations_side}
    return SimulatedEpisode(episode_id=episode_id, old_shape=old_shape, entries=entries, side=side,
                            directives=directives)


class SimulationSummary(BaseModel):
    """What `write_episodes` wrote."""

    model_config = ConfigDict(extra="forbid")

    out_dir: str
    episodes: int
    entries: int
    old_shape_episodes: int
    files: list[str]
    archived_plans: int = 0


def episode_is_old_shape(seed: int, index: int, old_shape_fraction: float) -> bool:
    """Whether episode `index` of a seed is written in the older short shape."""
    return random.Random(derive_seed("shape", seed, index)).random() < old_shape_fraction


def archive_mode(seed: int, index: int) -> str:
    """How episode `index`'s plans were made, hence where its archive lies: manual, codex or codex_api."""
    return random.Random(derive_seed("archive", seed, index)).choice(MODES)


def write_archive(folder: Path, episode_id: str, entries: Sequence[Mapping[str, Any]],
                  packets: Sequence[Mapping[str, Any]], directives: Sequence[Mapping[str, Any]],
                  profiles: Sequence[Mapping[str, Any]], mode: str) -> int:
    """Write an episode's `.advisor/` as the loop runner would have (`advisor_archive.write_plan`), one plan per
    log line: `packets[i]` is the planner fields of the packet before entry i (the runner's, from its log),
    `directives[i]` what the planner answered, `profiles[i]` the performance profile it saw; returns the number of
    plans written. A directive the runner's own check refuses (a blocked family) is never archived: the runner
    stops before writing it, so that attempt was planned around the runner and its log line has no archive (its
    packet is rebuilt on import)."""
    written = 0
    for entry, fields, directive, profile in zip(entries, packets, directives, profiles):
        if pivot.validate_directive_original(directive, fields["strategy_family_constraints"]["blocked_families"]):
            continue
        recorded = datetime.strptime(entry["timestamp_utc"], TIMESTAMP_FORMAT)
        planned = (recorded - timedelta(minutes=5)).strftime(TIMESTAMP_FORMAT)
        packet = runner_packet({**fields, "performance_profile": runner_profile(profile)},
                               iteration_id=entry["iteration_id"], timestamp_utc=planned, branch=entry["branch"],
                               base_branch=entry["base_branch"], base_sha=entry["base_sha"],
                               worktree=f"/home/loop/{episode_id}",
                               origin_url=f"https://github.com/example/{episode_id}.git", mode=mode)
        write_plan(folder, mode, packet, directive, created_at_utc=planned,
                   from_ref=f"origin/plan/{entry['iteration_id']:04d}-manual" if mode == "manual" else None)
        written += 1
    return written


def write_episode_archive(folder: Path, episode: SimulatedEpisode, packets: Sequence[Mapping[str, Any]],
                          mode: str) -> int:
    """`write_archive` for a simulated episode: its directives and the profiles of its side file."""
    profiles = [side["performance_profile"] for side in episode.side["iterations"]]
    return write_archive(folder, episode.episode_id, episode.entries, packets, episode.directives, profiles, mode)


def runner_profile(profile: Mapping[str, Any]) -> dict[str, Any]:
    """A profile as the runner's `_compute_performance_profile_for_submission_case` writes it: the bounds plus its
    own keys (the submission case, slack in cycles, the dominant engine)."""
    engines = profile.get("min_cycles_by_engine") or {}
    dominant = max(engines, key=lambda k: (engines[k], k)) if engines else None
    return {**profile, "profile_case": {"forest_height": 10, "n_nodes": 2047, "batch_size": 256, "rounds": 16},
            "schedule_slack_cycles": profile["schedule_cycles_estimate"] - profile["tight_lb_cycles"],
            "dominant_engine": dominant}


PacketsOf = Callable[[SimulatedEpisode], list[dict[str, Any]]]


def write_episodes(out_dir: Path | str, episodes: int, seed: int, *,
                   old_shape_fraction: float = 0.2, archive_packets: Optional[PacketsOf] = None,
                   archive_episodes: Optional[int] = None) -> SimulationSummary:
    """Write `episodes` episodes as OUT/episode-NNNN/log.jsonl plus their `log.sim.jsonl` side files.

    With `archive_packets` (the packets the runner builds from an episode's log: `guidebench.data` passes its
    rebuild, which sits above this layer), every episode in the current log shape also gets the runner's planner
    archive, `OUT/episode-NNNN/.advisor/`, in the mode `archive_mode` draws (older-shape episodes come from a runner
    that kept none); `archive_episodes` limits that to the first so many of them (the committed sample keeps three:
    an archive is some 30 kB a plan)."""
    if episodes < 1:
        raise ValueError("episodes must be >= 1")
    if not 0.0 <= old_shape_fraction <= 1.0:
        raise ValueError("old_shape_fraction must be within [0, 1]")
    out = Path(out_dir)
    files: list[str] = []
    total = old = archived = archived_episodes = 0
    for index in range(episodes):
        episode = simulate_episode(seed, index, old_shape=episode_is_old_shape(seed, index, old_shape_fraction))
        folder = out / f"episode-{index:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "log.jsonl"
        log.write_text(episode.log_text(), encoding="utf-8")
        (folder / f"log{SIDE_FILE_SUFFIX}").write_text(episode.side_text(), encoding="utf-8")
        files.append(log.relative_to(out).as_posix())
        total += len(episode.entries)
        old += episode.old_shape
        if archive_packets is not None and not episode.old_shape and (archive_episodes is None
                                                                      or archived_episodes < archive_episodes):
            archived += write_episode_archive(folder, episode, archive_packets(episode), archive_mode(seed, index))
            archived_episodes += 1
    return SimulationSummary(out_dir=str(out), episodes=episodes, entries=total, old_shape_episodes=old, files=files,
                             archived_plans=archived)
