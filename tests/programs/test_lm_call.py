"""programs.lm_call: unparseable model output never raises: one call, a safe pause, or a lenient parse of what the
adapter rejects; the adapter lays every constant part of a prompt out before the record, for every LM program."""

from __future__ import annotations

import pytest

import programs
from guidebench.lm.prompt import message_text, render_prompt
from program_support import recorded_requests
from programs.hybrid import rule_gate_of
from programs.seeds import DECISION_SEEDS, STALLED_SEED, _planner_seed_packets


def test_unparseable_output_is_a_safe_pause_after_one_call(scripted_lm):
    lm = scripted_lm(["I think we should probably keep going, the tests look fine."])
    out = programs.get("full_auto.predict")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    assert (out.action, out.confidence, out.next_input) == ("pause", 0.0, "")
    assert out.decision.parse_failed and any("ChatAdapter" in error for error in out.parse_errors)
    assert out.raw_output.startswith("I think")
    assert lm.engine.calls == 1  # no JSON-adapter retry


@pytest.mark.parametrize("raw, expected", [
    ("[[ ## action ## ]]\nContinue\n\n[[ ## next_input ## ]]\nRun the tests\n\n[[ ## reason ## ]]\nok\n\n"
     "[[ ## confidence ## ]]\n0.9\n\n[[ ## completed ## ]]", ("continue", 0.9, [])),
    ("[[ ## action ## ]]\nstop\n\n[[ ## confidence ## ]]\n0.7", ("stop", 0.7, [])),
    ("[[ ## action ## ]]\nrestart\n\n[[ ## next_input ## ]]\n\n[[ ## reason ## ]]\nx\n\n[[ ## confidence ## ]]\n0.9",
     ("pause", 0.9, ["unknown action"])),  # as the original: pause, the model's confidence kept
    ("[[ ## action ## ]]\ncontinue\n\n[[ ## next_input ## ]]\n\n[[ ## reason ## ]]\nx\n\n[[ ## confidence ## ]]\nhigh",
     ("continue", 0.0, ["confidence not parseable"])),  # as the original: 0.0, the action kept
])
def test_lenient_parse_of_what_the_adapter_rejects(scripted_lm, raw, expected):
    scripted_lm([raw])
    out = programs.get("full_auto.predict")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    action, confidence, errors = expected
    assert (out.action, out.confidence) == (action, confidence)
    for fragment in errors:
        assert any(fragment in error for error in out.parse_errors)
    assert bool(out.parse_errors) == bool(errors)


# ----- prompt layout: every constant part before the record ----------------------------------------

# A cascade's LM half is one of these programs; the cascade itself needs a fitted model (tests/programs/test_learned.py).
LM_PROGRAMS = [spec.name for spec in programs.specs() if spec.uses_lm and not spec.trained]


@pytest.mark.parametrize("name", LM_PROGRAMS)
def test_every_constant_part_of_a_prompt_comes_before_the_record(name):
    """Instruction, field descriptions and demos (the system message and the demo turns) are the same for any
    record; only the last user message holds the record. Every call of a multi-call program (the stack, a
    chain of thought) is checked: nothing per-record comes before the demos, so the prefix can be reused."""
    if programs.spec(name).kind == "full_auto":
        # two turns the program asks its LM about: a rule-gated one (full_auto.hybrid) takes the pending approval itself
        seeds = (DECISION_SEEDS[0], STALLED_SEED) if rule_gate_of(programs.get(name)) else DECISION_SEEDS[:2]
        first, second = (programs.decision_inputs(seed.summary) for seed in seeds)
    else:
        packets = [packet for packet, _ in _planner_seed_packets()]
        if name == "planner.hybrid":  # one prefix per family: the demos of the family the rules chose go last
            packets = [packets[1], packets[1].model_copy(update={"best_cycles": 1430})]
        first, second = (programs.planner_inputs(packet) for packet in packets)
    a, b = recorded_requests(name, first), recorded_requests(name, second)
    assert a and len(a) == len(b)
    for one, other in zip(a, b):
        assert one.system == other.system
        assert one.messages[:-1] == other.messages[:-1]  # the demos, identical and before the record
        assert one.messages[-1].role == "user" and one.messages[-1] != other.messages[-1]
        demos = "\n\n".join(message_text(m).strip() for m in one.messages[:-1])
        rendered = render_prompt(one)
        # the engine's prompt: system text, the adapter's closing instruction, the demos, then the record
        assert rendered.prefix == render_prompt(other).prefix and rendered.prompt.startswith(rendered.prefix)
        assert rendered.prefix.startswith(one.system.strip()) and rendered.prefix.rstrip().endswith(demos)
