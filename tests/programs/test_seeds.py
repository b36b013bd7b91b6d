"""programs.seeds: the compact seed demos are the seeds rendered compactly, every output field within the
compact programs' budget; the original seed demos show only what their signature shows."""

from __future__ import annotations

import re

from programs.seeds import (COMPACT_DIRECTIVES, DECISION_SEEDS, _planner_seed_packets, compact_decision_demos,
                            compact_planner_demos, planner_demos)
from runtime.inputs import compact_packet_inputs, compact_summary_inputs
from runtime.pivot import validate_directive
from signatures import FullAutoCompactSignature, OptimizationDirectiveSignature, PlannerCompactSignature


def test_compact_decision_demos_render_the_seeds_compactly_within_the_output_budget():
    demos = compact_decision_demos()
    assert len(demos) == len(DECISION_SEEDS)
    for demo, seed in zip(demos, DECISION_SEEDS):
        assert set(demo.inputs().keys()) == set(FullAutoCompactSignature.input_fields)
        rendered = compact_summary_inputs(seed.summary)
        assert {name: demo[name] for name in demo.inputs().keys()} == {name: rendered[name] for name in rendered}
        assert demo.action == seed.action
        assert re.fullmatch(r"[01]\.\d\d", demo.confidence) and float(demo.confidence) == seed.confidence
        assert demo.reason.count(".") == 1 and demo.reason.endswith(".") and len(demo.reason.split()) <= 12
        assert bool(demo.next_input) == (seed.action == "continue")


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
