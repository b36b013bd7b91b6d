"""No-LM reference planner that follows the pivot policy of `runtime.pivot`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import dspy

from runtime.advisor import FAMILIES, AdvisorPacket, DirectiveValidation, OptimizationDirective
from runtime.pivot import (
    current_streak,
    family_constraints,
    family_of,
    invalid_streak,
    near_bound,
    packet_pivot_inputs,
    pivot_required,
)

from .batch import AnswersInBatches
from .inputs import objective_text, packet_from_inputs, tail_entries
from .results import directive_prediction, safe_directive

BOUND_LOWERING: tuple[str, ...] = ("family:reduce_loads", "family:break_deps")
INVALID_RECOVERY = 3


@dataclass(frozen=True)
class Playbook:
    """What the rule planner proposes within one strategy family."""

    modifiers: tuple[str, ...]
    hypothesis: str
    approaches: tuple[str, str, str]
    changes: tuple[str, ...]
    wild_card: str
    risk: str


PLAYBOOKS: dict[str, Playbook] = {
    "family:schedule": Playbook(
        modifiers=("list_scheduling", "slot_packing"),
        hypothesis="Bundles leave slots idle; packing independent ops into them shortens the schedule "
                   "toward the resource bound.",
        approaches=("list-schedule by critical-path priority", "pack ALU ops into idle bundles",
                    "software-pipeline the round loop"),
        changes=("Reorder independent ops by critical-path priority", "Fill idle ALU and VALU slots"),
        wild_card="move the flow ops to the start of each bundle group",
        risk="Low",
    ),
    "family:reduce_loads": Playbook(
        modifiers=("register_reuse", "vload"),
        hypothesis="The load engine (2 slots per cycle) bounds the kernel; fewer loads lower the tight "
                   "bound itself.",
        approaches=("keep reused values in registers", "replace scalar loads with vector loads",
                    "fuse loads of adjacent fields"),
        changes=("Keep values reused across rounds in registers", "Load 8 lanes at once with vector loads"),
        wild_card="store data interleaved so one load serves two uses",
        risk="Medium",
    ),
    "family:break_deps": Playbook(
        modifiers=("interleave_batches", "split_chains"),
        hypothesis="A long dependency chain sets the critical path; interleaving independent work "
                   "hides its latency.",
        approaches=("interleave independent batches", "split long chains into parallel halves",
                    "unroll the round loop"),
        changes=("Interleave two independent batches per round", "Split the longest chain in two"),
        wild_card="precompute loop-invariant values once outside the rounds",
        risk="Medium",
    ),
}


def family_tries(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many attempts of each family the log shows."""
    tries = {family: 0 for family in FAMILIES}
    for entry in entries:
        family = family_of(entry)
        if family is not None:
            tries[family] += 1
    return tries


def _improved(entry: Mapping[str, Any], earlier: Sequence[Mapping[str, Any]]) -> bool:
    if entry.get("valid") is not True or not isinstance(entry.get("cycles"), int):
        return False
    if isinstance(entry.get("delta_vs_best"), int):
        return entry["delta_vs_best"] < 0
    previous = [e["cycles"] for e in earlier if e.get("valid") is True and isinstance(e.get("cycles"), int)]
    return not previous or entry["cycles"] < min(previous)


def two_strikes(entries: Sequence[Mapping[str, Any]]) -> bool:
    """The current family's last two attempts both failed to improve (invalid counts as non-improving)."""
    _, streak = current_streak(entries)
    if len(streak) < 2:
        return False
    start = len(entries) - len(streak)
    return not any(_improved(entries[start + i], entries[: start + i]) for i in (len(streak) - 2, len(streak) - 1))


