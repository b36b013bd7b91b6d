"""Full Auto metrics: per-record scores, aggregates, feedback sentences and the DSPy metric forms."""

from __future__ import annotations

import math

import dspy
import pytest

from evals import metrics_fullauto as mf
from runtime import GuardrailConfig, GuardrailContext, GuidanceDecision, OutcomeLabel


def outcome(action="continue", confidence=0.9, label=None, status="completed", next_input="run the tests",
            parse_errors=(), config=None, error=None, **context):
    model = GuidanceDecision(action=action, confidence=confidence, next_input=next_input,
                             parse_errors=list(parse_errors))
    return mf.enforce(model, GuardrailContext(last_turn_status=status, **context), config or GuardrailConfig(),
                      OutcomeLabel(action=label, source="human") if label else None, error=error)


def test_cost_matrix_makes_running_on_past_a_stop_the_worst_mistake():
    assert mf.decision_cost("stop", "continue") == mf.MAX_COST
    assert mf.decision_cost("stop", "continue") > mf.decision_cost("continue", "pause")
    assert all(mf.COST[a][a] == 0 for a in mf.DISPATCH_ACTIONS)
    assert mf.decision_cost("review", "pause") == 0  # production dispatches review as pause


def test_scores_of_a_right_decision():
    scores = mf.score_outcome(outcome(label="continue"))
    assert scores["action_accuracy"] == 1.0
    assert scores["objective"] == 1.0
    assert scores["cost_weighted_error"] == 0.0
    assert scores["guardrail_override_rate"] == 0.0
    assert scores["brier"] == pytest.approx(0.01)
    assert scores["next_input_proxy"] == 1.0


def test_guardrail_override_is_scored_on_the_enforced_action_and_by_rule():
    o = outcome(action="continue", status="failed", label="stop")
    scores = mf.score_outcome(o)
    assert o.enforced.action == "stop" and o.overridden
    assert scores["guardrail_override_rate"] == 1.0
    assert scores["guardrail_override_rate.turn_failed"] == 1.0
    assert scores["guardrail_override_rate.low_confidence"] == 0.0
    assert scores["action_accuracy"] == 1.0  # the enforced stop is right
    assert scores["brier"] == pytest.approx(0.81)  # the model itself was confidently wrong


def test_a_fired_rule_that_keeps_the_action_is_not_an_override():
    o = outcome(action="pause", confidence=0.2, label="pause")
    assert o.audit.rule == "low_confidence" and not o.overridden
    assert mf.score_outcome(o)["guardrail_override_rate"] == 0.0


def test_continuing_past_a_stop_scores_zero_and_an_unneeded_pause_scores_partly():
    assert mf.score_outcome(outcome(label="stop"))["objective"] == 0.0
    pause = mf.score_outcome(outcome(action="pause", label="continue"))
    assert pause["objective"] == pytest.approx(1 - 2 / 5)
    assert pause["cost_weighted_error"] == 2.0


def test_parse_failures_and_errors_score_zero_even_when_the_safe_pause_is_right():
    failed = outcome(action="pause", confidence=0.0, label="pause", parse_errors=["action is missing"])
    scores = mf.score_outcome(failed)
    assert scores["parse_failure_rate"] == 1.0 and scores["objective"] == 0.0
    assert scores["action_accuracy"] == 1.0  # what production did was still right
    raised = mf.score_outcome(outcome(action="pause", confidence=0.0, label="pause", error="ValueError: boom"))
    assert raised["error_rate"] == 1.0 and raised["objective"] == 0.0


def test_unlabeled_records_skip_label_metrics():
    scores = mf.score_outcome(outcome())
    assert math.isnan(scores["objective"]) and math.isnan(scores["action_accuracy"]) and math.isnan(scores["brier"])
    assert scores["guardrail_override_rate"] == 0.0


def test_next_input_proxy():
    assert mf.score_outcome(outcome(next_input=""))["next_input_proxy"] == 0.0
    assert mf.score_outcome(outcome(next_input="x" * (mf.NEXT_INPUT_MAX_CHARS + 1)))["next_input_proxy"] == 0.0
    assert mf.score_outcome(outcome(next_input="Not supplied for this particular example."))["next_input_proxy"] == 0.0
    assert math.isnan(mf.score_outcome(outcome(action="stop"))["next_input_proxy"])


def test_aggregate_has_every_metric_with_an_interval():
    outcomes = [outcome(label="continue")] * 6 + [outcome(status="failed", label="stop")] * 2 + \
        [outcome(action="pause", label="continue")] * 2
    metrics = mf.aggregate(mf.rows_outcomes(outcomes))
    assert set(metrics) == set(mf.METRIC_NAMES)
    assert metrics["guardrail_override_rate"].value == pytest.approx(0.2)
    assert metrics["guardrail_override_rate.turn_failed"].value == pytest.approx(0.2)
    assert metrics["action_accuracy"].value == pytest.approx(0.8)
    assert metrics["objective"].value == pytest.approx((8 + 2 * 0.6) / 10)
    for name, value in metrics.items():
        assert value.ci_low is not None and value.ci_low <= value.value <= value.ci_high, name


