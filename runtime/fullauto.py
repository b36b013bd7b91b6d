"""Record shapes of the Full Auto loop (formats.md §1), as pydantic models."""

from __future__ import annotations

import json
import math
import re
import struct
from datetime import datetime
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Action = Literal["continue", "pause", "stop", "review"]
ACTIONS: tuple[str, ...] = ("continue", "pause", "stop", "review")
# The statuses the original acts on; it logs `last_turn_status` as any string (an unknown one is
# neither failed nor interrupted, so no status rule fires for it).
TURN_STATUSES: tuple[str, ...] = ("completed", "interrupted", "failed")
GUARDRAIL_RULES: tuple[str, ...] = (
    "turn_failed", "turn_interrupted", "max_turns", "no_progress",
    "max_tokens", "low_confidence", "review_requested",
)
GuardrailRule = Literal[
    "turn_failed", "turn_interrupted", "max_turns", "no_progress",
    "max_tokens", "low_confidence", "review_requested",
]

# Log lines mirror a strictly typed producer (serde structs without defaults): a number
# where text is expected (or the reverse) is a wrong-typed line and a missing key an
# incomplete one; neither is coerced or filled in silently. Unknown extra keys are ignored
# so that a newer producer's additions do not break the import.
_LOG = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False, populate_by_name=True)

_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


_F32_MAX = 3.4028234663852886e38


def f32(value: float) -> float:
    """The value as the original's f32 holds it, widened back to a Python float (0.8 -> 0.800000011920929)."""
    if not math.isfinite(value):
        return value
    if abs(value) > _F32_MAX:
        return math.copysign(math.inf, value)
    return struct.unpack("<f", struct.pack("<f", value))[0]


def f32_shortest(value: float) -> float:
    """The shortest decimal that is the same f32: how serde writes an f32 (0.800000011920929 -> 0.8)."""
    held = f32(value)
    if not math.isfinite(held):
        return held
    for digits in range(1, 10):
        candidate = float(f"{held:.{digits}g}")
        if f32(candidate) == held:
            return candidate
    return held


