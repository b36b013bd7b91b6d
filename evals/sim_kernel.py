"""Simulated VLIW kernel-cycle environment: what a planner's directive does to the cycle count.

The model
---------
One fixed kernel is being optimized (the take-home's hash/tree kernel, formats.md §2); episodes
differ only in the code they start from. The code on the main branch is a `KernelState`:

- `task_counts`: operations per engine (alu, valu, load, store, flow);
- `cp_lb_cycles`: the critical-path lower bound (longest dependency chain, in cycles);
- `cycles`: what the current schedule of that code takes (the best valid cycles so far).

Everything the planner's packet shows follows from it (`performance_profile`):
`min_cycles_by_engine[e] = ceil(count[e] / SLOT_LIMITS[e])`, `resource_lb = max` of those,
`tight_lb = max(resource_lb, cp_lb)`, slack = `cycles - tight_lb`, `schedule_slack_pct` =
slack / tight_lb (a fraction). The state is therefore carried by a profile and rebuilt exactly
from it (`state_from_profile`). Without one there is no state: the simulator's constants (its floors, its
slot mix) are this one kernel's and are never applied to a packet they were not fitted on
(`evals.cycles`; a learned outcome model estimates such packets instead).

A directive is applied by `apply_directive(state, directive, rng)`:

- `family:schedule` removes a Beta(2, 5)-distributed share of the excess slack (slack above an
  unreachable floor of 0.4% of the tight bound), plus N(1, 1.5) noise, and regresses by 2 cycles
  to 2% of the bound one time in five. Once slack is within 4% of the tight bound (the pivot
  protocol's near-bound regime) rescheduling keeps only 35% of its power and regresses one time
  in three: it no longer pays.
- `family:reduce_loads` removes a Beta(2, 6) share of the loads above the kernel's floor
  (`LOAD_FLOOR_TASKS`, 1,290 load cycles), adding 0.6 valu ops per removed load (vector loads
  need shuffles).
- `family:break_deps` cuts a Beta(2, 6) share of the critical path above `CP_FLOOR_CYCLES`
  (1,285), adding two alu ops per cut cycle and a few flow ops.
- Bound-lowering families only pay when they lower the *binding* bound; they also disturb the
  schedule (new slack = old slack + up to 35% of the drop of the tight bound + N(1.5, 2.5)), which
  later rescheduling recovers. Lowering a bound that does not bind changes cycles only by that
  noise: now and then a few cycles better (merged, so the other bound can be attacked next),
  mostly worse.
- Diminishing returns: every gain is a share of what is left above a floor, so the bests of
  whole episodes land around 1,300-1,440 from starts of 1,450-1,900.
- 30% of ideas are duds: the change is made with zero power (only its noise and disruption).
- `risk` trades gain for failures (Low 0.7x gain and 0.6x failure rate, High 1.35x and 1.5x);
  each modifier matching the family's own techniques adds 8% gain, an unrelated one costs 5%,
  and every modifier adds 15% to the failure rate (bigger change, more to get wrong).
- Invalid attempts: correctness fails with a family-dependent base rate (schedule 10%,
  reduce_loads 14%, break_deps 20%), cycles are then usually not measured; 2% of attempts edit the
  tests, 3% touch files outside the allowed scope. `valid` = correctness passed and tests
  unchanged and scope ok.
- A valid attempt below the best becomes the new main code (`state_after`); anything else leaves
  the state unchanged, so the best cycles never increase.

`expected_improvement` averages `best_before - best_after` over seeded rollouts: the
`cycles_improvement` of a directive from an example's state.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field

from runtime.advisor import FAMILIES, SLOT_LIMITS, OptimizationDirective, PerformanceProfile

ENGINES: tuple[str, ...] = tuple(SLOT_LIMITS)
SCHEDULE, REDUCE_LOADS, BREAK_DEPS = FAMILIES

# Floors of the one kernel every episode optimizes: the bests cannot go below ~1,295 cycles.
LOAD_FLOOR_TASKS = 2580
CP_FLOOR_CYCLES = 1285
SLACK_FLOOR_FRACTION = 0.004
NEAR_BOUND_SLACK = 0.04

VALU_PER_REMOVED_LOAD = 0.6
ALU_PER_CUT_CYCLE = 2
NEAR_BOUND_SCHEDULE_POWER = 0.35

RISK_GAIN = {"Low": 0.7, "Medium": 1.0, "High": 1.35}
RISK_FAILURE = {"Low": 0.6, "Medium": 1.0, "High": 1.5}
FAILURE_BASE = {SCHEDULE: 0.10, REDUCE_LOADS: 0.14, BREAK_DEPS: 0.20}
MAX_FAILURE = 0.6
P_CYCLES_MEASURED_ON_FAILURE = 0.3
P_TESTS_CHANGED = 0.02
P_SCOPE_VIOLATION = 0.03
P_DUD = 0.3

# The techniques each family is made of; a directive's modifiers are scored against them.
FAMILY_TECHNIQUES: dict[str, tuple[str, ...]] = {
    SCHEDULE: ("list_scheduling", "software_pipelining", "unroll", "slot_packing"),
    REDUCE_LOADS: ("vload", "hoist_invariants", "register_reuse", "cache_tree_levels"),
    BREAK_DEPS: ("reassociate", "tree_reduction", "interleave_batches", "speculate_branches"),
}
MODIFIER_BONUS = 0.08
MODIFIER_PENALTY = 0.05
MODIFIER_FAILURE = 0.15

ALLOWED_FILE = "perf_takehome.py"
DISALLOWED_FILES = ("problem.py", "frozen_problem.py")
FORBIDDEN_FILES = ("tests/submission_tests.py", "tests/frozen_problem.py")


class KernelState(BaseModel):
    """The main branch's code as the environment sees it: work per engine, critical path, cycles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_counts: dict[str, int]
    cp_lb_cycles: int = Field(ge=1)
    cycles: int = Field(ge=1)

    @property
    def min_cycles_by_engine(self) -> dict[str, int]:
        """ceil(task count / slot limit) for every engine."""
        return {e: math.ceil(self.task_counts.get(e, 0) / SLOT_LIMITS[e]) for e in ENGINES}

    @property
    def resource_lb_cycles(self) -> int:
        """The busiest engine's minimum cycles."""
        return max(self.min_cycles_by_engine.values())

    @property
    def tight_lb_cycles(self) -> int:
        """max(resource bound, critical-path bound): no schedule of this code can beat it."""
        return max(self.resource_lb_cycles, self.cp_lb_cycles)

    @property
    def slack_cycles(self) -> int:
        """Cycles the schedule spends above the tight bound."""
        return self.cycles - self.tight_lb_cycles

    @property
    def slack_fraction(self) -> float:
        """Slack as a fraction of the tight bound."""
        return self.slack_cycles / self.tight_lb_cycles

    @property
    def binding_bound(self) -> str:
        """`cp` when the critical path sets the tight bound, else the busiest engine's name."""
        by_engine = self.min_cycles_by_engine
        engine = max(ENGINES, key=lambda e: (by_engine[e], -ENGINES.index(e)))
        return "cp" if self.cp_lb_cycles >= by_engine[engine] else engine


