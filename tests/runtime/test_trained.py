"""runtime.trained: the features of a turn, the least-cost answer under the guardrails, and a state that refuses
to load when it was edited into something it cannot score."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from runtime.fullauto import GuardrailConfig
from runtime.inputs import summary_inputs
from runtime.trained import (NUMBER_NAMES, TrainedDecisionModel, TrainedModelError, config_inputs,
                             least_cost_action, least_cost_actions, next_input, turn_features, turn_numbers, turn_text)
from program_support import summary

COST = {"continue": {"continue": 0.0, "pause": 2.0, "stop": 3.0},
        "pause": {"continue": 3.0, "pause": 0.0, "stop": 1.0},
        "stop": {"continue": 5.0, "pause": 1.0, "stop": 0.0}}
PLAN = json.dumps({"threadId": "7f795164-32f9-494f-9a30-d1d57aaf90d4", "turnId": "60ad6ad9-fe9c-4b57-ac0f-d671d2a6daaf",
                   "explanation": "Blocked: which cache key?",
                   "plan": [{"step": "Read the code", "status": "completed"},
                            {"step": "Add the cache", "status": "inProgress"}]}, indent=2)
DIFF = json.dumps({"threadId": "x", "turnId": "y", "diff": "diff --git a/auth/permissions.py b/auth/permissions.py\n"
                   "index 850cf9b..85eb81f 100644\n--- a/auth/permissions.py\n+++ b/auth/permissions.py\n"
                   "@@ -1,2 +1,3 @@\n+    check(user)\n-    pass\n"})


def _inputs(**fields) -> dict:
    return {**summary_inputs(summary(**fields)), **config_inputs(GuardrailConfig())}


def test_the_text_keeps_what_a_person_reads_and_drops_ids_and_hashes():
    text = turn_text(_inputs(turn_plan=PLAN, diff_summary=DIFF, recent_actions='[{"action": "continue"}]'))
    assert "explanation: Blocked: which cache key?" in text
    assert "step inprogress: Add the cache" in text and "touched: auth/permissions.py" in text
    assert "last_action_continue" in text
    for identifier in ("7f795164", "60ad6ad9-fe9c", "850cf9b", "85eb81f"):
        assert identifier not in text


def test_the_numbers_read_counts_plan_diff_and_config():
    numbers = dict(zip(NUMBER_NAMES, turn_numbers({**_inputs(turn_plan=PLAN, diff_summary=DIFF, turn_count=20,
                                                             pending_approvals="2", no_progress_count=2),
                                                   **config_inputs(GuardrailConfig(max_turns=40, min_confidence=0.7))})))
    assert numbers["approvals"] == 2 and numbers["no_progress"] == 2 and numbers["no_progress_share"] == pytest.approx(2 / 3)
    assert numbers["turn_share"] == pytest.approx(0.5) and numbers["min_confidence"] == 0.7
    assert numbers["plan_steps"] == 2 and numbers["plan_done_share"] == 0.5 and numbers["diff_files"] == 1
    assert numbers["diff_added"] == pytest.approx(math.log1p(1)) and numbers["diff_removed"] == pytest.approx(math.log1p(1))


def test_a_megabyte_field_is_clipped_not_refused():
    text, numbers = turn_features(_inputs(turn_error="x " * 500_000, last_agent_message="y" * 1_000_000))
    assert len(text) < 25_000 and len(numbers) == len(NUMBER_NAMES)


def test_the_answer_is_the_least_expected_cost_not_the_most_probable():
    # continue is the most probable, but a wrong continue costs so much that a pause is cheaper in expectation
    action, confidence, expected = least_cost_action({"continue": 0.5, "pause": 0.2, "stop": 0.3}, COST, 0.0)
    assert action == "pause" and confidence == pytest.approx(0.2)
    assert expected == pytest.approx(0.5 * 2 + 0.3 * 1)


def test_an_answer_under_min_confidence_costs_what_the_guardrails_pause_costs():
    probabilities = {"continue": 0.75, "pause": 0.2, "stop": 0.05}
    assert least_cost_action(probabilities, COST, 0.55)[0] == "continue"
    # at 0.8 the guardrails would pause a continue: its expected cost is a pause's, and the tie goes to pause
    assert least_cost_action(probabilities, COST, 0.8)[0] == "pause"


def test_review_is_answered_when_more_likely_than_a_plain_pause():
    action, confidence, _ = least_cost_action({"continue": 0.1, "pause": 0.3, "review": 0.5, "stop": 0.1}, COST, 0.55)
    assert action == "review" and confidence == pytest.approx(0.8)


@pytest.mark.parametrize("classes", [["continue", "pause", "review", "stop"], ["continue", "pause", "stop"],
                                     ["pause", "stop"], ["continue", "review"]])
def test_many_turns_at_once_get_exactly_the_answers_of_one_turn_at_a_time(classes):
    rng = np.random.default_rng(len(classes))
    probabilities = rng.dirichlet(np.full(len(classes), 0.7), size=400)
    probabilities[:40] = np.round(probabilities[:40], 1)  # ties and exact thresholds too
    probabilities[:40] /= probabilities[:40].sum(axis=1, keepdims=True)
    floors = rng.choice([0.0, 0.3, 0.55, 0.8, 1.0], size=400)
    answers, confidence = least_cost_actions(probabilities, classes, COST, floors)
    for row, floor, answer, p in zip(probabilities, floors, answers, confidence.tolist()):
        one = least_cost_action(dict(zip(classes, row.tolist())), COST, float(floor))
        assert (answer, p) == one[:2]


def test_a_continue_sends_the_current_step():
    assert next_input(_inputs(turn_plan=PLAN)) == "Continue with the next plan step: Add the cache"
    assert next_input(_inputs(turn_plan="")) == ""


def _state(classes=("continue", "pause", "stop")) -> dict:
    from runtime.frozen.knn import TfidfVectorizer

    vectorizer = TfidfVectorizer(max_features=50).fit(["status completed", "status failed error", "pending approvals 2"])
    width = len(vectorizer.idf) + len(NUMBER_NAMES)
    rng = np.random.default_rng(0)
    return {"kind": "linear", "features_version": 1, "classes": list(classes), "vectorizer": vectorizer.to_state(),
            "numbers": list(NUMBER_NAMES), "mean": [0.0] * len(NUMBER_NAMES), "scale": [1.0] * len(NUMBER_NAMES),
            "coef": rng.normal(size=(len(classes), width)).tolist(), "intercept": [0.0] * len(classes),
            "temperature": 1.0, "cost": COST, "fit": {}}


def test_probabilities_are_calibrated_softmax_and_the_state_round_trips():
    model = TrainedDecisionModel.from_state(_state())
    inputs = _inputs(last_turn_status="failed", turn_error="boom")
    probabilities = model.probabilities(inputs)
    assert set(probabilities) == {"continue", "pause", "stop"} and sum(probabilities.values()) == pytest.approx(1.0)
    hotter = TrainedDecisionModel.from_state({**_state(), "temperature": 4.0}).probabilities(inputs)
    assert max(hotter.values()) < max(probabilities.values())  # a higher temperature flattens them
    again = TrainedDecisionModel.from_state(json.loads(json.dumps(model.to_state())))
    assert again.probabilities(inputs) == probabilities
    decision = model.decide(inputs)
    assert decision.reason.startswith("trained model:") and 0.0 <= decision.confidence <= 1.0


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update(coef=s["coef"][:2]), "`coef` has shape"),
    (lambda s: s["coef"][0].__setitem__(0, float("nan")), "not finite"),
    (lambda s: s.update(classes=["continue", "maybe", "stop"]), "`classes` must list"),
    (lambda s: s.update(classes=["continue"], coef=s["coef"][:1], intercept=[0.0]), "`classes` must list"),
    (lambda s: s.update(features_version=99), "fit the model again"),
    (lambda s: s.update(temperature=0), "`temperature` must be a positive number"),
    (lambda s: s["cost"].pop("stop"), "`cost` must give a cost"),
    (lambda s: s.update(scale=[0.0] * len(NUMBER_NAMES)), "`scale` must hold positive numbers"),
    (lambda s: s["vectorizer"].update(idf=[1.0]), "`vectorizer` is not a TF-IDF state"),
    (lambda s: s.update(kind="forest"), "scores 'linear' models"),
    # finite numbers whose scores overflow: every call would give NaN probabilities
    (lambda s: s.update(coef=[[1e308] * len(row) for row in s["coef"]]), "could give a turn a scaled score of inf"),
    (lambda s: s.update(intercept=[1e200, 0.0, 0.0]), "could give a turn a scaled score of 1e+200"),
    (lambda s: s.update(temperature=1e-300), "(at most 1e+100 is scored"),
])
def test_an_edited_state_is_refused_with_one_line(edit, message):
    state = copy.deepcopy(_state())
    edit(state)
    with pytest.raises(TrainedModelError) as caught:
        TrainedDecisionModel.from_state(state)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_input_far_beyond_the_training_data_still_scores_finite():
    model = TrainedDecisionModel.from_state(_state())
    extreme = _inputs(turn_count=10 ** 18, no_progress_count=10 ** 18, pending_approvals=str(10 ** 308),
                      pending_tool_inputs=str(10 ** 308))
    probabilities = model.probabilities(extreme)  # the standardised numbers are clipped, as the bound assumes
    assert all(math.isfinite(p) for p in probabilities.values()) and sum(probabilities.values()) == pytest.approx(1.0)


def test_scores_that_are_not_finite_raise_and_replay_counts_each_as_an_error(monkeypatch):
    """Never the silent pause of NaN probabilities (every action `pause`, `errors 0`): an error per record."""
    import programs
    from evals.replay import replay
    from optimizer_support import decision_records

    model = TrainedDecisionModel.from_state(_state())
    monkeypatch.setattr(model, "scores", lambda inputs: np.full(3, np.nan))
    with pytest.raises(TrainedModelError, match="probabilities for this turn are not finite"):
        model.decide(_inputs())
    learned = programs.get("full_auto.learned")
    learned.trained_model.set_model(model)
    records = decision_records(4)
    result = replay(learned, records, progress=False)
    assert result.summary["n_errors"] == 4 and result.metrics["error_rate"].value == 1.0
    assert {row["error"]["class"] for row in result.rows} == {"TrainedModelError"}
