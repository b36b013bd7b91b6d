"""A planner loop on the simulator: a frozen planner drives simulated kernel episodes and logs as production does.

Each iteration builds the packet the loop runner would give (`guidebench.data.planner_packets.PacketBuilder`, the
builder the import rebuilds packets with, over the log lines written so far, with the goal and the performance
profile), lets the deployed planner decide through `runtime.planner_shadow.PlannerShadow` (its directive unchanged,
the decision with every family's probability appended to `planner-decisions.jsonl`, and a shadowing candidate's
choice beside it), applies the directive to the simulated kernel (`evals.sim_kernel`) and appends the runner's log
line (formats.md §2.1). Each episode is a folder `episode-NNNN/` with `log.jsonl`, the side file `log.sim.jsonl`
(goal and profile per iteration, as `data simulate experiments` writes) and `planner-decisions.jsonl`, so
`guidebench data import OUT --kind experiments` reads it back with the logged propensities joined.

The kernel and its noise come from the simulator's streams seeded by (seed, episode, iteration), as
`guidebench.simulators.experiments.simulate_episode`; the planner's own draws from its exploration seed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Optional

from evals.sim_kernel import AttemptOutcome, KernelState, apply_directive, derive_seed, initial_state, performance_profile
from runtime.advisor import AdvisorPacket, OptimizationDirective

from guidebench.data.planner_packets import PacketBuilder
from guidebench.simulators.experiments import (EPOCH, SIDE_FILE_FORMAT, SIDE_FILE_SUFFIX, SLUGS, entry_line, log_entry,
                                               next_threshold, sample_persona)

Observer = Callable[[int, AdvisorPacket, KernelState, Any, AttemptOutcome], None]


@dataclass
class PlannerLoopSummary:
    """What a planner loop wrote."""

    out: Path
    episodes: int = 0
    iterations: int = 0
    explored: int = 0  # iterations whose family was not the planner's greedy one
    improvement: float = 0.0  # cycles taken off the best, summed
    families: dict[str, int] = field(default_factory=dict)
    sidecar_errors: list[str] = field(default_factory=list)


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def _setup(seed: int, index: int) -> tuple[random.Random, KernelState, int, bool]:
    """The episode's start as `simulate_episode` draws it (same stream, same order)."""
    setup = random.Random(derive_seed("episode", seed, index))
    state = initial_state(setup)
    sample_persona(setup)  # drawn to keep the stream in step with the simulated planner's episodes
    count = setup.randint(24, 48)
    climbs = setup.random() < 0.7
    return setup, state, count, climbs


def run_planner_episode(shadow: Any, seed: int, index: int, folder: Path, *, iterations: Optional[int] = None,
                        observe: Optional[Observer] = None) -> tuple[int, int, float]:
    """Episode `index`: the shadow's deployed planner plays the kernel; writes log, side file and sidecar lines.

    Returns (iterations, explored iterations, cycles improved). `observe(iteration, packet, state before, decision,
    outcome)` sees every step (the benchmarks measure truth with it)."""
    setup, state, count, climbs = _setup(seed, index)
    count = iterations or count
    clock = EPOCH + timedelta(hours=7 * index, minutes=setup.randint(0, 300))
    main_sha = _sha(setup)
    slug = random.Random(derive_seed("slug", seed, index)).choice(SLUGS)
    builder = PacketBuilder()
    lines: list[str] = []
    side: list[dict[str, Any]] = []
    explored, improved = 0, 0.0
    for iteration_id in range(1, count + 1):
        rng = random.Random(derive_seed("planner", seed, index, iteration_id))
        env = random.Random(derive_seed("env", seed, index, iteration_id))
        target = next_threshold(state.cycles) if climbs else None
        profile = performance_profile(state)
        goal = "best" if target is None else "threshold"
        side.append({"iteration_id": iteration_id, "goal": goal, "threshold_target": target,
                     "performance_profile": profile.model_dump(mode="json")})
        # the entry about to be planned carries the best/* tags' best, as the runner's packet reads it
        packet = builder.packet({"best_before": state.cycles}, goal=goal, threshold_target=target, profile=profile)
        decision = shadow.decide(packet, iteration_id)
        directive: OptimizationDirective = decision.directive
        outcome = apply_directive(state, directive, env)
        clock += timedelta(minutes=rng.randint(6, 45), seconds=rng.randint(0, 59))
        head_sha = _sha(rng)
        entry = log_entry(iteration_id, clock, directive, outcome, (main_sha, head_sha), target, rng, False, slug)
        line = entry_line(entry)
        builder.add(entry, line)
        lines.append(line)
        if observe is not None:
            observe(iteration_id, packet, state, decision, outcome)
        explored += decision.family != decision.greedy_family
        improved += max(0, state.cycles - outcome.state_after.cycles)
        if outcome.new_best:
            main_sha = head_sha
        state = outcome.state_after
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log.jsonl").write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    header = {"format": SIDE_FILE_FORMAT, "episode_id": f"loop-{seed}-{index:04d}", "seed": seed, "index": index,
              "old_shape": False, "final_best_cycles": state.cycles}
    (folder / f"log{SIDE_FILE_SUFFIX}").write_text(
        "".join(json.dumps(x, sort_keys=True) + "\n" for x in [header, *side]), encoding="utf-8")
    return count, explored, improved


def run_planner_loop(deployed: Any, out: Path, *, episodes: int, seed: int = 0, candidate: Any = None,
                     repository: str = "simulator", deadline_s: float = 5.0, program: Any = None,
                     candidate_program: Any = None, iterations: Optional[int] = None,
                     observe: Optional[Observer] = None) -> PlannerLoopSummary:
    """`episodes` simulated episodes under OUT/episode-NNNN/, each with its own sidecar (see the module)."""
    from runtime.planner_shadow import PlannerShadow

    summary = PlannerLoopSummary(out=Path(out))
    for index in range(episodes):
        folder = Path(out) / f"episode-{index:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        with PlannerShadow(deployed, folder, candidate=candidate, repository=repository, deadline_s=deadline_s,
                           program=program, candidate_program=candidate_program) as shadow:
            count, explored, improved = run_planner_episode(shadow, seed, index, folder, iterations=iterations,
                                                            observe=observe)
            deployed = shadow.deployed  # loaded once, reused by the next episodes (each starts its candidate process)
        summary.sidecar_errors += shadow.write_errors
        summary.episodes += 1
        summary.iterations += count
        summary.explored += explored
        summary.improvement += improved
    return summary


__all__ = ["PlannerLoopSummary", "run_planner_episode", "run_planner_loop"]
