"""programs.seeds: the compact seed demos are the seeds rendered compactly, every output field within the
compact programs' budget; the original seed demos show only what their signature shows."""

from __future__ import annotations

import re

import programs
from guidebench.lm.grammar import OutputField, word_cap
from programs.seeds import (COMPACT_DIRECTIVES, COMPACT_STATE_SEEDS, DECISION_SEEDS, STALLED_SEED,
                            _planner_seed_packets, compact_cot_demos, compact_decision_demos, compact_planner_demos,
                            compact_state_demos, planner_demos)
from runtime.inputs import compact_packet_inputs, compact_state_inputs, compact_summary_inputs
from runtime.pivot import validate_directive
from runtime.rules import rule_decision
from signatures import (FullAutoCompactSignature, FullAutoCompactStateSignature, OptimizationDirectiveSignature,
                        PlannerCompactSignature)


def _cap(name: str) -> int:
    """The word cap the compact signature's description of an output field states."""
    desc = FullAutoCompactSignature.output_fields[name].json_schema_extra["desc"]
    cap = word_cap(OutputField(name, "str", desc))
    assert cap is not None, name
    return cap


def test_compact_decision_demos_render_the_seeds_compactly_within_the_output_budget():
    demos = compact_decision_demos()
    assert len(demos) == len(DECISION_SEEDS)
    for demo, seed in zip(demos, DECISION_SEEDS):
        assert set(demo.inputs().keys()) == set(FullAutoCompactSignature.input_fields)
        rendered = compact_summary_inputs(seed.summary)
        assert {name: demo[name] for name in demo.inputs().keys()} == {name: rendered[name] for name in rendered}
        assert demo.action == seed.action
        # one decimal, a reason and a next input within the signature's word caps
        assert re.fullmatch(r"[01]\.\d", demo.confidence) and abs(float(demo.confidence) - seed.confidence) <= 0.05
        assert demo.reason.count(".") == 1 and demo.reason.endswith(".") and len(demo.reason.split()) <= _cap("reason")
        assert bool(demo.next_input) == (seed.action == "continue") and len(demo.next_input.split()) <= _cap("next_input")


def test_compact_state_demos_add_a_stalled_turn_and_show_the_counters_and_the_message():
    demos = compact_state_demos()
    assert len(demos) == len(COMPACT_STATE_SEEDS) == len(DECISION_SEEDS) + 1
    for demo, seed in zip(demos, COMPACT_STATE_SEEDS):
        assert set(demo.inputs().keys()) == set(FullAutoCompactStateSignature.input_fields)
        rendered = {**compact_summary_inputs(seed.summary), **compact_state_inputs(seed.summary)}
        assert {name: demo[name] for name in demo.inputs().keys()} == {name: rendered[name] for name in demo.inputs()}
        assert demo.action == seed.action and abs(float(demo.confidence) - seed.confidence) <= 0.05
        assert demo.reason.count(".") == 1 and demo.reason.endswith(".") and len(demo.reason.split()) <= _cap("reason")
        assert bool(demo.next_input) == (seed.action == "continue") and len(demo.next_input.split()) <= _cap("next_input")
    # The compact demos' answers for the shared seeds; the stalled turn is one only the counters tell apart.
    assert [d.labels().toDict() for d in demos[:3]] == [d.labels().toDict() for d in compact_decision_demos()]
    stalled = demos[-1]
    assert (stalled.no_progress_count, stalled.action) == ("2", "pause") and stalled.message != "none"
    assert {d.no_progress_count for d in demos[:3]} == {"0"}
    # It is a stall for the rule policy too (the hybrid leaves such turns to its LM by default).
    assert rule_decision(programs.decision_inputs(STALLED_SEED.summary))[1] == "stalled"


def test_compact_cot_demos_reason_in_one_short_sentence_before_the_compact_answer():
    for demo, compact in zip(compact_cot_demos(), compact_decision_demos(), strict=True):
        assert demo.inputs().toDict() == compact.inputs().toDict()
        assert {k: v for k, v in demo.labels().items() if k != "reasoning"} == compact.labels().toDict()
        assert demo.reasoning.count(".") == 1 and len(demo.reasoning.split()) <= 15


def test_compact_planner_demos_keep_the_seed_decisions_with_short_lists():
    packets = [packet for packet, _ in _planner_seed_packets()]
    for demo, packet, (_, seed) in zip(compact_planner_demos(), packets, _planner_seed_packets(), strict=True):
        assert set(demo.inputs().keys()) == set(PlannerCompactSignature.input_fields)
        rendered = compact_packet_inputs(packet)
        assert {name: demo[name] for name in demo.inputs().keys()} == rendered
        directive = {name: demo[name] for name in PlannerCompactSignature.output_fields}
        assert validate_directive(directive, packet.strategy_family_constraints.blocked_families) == []
        assert directive["strategy_family"] == seed["strategy_family"]  # the same decision as the seed
        assert len(directive["strategy_modifiers"]) <= 2 and len(directive["change_summary"]) <= 2
        assert 3 <= len(directive["step_plan"]) <= 4 and len(directive["next_packet_requests"]) <= 1
    assert len(COMPACT_DIRECTIVES) == len(packets)


def test_original_planner_demos_show_only_their_signature_inputs():
    for demo in planner_demos():
        assert set(demo.inputs().keys()) == set(OptimizationDirectiveSignature.input_fields)
