"""The shadow sidecar `shadow-decisions.jsonl`: one line per decision a candidate made beside the deployed program.

The file sits next to the workspace's `fullauto-decisions.jsonl`. `runtime.shadow.ShadowRunner` writes it;
`guidebench data import` joins each line to its decision line; `guidebench shadow report` scores both.
`ShadowDecisionLine` is the single definition of a line (schema version 1, documented in docs/shadow.md):

- `schema_version` 1; `timestamp`, RFC 3339, when the line was written.
- The join keys, copied from the decision line it shadows: `workspace_id`, `run_id`, `sequence_id`,
  `thread_id`, `turn_id`, plus `decision_timestamp` and `deployed_action` (that line's `timestamp` and
  enforced `action`), and `inputs_hash` = `runtime.records.inputs_hash(summary, config)` of the logged
  summary under `config`, the guardrail config the shadow was judged with (the run's; the defaults for a
  decision of run "unknown", whose run and config the writer had dropped, as the import reads it).
- `module`: the candidate, `name`, `version`, `entry` and `checksum` (SHA-256 of its `checksums.sha256`,
  `runtime.checksums.module_checksum`, the digest the promotion ledger names a module by).
- `status`: `ok` (a valid decision), `invalid` (an answer that is not a valid decision, or one the module
  could only read as its safe default: `parse_errors` says why), `error` (the module raised), `timeout`
  (no answer within `deadline_s`, or not run because the shadow was behind: `error` says which).
- `decision` (the candidate's own), `enforced` (after the guardrails) and `guardrail` (the audit): present
  for `ok`, and for `invalid` when the module still gave a decision; absent for `error` and `timeout`.
  A confidence that is NaN or infinite is `null`, as the real writer logs it.
- `error`, `parse_errors`, `latency_s` (the candidate's own time; the deadline for a timeout), `deadline_s`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.fullauto import Action, GuardrailAudit, GuardrailConfig, GuidanceDecision, rfc3339_text

SHADOW_FILE = "shadow-decisions.jsonl"
SCHEMA_VERSION = 1
STATUSES: tuple[str, ...] = ("ok", "invalid", "error", "timeout")
ShadowStatus = Literal["ok", "invalid", "error", "timeout"]
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# Our own writer, strictly typed: a wrong type is an invalid line; keys a later schema adds are ignored.
_LINE = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


def _sha256(value: str) -> str:
    if not _SHA256.match(value):
        raise ValueError(f"expected 64 lower-case hex digits (SHA-256), got {value[:80]!r}")
    return value


class ShadowModule(BaseModel):
    """The candidate module a shadow decision came from."""

    model_config = ConfigDict(strict=True, extra="ignore")

    name: str
    version: str
    checksum: str
    entry: str = ""

    @field_validator("checksum")
    @classmethod
    def _checksum(cls, value: str) -> str:
        return _sha256(value)

    @property
    def package(self) -> str:
        """`name@version`."""
        return f"{self.name}@{self.version}"

    def same_module(self, other: "ShadowModule") -> bool:
        """True when both name one module folder: same name, version and checksum."""
        return (self.name, self.version, self.checksum) == (other.name, other.version, other.checksum)


class ShadowAnswer(BaseModel):
    """One decision as the sidecar writes it (a non-finite confidence is null)."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)

    action: Action
    confidence: Optional[float]
    reason: str = ""
    next_input: str = ""

    @classmethod
    def of(cls, decision: GuidanceDecision) -> "ShadowAnswer":
        """The answer of a decision (NaN and infinity written as null)."""
        confidence = float(decision.confidence)
        return cls(action=decision.action, confidence=confidence if math.isfinite(confidence) else None,
                   reason=decision.reason, next_input=decision.next_input)


class ShadowOutcome(BaseModel):
    """What the candidate did on one turn: its module, status, decisions and why there is none. A sidecar line
    (`ShadowDecisionLine`) adds the keys that join it; a dataset record's `shadow` adds where the line was."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    module: ShadowModule
    status: ShadowStatus
    decision: Optional[ShadowAnswer] = None
    enforced: Optional[ShadowAnswer] = None
    guardrail: Optional[GuardrailAudit] = None
    error: str = ""
    parse_errors: list[str] = Field(default_factory=list)
    latency_s: float = Field(ge=0.0)
    deadline_s: float = Field(gt=0.0)

    @model_validator(mode="after")
    def _consistent(self) -> "ShadowOutcome":
        decided = (self.decision, self.enforced, self.guardrail)
        if self.status == "ok" and (None in decided or self.parse_errors):
            raise ValueError("status: an ok line has decision, enforced and guardrail, and no parse_errors")
        if self.status in ("error", "timeout") and any(part is not None for part in decided):
            raise ValueError(f"status: a {self.status} line has no decision, enforced or guardrail")
        if self.status != "ok" and not (self.error or self.parse_errors):
            raise ValueError(f"error: a {self.status} line says why (error or parse_errors)")
        if (self.enforced is None) != (self.guardrail is None) or (self.decision is None) != (self.enforced is None):
            raise ValueError("decision, enforced and guardrail come together")
        if self.enforced is not None and self.guardrail is not None and \
                (self.guardrail.enforced_action, self.guardrail.original_action) != \
                (self.enforced.action, self.decision.action):  # type: ignore[union-attr]
            raise ValueError("guardrail: its original and enforced actions are not the line's decision and enforced")
        return self

    def outcome(self) -> dict[str, Any]:
        """The outcome's fields (of a line or a record), to build the other from."""
        return {name: getattr(self, name) for name in ShadowOutcome.model_fields}


class ShadowDecisionLine(ShadowOutcome):
    """One line of `shadow-decisions.jsonl` (schema version 1; see the module docstring)."""

    model_config = _LINE

    schema_version: Literal[1]
    timestamp: str
    workspace_id: str
    run_id: str
    sequence_id: int = Field(ge=0)
    thread_id: str
    turn_id: str
    decision_timestamp: str
    deployed_action: Action
    inputs_hash: str
    config: GuardrailConfig

    @field_validator("timestamp", "decision_timestamp")
    @classmethod
    def _timestamps(cls, value: str) -> str:
        return rfc3339_text(value)

    @field_validator("inputs_hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        return _sha256(value)

    @field_validator("config", mode="before")
    @classmethod
    def _config(cls, value: Any) -> Any:
        # GuardrailConfig refuses unknown keys itself; its floats may come as JSON integers.
        return GuardrailConfig.model_validate(value) if isinstance(value, dict) else value
