"""Record shapes of the Full Auto loop (formats.md §1), as pydantic models."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

Action = Literal["continue", "pause", "stop", "review"]
ACTIONS: tuple[str, ...] = ("continue", "pause", "stop", "review")
TurnStatus = Literal["completed", "interrupted", "failed"]
GUARDRAIL_RULES: tuple[str, ...] = (
    "turn_failed", "turn_interrupted", "max_turns", "no_progress",
    "max_tokens", "low_confidence", "review_requested",
)

# Log lines mirror a strictly typed producer: a number where text is expected (or the
# reverse) is a wrong-typed line, not something to coerce silently.
_LOG = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False, populate_by_name=True)


def _rfc3339(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"not an RFC 3339 timestamp: {value!r}") from exc
    return value


class FullAutoTurnSummary(BaseModel):
    """What the loop knows after a turn (formats.md §1.1)."""

    model_config = _LOG

    thread_id: str
    turn_id: str
    last_turn_status: TurnStatus = "completed"
    turn_error: str = ""
    last_agent_message: str = ""
    last_guidance_directive: str = ""
    turn_plan: str = ""
    diff_summary: str = ""
    token_usage: str = ""
    pending_approvals: str = ""
    pending_tool_inputs: str = ""
    compaction_events: str = ""
    recent_actions: str = "[]"
    turn_count: int = Field(default=0, ge=0)
    no_progress_count: int = Field(default=0, ge=0)

    def tokens_used(self) -> Optional[int]:
        """Total tokens from the token-usage JSON (`totalTokens` or `total_tokens`)."""
        return tokens_from_usage(self.token_usage)

    def progress_signature(self) -> Optional[str]:
        """The no-progress signature `plan:<plan>\\ndiff:<diff>`, None when both are empty."""
        if not self.turn_plan and not self.diff_summary:
            return None
        return f"plan:{self.turn_plan}\ndiff:{self.diff_summary}"


def tokens_from_usage(token_usage: Any) -> Optional[int]:
    """Read `totalTokens` or `total_tokens` from token-usage JSON text or a dict; None if absent."""
    data = token_usage
    if isinstance(token_usage, str):
        if not token_usage.strip():
            return None
        try:
            data = json.loads(token_usage)
        except ValueError:
            return None
    if not isinstance(data, dict):
        return None
    for key in ("totalTokens", "total_tokens"):
        value = data.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
    return None


def next_progress_count(previous_signature: Optional[str], summary_signature: Optional[str], count: int) -> int:
    """No-progress counter update of formats.md §1.1: same +1, different 0, None unchanged."""
    if summary_signature is None:
        return count
    return count + 1 if summary_signature == previous_signature else 0


class GuidanceDecision(BaseModel):
    """One next-action decision: the four outputs of the decision signature."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    action: Action
    next_input: str = ""
    reason: str = ""
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    # Diagnostics of parse_decision; empty for a cleanly parsed decision.
    parse_errors: list[str] = Field(default_factory=list)

    @property
    def parse_failed(self) -> bool:
        """True when this decision is the safe default for unparseable output."""
        return bool(self.parse_errors)


class GuardrailConfig(BaseModel):
    """Guardrail limits (formats.md §1.3); 0 disables max_turns / no_progress_limit."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    min_confidence: float = 0.55
    max_turns: int = 200
    no_progress_limit: int = 3
    max_tokens: Optional[int] = None


class GuardrailContext(BaseModel):
    """What the guardrails look at besides the decision."""

    model_config = ConfigDict(extra="forbid")

    last_turn_status: TurnStatus = "completed"
    turn_count: int = 0
    no_progress_count: int = 0
    tokens_used: Optional[int] = None

    @classmethod
    def from_summary(cls, summary: FullAutoTurnSummary | dict) -> "GuardrailContext":
        """Build the context from a turn summary (tokens from `totalTokens`/`total_tokens`)."""
        if isinstance(summary, dict):
            summary = FullAutoTurnSummary.model_validate(summary, strict=False)
        return cls(
            last_turn_status=summary.last_turn_status,
            turn_count=summary.turn_count,
            no_progress_count=summary.no_progress_count,
            tokens_used=summary.tokens_used(),
        )


class GuardrailAudit(BaseModel):
    """The audit attached to every enforced decision (`triggered: false` when none fired)."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)

    triggered: bool
    rule: Optional[str] = None
    original_action: str
    original_confidence: float
    enforced_action: str
    enforced_confidence: float

    @property
    def overridden(self) -> bool:
        """True when the guardrail changed the action."""
        return self.original_action != self.enforced_action


class DecisionLogLine(BaseModel):
    """One line of `fullauto-decisions.jsonl` (formats.md §1.4)."""

    model_config = _LOG

    timestamp: str
    sequence_id: int = Field(ge=0)
    run_id: str
    workspace_id: str
    thread_id: str
    turn_id: str
    action: Action
    confidence: float
    reason: str
    next_input_preview: str = ""
    state: Literal["running", "paused"]
    model: str
    guardrail: Optional[GuardrailAudit] = None
    summary: FullAutoTurnSummary

    @field_validator("timestamp")
    @classmethod
    def _timestamp_is_rfc3339(cls, value: str) -> str:
        return _rfc3339(value)

    def model_action(self) -> str:
        """The model's own action: the audit's original action when audited, else the logged one."""
        return self.guardrail.original_action if self.guardrail else self.action

    def model_confidence(self) -> float:
        """The model's own confidence (from the audit when present)."""
        return self.guardrail.original_confidence if self.guardrail else self.confidence


class RawDecisionLogLine(BaseModel):
    """One line of `fullauto-decisions-raw.jsonl`."""

    model_config = _LOG

    timestamp: str
    sequence_id: int = Field(ge=0)
    run_id: str
    workspace_id: str = ""
    thread_id: str = ""
    turn_id: str
    raw_prediction: Any = None
    parse_diagnostics: Any = None


class RunFile(BaseModel):
    """`runs/<run_id>.json`: the guardrail config in force for one run."""

    model_config = ConfigDict(strict=False, extra="ignore", allow_inf_nan=False)

    run_id: str
    workspace_id: str = ""
    thread_id: str = ""
    started_at: Any = None
    decision_model: str = ""
    min_confidence: Optional[float] = None
    max_turns: Optional[int] = None
    no_progress_limit: Optional[int] = None
    max_tokens: Optional[int] = None

    def guardrail_config(self) -> GuardrailConfig:
        """The config this run used; absent values fall back to the defaults."""
        default = GuardrailConfig()
        return GuardrailConfig(
            min_confidence=default.min_confidence if self.min_confidence is None else self.min_confidence,
            max_turns=default.max_turns if self.max_turns is None else self.max_turns,
            no_progress_limit=default.no_progress_limit if self.no_progress_limit is None else self.no_progress_limit,
            max_tokens=self.max_tokens,
        )


class RunEvent(BaseModel):
    """One line of `runs/<run_id>_events.jsonl`."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    timestamp: Any = None
    sequence_id: int = 0
    event_type: str
    data: Any = None