class AttemptOutcome(BaseModel):
    """What one applied directive produced, in the terms of a loop-runner log entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str
    valid: bool
    cycles: Optional[int]
    correctness_pass: bool
    tests_diff_empty: bool
    scope_ok: bool
    scope_disallowed_files: list[str]
    scope_forbidden_files: list[str]
    files_changed: list[str]
    best_before: int
    new_best: bool
    failure: Literal["", "correctness", "tests_changed", "scope"]
    state_after: KernelState

    @property
    def best_after(self) -> int:
        """Best cycles once the attempt is merged (or not)."""
        return self.state_after.cycles

    @property
    def improvement(self) -> int:
        """Cycles the best dropped by (>= 0)."""
        return self.best_before - self.best_after


def derive_seed(*parts: Any) -> int:
    """A 64-bit seed from any parts, stable across runs and Python versions (no hash())."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def performance_profile(state: KernelState) -> PerformanceProfile:
    """The packet's `performance_profile` of a state (bounds, schedule estimate, slack fraction)."""
    return PerformanceProfile(
        task_counts_by_engine={e: state.task_counts.get(e, 0) for e in ENGINES},
        min_cycles_by_engine=state.min_cycles_by_engine,
        resource_lb_cycles=state.resource_lb_cycles,
        cp_lb_cycles=state.cp_lb_cycles,
        tight_lb_cycles=state.tight_lb_cycles,
        schedule_cycles_estimate=state.cycles,
        schedule_slack_pct=round(state.slack_fraction, 6),
    )


