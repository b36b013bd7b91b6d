"""Decision programs: registry, inputs and examples, parsing and safe failure, rules, state, CLI, real model."""

from __future__ import annotations

import json
import time

import dspy
import pytest

import programs
from guidebench.cli import main
from programs.seeds import DECISION_SEEDS, _planner_seed_packets
from runtime import (
    ACTIONS,
    FAMILIES,
    AdvisorPacket,
    DecisionRecord,
    FullAutoTurnSummary,
    GuardrailConfig,
    GuidanceDecision,
    LoggedDecision,
    OptimizationDirective,
    OutcomeLabel,
    PlannerRecord,
)
from runtime.advisor import ExperimentLogEntry, FamilyConstraints, PerformanceProfile
from evals.usage import track_calls
from runtime.pivot import validate_directive

REQUIRED = ("full_auto.predict", "full_auto.cot", "full_auto.stack", "full_auto.rules", "full_auto.always_continue",
            "planner.predict", "planner.cot", "planner.rules")
LM_FULL_AUTO = ("full_auto.predict", "full_auto.cot", "full_auto.stack", "full_auto.zeroshot")
LM_PLANNER = ("planner.predict", "planner.cot")


def summary(**fields) -> FullAutoTurnSummary:
    base = {"thread_id": "thr-t", "turn_id": "turn-1", "pending_approvals": "0", "pending_tool_inputs": "0",
            "compaction_events": "0"}
    return FullAutoTurnSummary(**{**base, **fields})


def record(label_action: str = "continue", **label) -> DecisionRecord:
    return DecisionRecord.build(
        DECISION_SEEDS[0].summary, GuardrailConfig(), run_id="fullauto-1", sequence_id=3,
        logged=LoggedDecision(action="pause", confidence=0.4, model_action="continue", model_confidence=0.4,
                              reason="keep going", next_input_preview="Run the tests"),
        label=OutcomeLabel(action=label_action, source=label.pop("source", "rule:resumed_at_once"), **label))


def entry(iteration: int, family: str, valid: bool, cycles: int | None, best_before: int) -> dict:
    return {"iteration_id": iteration, "timestamp_utc": "2025-01-01T00:00:00Z", "branch": f"b{iteration}",
            "base_branch": "main", "base_sha": "a" * 7, "head_sha": "b" * 7, "files_changed": ["kernel.py"],
            "tests_diff_empty": True, "valid": valid, "cycles": cycles,
            "delta_vs_best": None if cycles is None else cycles - best_before, "strategy_tags": [family, "x"],
            "hypothesis": f"attempt {iteration}", "change_summary": ["edit kernel"], "result_summary": "measured",
            "best_before": best_before}


def planner_inputs_with(entries: list, **packet) -> dict:
    return programs.planner_inputs(AdvisorPacket(experiment_log_tail=entries, **packet))


# ----------------------------------------------------------------------------- registry


def test_registry_lists_every_required_program_with_its_spec():
    names = programs.names()
    assert set(REQUIRED) <= set(names)
    assert programs.spec("rule").name == "full_auto.rules" and programs.resolve("rule") == "full_auto.rules"
    assert set(programs.names("planner")) >= {"planner.predict", "planner.cot", "planner.rules"}
    for name in REQUIRED:
        spec = programs.spec(name)
        assert spec.kind == name.split(".")[0] and spec.description
        assert spec.uses_lm == (name in LM_FULL_AUTO + LM_PLANNER)
        first, second = programs.get(name), programs.get(name)
        assert isinstance(first, dspy.Module) and first is not second


def test_registry_errors_are_clear():
    with pytest.raises(programs.UnknownProgramError, match="known programs: .*full_auto.predict"):
        programs.get("full_auto.nope")
    with pytest.raises(ValueError, match="already registered"):
        programs.register("full_auto.predict", dspy.Module, kind="full_auto", uses_lm=False, description="x")
    with pytest.raises(ValueError, match="already an alias"):
        programs.register("test.other", dspy.Module, kind="full_auto", uses_lm=False, description="x",
                          aliases=("rule",))
    with pytest.raises(ValueError, match="kind"):
        programs.register("test.bad_kind", dspy.Module, kind="chat", uses_lm=False, description="x")


def test_register_adds_a_program():
    programs.register("test.always_stop", programs.get("full_auto.always_continue").__class__, kind="full_auto",
                      uses_lm=False, description="test program", replace=True)
    assert "test.always_stop" in programs.names("full_auto")


# ----------------------------------------------------------------------------- inputs and examples


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


