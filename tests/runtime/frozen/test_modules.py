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
from runtime import DecisionRecord, FrozenModuleError, GuardrailConfig, OptimizationDirective, load_frozen
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


def test_a_parse_error_falls_back_to_pause(pristine: Path):
    module = load_frozen(pristine)
    with dspy.context(lm=DummyLM([{"verdict": "nonsense"}] * 4)):  # output in the wrong format
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
    with dspy.context(lm=DummyLM([good] * 6)):  # the packet as JSON text, as a log line carries it
        assert module(packet.model_dump_json()).directive == module(packet).directive


# ----- what the caller passes: an LM, the summary and the config ---------------------------------

def test_a_module_that_calls_an_lm_refuses_to_decide_without_one(pristine: Path, tmp_path: Path):
    # Without an LM every turn used to be the safe pause at confidence 0.0, the reason hidden in parse_errors.
    planner = load_frozen(export_program("planner.predict", tmp_path / "planner", name="plan").path)
    for module, call in ((load_frozen(pristine), lambda m: m(summary(), GuardrailConfig())),
                         (load_frozen(pristine), lambda m: m.decide(summary())),
                         (planner, lambda m: m({}))):
        with dspy.context(lm=None), pytest.raises(FrozenModuleError) as refused:
            call(module)
        message = str(refused.value)
        assert "\n" not in message and "calls an LM and none is set" in message, message
        for how in ('lm=dspy.LM("openai/gpt-4o-mini")', 'guidebench.lm.factory.make_lm("local")', "dspy.configure(lm="):
            assert how in message, (how, message)
    # Given at load or configured: it decides.
    answer = dict(action="continue", next_input="go on", reason="steps remain", confidence="0.8")
    with dspy.context(lm=None):
        assert load_frozen(pristine, lm=_answer(**answer))(summary())[0].action == "continue"
    with dspy.context(lm=_answer(**answer)):
        assert load_frozen(pristine)(summary())[0].action == "continue"


def test_a_rule_program_decides_without_an_lm(tmp_path: Path):
    import programs

    folder = export_program("full_auto.rules", tmp_path / "rules").path
    module = load_frozen(folder, program=programs.spec("full_auto.rules").factory, inputs=programs.decision_inputs)
    with dspy.context(lm=None):
        decision, _, _ = module(summary(last_turn_status="failed", turn_error="boom"))
    assert decision.action == "stop" and not decision.parse_errors


def _logged_line() -> tuple[dict, Path]:
    """The first line of the sample's decision log and its run file (the original writer's shapes)."""
    logs = Path(__file__).resolve().parents[3] / "datasets" / "sample" / "fullauto"
    with open(logs / "fullauto-decisions.jsonl", encoding="utf-8") as handle:
        line = json.loads(handle.readline())
    return line, logs / "runs" / f"{line['run_id']}.json"


def test_the_summary_and_config_may_be_records_dicts_or_json_text(pristine: Path):
    from runtime import LoggedTurnSummary, RunFile

    line, run_path = _logged_line()
    run_text = run_path.read_text(encoding="utf-8")
    run = RunFile.model_validate_json(run_text)
    summaries = [line["summary"], json.dumps(line["summary"]), LoggedTurnSummary.model_validate(line["summary"])]
    configs = [run.guardrail_config(), run, json.loads(run_text), run_text, run.guardrail_config().model_dump(),
               run.guardrail_config().model_dump_json()]
    module = load_frozen(pristine)
    records = set()
    answer = {"action": "continue", "next_input": "go on", "reason": "steps remain", "confidence": "0.8"}
    with dspy.context(lm=DummyLM([answer] * len(summaries) * len(configs))):
        for given_summary in summaries:
            for config in configs:
                _, _, record = module(given_summary, config, run_id=line["run_id"])
                records.add(record.model_copy(update={"timestamp": ""}).model_dump_json())
    assert len(records) == 1, "every form of the same summary and config gives the same record"
    record = json.loads(records.pop())
    assert record["summary"]["turn_id"] == line["turn_id"] and record["config"] == run.guardrail_config().model_dump()


@pytest.mark.parametrize("summary_arg, config_arg, message", [
    ({"thread_id": "t"}, None, "turn summary: turn_id: Field required"),
    ("{not json", None, "turn summary: not JSON text: Expecting property name"),
    (["t", "u"], None, "turn summary: expected a FullAutoTurnSummary, a dict or its JSON text; got list"),
    ("LINE", None, "turn summary: this is a decision log line; pass its `summary`"),
    (None, {"min_confidence": "high"}, "guardrail config: min_confidence: Input should be a valid number"),
    (None, {"max_turns": 5, "min_conf": 0.5}, "guardrail config: min_conf: Extra inputs are not permitted"),
    (None, {"run_id": "r", "max_turns": 5}, "guardrail config (a run file): workspace_id: Field required (and "),
    (None, 0.55, "guardrail config: expected a GuardrailConfig, a RunFile, a dict or its JSON text; got float"),
])
def test_a_summary_or_config_it_cannot_read_is_a_one_line_error(pristine: Path, summary_arg, config_arg, message):
    from runtime import FrozenInputError

    line, _ = _logged_line()
    summary_arg = line if summary_arg == "LINE" else line["summary"] if summary_arg is None else summary_arg
    module = load_frozen(pristine)
    lm = _answer(action="continue", next_input="go on", reason="steps remain", confidence="0.8")
    with dspy.context(lm=lm), pytest.raises(FrozenInputError) as refused:
        module(summary_arg, config_arg)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value), str(refused.value)
    assert lm.history == [], "nothing was asked of the LM"


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


def test_a_loaded_module_pickles_as_its_folder_and_load_arguments(tmp_path):
    """An LM module's rebuilt signatures do not pickle: the module pickles as the load_frozen call that made it (the
    shadow's process loads and verifies the folder again)."""
    import pickle

    import programs

    folder = export_program("full_auto.cot", tmp_path / "cot").path
    module = load_frozen(folder, program=programs.spec("full_auto.cot").factory, inputs=programs.decision_inputs)
    again = pickle.loads(pickle.dumps(module))
    assert again is not module and again.path == module.path and again.manifest == module.manifest
    assert type(again.program) is type(module.program) and again.program.dump_state() == module.program.dump_state()
    bare = FrozenGuidanceModule(module.manifest, module.program, module.path)
    with pytest.raises(TypeError, match="was not loaded by load_frozen"):
        pickle.dumps(bare)
