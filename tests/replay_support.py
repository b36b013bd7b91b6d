"""Test helpers for replay and eval: a hand-made Full Auto workspace log in the real layout, and records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import dspy

from runtime import (
    DecisionLogLine,
    DecisionRecord,
    FullAutoTurnSummary,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    OutcomeLabel,
    apply_guardrails,
)
from runtime.records import LoggedDecision

RUN_A = "fullauto-0f8b6d52-5a3e-4c1e-9a7b-1c2d3e4f5a6b"  # has a run file: min_confidence 0.7
RUN_B = "fullauto-7c9d2e41-0b6a-4f3d-8e21-9a8b7c6d5e4f"  # no run file: defaults
CONFIG_A = GuardrailConfig(min_confidence=0.7, max_turns=50, no_progress_limit=3)

# (run, status, turn_count, no_progress_count, model action, model confidence, audit logged)
HAND_MADE = [
    (RUN_A, "completed", 1, 0, "continue", 0.9, True),
    (RUN_A, "completed", 2, 0, "continue", 0.65, True),   # low_confidence under 0.7: override
    (RUN_A, "failed", 3, 0, "continue", 0.8, True),       # turn_failed: override
    (RUN_A, "completed", 4, 0, "review", 0.9, True),      # review_requested: override
    (RUN_A, "completed", 5, 0, "pause", 0.4, True),       # low_confidence fires, keeps pause: not an override
    (RUN_A, "completed", 6, 3, "continue", 0.9, True),    # no_progress: override
    (RUN_B, "completed", 1, 0, "continue", 0.65, True),   # 0.65 >= 0.55 default: no override
    (RUN_B, "interrupted", 2, 0, "continue", 0.9, True),  # turn_interrupted: override
    (RUN_B, "completed", 3, 0, "stop", 0.95, True),
    (RUN_B, "completed", 4, 1, "continue", 0.8, False),   # older line without an audit
]


def _summary(index: int, run: str, status: str, turn_count: int, no_progress: int) -> FullAutoTurnSummary:
    return FullAutoTurnSummary(
        thread_id=f"thread-{run[-4:]}", turn_id=f"turn-{index:03d}", last_turn_status=status,
        turn_error="pytest exited with 1" if status == "failed" else "",
        last_agent_message=f"Turn {turn_count}: edited parser.py",
        turn_plan=json.dumps([{"step": "fix parser", "status": "in_progress"}], indent=2),
        diff_summary=f"parser.py | {index + 2} ++--", token_usage=json.dumps({"totalTokens": 1000 * turn_count}),
        pending_approvals="0", pending_tool_inputs="0", compaction_events="0", recent_actions="[]",
        turn_count=turn_count, no_progress_count=no_progress)


def hand_made_lines() -> list[DecisionLogLine]:
    """Decision log lines produced with the real guardrails and each run's config."""
    lines = []
    for index, (run, status, turns, stalled, action, confidence, audited) in enumerate(HAND_MADE):
        summary = _summary(index, run, status, turns, stalled)
        config = CONFIG_A if run == RUN_A else GuardrailConfig()
        model = GuidanceDecision(action=action, confidence=confidence, reason="model reason",
                                 next_input="run the tests" if action == "continue" else "")
        enforced, audit = apply_guardrails(model, GuardrailContext.from_summary(summary), config)
        lines.append(DecisionLogLine(
            timestamp=f"2025-05-01T10:{index:02d}:00Z", sequence_id=index, run_id=run, workspace_id="ws-1",
            thread_id=summary.thread_id, turn_id=summary.turn_id, action=enforced.action,
            confidence=enforced.confidence, reason=enforced.reason, next_input_preview=enforced.next_input[:140],
            state="running" if enforced.action == "continue" else "paused", model="gpt-test",
            guardrail=audit if audited else None, summary=summary))
    return lines


def expected_override_rate(lines: list[DecisionLogLine]) -> float:
    """The share of logged decisions whose audit shows the guardrail changed the action."""
    overridden = sum(1 for line in lines if line.guardrail is not None and line.guardrail.original_action != line.action)
    return overridden / len(lines)


def write_workspace(root: Path, lines: Optional[list[DecisionLogLine]] = None) -> Path:
    """Write a workspace log folder in the layout of formats.md §1.4 (RUN_B has no run file)."""
    lines = lines if lines is not None else hand_made_lines()
    (root / "runs").mkdir(parents=True, exist_ok=True)
    with (root / "fullauto-decisions.jsonl").open("w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(line.model_dump_json() + "\n")
    (root / "runs" / f"{RUN_A}.json").write_text(json.dumps({
        "run_id": RUN_A, "workspace_id": "ws-1", "thread_id": f"thread-{RUN_A[-4:]}", "started_at": "2025-05-01T10:00:00Z",
        "decision_model": "gpt-test", "min_confidence": CONFIG_A.min_confidence, "max_turns": CONFIG_A.max_turns,
        "no_progress_limit": CONFIG_A.no_progress_limit, "max_tokens": None}), encoding="utf-8")
    return root


def records_of(lines: list[DecisionLogLine], label: Optional[str] = "continue") -> list[DecisionRecord]:
    """Decision records of log lines (configs as the run files say), optionally all labeled."""
    records = []
    for line in lines:
        config = CONFIG_A if line.run_id == RUN_A else GuardrailConfig()
        records.append(DecisionRecord.build(
            line.summary, config, run_id=line.run_id, sequence_id=line.sequence_id, guardrail=line.guardrail,
            logged=LoggedDecision(action=line.action, confidence=line.confidence, model_action=line.model_action(),
                                  model_confidence=line.model_confidence(), reason=line.reason,
                                  next_input_preview=line.next_input_preview, state=line.state),
            label=OutcomeLabel(action=label, source="human") if label else None))
    return records


class RaisingProgram(dspy.Module):
    """Continues confidently, but raises on every record whose turn id ends in the given digits."""

    program_name = "raising"

    def __init__(self, fail_suffixes: tuple[str, ...] = ("1", "4")):
        super().__init__()
        self.fail_suffixes = fail_suffixes

    def forward(self, **inputs: Any) -> dspy.Prediction:
        if inputs["turn_id"].endswith(self.fail_suffixes):
            raise RuntimeError(f"backend exploded on {inputs['turn_id']}")
        decision = GuidanceDecision(action="continue", confidence=0.9, next_input="run the tests")
        return dspy.Prediction(action="continue", next_input="run the tests", reason="", confidence=0.9,
                               decision=decision, parse_errors=[])
