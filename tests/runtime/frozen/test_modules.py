"""runtime.frozen.modules: the guidance and planner modules `load_frozen` returns decide, enforce the
guardrails and record; any LM fault or unusable answer gives the safe default, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM

from frozen_support import export_program, summary
from lm_fault_support import FAULTS, RAISING, FaultEngine, fault_lm
from reliability_ledger import record as ledger
from runtime import DecisionRecord, GuardrailConfig, OptimizationDirective, load_frozen
from runtime.frozen.modules import FrozenGuidanceModule, FrozenPlannerModule


# ----- running a loaded module ------------------------------------------------------------------

def _answer(**fields) -> DummyLM:
    return DummyLM([fields] * 4)


def test_standalone_module_decides_enforces_and_records(pristine: Path):
    module = load_frozen(pristine)
    assert isinstance(module, FrozenGuidanceModule) and module.manifest.package == "X@0.1.0"
    lm = _answer(action="continue", next_input="Run the tests next.", reason="plan has open steps",
                 confidence="0.8")
    with dspy.context(lm=lm):
        decision, audit, record = module(summary(), GuardrailConfig(), run_id="fullauto-1", sequence_id=4)
    assert (decision.action, decision.confidence, decision.next_input) == ("continue", 0.8, "Run the tests next.")
    assert audit.triggered is False and audit.original_action == "continue"
    assert isinstance(record, DecisionRecord) and record.package_version == "X@0.1.0"
    assert record.run_id == "fullauto-1" and record.sequence_id == 4 and record.model == "dummy"
    assert record.logged.action == "continue" and record.logged.state == "running"
    assert record.guardrail == audit and record.summary.turn_id == "turn-1"
    # The demos are in the prompt the model saw.
    prompt = json.dumps(lm.history[-1]["messages"])
    assert prompt.count("[[ ## action ## ]]") >= 4


def test_a_standalone_module_applies_the_programs_answer_cap(tmp_path: Path):
    # full_auto.compact caps its answer at 80 tokens in code (`dspy.Predict(..., max_tokens=80)`); DSPy's
    # program state does not save that, so the manifest carries it and the rebuilt predictor applies it.
    from programs.full_auto import COMPACT_DECISION_MAX_TOKENS

    folder = export_program("full_auto.compact", tmp_path / "compact").path
    module = load_frozen(folder)
    assert module.manifest.predictors[0].max_tokens == COMPACT_DECISION_MAX_TOKENS == 80
    assert any("answer cap is not carried" in note for note in module.manifest.dsrs_notes)
    lm = _answer(action="continue", next_input="go on", reason="steps remain", confidence="0.8")
    with dspy.context(lm=lm):
        decision, _, _ = module(summary(), GuardrailConfig())
    assert decision.action == "continue" and lm.history[-1]["kwargs"]["max_tokens"] == 80
    # A program without a cap in code exports none: the LM's own limit applies.
    assert load_frozen(export_program("full_auto.predict", tmp_path / "predict").path).manifest.predictors[0] \
        .max_tokens is None


def test_guardrails_override_the_model(pristine: Path):
    module = load_frozen(pristine)
    with dspy.context(lm=_answer(action="continue", next_input="go", reason="r", confidence="0.9")):
        decision, audit, _ = module(summary(last_turn_status="failed", turn_error="boom"))
        assert (decision.action, audit.rule, audit.original_action) == ("stop", "turn_failed", "continue")
    with dspy.context(lm=_answer(action="review", next_input="", reason="r", confidence="0.9")):
        decision, audit, record = module(summary())
        assert (decision.action, audit.rule) == ("pause", "review_requested")
        assert record.logged.model_action == "review" and record.logged.state == "paused"


@pytest.mark.parametrize("lm", [
    DummyLM([{"verdict": "nonsense"}] * 4),  # output in the wrong format
    None,  # no LM configured at all
])
def test_any_lm_or_parse_error_falls_back_to_pause(pristine: Path, lm):
    module = load_frozen(pristine)
    with dspy.context(lm=lm):
        decision, audit, record = module(summary())
    assert decision.action == "pause" and decision.confidence == 0.0 and decision.parse_errors
    assert audit.original_action == "pause" and audit.rule == "low_confidence"
    assert record.parse_diagnostics["parse_errors"] == decision.parse_errors


def test_an_lm_that_raises_falls_back_to_pause(pristine: Path):
    class Broken(DummyLM):
        def forward(self, *args, **kwargs):
            raise ConnectionError("endpoint unreachable")

    module = load_frozen(pristine, lm=Broken([]))
    decision, audit, _ = module(summary())
    assert decision.action == "pause" and any("endpoint unreachable" in e for e in decision.parse_errors)


def test_planner_module_returns_a_validated_directive(tmp_path: Path):
    from runtime.advisor import AdvisorPacket, FamilyConstraints

    folder = export_program("planner.predict", tmp_path / "planner", name="plan").path
    module = load_frozen(folder)
    assert isinstance(module, FrozenPlannerModule)
    packet = AdvisorPacket(best_cycles=1500, strategy_family_constraints=FamilyConstraints(
        allowed_families=["family:reduce_loads", "family:break_deps"], blocked_families=["family:schedule"],
        current_family="family:schedule", current_family_streak_len=2))
    good = {"objective": "Beat 1500", "primary_hypothesis": "fewer loads", "strategy_family": "family:reduce_loads",
            "strategy_modifiers": '["vector"]', "risk": "Low", "expected_effect_cycles": "-20",
            "change_summary": '["merge loads"]', "step_plan": '["a", "b", "c"]',
            "validation": '{"commands": ["python tests/submission_tests.py"], "pass_criteria": ["passes"]}',
            "next_packet_requests": "[]", "did_web_search": "false"}
    with dspy.context(lm=DummyLM([good] * 3)):
        result = module(packet)
    assert not result.used_default and isinstance(result.directive, OptimizationDirective)
    assert result.directive.strategy_family == "family:reduce_loads" and result.directive.expected_effect_cycles == -20
    blocked = dict(good, strategy_family="family:schedule")
    with dspy.context(lm=DummyLM([blocked] * 3)):
        result = module(packet)
    assert result.used_default and any("blocked" in e for e in result.errors)
    assert result.directive.strategy_family != "family:schedule"
    with dspy.context(lm=None):
        result = module(packet)
    assert result.used_default and result.directive.risk == "Low"


# ----- LM faults ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fault", FAULTS)
def test_the_runtime_module_answers_pause_for_every_fault(pristine: Path, fault: str):
    engine = FaultEngine(lambda index, inputs: fault)
    module = load_frozen(pristine, lm=fault_lm(engine))
    decision, audit, record = module(summary(), GuardrailConfig(), run_id="fullauto-faults", sequence_id=1)
    assert engine.faults[fault] >= 1
    assert (decision.action, audit.original_action, audit.original_confidence) == ("pause", "pause", 0.0)
    assert audit.rule == "low_confidence" and decision.next_input == ""
    assert record.parse_diagnostics and record.parse_diagnostics["parse_errors"]
    if fault in RAISING:
        assert any(RAISING[fault] in error for error in record.parse_diagnostics["parse_errors"])
    ledger("faults", scenario="runtime module", injected={fault: engine.faults[fault]}, answered_pause=1,
           raised=0)


def test_the_runtime_planner_answers_its_safe_directive_for_every_fault(tmp_path: Path):
    from runtime.advisor import AdvisorPacket, FamilyConstraints

    folder = export_program("planner.predict", tmp_path / "planner", name="plan").path
    packet = AdvisorPacket(goal="best", best_cycles=1500, strategy_family_constraints=FamilyConstraints(
        allowed_families=["family:schedule", "family:reduce_loads", "family:break_deps"],
        blocked_families=["family:schedule"], current_family="family:schedule", current_family_streak_len=2,
        max_consecutive=2))
    for fault in FAULTS:
        module = load_frozen(folder, lm=fault_lm(FaultEngine(lambda index, inputs, f=fault: f)))
        assert isinstance(module, FrozenPlannerModule)
        directive, errors, used_default = module(packet)
        assert used_default and errors, fault
        assert directive.strategy_family != "family:schedule" and directive.risk == "Low"
    ledger("faults", scenario="runtime planner", injected={fault: 1 for fault in FAULTS}, safe_directive=len(FAULTS),
           raised=0)