def _finite_float(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def rfc3339_text(value: str) -> str:
    """Accept an RFC 3339 date-time with an offset (chrono writes up to 9 fraction digits)."""
    match = _RFC3339.match(value)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp (date, time and offset required): {value!r}")
    date, time, fraction, offset = match.groups()
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        datetime.fromisoformat(f"{date}T{time}.{(fraction or '0')[:6].ljust(6, '0')}{offset}")
    except ValueError as exc:
        raise ValueError(f"not an RFC 3339 timestamp: {value!r} ({exc})") from exc
    return value


class FullAutoTurnSummary(BaseModel):
    """What the loop knows after a turn (formats.md §1.1).

    Built in code, every field but the ids has the producer's default. Validating a
    logged summary (inside `DecisionLogLine`) requires every field the writer has: see
    `LoggedTurnSummary`. `last_agent_message` and `last_guidance_directive` exist only in later
    builds (a logged summary without them reads them as "").
    """

    model_config = _LOG

    thread_id: str
    turn_id: str
    last_turn_status: str = "completed"
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
        """Total tokens the turn reports (top-level `totalTokens` / `total_tokens`, else `tokenUsage.total`)."""
        return tokens_from_usage(self.token_usage)

    def progress_signature(self) -> Optional[str]:
        """The no-progress signature `plan:<plan>\\ndiff:<diff>`, None when both are empty.

        As in the original, plan and diff are trimmed first (whitespace-only counts as empty).
        """
        plan, diff = self.turn_plan.strip(), self.diff_summary.strip()
        if not plan and not diff:
            return None
        return f"plan:{plan}\ndiff:{diff}"


class LoggedTurnSummary(FullAutoTurnSummary):
    """A turn summary as written in `fullauto-decisions.jsonl`: the producer writes every field it has.

    The writer of the decision logs has no `last_agent_message` / `last_guidance_directive`; later
    builds add them, so they are read as "" when absent. Every other field is required.
    """

    model_config = _LOG

    thread_id: str
    turn_id: str
    last_turn_status: str
    turn_error: str
    last_agent_message: str = ""
    last_guidance_directive: str = ""
    turn_plan: str
    diff_summary: str
    token_usage: str
    pending_approvals: str
    pending_tool_inputs: str
    compaction_events: str
    recent_actions: str
    turn_count: int = Field(ge=0)
    no_progress_count: int = Field(ge=0)

    def as_turn_summary(self) -> FullAutoTurnSummary:
        """The summary the decision was made on, as the program reads it: what every inputs hash of a logged line
        is computed from (the import's and the shadow writer's, which must agree for their lines to join)."""
        return FullAutoTurnSummary.model_validate(self.model_dump())


def _token_count(value: Any) -> Optional[int]:
    # As the original's `as_u64`: a non-negative JSON integer up to u64; 5.0, "5" and true are not counts.
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= 2 ** 64 - 1 else None
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # serde_json refuses NaN / Infinity


def _usage_object(token_usage: Any) -> Optional[dict]:
    if isinstance(token_usage, (bytes, bytearray)):
        token_usage = token_usage.decode("utf-8", errors="replace")
    data = token_usage
    if isinstance(token_usage, str):
        if not token_usage.strip():
            return None
        try:
            data = json.loads(token_usage, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return None
    return data if isinstance(data, dict) else None


def _top_level_total(data: dict) -> Optional[int]:
    for key in ("totalTokens", "total_tokens"):
        count = _token_count(data.get(key))
        if count is not None:
            return count
    return None


def guardrail_tokens(token_usage: Any) -> Optional[int]:
    """The tokens the original's max_tokens guardrail sees: top-level `totalTokens`, else `total_tokens`.

    Exactly the original's `parse_total_tokens` (`get("totalTokens").or_else(|| get("total_tokens"))
    .and_then(as_u64)`): `total_tokens` is read only when `totalTokens` is absent, not when it is
    present but null or not a count. It reads no nested total, so a summary whose usage nests it as
    `tokenUsage.total` never trips max_tokens there; replay must not trip it either.
    """
    data = _usage_object(token_usage)
    if data is None:
        return None
    return _token_count(data["totalTokens"] if "totalTokens" in data else data.get("total_tokens"))


def tokens_from_usage(token_usage: Any) -> Optional[int]:
    """Total tokens from token-usage JSON text or a dict; None if absent.

    Top-level `totalTokens` / `total_tokens` first, else the app server's nesting `tokenUsage.total`
    (a number, or an object with `totalTokens` / `total_tokens`). Like the original (`as_u64`),
    only a non-negative JSON integer counts.
    """
    data = _usage_object(token_usage)
    if data is None:
        return None
    count = _top_level_total(data)
    if count is not None:
        return count
    nested = data.get("tokenUsage")
    total = nested.get("total") if isinstance(nested, dict) else None
    if isinstance(total, dict):
        return _top_level_total(total)
    return _token_count(total)


def next_progress_count(previous_signature: Optional[str], summary_signature: Optional[str], count: int) -> int:
    """No-progress counter update of formats.md §1.1: same +1, different 0, None unchanged."""
    if summary_signature is None:
        return count
    return count + 1 if summary_signature == previous_signature else 0


class GuidanceDecision(BaseModel):
    """One next-action decision: the four outputs of the decision signature.

    `confidence` is the model's f32 as the original keeps it: not clamped (-0.2 stays -0.2) and
    possibly NaN or infinite (the original logs those as null; `NaN < min_confidence` is false,
    so such a decision goes through).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=True)

    action: Action
    next_input: str = ""
    reason: str = ""
    confidence: float = 0.0
    # Diagnostics of parse_decision; empty for a cleanly parsed decision.
    parse_errors: list[str] = Field(default_factory=list)

    @field_validator("next_input", "reason", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        # The original's next_input is Option<String>: None means "use the fallback prompt".
        return "" if value is None else value

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
    """What the guardrails look at besides the decision.

    `last_turn_status` is any text, as in the original (which compares it with "failed"
    and "interrupted"); logged summaries restrict it to the three statuses of §1.1.
    """

    model_config = ConfigDict(extra="forbid")

    last_turn_status: str = "completed"
    turn_count: int = 0
    no_progress_count: int = 0
    tokens_used: Optional[int] = None

    @classmethod
    def from_summary(cls, summary: FullAutoTurnSummary | dict) -> "GuardrailContext":
        """Build the context from a turn summary (tokens as the original's guardrail reads them)."""
        if isinstance(summary, dict):
            summary = FullAutoTurnSummary.model_validate(summary, strict=False)
        return cls(
            last_turn_status=summary.last_turn_status,
            turn_count=summary.turn_count,
            no_progress_count=summary.no_progress_count,
            tokens_used=guardrail_tokens(summary.token_usage),
        )


class GuardrailAudit(BaseModel):
    """The audit attached to every enforced decision (`triggered: false` when none fired).

    Its confidences are the original's f32s; a NaN or infinite one is null in the log (serde
    writes no NaN) and None here. A log line's audit is read by `DecisionLogLine`, which also
    turns the writer's widened doubles (0.800000011920929) back into the f32 they were (0.8).
    """

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)

    triggered: bool
    rule: Optional[GuardrailRule] = None
    original_action: Action
    original_confidence: Optional[float]
    enforced_action: Action
    enforced_confidence: Optional[float]

    @field_validator("original_confidence", "enforced_confidence", mode="before")
    @classmethod
    def _float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _rule_iff_triggered(self) -> "GuardrailAudit":
        if self.triggered and self.rule is None:
            raise ValueError("rule: a triggered audit must name its rule")
        if not self.triggered and self.rule is not None:
            raise ValueError(f"rule: an untriggered audit has rule null, got {self.rule!r}")
        return self

    @property
    def overridden(self) -> bool:
        """True when the guardrail changed the action."""
        return self.original_action != self.enforced_action


ORPHAN_RUN = "unknown"  # the writer's run id of a decision made after its run state was dropped


class DecisionLogLine(BaseModel):
    """One line of `fullauto-decisions.jsonl` (formats.md §1.4).

    Every key is required except `guardrail` (an Option in the producer); the summary
    must carry all of its fields.
    """

    model_config = _LOG

    timestamp: str
    sequence_id: int = Field(ge=0)
    run_id: str
    workspace_id: str
    thread_id: str
    turn_id: str
    action: Action
    confidence: Optional[float]  # an f32 in the writer: NaN or infinity is written as null
    reason: str
    next_input_preview: str
    state: Literal["running", "paused"]
    model: str
    guardrail: Optional[GuardrailAudit] = None  # an Option in the producer: null or absent
    summary: LoggedTurnSummary

    @field_validator("timestamp")
    @classmethod
    def _timestamp_is_rfc3339(cls, value: str) -> str:
        return rfc3339_text(value)

    @field_validator("guardrail", mode="before")
    @classmethod
    def _audit_f32s(cls, value: Any) -> Any:
        # The writer nests the audit as a JSON value: its f32 confidences come widened to doubles.
        if isinstance(value, GuardrailAudit):
            value = value.model_dump()
        if isinstance(value, dict):
            return {key: f32_shortest(item) if key.endswith("_confidence") and _finite_float(item) else item
                    for key, item in value.items()}
        return value

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence_f32(cls, value: Any) -> Any:
        return f32_shortest(value) if _finite_float(value) else value

    @field_validator("summary", mode="before")
    @classmethod
    def _summary_object(cls, value: Any) -> Any:
        # A summary built in code is complete by construction: accept it as its fields.
        if isinstance(value, FullAutoTurnSummary) and not isinstance(value, LoggedTurnSummary):
            return value.model_dump()
        return value

    def model_action(self) -> str:
        """The model's own action: the audit's original action when audited, else the logged one."""
        return self.guardrail.original_action if self.guardrail else self.action

    def model_confidence(self) -> Optional[float]:
        """The model's own confidence (from the audit when present); None when it was NaN or infinite."""
        return self.guardrail.original_confidence if self.guardrail else self.confidence


class RawDecisionLogLine(BaseModel):
    """One line of `fullauto-decisions-raw.jsonl`; every key is required (the two values may be null)."""

    model_config = _LOG

    timestamp: str
    sequence_id: int = Field(ge=0)
    run_id: str
    workspace_id: str
    thread_id: str
    turn_id: str
    raw_prediction: Any
    parse_diagnostics: Any

    @field_validator("timestamp")
    @classmethod
    def _timestamp_is_rfc3339(cls, value: str) -> str:
        return rfc3339_text(value)


class RunFile(BaseModel):
    """`runs/<run_id>.json`: the guardrail config in force for one run.

    `thread_id` and `max_tokens` are `Option`s in the producer (null, or absent as serde
    allows on read); the other keys are required.
    """

    model_config = _LOG

    run_id: str
    workspace_id: str
    thread_id: Optional[str] = None
    started_at: str
    decision_model: str
    min_confidence: float
    max_turns: int = Field(ge=0)
    no_progress_limit: int = Field(ge=0)
    max_tokens: Optional[int] = Field(default=None, ge=0)

    @field_validator("started_at")
    @classmethod
    def _started_at_is_rfc3339(cls, value: str) -> str:
        return rfc3339_text(value)

    def guardrail_config(self) -> GuardrailConfig:
        """The config this run used."""
        return GuardrailConfig(
            min_confidence=self.min_confidence,
            max_turns=self.max_turns,
            no_progress_limit=self.no_progress_limit,
            max_tokens=self.max_tokens,
        )


class RunEvent(BaseModel):
    """One line of `runs/<run_id>_events.jsonl` (`data` may be null but must be present)."""

    model_config = _LOG

    timestamp: str
    sequence_id: int = Field(ge=0)
    event_type: str
    data: Any

    @field_validator("timestamp")
    @classmethod
    def _timestamp_is_rfc3339(cls, value: str) -> str:
        return rfc3339_text(value)