def _expected_effect(packet: AdvisorPacket, lowering: bool) -> int:
    """The rule's guess of the cycles the directive saves: a quarter of the schedule gap when the profile shows one,
    else a share of the best so far (1% for a bound-lowering family, 0.5% for schedule), so that the guess follows
    the kernel's scale instead of a constant fitted to one kernel."""
    profile = packet.performance_profile
    best = packet.best_so_far or 1000  # no best known: a thousand-cycle kernel's share
    if profile is not None and profile.schedule_cycles_estimate and profile.tight_lb_cycles:
        gap = profile.schedule_cycles_estimate - profile.tight_lb_cycles
        if not lowering and gap > 0:
            return -max(1, min(200, gap // 4))
    return -max(1, round(best * (0.01 if lowering else 0.005)))


@dataclass(frozen=True)
class RuleChoice:
    """What the pivot protocol fixes for the next directive, as the rule planner reads a packet."""

    family: str
    reasons: tuple[str, ...]
    lowering: bool  # near the bound: the family lowers it
    recovery: bool  # three invalid attempts in a row: start again from the last valid kernel


@dataclass(frozen=True)
class ProtocolView:
    """What the pivot protocol says about the next directive, as the rule planner reads a packet."""

    entries: list[dict[str, Any]]
    allowed: list[str]  # allowed by the constraints (blocked ones out)
    compliant: list[str]  # the families a directive may choose and comply (a subset of `allowed`)
    current: Optional[str]
    reasons: list[str]
    must_leave: bool
    lowering: bool  # near the bound: the family must lower it
    recovery: bool  # three invalid attempts in a row: start again from the last valid kernel


def protocol_view(packet: AdvisorPacket) -> ProtocolView:
    """The pivot protocol on a packet: allowed and compliant families, the rules in force and why.

    A compliant family is what `evals.metrics_planner` scores as compliant: allowed by the packet's constraints,
    bound-lowering near the bound, and not the current family when any rule but `near_bound` demands a pivot
    (near the bound alone, the current bound-lowering family may go on).
    """
    entries = tail_entries(packet)
    stated = packet.strategy_family_constraints
    # The packet's constraints come from the whole log; the tail re-derives them as a cross-check.
    blocked = set(stated.blocked_families) | set(family_constraints(entries).blocked_families)
    allowed = [f for f in stated.families_for_next() if f not in blocked] or stated.families_for_next()
    target = packet.threshold_target if packet.goal == "threshold" else None
    # The tail holds the last 20 entries only, and the best may be a best/* tag's: the pivot policy reads
    # the packet's best and plateau, as the real runner gave them, so the rules agree with the packet.
    known = packet_pivot_inputs(packet)
    _, reasons = pivot_required(entries, packet.performance_profile, target, **known)
    if stated.blocked_families and "family_blocked" not in reasons:
        reasons.append("family_blocked")  # the packet's own block (whole log) demands a pivot too
    lowering = near_bound(entries, packet.performance_profile, target, **known)
    current = stated.current_family or current_streak(entries)[0]
    # Every rule but near_bound demands a new family; near the bound alone, any bound-lowering one will do.
    leave = [f for f in allowed if f != current] or allowed
    must_leave = any(reason != "near_bound" for reason in reasons)
    if lowering:
        compliant = [f for f in (leave if must_leave else allowed) if f in BOUND_LOWERING] \
            or [f for f in allowed if f in BOUND_LOWERING] or allowed
    else:
        compliant = leave if must_leave else allowed
    return ProtocolView(entries=entries, allowed=allowed, compliant=compliant, current=current, reasons=reasons,
                        must_leave=must_leave, lowering=lowering,
                        recovery=invalid_streak(entries) >= INVALID_RECOVERY)


def rule_choice(packet: AdvisorPacket) -> RuleChoice:
    """The family the pivot protocol leaves, the least-tried among the candidates, and the reasons behind it.

    The family always complies with the protocol as `evals.metrics_planner` scores it (`protocol_view`).
    """
    view = protocol_view(packet)
    entries, reasons = view.entries, list(view.reasons)
    candidates = view.compliant
    if not view.lowering and not view.must_leave:
        if two_strikes(entries):
            reasons.append(f"two_strikes: the last two {view.current} attempts did not improve")
            candidates = [f for f in view.allowed if f != view.current] or view.allowed
        elif view.current in view.allowed and entries and _improved(entries[-1], entries[:-1]):
            candidates = [view.current]
            reasons.append(f"keep {view.current}: the last attempt improved")
    tries = family_tries(entries)
    family = min(candidates, key=lambda f: (tries[f], FAMILIES.index(f)))
    return RuleChoice(family=family, reasons=tuple(reasons), lowering=view.lowering, recovery=view.recovery)


def plan_steps(choice: RuleChoice, changes: Sequence[str], best: Optional[int]) -> list[str]:
    """The step plan the protocol asks for: three orthogonal approaches, one wild card, the changes, then
    the tests and the measurement (first, in recovery, a restart from the last valid kernel)."""
    play = PLAYBOOKS[choice.family]
    return [
        *(["Start from the last valid kernel"] if choice.recovery else []),
        "Weigh three orthogonal approaches: " + "; ".join(play.approaches),
        f"Pick '{play.approaches[0]}' as the main change",
        f"Wild card: {play.wild_card}",
        *changes,
        "Run the correctness tests and check that the tests are unchanged",
        f"Measure cycles and compare with {best if best is not None else 'the baseline'}",
    ]


def rule_directive(packet: AdvisorPacket, choice: Optional[RuleChoice] = None
                   ) -> tuple[OptimizationDirective, list[str]]:
    """The rule planner's directive for a packet (from its `rule_choice`, computed unless given), and the
    pivot-policy reasons behind it."""
    choice = choice or rule_choice(packet)
    play = PLAYBOOKS[choice.family]
    modifiers = list(play.modifiers)
    hypothesis = play.hypothesis
    if choice.recovery:
        modifiers = ["recovery", *modifiers][:3]
        hypothesis = "Several attempts in a row were invalid: start again from the last valid kernel. " + hypothesis
    best = packet.best_cycles
    directive = OptimizationDirective(
        objective=objective_text(packet),
        primary_hypothesis=hypothesis,
        strategy_family=choice.family,
        strategy_modifiers=modifiers,
        risk="Low" if choice.recovery else play.risk,
        expected_effect_cycles=_expected_effect(packet, choice.lowering),
        change_summary=list(play.changes),
        step_plan=plan_steps(choice, play.changes, best),
        validation=DirectiveValidation(
            commands=["python tests/submission_tests.py"],
            pass_criteria=["correctness tests pass",
                           f"cycles below {best}" if best is not None else "cycles below the baseline"],
        ),
        next_packet_requests=["slot utilization per engine after the change"],
        did_web_search=False,
    )
    return directive, list(choice.reasons)


def explored_directive(packet: AdvisorPacket, family: str, why: str) -> tuple[OptimizationDirective, list[str]]:
    """The rule planner's directive for a family an exploring planner drew (`runtime.exploration`)."""
    view = protocol_view(packet)
    choice = RuleChoice(family=family, reasons=(*view.reasons, why), lowering=view.lowering, recovery=view.recovery)
    return rule_directive(packet, choice)


class PlannerRules(AnswersInBatches, dspy.Module):
    """Reference planner without an LM: pivots to the least-tried allowed family, lowers the bound when near it."""

    # An export may explore epsilon-greedily over the compliant families (`runtime.exploration`).
    exploration_policies: tuple[str, ...] = ("epsilon",)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        packet: Optional[AdvisorPacket] = packet_from_inputs(inputs)
        if packet is None:
            error = "planner.rules needs the full advisor packet as the `packet` input (see programs.planner_inputs)"
            return directive_prediction(safe_directive(), parse_errors=[error], rule_reasons=[])
        directive, reasons = rule_directive(packet)
        return directive_prediction(directive, rule_reasons=reasons, compliant=protocol_view(packet).compliant)

    def directive_for(self, family: str, **inputs: Any) -> dspy.Prediction:
        """The directive for a family an exploring export drew (its rules' directive for that family)."""
        packet = packet_from_inputs(inputs)
        if packet is None or family not in FAMILIES:
            raise ValueError(f"planner.rules: no packet, or {family!r} is not a family")
        directive, reasons = explored_directive(packet, family, f"explore: {family} drawn")
        return directive_prediction(directive, rule_reasons=reasons)
