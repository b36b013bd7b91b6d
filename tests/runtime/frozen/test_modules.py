"""runtime.frozen.modules: the guidance and planner modules `load_frozen` returns decide, enforce the
guardrails and record; any LM fault or unusable answer gives the safe default, never an exception."""

from __future__ import annotations

from pathlib import Path

import pytest

from frozen_support import export_program, summary
from lm_fault_support import FAULTS, RAISING, FaultEngine, fault_lm
from reliability_ledger import record as ledger
from runtime import GuardrailConfig, load_frozen
from runtime.frozen.modules import FrozenPlannerModule


# ----- LM faults ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return export_program("full_auto.predict", tmp_path_factory.mktemp("export") / "X").path


@pytest.mark.parametrize("fault", FAULTS)
def test_the_runtime_module_answers_pause_for_every_fault(exported: Path, fault: str):
    engine = FaultEngine(lambda index, inputs: fault)
    module = load_frozen(exported, lm=fault_lm(engine))
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
