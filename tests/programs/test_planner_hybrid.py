"""programs.planner_hybrid: the pivot rules choose the family (pivot compliance 1.0 by construction, whatever the
LM answers), one short LM call writes the fields the protocol leaves open, each checked on its own (an invalid one
keeps the rule planner's value and says so), the directive is always strict; the program's state round-trips,
optimizers compile its one predictor on the attempts in the rules' family, and it answers on the embedded model
(slow)."""

from __future__ import annotations

import json
import time

import dspy
import pytest

import optimizers
import programs
from evals import metrics_planner
from evals.replay import replay
from evals.usage import track_calls
from guidebench.lm.prompt import message_text, render_prompt
from optimizer_support import episode_records
from program_support import recorded_requests
from programs.planner_hybrid import GIVEN_FAMILY_MAX_TOKENS, LM_FIELDS, PlannerHybrid, family_last
from programs.rules_planner import rule_choice, rule_directive
from programs.seeds import _planner_seed_packets, given_family_demos
from runtime import OptimizationDirective
from runtime.pivot import validate_directive

RULE_FIXED = ("objective", "strategy_family", "next_packet_requests", "did_web_search")


def _answer(**fields) -> str:
    return "\n\n".join(f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}" for k, v in fields.items())


GOOD = {"primary_hypothesis": "Fewer loads lower the load bound.", "strategy_modifiers": ["vload"], "risk": "High",
        "expected_effect_cycles": -25, "change_summary": ["Load 8 lanes at once"],
        "validation": {"commands": ["python tests/submission_tests.py"], "pass_criteria": ["cycles drop"]}}


def records(*seeds: int) -> list:
    """Simulated planner records (four episodes per seed), packets built as the importer does."""
    return [r for seed in seeds for index in range(4) for r in episode_records(seed, index)]


def test_the_rules_choose_the_family_and_one_short_lm_call_writes_the_rest(fake_lm):
    for packet, _ in _planner_seed_packets():
        inputs = programs.planner_inputs(packet)
        with track_calls() as ledger:
            out = programs.get("planner.hybrid")(**inputs)
        rule, reasons = rule_directive(packet)
        assert len(ledger.calls) == 1 and out.parse_errors == [] and out.directive_errors == []
        assert out.lm_fields == list(LM_FIELDS) and out.lm_errors == [] and out.rule_reasons == reasons
        assert all(getattr(out.directive, name) == getattr(rule, name) for name in RULE_FIXED)
        # the fake LM answers with the family's playbook: the LM's changes are the step plan's changes
        assert all(change in out.directive.step_plan for change in out.directive.change_summary)
    [request] = recorded_requests("planner.hybrid", inputs)
    assert request.config.max_tokens == GIVEN_FAMILY_MAX_TOKENS
    text = message_text(request.messages[-1])
    assert "[[ ## family ## ]]\nreduce_loads" in text and "[[ ## why ## ]]\nnear_bound" in text
    assert "strategy_family" not in render_prompt(request).prompt and "{" not in text  # no packet JSON
    # the demo of the chosen family is the last one, next to the input
    assert render_prompt(request).prompt.rindex("[[ ## family ## ]]\nreduce_loads") > \
        render_prompt(request).prompt.rindex("[[ ## family ## ]]\nschedule")


@pytest.mark.parametrize("answers", ["fake", "garbage", "wrong"])
def test_pivot_compliance_is_one_by_construction_on_replayed_records(fake_lm, scripted_lm, answers):
    """Replayed like any program: whatever the LM answers, every directive is strict and follows the protocol."""
    planner_records = records(5, 8)
    if answers == "garbage":
        scripted_lm(["The best plan is to reschedule everything."] * len(planner_records))
    elif answers == "wrong":  # the answer names a blocked family and breaks every bound it can
        bad = _answer(strategy_family="family:schedule", primary_hypothesis="", strategy_modifiers=["a"] * 5,
                      risk="Extreme", expected_effect_cycles="many", change_summary=[], validation={"commands": []})
        scripted_lm([bad] * len(planner_records))
    result = replay(PlannerHybrid(), planner_records, progress=False)
    assert result.n == len(planner_records) > 100 and result.errors == 0
    for row in result.rows:
        assert row["scores"]["pivot_compliance"] == 1.0 and row["scores"]["schema_validity"] == 1.0, row
    rules = replay(programs.get("planner.rules"), planner_records, progress=False)
    # the same family as planner.rules on every record
    assert [row["strategy_family"] for row in result.rows] == [row["strategy_family"] for row in rules.rows]
    if answers != "fake":  # nothing of the answer was usable: the rule planner's directive, record for record
        assert [row["directive"] for row in result.rows] == [row["directive"] for row in rules.rows]


