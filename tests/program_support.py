"""Helpers shared by the program tests (tests/programs/) and the `guidebench predict` tests: the required
program names, a turn summary, a decision record, an experiment log entry, an unseen summary, and the
requests a program sends the fake LM."""

from __future__ import annotations

import json

import dspy

import programs
from evals.usage import instrument
from guidebench.lm.fake import FAKE_MODEL_ID, FakeEngine
from programs.seeds import DECISION_SEEDS
from runtime import DecisionRecord, FullAutoTurnSummary, GuardrailConfig, LoggedDecision, OutcomeLabel

REQUIRED = ("full_auto.predict", "full_auto.cot", "full_auto.stack", "full_auto.rules", "full_auto.always_continue",
            "planner.predict", "planner.cot", "planner.rules")
LM_FULL_AUTO = ("full_auto.predict", "full_auto.cot", "full_auto.stack", "full_auto.zeroshot", "full_auto.compact_state",
                "full_auto.compact_cot", "full_auto.hybrid")
LM_PLANNER = ("planner.predict", "planner.cot")


# One turn per rule of the rule policy (`runtime.rules.RULE_NAMES` order): the summary fields that make it decide.
RULE_TURNS: dict[str, dict[str, object]] = {
    "turn_failed": {"last_turn_status": "failed", "turn_error": "sandbox crashed"},
    "interrupted": {"last_turn_status": "interrupted"},
    "pending_input": {"pending_approvals": "1"},
    "done": {"turn_plan": json.dumps([{"step": "a", "status": "completed"}]), "last_agent_message": "All tests pass."},
    "stalled": {"turn_plan": "- [x] write code\n- [ ] add tests", "no_progress_count": 2},
    "fix_failures": {"last_agent_message": "2 failed, 10 passed"},
    "open_steps": {"turn_plan": "- [x] write code\n- [ ] add tests"},
    "default_continue": {},
}


def summary(**fields: object) -> FullAutoTurnSummary:
    """A turn summary with no pending input; `fields` override."""
    base = {"thread_id": "thr-t", "turn_id": "turn-1", "pending_approvals": "0", "pending_tool_inputs": "0",
            "compaction_events": "0"}
    return FullAutoTurnSummary(**{**base, **fields})


def record(label_action: str = "continue", **label: object) -> DecisionRecord:
    """A decision record of the first seed: a logged pause of a model `continue`, labeled `label_action`."""
    return DecisionRecord.build(
        DECISION_SEEDS[0].summary, GuardrailConfig(), run_id="fullauto-1", sequence_id=3,
        logged=LoggedDecision(action="pause", confidence=0.4, model_action="continue", model_confidence=0.4,
                              reason="keep going", next_input_preview="Run the tests"),
        label=OutcomeLabel(action=label_action, source=label.pop("source", "rule:resumed_at_once"), **label))


def entry(iteration: int, family: str, valid: bool, cycles: int | None, best_before: int) -> dict:
    """An experiment log line (new shape) of one attempt in `family`."""
    return {"iteration_id": iteration, "timestamp_utc": "2025-01-01T00:00:00Z", "branch": f"b{iteration}",
            "base_branch": "main", "base_sha": "a" * 7, "head_sha": "b" * 7, "files_changed": ["kernel.py"],
            "tests_diff_empty": True, "valid": valid, "cycles": cycles,
            "delta_vs_best": None if cycles is None else cycles - best_before, "strategy_tags": [family, "x"],
            "hypothesis": f"attempt {iteration}", "change_summary": ["edit kernel"], "result_summary": "measured",
            "best_before": best_before}


# A turn none of the seed demos shows, for the real model.
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


class RecordingEngine(FakeEngine):
    """The fake LM engine, keeping every request it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list = []

    def complete(self, request):  # noqa: ANN001, ANN201 - the engine contract's types
        """Keep the request, answer as the fake LM does."""
        self.requests.append(request)
        return super().complete(request)


def recorded_requests(program: str | dspy.Module, inputs: dict) -> list:
    """The requests a program (a fresh instance when given by name) sends the fake LM for these inputs, in
    call order (the calls are recorded by `evals.usage.track_calls` too)."""
    engine = RecordingEngine()
    with dspy.context(lm=instrument(dspy.LM(FAKE_MODEL_ID, engine=engine, cache=False, num_retries=0))):
        (programs.get(program) if isinstance(program, str) else program)(**inputs)
    return engine.requests
