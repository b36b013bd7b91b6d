"""Replay: guardrails as production, the `logged` program, failures that never abort, threads, usage."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils import DummyLM

import programs
from evals import metrics_fullauto
from evals.replay import compare, replay
from evals.usage import instrument
from replay_support import (
    RUN_A,
    RaisingProgram,
    expected_override_rate,
    hand_made_lines,
    records_of,
)
from runtime import GuardrailConfig


@pytest.fixture(scope="module")
def lines():
    return hand_made_lines()


def test_logged_gives_exactly_the_logs_override_rate(lines):
    result = replay("logged", records_of(lines), progress=False)
    expected = expected_override_rate(lines)
    assert expected == pytest.approx(0.5)  # 5 of the 10 hand-made decisions were overridden
    assert result.metrics["guardrail_override_rate"].value == pytest.approx(expected)
    assert result.summary["n_overridden"] == 5
    assert result.summary["overrides_by_rule"] == {
        "low_confidence": 1, "turn_failed": 1, "review_requested": 1, "no_progress": 1, "turn_interrupted": 1}
    assert result.metrics["guardrail_override_rate.low_confidence"].value == pytest.approx(0.1)
    assert result.metrics["logged_agreement"].value == 1.0
    assert result.summary["logged_enforcement_mismatches"] == 0
    assert all(row["guardrail_source"] == "log" for row in result.rows)


def test_logged_keeps_the_logged_enforcement_when_todays_config_differs(lines):
    # Replayed with default configs everywhere, the 0.65 decision of RUN_A would no longer pause.
    records = [r.model_copy(update={"config": GuardrailConfig()}) for r in records_of(lines)]
    result = replay("logged", records, progress=False)
    assert result.metrics["guardrail_override_rate"].value == pytest.approx(expected_override_rate(lines))
    assert result.summary["logged_enforcement_mismatches"] == 1
    mismatch = [row for row in result.rows if row["replay_enforced_action"] != row["enforced_action"]]
    assert mismatch[0]["logged_model_action"] == "continue" and mismatch[0]["enforced_action"] == "pause"


def test_other_programs_get_the_production_guardrails_with_each_records_config(lines):
    records = records_of(lines)
    result = replay("full_auto.always_continue", records, progress=False)
    by_turn = {row["turn_id"]: row for row in result.rows}
    assert by_turn["turn-002"]["enforced_action"] == "stop" and by_turn["turn-002"]["guardrail_rule"] == "turn_failed"
    assert by_turn["turn-007"]["enforced_action"] == "pause"  # interrupted
    assert by_turn["turn-005"]["guardrail_rule"] == "no_progress"
    assert all(row["guardrail_source"] == "replay" for row in result.rows)
    # Changing a record's config changes what replay enforces.
    strict = [r.model_copy(update={"config": GuardrailConfig(no_progress_limit=1)}) for r in records]
    strict_rows = {row["turn_id"]: row for row in replay("full_auto.always_continue", strict, progress=False).rows}
    assert strict_rows["turn-009"]["guardrail_rule"] == "no_progress"


def test_a_program_that_raises_on_some_records_still_yields_a_complete_report(lines):
    records = records_of(lines)
    result = replay(RaisingProgram(), records, progress=False, threads=3)
    assert result.n == len(records)
    assert [row["record_id"] for row in result.rows] == [r.record_id for r in records]
    failed = [row for row in result.rows if row["error"]]
    assert {row["turn_id"] for row in failed} == {"turn-001", "turn-004"}
    for row in failed:
        error = row["error"]
        assert error["class"] == "RuntimeError" and "backend exploded" in error["message"]
        assert error["stage"] == "program" and "Traceback" in error["stack"] and error["lm"]
        assert row["scores"]["objective"] == 0.0 and row["scores"]["error_rate"] == 1.0
        assert row["model_action"] == "pause" and row["model_confidence"] == 0.0
    assert result.summary["n_errors"] == 2 and result.summary["errors_by_class"] == {"RuntimeError": 2}
    assert result.metrics["error_rate"].value == pytest.approx(0.2)
    for name, value in result.metrics.items():
        if value.n:
            assert value.ci_low is not None and value.ci_high is not None, name
    frame = result.to_frame()
    assert len(frame) == len(records) and frame["error.class"].notna().sum() == 2


def test_unparseable_lm_output_is_a_parse_failure_not_a_crash(lines):
    records = records_of(lines)[:4]
    lm = DummyLM([{"response": "I think we should keep going"}] * 20)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        result = replay("full_auto.zeroshot", records, progress=False)
    assert result.n == 4 and result.summary["n_errors"] == 0
    assert result.metrics["parse_failure_rate"].value == 1.0
    assert all(row["model_action"] == "pause" for row in result.rows)
    assert all(json.loads(row["parse_errors"]) for row in result.rows)


def test_lm_usage_lands_in_every_row(lines):
    records = records_of(lines)[:3]
    answer = {"action": "continue", "next_input": "run the tests", "reason": "progress", "confidence": "0.9"}
    lm = instrument(DummyLM([answer] * 10))
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        result = replay("full_auto.zeroshot", records, progress=False, threads=2)
    assert all(row["usage"]["lm_calls"] >= 1 for row in result.rows)
    assert result.metrics["lm_calls_per_decision"].value >= 1.0
    assert result.summary["usage"]["lm_calls"] == sum(row["usage"]["lm_calls"] for row in result.rows)
    assert result.metrics["parse_failure_rate"].value == 0.0


def test_threads_do_not_change_results(lines):
    records = records_of(lines)
    one = replay("rule", records, progress=False, threads=1)
    four = replay("rule", records, progress=False, threads=4)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("latency_s", "scores")} for r in rows]  # noqa: E731
    assert strip(one.rows) == strip(four.rows)
    assert one.metrics["objective"] == four.metrics["objective"]


def test_compare_pairs_records_and_refuses_different_ones(lines):
    records = records_of(lines, label="continue")
    logged = replay("logged", records, progress=False)
    always = replay("full_auto.always_continue", records, progress=False)
    result = compare(always, logged)
    diff = result["metrics"]["objective"]
    assert diff.diff == pytest.approx(always.metrics["objective"].value - logged.metrics["objective"].value)
    assert diff.ci_low <= diff.diff <= diff.ci_high and 0 < diff.p_value <= 1
    assert result["mcnemar"]["metric"] == "action_accuracy"
    with pytest.raises(ValueError, match="same records"):
        compare(always, replay("logged", records[:5], progress=False))


def test_kind_mismatch_is_refused(lines):
    with pytest.raises(ValueError, match="planner program cannot replay full_auto records"):
        replay("planner.rules", records_of(lines), progress=False)


def test_logged_program_is_registered_and_answers_from_the_log(lines):
    assert "logged" in programs.names("full_auto")
    program = programs.get("logged")
    record = records_of(lines)[1]  # model said continue at 0.65; the log enforced pause
    pred = program(**programs.decision_inputs(record))
    assert (pred.action, pred.confidence) == ("continue", 0.65)
    assert record.run_id == RUN_A and record.logged.action == "pause"
    with pytest.raises(ValueError):
        program(**{k: v for k, v in programs.decision_inputs(record).items() if not k.startswith("logged_")})


def test_a_routing_program_says_which_path_decided_each_record(lines):
    from guidebench.lm.factory import make_lm
    from runtime.rules import gated_decision

    records = records_of(lines)
    with dspy.context(lm=make_lm("fake", cache=False)):
        result = replay("full_auto.hybrid", records, progress=False)
    hybrid = programs.get("full_auto.hybrid")
    expected = [(gated_decision(programs.decision_inputs(r), hybrid.rules) or (None, "lm"))[1] for r in records]
    assert [row["decided_by"] for row in result.rows] == expected
    assert result.summary["decided_by"] == {path: expected.count(path) for path in set(expected)}
    assert set(expected) - {"lm"} and "lm" in expected  # the hand-made decisions take both paths
    # each record the LM decides costs one call, a rule's none
    assert [row["usage"]["lm_calls"] for row in result.rows] == [int(path == "lm") for path in expected]
    plain = replay("full_auto.rules", records, progress=False)
    assert "decided_by" not in plain.summary and {row["decided_by"] for row in plain.rows} == {None}


def test_lm_share_counts_the_decisions_a_cascade_sends_to_its_lm(fake_lm):
    from optimizer_support import decision_examples, decision_records
    from optimizers.fitting import FitSettings, fit_model
    from programs.learned import FullAutoCascade

    model = fit_model(decision_examples(16), decision_examples(8, offset=100), metrics_fullauto.metric,
                      FitSettings(C=(0.05,), class_weight=("none",))).model
    records = decision_records(12, offset=300)
    shares = []
    for threshold in (0.0, 0.9, 1.0):
        cascade = FullAutoCascade(threshold=threshold)
        cascade.trained_model.set_model(model)
        result = replay(cascade, records, progress=False)
        sent = result.summary["decided_by"].get("lm", 0)
        assert result.metrics["lm_share"].value == pytest.approx(sent / len(records))
        shares.append(result.metrics["lm_share"].value)
    assert shares[0] == 0.0 and shares[-1] == 1.0 and 0.0 <= shares[1] <= 1.0
    assert replay("rule", records, progress=False).metrics["lm_share"].value == 0.0


def test_a_trained_program_replays_in_batches_with_the_rows_of_one_call_per_record(monkeypatch):
    from optimizer_support import decision_examples, decision_records
    from optimizers.fitting import FitSettings, fit_model
    from programs.learned import FullAutoLearned

    model = fit_model(decision_examples(16), decision_examples(8, offset=100), metrics_fullauto.metric,
                      FitSettings(C=(1.0,), class_weight=("none",))).model
    program = FullAutoLearned()
    program.trained_model.set_model(model)
    records = decision_records(12, offset=300)
    one_by_one = replay(lambda **inputs: program(**inputs), records, progress=False)  # a plain callable: one call each

    def no_call(self, **inputs):
        raise AssertionError("the batch path made a call per record")

    monkeypatch.setattr(FullAutoLearned, "forward", no_call)
    batched = replay(program, records, progress=False)
    drop = lambda row: {k: v for k, v in row.items() if k != "latency_s"}  # noqa: E731
    assert [drop(row) for row in batched.rows] == [drop(row) for row in one_by_one.rows]
    assert batched.errors == 0 and all(row["latency_s"] > 0 for row in batched.rows)


def test_a_batch_that_raises_leaves_each_record_to_fail_on_its_own_with_its_stage():
    from optimizer_support import decision_records
    from programs.learned import FullAutoLearned

    result = replay(FullAutoLearned(), decision_records(3), progress=False)  # not fitted: the batch raises too
    assert result.errors == 3 and {row["error"]["stage"] for row in result.rows} == {"program"}
    assert {row["error"]["class"] for row in result.rows} == {"NotFittedError"}


def test_a_long_stack_keeps_its_first_line_and_the_frames_nearest_the_fault():
    # A deep stack, or a checkout in a long path, must not cut the line that says it is a traceback.
    from evals.replay import STACK_CHARS, _shortened

    stack = "Traceback (most recent call last):\n" + '  File "/a/long/checkout/path.py", line 1\n' * 400 + "E: boom\n"
    short = _shortened(stack)
    assert len(short) == STACK_CHARS and short.startswith("Traceback (most recent call last):\n  ...\n")
    assert short.endswith("E: boom\n") and _shortened("Traceback\nE: x\n") == "Traceback\nE: x\n"