def test_feedback_names_the_rule_and_the_mistake():
    text = mf.feedback(outcome(action="continue", status="failed", label="stop"))
    assert "guardrail turn_failed overrode 'continue' to 'stop': a failed turn must stop" in text.lower()
    text = mf.feedback(outcome(label="stop"))
    assert "right action was 'stop'" in text and "costliest" in text
    text = mf.feedback(outcome(action="pause", confidence=0.0, parse_errors=["action is missing"], label="pause"))
    assert "could not be parsed" in text
    low = mf.feedback_by_metric(outcome(confidence=0.3, label="continue"))
    assert "0.30 is below the minimum 0.55" in low["guardrail_override_rate"]
    assert "too low" in low["brier"]


def decision_example(label="continue", status="completed", **extra):
    inputs = {"thread_id": "t", "turn_id": "u", "last_turn_status": status, "turn_error": "", "turn_plan": "",
              "diff_summary": "", "token_usage": '{"totalTokens": 10}', "pending_approvals": "",
              "pending_tool_inputs": "", "recent_actions": "[]", "compaction_events": "", "turn_count": "3",
              "no_progress_count": "0"}
    return dspy.Example(**inputs, action=label, next_input="go", reason="", confidence=0.9,
                        label_source="human", **extra).with_inputs(*inputs)


def test_dspy_metric_applies_guardrails_and_scores_the_objective():
    pred = dspy.Prediction(action="continue", next_input="go", reason="", confidence=0.9)
    assert mf.metric(decision_example("continue"), pred) == 1.0
    assert mf.metric(decision_example("stop"), pred) == 0.0
    # The failed turn forces stop: the guardrail makes the prediction right.
    assert mf.metric(decision_example("stop", status="failed"), pred) == 1.0
    # While bootstrapping demos only fully right answers count.
    half = dspy.Prediction(action="pause", next_input="", reason="", confidence=0.9)
    assert mf.metric(decision_example("continue"), half) == pytest.approx(0.6)
    assert mf.metric(decision_example("continue"), half, trace=[]) == 0.0
    # Unparseable output is a safe pause that scores zero.
    assert mf.metric(decision_example("pause"), dspy.Prediction(action="maybe", confidence="high")) == 0.0


def test_dspy_metric_reads_a_config_carried_by_the_example():
    pred = dspy.Prediction(action="continue", next_input="go", reason="", confidence=0.6)
    assert mf.metric(decision_example("continue"), pred) == 1.0
    strict = decision_example("continue", guardrail_config={"min_confidence": 0.7})
    assert mf.metric(strict, pred) == pytest.approx(0.6)  # low confidence pauses


def test_gepa_metric_returns_score_and_feedback():
    pred = dspy.Prediction(action="continue", next_input="go", reason="", confidence=0.9)
    result = mf.gepa_metric(decision_example("stop", status="failed"), pred, None, "predict", None)
    assert isinstance(result, dspy.Prediction)
    assert result.score == 1.0
    assert "turn_failed overrode 'continue' to 'stop'" in result.feedback


# ----- the objective cannot be gamed by a constant policy (simulated runs) ----------------------

class ConstantPolicy:
    """Always the same action, confidently."""

    def __init__(self, action: str):
        self.action = action
        self.program_name = f"always_{action}"

    def __call__(self, **inputs):
        decision = GuidanceDecision(action=self.action, confidence=0.95,
                                    next_input="Continue with the next step." if self.action == "continue" else "")
        return dspy.Prediction(decision=decision, action=decision.action, confidence=decision.confidence,
                               next_input=decision.next_input, reason="", parse_errors=[])


def simulated_records(runs: int = 40, seed: int = 7):
    """Decision records of simulated runs: each run's guardrail config and the simulator's true labels."""
    from guidebench.simulators.fullauto import FullAutoSimulator
    from runtime import DecisionRecord
    from runtime.records import LoggedDecision

    records = []
    for run in FullAutoSimulator(seed).runs(runs):
        config = run.run_file.guardrail_config()
        # a session's runs each count sequence ids from 1 (orphans use 0): a label is its run's and turn's
        labels = {(label.run_id, label.sequence_id, label.turn_id): label.label for label in run.labels}
        for line in run.decisions:
            records.append(DecisionRecord.build(
                line.summary, config, run_id=line.run_id, sequence_id=line.sequence_id, guardrail=line.guardrail,
                logged=LoggedDecision(action=line.action, confidence=line.confidence, model_action=line.model_action(),
                                      model_confidence=line.model_confidence()),
                label=labels.get((line.run_id, line.sequence_id, line.summary.turn_id))))
    return records


def test_constant_policies_score_below_the_rule_policy_on_simulated_runs():
    from evals.replay import replay

    records = simulated_records()
    assert len(records) > 100 and len({r.label.action for r in records if r.label}) >= 3
    rule = replay("rule", records, progress=False).metrics["objective"]
    for action in ("pause", "stop", "continue"):
        constant = replay(ConstantPolicy(action), records, progress=False).metrics["objective"]
        assert constant.value < rule.value, action
        # Not a near miss: the whole interval of the constant policy lies below the rule policy.
        assert constant.ci_high < rule.value, action
