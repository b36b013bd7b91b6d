"""programs.inputs: signature inputs from summaries, records and packets; labeled examples with every output field."""

from __future__ import annotations

import json

import pytest

import programs
from program_support import entry, record
from programs.seeds import DECISION_SEEDS, _planner_seed_packets
from runtime import AdvisorPacket, OptimizationDirective, PlannerRecord
from runtime.advisor import ExperimentLogEntry
from runtime.pivot import validate_directive


def test_decision_inputs_from_summary_record_and_dict():
    seed = DECISION_SEEDS[1].summary
    inputs = programs.decision_inputs(seed)
    assert inputs["pending_approvals"] == "1" and inputs["turn_count"] == "7"
    assert inputs["last_agent_message"].startswith("I need approval")
    assert all(isinstance(value, str) for value in inputs.values())
    assert "logged_action" not in inputs
    assert programs.decision_inputs(seed.model_dump()) == inputs
    from_record = programs.decision_inputs(record())
    assert from_record["logged_action"] == "continue" and from_record["logged_confidence"] == "0.4"
    assert from_record["logged_next_input"] == "Run the tests"
    assert programs.decision_inputs(record().model_dump(mode="json")) == from_record
    with pytest.raises(TypeError):
        programs.decision_inputs(42)


def test_decision_example_carries_every_output_field():
    example = programs.decision_example(record("continue"))
    assert example.action == "continue" and example.next_input == "Run the tests"
    assert example.reason and example.confidence == 0.8  # a rule label, no stated confidence
    assert set(example.inputs().keys()) >= set(programs.decision_inputs(record()))
    assert "action" not in example.inputs() and example.record_id
    stated = programs.decision_example(record("stop", source="human", confidence=0.6, reason="Done."))
    assert (stated.action, stated.next_input, stated.reason, stated.confidence) == ("stop", "", "Done.", 0.6)
    assert programs.decision_example(record("pause", source="human")).confidence == 0.95
    unlabeled = record()
    unlabeled.label = None
    with pytest.raises(ValueError, match="no outcome label"):
        programs.decision_example(unlabeled)


def test_planner_inputs_render_the_packet_compactly():
    packet, _ = _planner_seed_packets()[1]
    inputs = programs.planner_inputs(packet)
    assert inputs["goal"] == "best: beat 1436 cycles (aspiration 1435)"
    assert inputs["experiment_log_tail"].splitlines()[0].startswith("#21 family:break_deps+interleave_batches valid")
    assert json.loads(inputs["strategy_family_constraints"])["current_family"] == "family:break_deps"
    assert json.loads(inputs["performance_profile"])["tight_lb_cycles"] == 1392
    assert AdvisorPacket.model_validate_json(inputs["packet"]) == packet
    # The original sends the tail as raw JSONL lines.
    raw = AdvisorPacket(experiment_log_tail=[json.dumps(entry(1, "family:schedule", True, 1500, 1600)), "garbage"])
    lines = programs.planner_inputs(raw)["experiment_log_tail"].splitlines()
    assert lines[0].startswith("#1 family:schedule+x valid cycles=1500 delta=-100") and lines[1] == "garbage"


def test_planner_example_is_a_valid_directive():
    packet, _ = _planner_seed_packets()[0]
    outcome = ExperimentLogEntry.model_validate(entry(4, "family:break_deps", True, 1780, 1802))
    example = programs.planner_example(PlannerRecord(record_id="r4", episode_id="e1", iteration_id=4,
                                                     packet=packet, outcome=outcome))
    fields = {name: example[name] for name in OptimizationDirective.model_fields}
    assert validate_directive(fields, packet.strategy_family_constraints.blocked_families) == []
    assert example.strategy_family == "family:break_deps" and example.expected_effect_cycles == -22
    assert "objective" not in example.inputs() and "packet" in example.inputs()
