"""The planner decision sidecar `planner-decisions.jsonl`: one line per directive a planner module gave, with the
probability of every family it could have chosen (schema version 1, documented in docs/planner-shadow.md).

The file sits next to the loop's `experiments/log.jsonl`. `runtime.planner_shadow.PlannerShadow` writes it;
`guidebench data import` joins each line to the log line of the same `iteration_id` whose rebuilt packet has
the line's `packet_hash` (`guidebench.data.planner_sidecar`), and the joined record carries the logged
propensities (`PlannerRecord.planner_log`) that the off-policy estimates and the planner gate read.

`PlannerDecisionLine` is the single definition of a line:
- `schema_version` 1; `timestamp` (RFC 3339, when the line was written); `repository` (who wrote it: any
  stable id of the repository the loop optimizes, e.g. its root commit; "" when unknown);
- `iteration_id` (the log line that records the attempt of this directive), `packet_hash`
  (`runtime.records.packet_hash` of the packet the planner saw);
- `module` (`name`, `version`, `entry`, `checksum`, as `runtime.shadow_log.ShadowModule`), `exploration`
  (`runtime.exploration.ExplorationSettings`), `probabilities` (every family of FAMILIES, finite, >= 0, sum 1),
  `family` (the directive's family: its probability is > 0), optional `greedy_family` and `latency_s`;
- optional `candidate`: a shadowing planner's own choice on the same packet (`PlannerCandidate`): its module,
  `status` (ok, invalid, error, timeout), `family` and `probabilities` when ok, `error` otherwise;
- optional `packet_stable_hash` (`runtime.runner_packet.stable_packet_hash`): the packet's hash without the
  fields the loop runner rewrites between planning and archiving (manual mode plans on `plan/NNNN-slug` at pack
  time, and archives the packet rewritten on `iter/NNNN-slug` at apply time); the import joins on it when
  `packet_hash` differs.
Probabilities are checked by the import, not here, so that a bad distribution gets its own reason and count.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.advisor import FAMILIES
from runtime.exploration import ExplorationSettings
from runtime.fullauto import rfc3339_text
from runtime.shadow_log import ShadowModule, _sha256

PLANNER_FILE = "planner-decisions.jsonl"
SCHEMA_VERSION = 1
CandidateStatus = Literal["ok", "invalid", "error", "timeout"]
_LINE = ConfigDict(strict=True, extra="ignore")


def _family(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in FAMILIES:
        raise ValueError(f"not a strategy family of {list(FAMILIES)}: {value!r}")
    return value


class PlannerCandidate(BaseModel):
    """A shadowing planner's choice on the deployed decision's packet (never applied)."""

    model_config = _LINE

    module: ShadowModule
    status: CandidateStatus
    family: Optional[str] = None
    probabilities: Optional[dict[str, Any]] = None
    exploration: Optional[ExplorationSettings] = None
    error: str = ""
    latency_s: float = Field(0.0, ge=0.0)
    deadline_s: Optional[float] = Field(None, gt=0.0)

    @field_validator("family")
    @classmethod
    def _known(cls, value: Optional[str]) -> Optional[str]:
        return _family(value)

    @model_validator(mode="after")
    def _consistent(self) -> "PlannerCandidate":
        if self.status == "ok" and (self.family is None or self.probabilities is None):
            raise ValueError("candidate: an ok candidate has family and probabilities")
        if self.status != "ok" and not self.error:
            raise ValueError(f"candidate: a {self.status} candidate says why (error)")
        return self


class PlannerDecisionLine(BaseModel):
    """One line of `planner-decisions.jsonl` (schema version 1; see the module docstring)."""

    model_config = _LINE

    schema_version: Literal[1]
    timestamp: str
    repository: str = ""
    iteration_id: int = Field(ge=0)
    packet_hash: str
    module: ShadowModule
    exploration: ExplorationSettings
    probabilities: dict[str, Any]
    family: str
    greedy_family: Optional[str] = None
    latency_s: Optional[float] = Field(None, ge=0.0)
    candidate: Optional[PlannerCandidate] = None
    packet_stable_hash: Optional[str] = None

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: str) -> str:
        return rfc3339_text(value)

    @field_validator("packet_hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        return _sha256(value)

    @field_validator("packet_stable_hash")
    @classmethod
    def _stable(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else _sha256(value)

    @field_validator("family", "greedy_family")
    @classmethod
    def _families(cls, value: Optional[str]) -> Optional[str]:
        return _family(value)


class LoggedCandidate(BaseModel):
    """A shadowing planner's choice as a dataset record keeps it (`PlannerLogged.candidate`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    module: ShadowModule
    status: CandidateStatus
    family: Optional[str] = None
    probabilities: Optional[dict[str, float]] = None
    error: str = ""


class PlannerLogged(BaseModel):
    """What the sidecar logged about a planner record's decision: the deployed module, its exploration, every
    family's probability (the logged propensities), the chosen family, and a shadowing candidate's choice."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    module: ShadowModule
    exploration: ExplorationSettings
    probabilities: dict[str, float]
    family: str
    candidate: Optional[LoggedCandidate] = None
    line: int = 0  # the sidecar line it came from

    def propensity(self, family: str) -> float:
        """The logged probability of a family (0 for one the planner could not choose)."""
        return float(self.probabilities.get(family, 0.0))


__all__ = ["CandidateStatus", "LoggedCandidate", "PLANNER_FILE", "PlannerCandidate", "PlannerDecisionLine",
           "PlannerLogged", "SCHEMA_VERSION"]
