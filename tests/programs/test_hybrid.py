"""programs.hybrid: gated rules decide their turns without an LM call and every other turn goes to the LM program;
the prediction names the path; the rule gate is a parameter that round-trips through the program's state (a
compiled program and a knn_fewshot wrapper keep it) and that optimizers leave alone while they compile the LM
predictor on the turns it decides; on the embedded model the hybrid and full_auto.compact_state answer in
format (slow)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dspy
import pytest

import optimizers
import programs
from evals import metrics_fullauto
from evals.usage import track_calls
from optimizer_support import decision_examples
from program_support import RULE_TURNS, summary
from programs.full_auto import COMPACT_DECISION_MAX_TOKENS
from programs.hybrid import (DEFAULT_RULES, LM_PATH, RULE_SET_CHOICES, FullAutoHybrid, RuleGate, parse_rule_set,
                             rule_gate_of)
from runtime import ACTIONS
from runtime.rules import RULE_NAMES, gated_decision, rule_decision


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_gated_rules_decide_without_the_lm_and_every_other_turn_goes_to_it(fake_lm, rule):
    inputs = programs.decision_inputs(summary(**RULE_TURNS[rule]))
    with track_calls() as ledger:
        out = programs.get("full_auto.hybrid")(**inputs)
    assert out.parse_errors == [] and out.action in ACTIONS
    if rule in DEFAULT_RULES:
        assert (out.decided_by, out.rule, len(ledger.calls)) == (rule, rule, 0)
        assert out.decision == rule_decision(inputs)[0]
    else:
        assert (out.decided_by, len(ledger.calls)) == (LM_PATH, 1)
        # the LM program's own answer (the fake LM answers like the rule policy)
        assert out.decision == programs.get("full_auto.compact_state")(**inputs).decision


def test_the_default_gate_takes_the_turns_whose_action_is_a_fact():
    assert DEFAULT_RULES == ("turn_failed", "interrupted", "pending_input", "done")
    assert programs.get("full_auto.hybrid").rules == list(DEFAULT_RULES)
    assert "+".join(DEFAULT_RULES) in RULE_SET_CHOICES
    # the search never draws the whole policy: that is full_auto.rules, with no LM call at all
    assert all(parse_rule_set(choice) != list(RULE_NAMES) for choice in RULE_SET_CHOICES)


def test_which_rules_short_circuit_is_a_parameter(fake_lm):
    hybrid = FullAutoHybrid(rules=["stalled"])
    stalled, failed = (programs.decision_inputs(summary(**RULE_TURNS[r])) for r in ("stalled", "turn_failed"))
    assert hybrid(**stalled).decided_by == "stalled"
    assert hybrid(**failed).decided_by == LM_PATH
    hybrid.set_rules([])
    assert hybrid(**stalled).decided_by == LM_PATH
    with pytest.raises(ValueError, match="unknown rule 'finished'"):
        FullAutoHybrid(rules=["turn_failed", "finished"])
    with pytest.raises(ValueError, match="unknown rule"):
        parse_rule_set("turn_failed+finished")
    assert parse_rule_set("done+turn_failed") == ["turn_failed", "done"] and parse_rule_set("") == []


def test_the_rule_gate_round_trips_through_the_programs_state(tmp_path):
    hybrid = programs.get("full_auto.hybrid")
    hybrid.set_rules(["turn_failed", "stalled"])
    state = json.loads(json.dumps(hybrid.dump_state()))
    assert state["rule_gate"] == {"rules": ["turn_failed", "stalled"]}
    assert [name for name, _ in hybrid.named_predictors()] == ["lm_program.decide"]  # the gate is no predictor
    fresh = programs.get("full_auto.hybrid")
    fresh.load_state(state)
    assert fresh.rules == ["turn_failed", "stalled"] and fresh.dump_state() == hybrid.dump_state()
    hybrid.save(str(tmp_path / "program.json"))
    saved = programs.get("full_auto.hybrid")
    saved.load(str(tmp_path / "program.json"))
    assert saved.rules == ["turn_failed", "stalled"]
    # An optimizer's student is a reset copy: its demos go, its gate stays.
    student = hybrid.reset_copy()
    assert student.rules == ["turn_failed", "stalled"] and student.lm_program.decide.demos == []
    assert hybrid.deepcopy().rules == ["turn_failed", "stalled"] and rule_gate_of(hybrid) is hybrid.rule_gate
    assert rule_gate_of(programs.get("full_auto.compact_state")) is None
    state["rule_gate"] = {"rules": ["turn_failed", "finished"]}
    with pytest.raises(ValueError, match="unknown rule 'finished'"):
        programs.get("full_auto.hybrid").load_state(state)
    with pytest.raises(ValueError, match="rule gate state"):
        RuleGate().load_state({"rule": []})


def test_labeled_fewshot_compiles_the_lm_predictor_on_the_turns_it_decides(fake_lm):
    train, dev = decision_examples(16), decision_examples(8, 100)
    student = programs.get("full_auto.hybrid")
    student.set_rules(["turn_failed", "pending_input"])
    result = optimizers.get("labeled_fewshot")().compile(student, train, dev, metrics_fullauto.metric, seed=3)
    compiled = result.program
    assert compiled.rules == ["turn_failed", "pending_input"]
    demos = compiled.lm_program.decide.demos
    assert demos and all(gated_decision(demo.inputs(), compiled.rules) is None for demo in demos)
    assert {demo.record_id for demo in demos} <= {ex.record_id for ex in student.lm_examples(train)}
    assert len(student.lm_examples(train)) < len(train)  # the gated turns are left out
    state = json.loads(json.dumps(compiled.dump_state()))
    loaded = optimizers.load_compiled(programs.get("full_auto.hybrid"), state)
    assert loaded.rules == compiled.rules and len(loaded.lm_program.decide.demos) == len(demos)
    outs = [loaded(**example.inputs()) for example in dev]
    assert {out.decided_by for out in outs} >= {"turn_failed", "pending_input", LM_PATH}


@pytest.mark.parametrize("recipe", ["bootstrap_fewshot", "knn_fewshot"])
def test_other_recipes_compile_it_and_keep_the_gate(fake_lm, recipe):
    student = programs.get("full_auto.hybrid")
    student.set_rules(["turn_failed"])
    result = optimizers.get(recipe)().compile(student, decision_examples(12), decision_examples(6, 100),
                                              metrics_fullauto.metric, seed=1)
    state = json.loads(json.dumps(result.program.dump_state()))
    loaded = optimizers.load_compiled(programs.get("full_auto.hybrid"), state)
    inner = getattr(loaded, "program", loaded)  # knn_fewshot wraps the program, state and gate included
    assert inner.rules == ["turn_failed"]
    failed = programs.decision_inputs(summary(**RULE_TURNS["turn_failed"]))
    assert loaded(**failed).decided_by == "turn_failed"


# ----------------------------------------------------------------------------- the real embedded model


@pytest.mark.slow
def test_real_model_hybrid_and_compact_state_answers_parse(real_lm, tmp_path, capsys):
    from evals.data import load_records
    from guidebench.data import import_logs

    import_logs(Path(__file__).resolve().parents[2] / "datasets" / "sample" / "fullauto", "fullauto",
                tmp_path / "fa", progress=False)
    records = load_records(tmp_path / "fa", "test")
    routed = [r for r in records if gated_decision(programs.decision_inputs(r), DEFAULT_RULES) is None][:2]
    gated = next(r for r in records if gated_decision(programs.decision_inputs(r), DEFAULT_RULES) is not None)
    assert len(routed) == 2
    lines = []
    for name in ("full_auto.compact_state", "full_auto.hybrid"):
        program = programs.get(name)
        for item in routed:
            started = time.perf_counter()
            with dspy.context(lm=real_lm), track_calls() as ledger:
                out = program(**programs.decision_inputs(item))
            [call] = ledger.calls
            assert out.parse_errors == [], out.get("raw_output")  # seed demos + marker prefill: the format holds
            assert out.action in ACTIONS and call.completion_tokens <= COMPACT_DECISION_MAX_TOKENS
            assert out.get("decided_by") == (LM_PATH if name == "full_auto.hybrid" else None)
            lines.append(f"{name}: {time.perf_counter() - started:.2f}s, {call.prompt_tokens} prompt + "
                         f"{call.completion_tokens} completion tokens -> {out.action} ({out.confidence}), "
                         f"label {item.label.action if item.label else None}")
    with dspy.context(lm=real_lm), track_calls() as ledger:
        out = programs.get("full_auto.hybrid")(**programs.decision_inputs(gated))
    assert ledger.calls == [] and out.decided_by in DEFAULT_RULES
    with capsys.disabled():
        print("\nfull_auto.compact_state and full_auto.hybrid on the embedded model:\n  " + "\n  ".join(lines))
