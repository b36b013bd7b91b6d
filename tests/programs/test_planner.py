"""programs.planner: the planner's LM programs return validated directives, fall back to the safe directive on
garbage or a blocked family, salvage loosely formatted fields, and work on the embedded model (slow); the
compact planner does the same from a shorter prompt with a capped answer."""

from __future__ import annotations

import json
import time

import dspy
import pytest

import programs
from evals.usage import track_calls
from guidebench.lm.prompt import message_text, render_prompt
from program_support import LM_PLANNER, recorded_requests
from programs.planner import COMPACT_DIRECTIVE_MAX_TOKENS
from programs.seeds import COMPACT_DIRECTIVES, _planner_seed_packets
from runtime import OptimizationDirective
from runtime.pivot import validate_directive


@pytest.mark.parametrize("name", LM_PLANNER)
def test_planner_lm_programs_return_validated_directives(fake_lm, name):
    program = programs.get(name)
    for packet, _ in _planner_seed_packets():
        inputs = programs.planner_inputs(packet)
        out = program(**inputs)
        assert isinstance(out.directive, OptimizationDirective)
        assert out.parse_errors == [] and out.directive_errors == []
        assert out.directive.strategy_family not in packet.strategy_family_constraints.blocked_families


def test_planner_garbage_gives_the_safe_directive(scripted_lm):
    scripted_lm(["The best plan is to schedule better."])
    packet, _ = _planner_seed_packets()[0]
    out = programs.get("planner.predict")(**programs.planner_inputs(packet))
    assert out.parse_errors and out.directive.strategy_modifiers == ["safe_default"]
    assert out.directive.strategy_family in ("family:reduce_loads", "family:break_deps")
    assert validate_directive(out.directive.model_dump(), ["family:schedule"]) == []


def test_planner_rejects_a_blocked_family(scripted_lm):
    packet, directive = _planner_seed_packets()[0]
    fields = {**directive, "strategy_family": "family:schedule"}
    raw = "\n\n".join(f"[[ ## {k} ## ]]\n{json.dumps(v) if not isinstance(v, str) else v}" for k, v in fields.items())
    scripted_lm([raw])
    out = programs.get("planner.predict")(**programs.planner_inputs(packet))
    assert out.parse_errors == [] and any("blocked" in error for error in out.directive_errors)
    assert out.directive.strategy_family != "family:schedule"


def test_planner_salvages_loosely_formatted_fields(scripted_lm):
    packet, directive = _planner_seed_packets()[1]
    fields = {**directive, "risk": "medium", "strategy_family": "reduce_loads", "expected_effect_cycles": "about -20",
              "step_plan": "1. count loads\n2. cache levels\n3. measure", "did_web_search": "no"}
    raw = "\n\n".join(f"[[ ## {k} ## ]]\n{json.dumps(v) if not isinstance(v, str) else v}" for k, v in fields.items())
    scripted_lm([raw])
    out = programs.get("planner.predict")(**programs.planner_inputs(packet))
    assert out.parse_errors == [] and out.directive_errors == [] and out.adapter_errors
    assert out.directive.risk == "Medium" and out.directive.strategy_family == "family:reduce_loads"
    assert out.directive.step_plan == ["count loads", "cache levels", "measure"]
    assert out.directive.expected_effect_cycles == -20 and out.directive.did_web_search is False


# ----------------------------------------------------------------------------- planner.compact

def _answer(directive: dict) -> str:
    return "\n\n".join(f"[[ ## {k} ## ]]\n{json.dumps(v) if not isinstance(v, str) else v}"
                       for k, v in directive.items())


def test_compact_planner_checks_directives_as_planner_predict(scripted_lm):
    packet, _ = _planner_seed_packets()[0]
    good, blocked = COMPACT_DIRECTIVES[0], {**COMPACT_DIRECTIVES[0], "strategy_family": "family:schedule"}
    scripted_lm([_answer(good), _answer(blocked), "The best plan is to schedule better.", _answer(blocked)])
    program = programs.get("planner.compact")
    out = program(**programs.planner_inputs(packet))
    assert out.parse_errors == [] and out.directive_errors == []
    assert out.directive == OptimizationDirective.model_validate(good)
    refused = program(**programs.planner_inputs(packet))
    assert any("blocked" in error for error in refused.directive_errors)
    garbage = program(**programs.planner_inputs(packet))
    assert garbage.parse_errors and garbage.directive.strategy_modifiers == ["safe_default"]
    # planner.predict refuses the same blocked answer with the same safe directive
    original = programs.get("planner.predict")(**programs.planner_inputs(packet))
    assert (refused.directive, refused.directive_errors) == (original.directive, original.directive_errors)


def test_compact_planner_reads_only_what_it_acts_on_from_a_shorter_prompt_with_a_capped_answer():
    packet, _ = _planner_seed_packets()[1]
    inputs = programs.planner_inputs(packet)
    sizes = {}
    for name in ("planner.predict", "planner.compact"):
        with track_calls() as ledger:
            [request] = recorded_requests(name, inputs)
        sizes[name] = (ledger.calls[0].prompt_tokens, len(render_prompt(request).prompt),
                       len(message_text(request.messages[-1])))
        if name == "planner.compact":
            assert request.config.max_tokens == COMPACT_DIRECTIVE_MAX_TOKENS
            text = message_text(request.messages[-1])
            assert "[[ ## attempts ## ]]" in text and "experiment_log_tail" not in text and "{" not in text
            # the packet JSON alone gives the same prompt
            [again] = recorded_requests(name, {"packet": inputs["packet"]})
            assert render_prompt(again).prompt == render_prompt(request).prompt
    assert all(c < p for c, p in zip(sizes["planner.compact"], sizes["planner.predict"])), sizes


# ----------------------------------------------------------------------------- the real embedded model


@pytest.mark.slow
def test_real_model_planner_predict_gives_a_valid_directive(real_lm, capsys):
    packet, _ = _planner_seed_packets()[0]
    unseen = packet.model_copy(update={"best_cycles": 1795, "threshold_target": 1790})
    started = time.perf_counter()
    with dspy.context(lm=real_lm):
        out = programs.get("planner.predict")(**programs.planner_inputs(unseen))
    elapsed = time.perf_counter() - started
    directive = OptimizationDirective.model_validate(out.directive.model_dump())
    assert validate_directive(directive.model_dump(), unseen.strategy_family_constraints.blocked_families) == []
    with capsys.disabled():
        used = "safe default" if (out.parse_errors or out.directive_errors) else "model directive"
        print(f"\nplanner.predict on the embedded model: {elapsed:.2f}s, {used}: "
              f"{(out.parse_errors + out.directive_errors)[:2]}")