# ----------------------------------------------------------------------------- LM programs with the fake LM


@pytest.mark.parametrize("name", LM_FULL_AUTO)
def test_full_auto_lm_programs_return_validated_decisions(fake_lm, name):
    program = programs.get(name)
    for seed in DECISION_SEEDS:
        out = program(**programs.decision_inputs(seed.summary))
        assert isinstance(out.decision, GuidanceDecision) and out.parse_errors == []
        assert (out.action, out.confidence, out.reason, out.next_input) == (
            out.decision.action, out.decision.confidence, out.decision.reason, out.decision.next_input)
        assert out.action == seed.action  # the fake LM answers like the rule policy


@pytest.mark.parametrize("name", LM_PLANNER)
def test_planner_lm_programs_return_validated_directives(fake_lm, name):
    program = programs.get(name)
    for packet, _ in _planner_seed_packets():
        inputs = programs.planner_inputs(packet)
        out = program(**inputs)
        assert isinstance(out.directive, OptimizationDirective)
        assert out.parse_errors == [] and out.directive_errors == []
        assert out.directive.strategy_family not in packet.strategy_family_constraints.blocked_families


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


def _section(fields: dict) -> str:
    return "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in fields.items()) + "\n\n[[ ## completed ## ]]"


def test_stack_verifier_can_only_make_the_decision_more_careful(scripted_lm):
    scripted_lm([
        _section({"state_summary": "Tests keep failing the same way.", "progress": "stalled"}),
        _section({"action": "continue", "next_input": "try again", "reason": "retry", "confidence": "0.8"}),
        _section({"verdict": "stop", "rationale": "it is looping", "confidence": "0.9"}),
    ])
    out = programs.get("full_auto.stack")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    assert (out.action, out.next_input, out.confidence, out.verdict) == ("stop", "", 0.9, "stop")
    assert "it is looping" in out.reason and out.stage_errors == []


def test_stack_survives_unusable_summary_and_verdict(scripted_lm):
    scripted_lm([
        "no idea",
        _section({"action": "pause", "next_input": "", "reason": "unclear", "confidence": "0.7"}),
        "garbage",
    ])
    out = programs.get("full_auto.stack")(**programs.decision_inputs(DECISION_SEEDS[1].summary))
    assert (out.action, out.confidence, out.parse_errors) == ("pause", 0.7, [])
    assert out.state_summary.startswith("status: completed") and len(out.stage_errors) == 2


# ----------------------------------------------------------------------------- rule policies


@pytest.mark.parametrize("fields, action, rule", [
    ({"last_turn_status": "failed", "turn_error": "sandbox crashed"}, "stop", "turn_failed"),
    ({"last_turn_status": "interrupted"}, "pause", "interrupted"),
    ({"pending_tool_inputs": "2"}, "pause", "pending_input"),
    ({"turn_plan": json.dumps([{"step": "a", "status": "completed"}]), "last_agent_message": "All tests pass."},
     "stop", "done"),
    ({"turn_plan": "- [x] write code\n- [ ] add tests", "no_progress_count": 2}, "pause", "stalled"),
    ({"last_agent_message": "2 failed, 10 passed"}, "continue", "fix_failures"),
    ({"turn_plan": "- [x] write code\n- [ ] add tests", "last_agent_message": "no errors"}, "continue", "open_steps"),
    ({}, "continue", "default_continue"),
])
def test_full_auto_rules(fields, action, rule):
    out = programs.get("rule")(**programs.decision_inputs(summary(**fields)))
    assert (out.action, out.rule) == (action, rule) and out.parse_errors == []
    assert out.confidence >= 0.55  # the rule policy is never stopped by the low-confidence guardrail


def test_always_continue_baseline():
    out = programs.get("full_auto.always_continue")(**programs.decision_inputs(summary()))
    assert (out.action, out.confidence, out.next_input) == ("continue", 1.0, "")


def test_planner_rules_pivots_away_from_a_blocked_family():
    entries = [entry(1, "family:schedule", True, 1600, 1700), entry(2, "family:schedule", True, 1601, 1600)]
    inputs = planner_inputs_with(entries, best_cycles=1600)
    out = programs.get("planner.rules")(**inputs)
    assert out.directive.strategy_family in ("family:reduce_loads", "family:break_deps")
    assert "family_blocked" in out.rule_reasons
    assert validate_directive(out.directive.model_dump(), ["family:schedule"]) == []


def test_planner_rules_pivots_to_the_least_tried_family():
    entries = [entry(1, "family:break_deps", True, 1700, 1800), entry(2, "family:schedule", True, 1690, 1700),
               entry(3, "family:schedule", False, None, 1690)]
    out = programs.get("planner.rules")(**planner_inputs_with(entries, best_cycles=1690))
    assert out.directive.strategy_family == "family:reduce_loads"


def test_planner_rules_lowers_the_bound_when_near_it():
    packet, _ = _planner_seed_packets()[1]
    out = programs.get("planner.rules")(**programs.planner_inputs(packet))
    assert "near_bound" in out.rule_reasons and out.directive.strategy_family == "family:reduce_loads"


def test_planner_rules_keeps_an_improving_family_and_recovers_from_invalid_streaks():
    improving = [entry(1, "family:break_deps", True, 1700, 1800)]
    out = programs.get("planner.rules")(**planner_inputs_with(improving, best_cycles=1700))
    assert out.directive.strategy_family == "family:break_deps"
    invalid = [entry(i, family, False, None, 1700) for i, family in
               enumerate(["family:schedule", "family:break_deps", "family:reduce_loads"], start=2)]
    out = programs.get("planner.rules")(**planner_inputs_with(improving + invalid, best_cycles=1700))
    assert "invalid_streak" in out.rule_reasons and out.directive.risk == "Low"
    assert out.directive.strategy_modifiers[0] == "recovery"


def test_planner_rules_without_a_packet_is_a_safe_default():
    out = programs.get("planner.rules")(goal="best")
    assert out.parse_errors and out.directive.strategy_modifiers == ["safe_default"]


def test_planner_rules_respects_the_packet_constraints():
    constraints = FamilyConstraints(blocked_families=["family:reduce_loads"], current_family="family:reduce_loads",
                                    current_family_streak_len=2)
    profile = PerformanceProfile(tight_lb_cycles=1400, schedule_cycles_estimate=1420)
    packet = AdvisorPacket(goal="threshold", threshold_target=1390, best_cycles=1420,
                           strategy_family_constraints=constraints, performance_profile=profile)
    out = programs.get("planner.rules")(**programs.planner_inputs(packet))
    assert out.directive.strategy_family == "family:break_deps"  # lowers the bound, avoiding the blocked one
    assert out.directive.objective == "Reach 1390 cycles"


# ----------------------------------------------------------------------------- state round trip


@pytest.mark.parametrize("name", REQUIRED + ("full_auto.zeroshot",))
def test_program_state_round_trips_as_json(tmp_path, name):
    program = programs.get(name)
    path = tmp_path / "program.json"
    program.save(str(path))
    state = json.loads(path.read_text())
    fresh = programs.get(name)
    for predictor in fresh.predictors():
        predictor.demos = []
    fresh.load(str(path))
    assert [len(p.demos) for p in fresh.predictors()] == [len(p.demos) for p in program.predictors()]
    assert fresh.dump_state() == program.dump_state()
    saved_demos = sum(len(entry.get("demos", [])) for entry in state.values() if isinstance(entry, dict))
    assert saved_demos == sum(len(p.demos) for p in program.predictors())
    assert saved_demos > 0 or not programs.spec(name).uses_lm or name == "full_auto.zeroshot"


# ----------------------------------------------------------------------------- CLI


def test_cli_predict_prints_model_and_enforced_decisions(tmp_path, capsys):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({**summary(last_turn_status="failed").model_dump(), "pending_approvals": 0,
                                "token_usage": {"totalTokens": 10}}))
    assert main(["predict", "--program", "full_auto.predict", "--summary", str(path), "--lm", "fake",
                 "--no-cache"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model_decision"]["action"] == "stop" and result["enforced_decision"]["action"] == "stop"
    assert result["audit"]["rule"] == "turn_failed" and result["audit"]["enforced_confidence"] == 1.0
    assert result["usage"]["lm_calls"] == 1 and result["lm"]["model"] == "fake/rules"


def test_cli_predict_applies_a_config_and_a_record(tmp_path, capsys):
    path = tmp_path / "record.json"
    path.write_text(record().model_dump_json())
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"run_id": "fullauto-1", "workspace_id": "ws", "thread_id": None,
                                  "started_at": "2025-01-01T00:00:00Z", "decision_model": "m", "min_confidence": 0.9,
                                  "max_turns": 50, "no_progress_limit": 3, "max_tokens": None}))
    assert main(["predict", "--program", "rule", "--summary", str(path), "--config", str(config)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["lm"] is None and result["guardrail_config"]["min_confidence"] == 0.9
    assert result["guardrail_config"]["max_turns"] == 50
    assert result["audit"]["rule"] == "low_confidence" and result["enforced_decision"]["action"] == "pause"


def test_cli_predict_planner_packet(tmp_path, capsys):
    packet, _ = _planner_seed_packets()[0]
    path = tmp_path / "packet.json"
    path.write_text(packet.model_dump_json())
    assert main(["predict", "--program", "planner.rules", "--packet", str(path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["directive"]["strategy_family"] in FAMILIES and result["used_safe_default"] is False


@pytest.mark.parametrize("content, args, message", [
    ('{"thread_id": 5, "turn_id": "t"}', [], "field thread_id"),
    ('{"thread_id": "x", "turn_id": "t", "last_turn_status": 3}', [], "field last_turn_status"),
    ("[1, 2]", [], "expected a JSON object"),
    ('{"thread_id": "x",', [], "line 1 column"),
    ('{"thread_id": "x", "turn_id": "t"}', ["--program", "nope"], "unknown program 'nope'"),
    ('{"thread_id": "x", "turn_id": "t"}', ["--program", "planner.rules"], "planner program"),
])
def test_cli_predict_bad_input_is_one_clear_line(tmp_path, capsys, content, args, message):
    path = tmp_path / "summary.json"
    path.write_text(content)
    assert main(["predict", "--summary", str(path), "--lm", "fake", *(args or ["--program", "rule"])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("guidebench: error:") and message in err and "\n" not in err


def test_cli_programs_lists_the_registry(capsys):
    assert main(["programs", "--json"]) == 0
    listed = {item["name"]: item for item in json.loads(capsys.readouterr().out)}
    assert set(REQUIRED) <= set(listed) and listed["full_auto.rules"]["aliases"] == ["rule"]
    assert main(["programs", "--kind", "planner"]) == 0
    table = capsys.readouterr().out
    assert "planner.rules" in table and "full_auto.predict" not in table


# ----------------------------------------------------------------------------- the real embedded model

UNSEEN = summary(
    thread_id="thr-unseen", turn_id="turn-6", turn_count=6,
    turn_plan=json.dumps([{"step": "Add a --dry-run flag to the deploy script", "status": "completed"},
                          {"step": "Document the flag in docs/deploy.md", "status": "in_progress"}], indent=2),
    diff_summary="scripts/deploy.py | 31 ++++++++++++++++++----\ndocs/deploy.md | 4 ++++",
    token_usage=json.dumps({"totalTokens": 27514, "inputTokens": 25990, "outputTokens": 1524}),
    recent_actions=json.dumps([{"turn_id": "turn-5", "action": "continue", "reason": "Flag half done.",
                                "confidence": 0.77, "timestamp": 1732262000}], indent=2),
    last_agent_message="The flag works; I still need to document it.",
)


@pytest.mark.slow
def test_real_model_full_auto_predict_gives_a_valid_decision(real_lm, capsys):
    started = time.perf_counter()
    with dspy.context(lm=real_lm), track_calls() as ledger:
        out = programs.get("full_auto.predict")(**programs.decision_inputs(UNSEEN))
    elapsed = time.perf_counter() - started
    decision = GuidanceDecision.model_validate(out.decision.model_dump())
    assert decision.action in ACTIONS and 0.0 <= decision.confidence <= 1.0
    assert out.parse_errors == [], out.raw_output  # seed demos + marker prefill: the format holds
    call = ledger.calls[0]
    assert len(ledger.calls) == 1 and call.prompt_tokens > 1000 and call.completion_tokens > 0
    with capsys.disabled():
        print(f"\nfull_auto.predict on the embedded model: {elapsed:.2f}s, {call.prompt_tokens} prompt + "
              f"{call.completion_tokens} completion tokens -> {decision.action} ({decision.confidence})")


@pytest.mark.slow
def test_real_model_cli_predict_on_an_unseen_summary(real_lm, tmp_path, capsys):
    path = tmp_path / "unseen.json"
    waiting = UNSEEN.model_copy(update={"turn_id": "turn-7", "pending_approvals": "1", "turn_count": 7,
                                        "last_agent_message": "I need approval to run the deploy script."})
    path.write_text(waiting.model_dump_json())
    assert main(["predict", "--program", "full_auto.predict", "--summary", str(path), "--no-cache"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model_decision"]["action"] in ACTIONS and result["parse_failed"] is False
    assert result["usage"]["lm_calls"] == 1 and result["lm"]["model"] == "local/gemma-3-270m-q4_k_m"
    assert result["audit"]["original_action"] == result["model_decision"]["action"]


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