def state_from_profile(profile: PerformanceProfile | Mapping[str, Any]) -> KernelState:
    """The exact state behind a profile; ValueError when the profile lacks counts, cp bound or estimate."""
    p = profile if isinstance(profile, PerformanceProfile) else PerformanceProfile.model_validate(profile)
    missing = [name for name, value in (("task_counts_by_engine", p.task_counts_by_engine),
                                        ("cp_lb_cycles", p.cp_lb_cycles),
                                        ("schedule_cycles_estimate", p.schedule_cycles_estimate)) if not value]
    if missing:
        raise ValueError(f"performance_profile lacks {', '.join(missing)}: cannot rebuild the kernel state")
    counts = {e: int(p.task_counts_by_engine.get(e, 0)) for e in ENGINES}
    return KernelState(task_counts=counts, cp_lb_cycles=int(p.cp_lb_cycles), cycles=int(p.schedule_cycles_estimate))


def initial_state(rng: random.Random) -> KernelState:
    """A start of an episode: bounds ~1,330-1,520 cycles, 6-26% slack, cycles within 1,450-1,900."""
    load_cycles = rng.randint(1330, 1520)
    cp = rng.randint(1320, 1520)
    counts = {
        "alu": rng.randint(9000, 10800),
        "valu": 6 * rng.randint(1150, 1255) - rng.randint(0, 5),
        "load": 2 * load_cycles - rng.randint(0, 1),
        "store": rng.randint(512, 640),
        "flow": rng.randint(300, 620),
    }
    tight = max(max(math.ceil(counts[e] / SLOT_LIMITS[e]) for e in ENGINES), cp)
    cycles = tight + round(tight * rng.uniform(0.06, 0.26))
    return KernelState(task_counts=counts, cp_lb_cycles=cp, cycles=min(1900, max(1450, cycles)))


def _directive_fields(directive: OptimizationDirective | Mapping[str, Any]) -> tuple[str, list[str], str]:
    if isinstance(directive, OptimizationDirective):
        return directive.strategy_family, list(directive.strategy_modifiers), directive.risk
    if not isinstance(directive, Mapping):
        raise TypeError(f"directive must be an OptimizationDirective or a mapping, got {type(directive).__name__}")
    family = directive.get("strategy_family")
    if family not in FAMILIES:
        raise ValueError(f"strategy_family must be one of {', '.join(FAMILIES)}, got {family!r}")
    modifiers = directive.get("strategy_modifiers") or []
    risk = directive.get("risk", "Medium")
    return family, [m for m in modifiers if isinstance(m, str)], risk if risk in RISK_GAIN else "Medium"


def _focus(family: str, modifiers: list[str]) -> float:
    own = FAMILY_TECHNIQUES[family]
    matching = sum(1 for m in modifiers if m in own)
    return 1.0 + MODIFIER_BONUS * matching - MODIFIER_PENALTY * (len(modifiers) - matching)


def _with(state: KernelState, counts: dict[str, int], cp: int, slack: int) -> KernelState:
    draft = KernelState(task_counts=counts, cp_lb_cycles=cp, cycles=state.cycles)
    return KernelState(task_counts=counts, cp_lb_cycles=cp, cycles=draft.tight_lb_cycles + slack)


def _slack_floor(state: KernelState) -> int:
    return math.ceil(SLACK_FLOOR_FRACTION * state.tight_lb_cycles)


def _disturbed_slack(state: KernelState, lowered: KernelState, rng: random.Random) -> int:
    """Restructured code schedules a little differently: part of the bound drop comes back as slack, plus noise."""
    drop = state.tight_lb_cycles - lowered.tight_lb_cycles
    slack = state.slack_cycles + round(rng.uniform(0.0, 0.35) * drop + rng.gauss(1.5, 2.5))
    return max(_slack_floor(lowered), slack)


def _reschedule(state: KernelState, power: float, rng: random.Random) -> KernelState:
    floor = _slack_floor(state)
    excess = max(0, state.slack_cycles - floor)
    share = rng.betavariate(2, 5) * power
    regress_p = 0.2
    if state.slack_fraction <= NEAR_BOUND_SLACK:
        share *= NEAR_BOUND_SCHEDULE_POWER
        regress_p = 0.35
    change = -excess * min(share, 0.9) + rng.gauss(1.0, 1.5)
    if rng.random() < regress_p:
        change += rng.uniform(2.0, 0.02 * state.tight_lb_cycles)
    slack = max(floor, round(state.slack_cycles + change))
    return _with(state, dict(state.task_counts), state.cp_lb_cycles, slack)


