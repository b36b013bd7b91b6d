"""Hand-written seed demonstrations of the uncompiled LM programs.

Why they exist: the embedded base model does not follow the `[[ ## field ## ]]` format zero-shot,
but follows it reliably with three full demonstrations in the prompt (design.md). Each seed
carries every output field; a demo with missing outputs makes DSPy write "Not supplied for this
particular example." into it, which the model then copies. Optimizers replace these demos:
`reset_copy()` clears them in the student, while the teacher keeps them to bootstrap traces.
The scenarios are invented, not taken from any dataset, so they never leak into an eval split.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import dspy

from runtime.advisor import AdvisorPacket, ExperimentSummary, FamilyConstraints, PerformanceProfile
from runtime.fullauto import FullAutoTurnSummary
from runtime.inputs import compact_packet_inputs, compact_state_inputs, compact_summary_inputs, summary_inputs
from signatures import (COMPACT_DECISION_INPUT_FIELDS, COMPACT_PLANNER_INPUT_FIELDS, COMPACT_STATE_INPUT_FIELDS,
                        FULL_AUTO_INPUT_FIELDS, PLANNER_INPUT_FIELDS, PlannerGivenFamilySignature)

from .inputs import given_family_inputs, planner_inputs
from .rules_planner import rule_choice


def _plan(*steps: tuple[str, str]) -> str:
    return json.dumps([{"step": step, "status": status} for step, status in steps], indent=2)


def _recent(*decisions: tuple[str, str, str, float]) -> str:
    items = [{"turn_id": turn, "action": action, "reason": reason, "confidence": confidence,
              "timestamp": 1732250000 + 300 * index}
             for index, (turn, action, reason, confidence) in enumerate(decisions)]
    return json.dumps(items, indent=2)


@dataclass(frozen=True)
class DecisionSeed:
    """One invented turn and the decision it calls for, with the text each program stage needs."""

    summary: FullAutoTurnSummary
    action: str
    next_input: str
    reason: str
    confidence: float
    reasoning: str
    state_summary: str
    progress: str


DECISION_SEEDS: tuple[DecisionSeed, ...] = (
    DecisionSeed(
        summary=FullAutoTurnSummary(
            thread_id="thr-seed-a", turn_id="turn-4", last_turn_status="completed",
            turn_plan=_plan(("Add input validation to parse_config", "completed"),
                            ("Fix the failing test_parse_config_defaults", "in_progress"),
                            ("Update the README section on configuration", "pending")),
            diff_summary="src/config.py | 24 +++++++++++++++++-------\ntests/test_config.py | 9 ++++++---",
            token_usage=json.dumps({"totalTokens": 48211, "inputTokens": 45102, "outputTokens": 3109}),
            pending_approvals="0", pending_tool_inputs="0", compaction_events="0",
            recent_actions=_recent(("turn-3", "continue", "The plan has open steps.", 0.8)),
            last_agent_message="Validation is in place; test_parse_config_defaults still fails on the empty-file case.",
            turn_count=4,
        ),
        action="continue",
        next_input="Fix test_parse_config_defaults for the empty-file case, then run the whole test suite.",
        reason="The last turn changed code and the plan still has open steps; one test is failing.",
        confidence=0.8,
        reasoning="The turn completed with code changes, nothing waits for approval, and a plan step "
                  "is still in progress with a failing test, so the agent should keep going.",
        state_summary="Input validation was added; one test still fails on the empty-file case. "
                      "Two plan steps remain and nothing is waiting for a person.",
        progress="progressing",
    ),
    DecisionSeed(
        summary=FullAutoTurnSummary(
            thread_id="thr-seed-b", turn_id="turn-7", last_turn_status="completed",
            turn_plan=_plan(("Write the migration adding an index on orders.created_at", "completed"),
                            ("Apply the migration to the dev database", "in_progress")),
            diff_summary="migrations/0007_orders_created_at_idx.sql | 12 ++++++++++++",
            token_usage=json.dumps({"totalTokens": 90544, "inputTokens": 86012, "outputTokens": 4532}),
            pending_approvals="1", pending_tool_inputs="0", compaction_events="1",
            recent_actions=_recent(("turn-5", "continue", "Migration still to write.", 0.78),
                                   ("turn-6", "continue", "Apply the migration next.", 0.74)),
            last_agent_message="I need approval to run `psql -f migrations/0007_orders_created_at_idx.sql`.",
            turn_count=7,
        ),
        action="pause",
        next_input="",
        reason="A command is waiting for approval; a person has to approve it before the loop goes on.",
        confidence=0.9,
        reasoning="There is one pending approval for a database command. The loop cannot approve it "
                  "by itself, so it must pause for a person.",
        state_summary="The migration is written and the agent waits for approval to apply it to the dev "
                      "database. One approval is pending.",
        progress="blocked",
    ),
    DecisionSeed(
        summary=FullAutoTurnSummary(
            thread_id="thr-seed-c", turn_id="turn-12", last_turn_status="completed",
            turn_plan=_plan(("Reproduce the timeout in fetch_batch", "completed"),
                            ("Add retry with backoff to fetch_batch", "completed"),
                            ("Run the full test suite", "completed")),
            diff_summary="",
            token_usage=json.dumps({"totalTokens": 131877, "inputTokens": 124420, "outputTokens": 7457}),
            pending_approvals="0", pending_tool_inputs="0", compaction_events="2",
            recent_actions=_recent(("turn-10", "continue", "Run the test suite.", 0.8),
                                   ("turn-11", "continue", "Confirm the fix.", 0.72)),
            last_agent_message="All 214 tests pass. The retry fix is complete; nothing else is left in the plan.",
            turn_count=12,
        ),
        action="stop",
        next_input="",
        reason="Every plan step is completed, the tests pass and the last turn made no further changes.",
        confidence=0.85,
        reasoning="All plan steps are completed, the diff is empty and the agent reports passing tests, "
                  "so the task is done and the loop should stop.",
        state_summary="The retry fix is done and all tests pass. Every plan step is completed and the "
                      "last turn changed nothing.",
        progress="done",
    ),
)


def _summary_inputs(summary: FullAutoTurnSummary) -> dict[str, str]:
    text = summary_inputs(summary)  # the rendering programs and the runtime share
    return {name: text[name] for name in FULL_AUTO_INPUT_FIELDS}


def decision_demos(with_reasoning: bool = False) -> list[dspy.Example]:
    """Seed demos for FullAutoDecisionSignature (with `reasoning` for chain of thought)."""
    demos = []
    for seed in DECISION_SEEDS:
        outputs: dict[str, Any] = {"action": seed.action, "next_input": seed.next_input,
                                   "reason": seed.reason, "confidence": seed.confidence}
        if with_reasoning:
            outputs = {"reasoning": seed.reasoning, **outputs}
        inputs = _summary_inputs(seed.summary)
        demos.append(dspy.Example(**inputs, **outputs).with_inputs(*inputs))
    return demos


# The compact program's answers to the same seeds, within the signature's word caps: a reason of a few
# words, a next input only when continuing (the plan's current step, which the compact rendering shows, in
# a few words). Confidence is text with one decimal ("0.8"), as the signature asks. The base model copies
# these answers' length (measured: most live reasons are a demo's, word for word), and each token of an
# answer is one forward pass: they stay short, in words a person reads at a glance.
COMPACT_ANSWERS: tuple[tuple[str, str], ...] = (  # (reason, next_input) per DECISION_SEEDS entry
    ("Steps remain; one test fails.", "Fix the failing config test."),
    ("A command waits for approval.", ""),
    ("Every plan step is done.", ""),
)


def compact_decision_demos() -> list[dspy.Example]:
    """Seed demos for FullAutoCompactSignature: the seeds rendered compactly, answers within the output budget."""
    demos = []
    for seed, (reason, next_input) in zip(DECISION_SEEDS, COMPACT_ANSWERS, strict=True):
        rendered = compact_summary_inputs(seed.summary)
        inputs = {name: rendered[name] for name in COMPACT_DECISION_INPUT_FIELDS}
        demos.append(dspy.Example(**inputs, action=seed.action, confidence=f"{seed.confidence:.1f}", reason=reason,
                                  next_input=next_input).with_inputs(*inputs))
    return demos


# The compact program's chain of thought: one short sentence of reasoning per DECISION_SEEDS entry, before
# the same budgeted answer (COMPACT_ANSWERS).
COMPACT_REASONING: tuple[str, ...] = (
    "The turn changed code, nothing waits for a person and plan steps remain.",
    "A command waits for approval, so the loop cannot go on by itself.",
    "Every plan step is done and the last turn changed nothing.",
)


def compact_cot_demos() -> list[dspy.Example]:
    """Seed demos for chain of thought over FullAutoCompactSignature: the compact demos with one short sentence of reasoning."""
    return [dspy.Example(**demo.inputs(), reasoning=reasoning, **demo.labels()).with_inputs(*demo.inputs().keys())
            for demo, reasoning in zip(compact_decision_demos(), COMPACT_REASONING, strict=True)]


# A turn only the compact state rendering tells apart: the plan and diff have not changed for two turns
# (no_progress_count) and the agent says it is stuck. The seeds above all progress (no_progress_count 0).
STALLED_SEED = DecisionSeed(
    summary=FullAutoTurnSummary(
        thread_id="thr-seed-d", turn_id="turn-9", last_turn_status="completed",
        turn_plan=_plan(("Find why test_sync_retries is flaky", "in_progress"),
                        ("Fix the race in sync_worker", "pending")),
        diff_summary="",
        token_usage=json.dumps({"totalTokens": 70318, "inputTokens": 66120, "outputTokens": 4198}),
        pending_approvals="0", pending_tool_inputs="0", compaction_events="0",
        recent_actions=_recent(("turn-7", "continue", "Look for the race.", 0.7),
                               ("turn-8", "continue", "Try to reproduce the failure.", 0.65)),
        last_agent_message="I re-ran test_sync_retries 20 times and could not reproduce the failure; "
                           "I am not sure where the race is.",
        turn_count=9, no_progress_count=2,
    ),
    action="pause",
    next_input="",
    reason="Two turns changed nothing and the agent is stuck; a person should redirect it.",
    confidence=0.7,
    reasoning="The plan and the diff have not changed for two turns and the agent cannot reproduce the "
              "failure, so a person should redirect it before the no-progress limit stops the loop.",
    state_summary="The agent cannot reproduce the flaky test; the plan and diff have not changed for two turns.",
    progress="stalled",
)
# The compact state program's seeds and answers: DECISION_SEEDS with COMPACT_ANSWERS, then the stalled turn.
COMPACT_STATE_SEEDS: tuple[DecisionSeed, ...] = (*DECISION_SEEDS, STALLED_SEED)
COMPACT_STATE_ANSWERS: tuple[tuple[str, str], ...] = (*COMPACT_ANSWERS, ("Two turns made no progress.", ""))


def compact_state_demos() -> list[dspy.Example]:
    """Seed demos for FullAutoCompactStateSignature: the compact demos' seeds and a stalled turn, with the turn
    counters and the clipped last message, answers within the output budget."""
    demos = []
    for seed, (reason, next_input) in zip(COMPACT_STATE_SEEDS, COMPACT_STATE_ANSWERS, strict=True):
        rendered = {**compact_summary_inputs(seed.summary), **compact_state_inputs(seed.summary)}
        inputs = {name: rendered[name] for name in COMPACT_STATE_INPUT_FIELDS}
        demos.append(dspy.Example(**inputs, action=seed.action, confidence=f"{seed.confidence:.1f}", reason=reason,
                                  next_input=next_input).with_inputs(*inputs))
    return demos


def stack_demos() -> dict[str, list[dspy.Example]]:
    """Seed demos for the module stack, keyed by stage: summarize, select, verify."""
    summarize, select, verify = [], [], []
    for seed in DECISION_SEEDS:
        data = seed.summary.model_dump()
        turn = {name: str(data[name]) for name in (
            "last_turn_status", "turn_error", "turn_plan", "diff_summary", "pending_approvals",
            "pending_tool_inputs", "recent_actions")}
        summarize.append(dspy.Example(**turn, state_summary=seed.state_summary,
                                      progress=seed.progress).with_inputs(*turn))
        chosen = {"state_summary": seed.state_summary, "progress": seed.progress,
                  "recent_actions": str(data["recent_actions"])}
        select.append(dspy.Example(**chosen, action=seed.action, next_input=seed.next_input,
                                   reason=seed.reason, confidence=seed.confidence).with_inputs(*chosen))
        proposal = {"state_summary": seed.state_summary, "progress": seed.progress,
                    "proposed_action": seed.action, "proposed_reason": seed.reason}
        verify.append(dspy.Example(**proposal, verdict="keep", rationale="The action fits the state.",
                                   confidence=seed.confidence).with_inputs(*proposal))
    return {"summarize": summarize, "select": select, "verify": verify}


def _entry(iteration: int, family: str, modifier: str, valid: bool, cycles: int | None, best_before: int,
           hypothesis: str) -> dict[str, Any]:
    delta = cycles - best_before if cycles is not None else None
    return {
        "iteration_id": iteration, "timestamp_utc": f"2025-01-0{1 + iteration % 9}T10:00:00Z",
        "valid": valid, "cycles": cycles, "strategy_tags": [family, modifier], "best_before": best_before,
        "delta_vs_best": delta, "new_best": bool(valid and delta is not None and delta < 0),
        "hypothesis": hypothesis,
    }


def _planner_seed_packets() -> list[tuple[AdvisorPacket, dict[str, Any]]]:
    # Seed 1: the schedule family used up its two attempts without a win and the schedule is far
    # from its bound: pivot to the least-tried allowed family.
    tail_a = [
        _entry(1, "family:reduce_loads", "vload", True, 1811, 2164, "Vector loads of the input batch."),
        _entry(2, "family:schedule", "list_scheduling", True, 1802, 1811, "List-schedule the hash rounds."),
        _entry(3, "family:schedule", "slot_packing", False, None, 1802, "Pack flow ops into idle bundles."),
    ]
    packet_a = AdvisorPacket(
        goal="threshold", threshold_target=1790, best_cycles=1802, plateau_valid_iters_since_best=0,
        strategy_family_constraints=FamilyConstraints(
            allowed_families=["family:reduce_loads", "family:break_deps"], blocked_families=["family:schedule"],
            current_family="family:schedule", current_family_streak_len=2, max_consecutive=2),
        experiment_log_tail=tail_a,
        experiment_summary=ExperimentSummary(
            best_cycles=1802, best_cycles_by_family={"family:reduce_loads": 1811, "family:schedule": 1802},
            invalid_counts={"family:schedule": 1}),
        performance_profile=PerformanceProfile(
            min_cycles_by_engine={"alu": 402, "valu": 655, "load": 1024, "store": 64, "flow": 210},
            resource_lb_cycles=1024, cp_lb_cycles=1310, tight_lb_cycles=1310, schedule_cycles_estimate=1802,
            schedule_slack_pct=0.376),
    )
    directive_a = {
        "objective": "Reach 1790 cycles",
        "primary_hypothesis": "The critical path (1310 cycles) sits far below the schedule (1802): the hash "
                              "rounds of one batch wait on each other, so interleaving two batches hides the latency.",
        "strategy_family": "family:break_deps",
        "strategy_modifiers": ["interleave_batches", "split_chains"],
        "risk": "Medium",
        "expected_effect_cycles": -40,
        "change_summary": ["Interleave the hash rounds of two independent batches",
                           "Split the long xor-shift chain into two shorter chains"],
        "step_plan": [
            "Weigh three approaches: interleave batches, split the xor chain, unroll the round loop",
            "Pick interleaving as the main change and splitting the chain as the second",
            "Wild card: precompute the round constants in registers once",
            "Rewrite the round loop to issue two batches per bundle",
            "Run the correctness tests",
            "Measure cycles and compare with 1802",
        ],
        "validation": {"commands": ["python tests/submission_tests.py"],
                       "pass_criteria": ["correctness tests pass", "cycles below 1802"]},
        "next_packet_requests": ["slot utilization per engine after the change"],
        "did_web_search": False,
    }
    # Seed 2: near the tight bound with no new best for three valid attempts: lower the bound.
    tail_b = [
        _entry(21, "family:break_deps", "interleave_batches", True, 1436, 1441, "Interleave batch pairs."),
        _entry(22, "family:schedule", "slot_packing", True, 1437, 1436, "Pack the tail bundles."),
        _entry(23, "family:schedule", "list_scheduling", True, 1438, 1436, "Reorder the final reduction."),
        _entry(24, "family:break_deps", "split_chains", True, 1437, 1436, "Split the index chain."),
    ]
    packet_b = AdvisorPacket(
        goal="best", best_cycles=1436, aspiration_cycles=1435, plateau_valid_iters_since_best=3,
        strategy_family_constraints=FamilyConstraints(current_family="family:break_deps",
                                                      current_family_streak_len=1, max_consecutive=2),
        experiment_log_tail=tail_b,
        experiment_summary=ExperimentSummary(
            best_cycles=1436, best_cycles_by_family={"family:break_deps": 1436, "family:schedule": 1437}),
        performance_profile=PerformanceProfile(
            min_cycles_by_engine={"alu": 380, "valu": 612, "load": 1392, "store": 64, "flow": 150},
            resource_lb_cycles=1392, cp_lb_cycles=1201, tight_lb_cycles=1392, schedule_cycles_estimate=1436,
            schedule_slack_pct=0.032),
    )
    directive_b = {
        "objective": "Beat the best of 1436 cycles",
        "primary_hypothesis": "The schedule is within 3.2% of the bound set by the load engine (1392 cycles), "
                              "so only fewer loads can lower it: reuse tree nodes already in registers.",
        "strategy_family": "family:reduce_loads",
        "strategy_modifiers": ["register_reuse", "vload"],
        "risk": "Medium",
        "expected_effect_cycles": -20,
        "change_summary": ["Keep the top tree levels in registers instead of reloading them each round",
                           "Replace scalar loads of the indices with one vector load per 8 lanes"],
        "step_plan": [
            "Weigh three approaches: cache top tree levels, vectorize index loads, fuse the value loads",
            "Pick caching the top levels as the main change",
            "Wild card: store indices and values interleaved to halve the loads",
            "Count the loads before and after the change",
            "Run the correctness tests",
            "Measure cycles and compare with 1436",
        ],
        "validation": {"commands": ["python tests/submission_tests.py"],
                       "pass_criteria": ["correctness tests pass", "cycles below 1436"]},
        "next_packet_requests": ["load count per round"],
        "did_web_search": False,
    }
    return [(packet_a, directive_a), (packet_b, directive_b)]


def planner_demos(with_reasoning: bool = False) -> list[dspy.Example]:
    """Seed demos for OptimizationDirectiveSignature (with `reasoning` for chain of thought)."""
    demos = []
    for packet, directive in _planner_seed_packets():
        rendered = planner_inputs(packet)
        inputs = {name: rendered[name] for name in PLANNER_INPUT_FIELDS}  # demos show only what the signature shows
        outputs = dict(directive)
        if with_reasoning:
            constraints = packet.strategy_family_constraints
            outputs = {"reasoning": f"Blocked families: {constraints.blocked_families or 'none'}. "
                                    f"Slack is {packet.performance_profile.schedule_slack_pct:.1%} of the tight "
                                    f"bound, so the plan uses {directive['strategy_family']}.", **outputs}
        demos.append(dspy.Example(**inputs, **outputs).with_inputs(*inputs))
    return demos


# The compact planner's directives for the same seed packets: the same decisions, every list cut to the
# lengths its signature asks for (the output budget).
COMPACT_DIRECTIVES: tuple[dict[str, Any], ...] = (
    {
        "objective": "Reach 1790 cycles",
        "primary_hypothesis": "The schedule (1802) is far above the critical path (1310): interleaving two "
                              "batches hides the latency.",
        "strategy_family": "family:break_deps",
        "strategy_modifiers": ["interleave_batches"],
        "risk": "Medium",
        "expected_effect_cycles": -40,
        "change_summary": ["Interleave the hash rounds of two independent batches"],
        "step_plan": ["Issue two batches per bundle in the round loop", "Run the correctness tests",
                      "Measure cycles against 1802"],
        "validation": {"commands": ["python tests/submission_tests.py"],
                       "pass_criteria": ["correctness tests pass", "cycles below 1802"]},
        "next_packet_requests": [],
        "did_web_search": False,
    },
    {
        "objective": "Beat the best of 1436 cycles",
        "primary_hypothesis": "The schedule is within 3.2% of the load bound (1392): only fewer loads lower it.",
        "strategy_family": "family:reduce_loads",
        "strategy_modifiers": ["register_reuse"],
        "risk": "Medium",
        "expected_effect_cycles": -20,
        "change_summary": ["Keep the top tree levels in registers instead of reloading them"],
        "step_plan": ["Cache the top tree levels in registers", "Run the correctness tests",
                      "Measure cycles against 1436"],
        "validation": {"commands": ["python tests/submission_tests.py"],
                       "pass_criteria": ["correctness tests pass", "cycles below 1436"]},
        "next_packet_requests": ["load count per round"],
        "did_web_search": False,
    },
)


def compact_planner_demos() -> list[dspy.Example]:
    """Seed demos for PlannerCompactSignature: the seed packets rendered compactly, directives within budget."""
    demos = []
    for (packet, _), directive in zip(_planner_seed_packets(), COMPACT_DIRECTIVES, strict=True):
        rendered = compact_packet_inputs(packet)
        inputs = {name: rendered[name] for name in COMPACT_PLANNER_INPUT_FIELDS}
        demos.append(dspy.Example(**inputs, **directive).with_inputs(*inputs))
    return demos


def _schedule_seed_packet() -> AdvisorPacket:
    # Seed 3: the schedule family just set a new best and the schedule is 10% above its bound: keep it.
    tail = [
        _entry(5, "family:reduce_loads", "vload", True, 1655, 1660, "Vector loads of the tree values."),
        _entry(6, "family:schedule", "slot_packing", True, 1610, 1655, "Pack the hash rounds' ALU ops into idle bundles."),
    ]
    return AdvisorPacket(
        goal="best", best_cycles=1610, aspiration_cycles=1609, plateau_valid_iters_since_best=0,
        strategy_family_constraints=FamilyConstraints(current_family="family:schedule", current_family_streak_len=1,
                                                      max_consecutive=2),
        experiment_log_tail=tail,
        experiment_summary=ExperimentSummary(
            best_cycles=1610, best_cycles_by_family={"family:reduce_loads": 1655, "family:schedule": 1610}),
        performance_profile=PerformanceProfile(
            min_cycles_by_engine={"alu": 810, "valu": 1190, "load": 1460, "store": 300, "flow": 420},
            resource_lb_cycles=1460, cp_lb_cycles=1395, tight_lb_cycles=1460, schedule_cycles_estimate=1610,
            schedule_slack_pct=0.103),
    )


SCHEDULE_SEED_FIELDS: dict[str, Any] = {
    "primary_hypothesis": "The schedule (1610) is still 10% above the load bound (1460): list-scheduling the hash "
                          "rounds by critical path fills the idle slots.",
    "strategy_modifiers": ["list_scheduling"],
    "risk": "Low",
    "expected_effect_cycles": -30,
    "change_summary": ["List-schedule the round loop by critical-path priority"],
    "validation": {"commands": ["python tests/submission_tests.py"],
                   "pass_criteria": ["correctness tests pass", "cycles below 1610"]},
}


def given_family_demos() -> list[dspy.Example]:
    """Seed demos for PlannerGivenFamilySignature, one per family: the seed packets with the family the rules
    choose for them and the compact directives' fields the model writes (`planner.hybrid`)."""
    packets = [packet for packet, _ in _planner_seed_packets()] + [_schedule_seed_packet()]
    answers = [*COMPACT_DIRECTIVES, SCHEDULE_SEED_FIELDS]
    demos = []
    for packet, answer in zip(packets, answers, strict=True):
        choice = rule_choice(packet)
        inputs = given_family_inputs(packet, choice.family, choice.reasons)
        outputs = {name: answer[name] for name in PlannerGivenFamilySignature.output_fields}
        demos.append(dspy.Example(**inputs, **outputs).with_inputs(*inputs))
    return demos