def test_an_invalid_field_keeps_the_rule_planners_value_and_the_prediction_says_so(scripted_lm):
    packet, _ = _planner_seed_packets()[1]
    rule, _ = rule_directive(packet)
    scripted_lm([_answer(**{**GOOD, "strategy_modifiers": ["a", "b", "c", "d"], "risk": "Extreme",
                            "validation": {"commands": [], "pass_criteria": ["x"]}}),
                 "no sections at all"])
    program = programs.get("planner.hybrid")
    out = program(**programs.planner_inputs(packet))
    assert out.lm_fields == ["primary_hypothesis", "expected_effect_cycles", "change_summary"]
    assert [error.split(":")[0] for error in out.lm_errors] == ["risk", "strategy_modifiers", "validation.commands"]
    assert all(error.endswith("(the rule planner's value is used)") for error in out.lm_errors)
    directive = out.directive
    assert (directive.strategy_modifiers, directive.risk, directive.validation) == \
        (rule.strategy_modifiers, rule.risk, rule.validation)
    assert (directive.primary_hypothesis, directive.expected_effect_cycles) == (GOOD["primary_hypothesis"], -25)
    assert "Load 8 lanes at once" in directive.step_plan and validate_directive(directive.model_dump()) == []
    # not the safe default: the directive is used, so the metric's error lists stay empty
    assert out.parse_errors == [] and out.directive_errors == []
    nothing = program(**programs.planner_inputs(packet))
    assert nothing.directive == rule and nothing.lm_fields == [] and nothing.adapter_errors
    assert sorted(error.split(":")[0] for error in nothing.lm_errors) == sorted(LM_FIELDS)


def test_recovery_mode_keeps_low_risk_and_a_missing_packet_is_the_safe_default(scripted_lm):
    recovering = next(r.packet for r in records(5) if rule_choice(r.packet).recovery)
    scripted_lm([_answer(**GOOD)])
    with track_calls() as ledger:
        out = programs.get("planner.hybrid")(**programs.planner_inputs(recovering))
        missing = programs.get("planner.hybrid")(goal="best")
    assert len(ledger.calls) == 1  # no LM call without a packet
    assert out.directive.risk == "Low" and "risk" not in out.lm_fields
    assert out.lm_errors == ["risk: High in recovery mode (the rule planner's value is used)"]
    assert out.directive.step_plan[0] == "Start from the last valid kernel"
    assert missing.parse_errors and missing.directive.strategy_modifiers == ["safe_default"]


def test_the_state_round_trips_and_the_program_has_one_predictor(tmp_path):
    program = programs.get("planner.hybrid")
    assert [name for name, _ in program.named_predictors()] == ["write"]
    assert len(program.write.demos) == 3 and {d.family for d in program.write.demos} == {
        "schedule", "reduce_loads", "break_deps"}
    program.write.demos = program.write.demos[:2]
    state = json.loads(json.dumps(program.dump_state()))
    assert set(state) == {"write"}  # the rules are code, not state
    fresh = programs.get("planner.hybrid")
    fresh.load_state(state)
    assert fresh.dump_state() == program.dump_state()
    program.save(str(tmp_path / "program.json"))
    saved = programs.get("planner.hybrid")
    saved.load(str(tmp_path / "program.json"))
    assert [d["family"] for d in saved.write.demos] == [d["family"] for d in program.write.demos]  # dicts once loaded
    assert family_last(saved.write.demos, "break_deps")[-1]["family"] == "break_deps"
    assert program.reset_copy().write.demos == []
    demos = given_family_demos()
    assert [d.family for d in family_last(demos, "break_deps")] == ["reduce_loads", "schedule", "break_deps"]
    assert family_last(demos, "unknown") == demos