def _reduce_loads(state: KernelState, power: float, rng: random.Random) -> KernelState:
    removable = max(0, state.task_counts["load"] - LOAD_FLOOR_TASKS)
    removed = round(removable * min(rng.betavariate(2, 6) * power, 0.8))
    counts = dict(state.task_counts)
    counts["load"] -= removed
    counts["valu"] += round(removed * VALU_PER_REMOVED_LOAD)
    lowered = _with(state, counts, state.cp_lb_cycles, 0)
    return _with(state, counts, state.cp_lb_cycles, _disturbed_slack(state, lowered, rng))


def _break_deps(state: KernelState, power: float, rng: random.Random) -> KernelState:
    reducible = max(0, state.cp_lb_cycles - CP_FLOOR_CYCLES)
    cut = round(reducible * min(rng.betavariate(2, 6) * power, 0.8))
    counts = dict(state.task_counts)
    counts["alu"] += ALU_PER_CUT_CYCLE * cut
    counts["flow"] += rng.randint(0, 3)
    lowered = _with(state, counts, state.cp_lb_cycles - cut, 0)
    return _with(state, counts, state.cp_lb_cycles - cut, _disturbed_slack(state, lowered, rng))


_TRANSFORMS = {SCHEDULE: _reschedule, REDUCE_LOADS: _reduce_loads, BREAK_DEPS: _break_deps}


def apply_directive(state: KernelState, directive: OptimizationDirective | Mapping[str, Any],
                    rng: random.Random) -> AttemptOutcome:
    """Apply a directive to the main code: the attempt's validity, measured cycles and the new main state."""
    family, modifiers, risk = _directive_fields(directive)
    power = RISK_GAIN[risk] * _focus(family, modifiers)
    p_fail = min(MAX_FAILURE, FAILURE_BASE[family] * RISK_FAILURE[risk] * (1 + MODIFIER_FAILURE * len(modifiers)))
    # Every draw happens in the same order whatever the branch, so a seed fixes the whole attempt.
    correctness = rng.random() >= p_fail
    measured_on_failure = rng.random() < P_CYCLES_MEASURED_ON_FAILURE
    tests_unchanged = rng.random() >= P_TESTS_CHANGED
    scope_violation = rng.random() < P_SCOPE_VIOLATION
    stray_file = rng.choice(DISALLOWED_FILES + FORBIDDEN_FILES)
    dud = rng.random() < P_DUD
    candidate = _TRANSFORMS[family](state, 0.0 if dud else power, rng)

    files = [ALLOWED_FILE]
    disallowed = [stray_file] if scope_violation and stray_file in DISALLOWED_FILES else []
    forbidden = [stray_file] if scope_violation and stray_file in FORBIDDEN_FILES else []
    if not tests_unchanged:
        files.append("tests/submission_tests.py")
    files.extend(f for f in disallowed + forbidden if f not in files)
    scope_ok = not disallowed and not forbidden
    valid = correctness and tests_unchanged and scope_ok
    cycles: Optional[int] = candidate.cycles if correctness or measured_on_failure else None
    new_best = valid and cycles is not None and cycles < state.cycles
    failure = "" if valid else ("correctness" if not correctness else "tests_changed" if not tests_unchanged
                                else "scope")
    return AttemptOutcome(
        family=family, valid=valid, cycles=cycles, correctness_pass=correctness,
        tests_diff_empty=tests_unchanged, scope_ok=scope_ok, scope_disallowed_files=disallowed,
        scope_forbidden_files=forbidden, files_changed=files, best_before=state.cycles, new_best=new_best,
        failure=failure, state_after=candidate if new_best else state,
    )


def expected_improvement(state: KernelState, directive: OptimizationDirective | Mapping[str, Any], *,
                         seed: int, rollouts: int = 32) -> float:
    """Mean drop of the best cycles (best_before - best_after, >= 0) over `rollouts` seeded attempts."""
    if rollouts < 1:
        raise ValueError("rollouts must be >= 1")
    total = 0
    for k in range(rollouts):
        total += apply_directive(state, directive, random.Random(derive_seed("rollout", seed, k))).improvement
    return total / rollouts
