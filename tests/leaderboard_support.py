"""Small, seeded Full Auto datasets and test programs for the leaderboard tests."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import dspy

import programs
from evals.data import save_dataset
from runtime import (
    DecisionRecord,
    FullAutoTurnSummary,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    LoggedDecision,
    OutcomeLabel,
    apply_guardrails,
)

STATUSES = ("completed",) * 8 + ("failed", "interrupted")


def right_action(summary: FullAutoTurnSummary, config: GuardrailConfig) -> str:
    """The true next action of the toy world."""
    if summary.last_turn_status == "failed" or summary.no_progress_count >= config.no_progress_limit:
        return "stop"
    if summary.last_turn_status == "interrupted" or summary.pending_approvals not in ("", "0"):
        return "pause"
    if "all tests pass" in summary.diff_summary:
        return "stop"
    return "continue"


def make_records(n: int, seed: int = 0, run_size: int = 6) -> list[DecisionRecord]:
    """Seeded decision records: summaries, the deployed (noisy) decision through the guardrails, true labels."""
    rng = random.Random(seed)
    config = GuardrailConfig()
    records = []
    for index in range(n):
        run = f"fullauto-{seed:02d}{index // run_size:04d}"
        status = rng.choice(STATUSES)
        done = rng.random() < 0.2
        summary = FullAutoTurnSummary(
            thread_id=f"th-{index // run_size}", turn_id=f"turn-{index}", last_turn_status=status,
            turn_error="boom" if status == "failed" else "",
            turn_plan=f"step {index % 5}", diff_summary="all tests pass" if done else f"edited file{index % 7}.py",
            token_usage=json.dumps({"totalTokens": 1000 * (index % run_size + 1)}),
            pending_approvals=str(rng.choice([0, 0, 0, 1])), pending_tool_inputs="0", compaction_events="0",
            turn_count=index % run_size + 1, no_progress_count=rng.choice([0, 0, 0, 1, 3]))
        truth = right_action(summary, config)
        model_action = truth if rng.random() < 0.7 else rng.choice(["continue", "pause", "stop", "review"])
        model = GuidanceDecision(action=model_action, reason="deployed policy", confidence=rng.choice([0.4, 0.7, 0.9]),
                                 next_input="keep going" if model_action == "continue" else "")
        enforced, audit = apply_guardrails(model, GuardrailContext.from_summary(summary), config)
        logged = LoggedDecision(action=enforced.action, confidence=enforced.confidence, model_action=model.action,
                                model_confidence=model.confidence, reason=model.reason,
                                next_input_preview=enforced.next_input[:140])
        label = OutcomeLabel(action=truth, source="simulator", reason="toy world",
                             next_input="run the tests" if truth == "continue" else "")
        records.append(DecisionRecord.build(summary, config, run_id=run, sequence_id=index, logged=logged,
                                            guardrail=audit, label=label, model="deployed-model"))
    return records


def make_dataset(folder: Path, n: int = 60, seed: int = 0) -> Path:
    """A Full Auto dataset folder with all records in the test split (and a few in train/dev)."""
    records = make_records(n, seed)
    save_dataset(folder, "fullauto", {"train": records[:6], "dev": records[6:12], "test": records[12:]})
    return folder


class OracleProgram(dspy.Module):
    """Knows the toy world's rule: the right action with high confidence (a stand-in for a good package)."""

    kind = "full_auto"

    def forward(self, **inputs: Any) -> dspy.Prediction:
        summary = FullAutoTurnSummary.model_validate({k: inputs[k] for k in FullAutoTurnSummary.model_fields
                                                      if k in inputs}, strict=False)
        action = right_action(summary, GuardrailConfig())
        return programs.decision_prediction(GuidanceDecision(
            action=action, confidence=0.9, reason="oracle", next_input="run the tests" if action == "continue" else ""))


class FlakyProgram(dspy.Module):
    """Raises on every third turn, always continues otherwise: failures must be scored, not crash the board."""

    kind = "full_auto"

    def forward(self, **inputs: Any) -> dspy.Prediction:
        if int(str(inputs["turn_id"]).split("-")[-1]) % 3 == 0:
            raise RuntimeError("flaky program failed")
        return programs.decision_prediction(GuidanceDecision(action="continue", confidence=0.8, reason="flaky",
                                                             next_input="go on"))


def register_test_programs() -> None:
    """Register the test programs (idempotent)."""
    programs.register("test.oracle", OracleProgram, kind="full_auto", uses_lm=False,
                      description="test: the toy world's oracle", replace=True)
    programs.register("test.flaky", FlakyProgram, kind="full_auto", uses_lm=False,
                      description="test: raises on every third record", replace=True)