def test_lm_examples_are_the_attempts_in_the_rules_family_with_the_lms_inputs():
    examples = [programs.planner_example(r) for r in records(5)]
    chosen = PlannerHybrid().lm_examples(examples)
    assert 0 < len(chosen) < len(examples)
    for example in chosen:
        packet = programs.packet_from_inputs(example)
        choice = rule_choice(packet)
        assert example.logged_family == choice.family and example.family == choice.family.split(":")[1]
        assert example.why == ("; ".join(choice.reasons) or programs.inputs.NO_PIVOT)
        assert "family" not in example.inputs()  # the program computes them; a run passes the packet's inputs
    # An old log's untagged attempt gets a directive in a guessed family: it never teaches the LM that family.
    ids = {example.record_id for example in chosen}
    tagged = [example for example in examples if example.record_id in ids]
    untagged = [dspy.Example(**{**example.toDict(), "logged_family": None}).with_inputs(*example.inputs().keys())
                for example in tagged[1:]]
    assert [example.record_id for example in PlannerHybrid().lm_examples([*untagged, tagged[0]])] == \
        [tagged[0].record_id]


@pytest.mark.parametrize("recipe", ["labeled_fewshot", "bootstrap_fewshot"])
def test_optimizers_compile_its_predictor_on_the_attempts_in_the_rules_family(fake_lm, recipe):
    train = [programs.planner_example(r) for r in records(5)[:60]]
    dev = [programs.planner_example(r) for r in records(8)[:8]]
    student = programs.get("planner.hybrid")
    result = optimizers.get(recipe)().compile(student, train, dev, metrics_planner.metric, seed=2)
    demos = result.program.write.demos
    narrowed = {ex.record_id: ex for ex in student.lm_examples(train)}
    labeled = [d for d in demos if "record_id" in d]  # bootstrapped traces carry the predictor's fields only
    assert demos and all(d.record_id in narrowed and d.family == narrowed[d.record_id].family for d in labeled)
    assert all({"family", "why", *LM_FIELDS} <= set(d.keys()) for d in demos)
    assert recipe == "labeled_fewshot" or len(labeled) < len(demos)  # bootstrap traced the hybrid itself
    state = json.loads(json.dumps(result.program.dump_state()))
    loaded = optimizers.load_compiled(programs.get("planner.hybrid"), state)
    assert len(loaded.write.demos) == len(demos)
    for example in dev:
        out = loaded(**example.inputs())
        scores = metrics_planner.score_outcome(metrics_planner.outcome_of(metrics_planner.record_of_example(example),
                                                                           out))
        assert scores["pivot_compliance"] == 1.0 and out.lm_errors == []


# ----------------------------------------------------------------------------- the real embedded model


@pytest.mark.slow
def test_real_model_writes_the_open_fields_of_a_strict_directive(real_lm, capsys):
    lines = []
    for record in records(5)[10:13]:
        packet = record.packet
        started = time.perf_counter()
        with dspy.context(lm=real_lm), track_calls() as ledger:
            out = programs.get("planner.hybrid")(**programs.planner_inputs(packet))
        [call] = ledger.calls
        directive = OptimizationDirective.model_validate(out.directive.model_dump())
        assert validate_directive(directive.model_dump(), packet.strategy_family_constraints.blocked_families) == []
        assert directive.strategy_family == rule_choice(packet).family and out.parse_errors == []
        assert call.completion_tokens <= GIVEN_FAMILY_MAX_TOKENS
        # three seed demos and the marker prefill: the answer is in format, the model's text reaches the directive
        assert out.lm_fields, (out.lm_errors, out.raw_output)
        lines.append(f"{time.perf_counter() - started:.1f}s, {call.prompt_tokens} prompt + {call.completion_tokens} "
                     f"completion tokens; {directive.strategy_family} {directive.strategy_modifiers} "
                     f"{directive.risk} {directive.expected_effect_cycles}; LM wrote {len(out.lm_fields)} of "
                     f"{len(LM_FIELDS)} fields")
    with capsys.disabled():
        print("\nplanner.hybrid on the embedded model:\n  " + "\n  ".join(lines))
