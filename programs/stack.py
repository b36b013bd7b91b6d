"""The "Guidance Module" as a module stack: summarize the turn, select the next action, verify it."""

from __future__ import annotations

from typing import Any, get_args

import dspy

from runtime.guardrails import parse_decision
from signatures import SelectNextAction, SummarizeTurnState, VerifyDecision
from signatures.stack import Progress, Verdict

from .full_auto import decision_from_outcome
from .lm_call import call_predictor, select_inputs
from .results import decision_prediction
from .seeds import stack_demos

PROGRESS_VALUES: tuple[str, ...] = get_args(Progress)
VERDICTS: tuple[str, ...] = get_args(Verdict)


def _fallback_summary(inputs: dict[str, str]) -> str:
    # When the summarizer's output is unusable the selector still gets the facts, verbatim.
    parts = [f"status: {inputs['last_turn_status'] or 'completed'}"]
    for name in ("turn_error", "turn_plan", "diff_summary", "pending_approvals", "pending_tool_inputs"):
        if inputs[name].strip():
            parts.append(f"{name}: {inputs[name].strip()[:400]}")
    return "\n".join(parts)


def _choice(value: Any, allowed: tuple[str, ...]) -> str | None:
    text = str(value or "").strip().strip("\"'`*.").lower()
    return text if text in allowed else None


class FullAutoStack(dspy.Module):
    """Three predictors in a row; the verifier can only make the decision more careful (pause or stop)."""

    def __init__(self, with_seed_demos: bool = True) -> None:
        super().__init__()
        self.summarize = dspy.Predict(SummarizeTurnState)
        self.select = dspy.Predict(SelectNextAction)
        self.verify = dspy.Predict(VerifyDecision)
        if with_seed_demos:
            demos = stack_demos()
            self.summarize.demos = demos["summarize"]
            self.select.demos = demos["select"]
            self.verify.demos = demos["verify"]

    def forward(self, **inputs: Any) -> dspy.Prediction:
        turn = select_inputs(inputs, list(SummarizeTurnState.input_fields))
        stage_errors: list[str] = []
        summarized = call_predictor(self.summarize, **turn)
        state_summary = str(summarized.fields.get("state_summary") or "").strip()
        progress = _choice(summarized.fields.get("progress"), PROGRESS_VALUES)
        if not state_summary or progress is None:
            stage_errors += [f"summarize: {error}" for error in summarized.errors] or ["summarize: unusable output"]
            state_summary = state_summary or _fallback_summary(turn)
            progress = progress or "progressing"

        selected = call_predictor(self.select, state_summary=state_summary, progress=progress,
                                  recent_actions=str(inputs.get("recent_actions") or ""))
        decision = decision_from_outcome(selected)
        extra = {"state_summary": state_summary, "progress": progress, "adapter_errors": list(selected.errors),
                 "raw_output": selected.raw}
        if decision.parse_failed:
            return decision_prediction(decision, stage_errors=stage_errors, verdict=None, **extra)

        verified = call_predictor(self.verify, state_summary=state_summary, progress=progress,
                                  proposed_action=decision.action, proposed_reason=decision.reason)
        verdict = _choice(verified.fields.get("verdict"), VERDICTS)
        if verdict is None:
            # The verifier is a second opinion: unusable output leaves the selected decision as it is.
            stage_errors += [f"verify: {error}" for error in verified.errors] or ["verify: unusable output"]
        elif verdict != "keep" and verdict != decision.action:
            checked = parse_decision({"action": verdict, "confidence": verified.fields.get("confidence")})
            rationale = str(verified.fields.get("rationale") or "").strip()
            decision = decision.model_copy(update={
                "action": verdict,
                "next_input": "",
                "reason": f"{decision.reason} Verifier: {rationale}".strip(),
                "confidence": decision.confidence if checked.parse_failed else checked.confidence,
            })
        return decision_prediction(decision, stage_errors=stage_errors, verdict=verdict, **extra)
