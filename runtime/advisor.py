"""Record shapes of the kernel-optimization advisor loop (formats.md §2)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

FAMILIES: tuple[str, ...] = ("family:schedule", "family:reduce_loads", "family:break_deps")
StrategyFamily = Literal["family:schedule", "family:reduce_loads", "family:break_deps"]
Risk = Literal["Low", "Medium", "High"]

# Published reference points of the simulated VLIW kernel (formats.md §2).
BASELINE_CYCLES = 147734
THRESHOLDS: tuple[int, ...] = (2164, 1790, 1579, 1548, 1487, 1363)
SLOT_LIMITS: dict[str, int] = {"alu": 12, "valu": 6, "load": 2, "store": 2, "flow": 1}
VECTOR_LENGTH = 8
TIMESTAMP_UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TIMESTAMP_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


class ExperimentLogEntry(BaseModel):
    """One line of `experiments/log.jsonl` (formats.md §2.1).

    Both shapes are accepted: the fields common to the old and the new shape are required
    (`cycles` and `delta_vs_best` may be null); the newer fields
    (scope, correctness, `best_before`, `new_best`, `threshold_met`) are None on old lines.
    `merged_to_main` and `notes` may be absent (one public log writes `merged_to_best`,
    kept as an extra key). Types are strict, as written by the loop runner.
    """

    model_config = ConfigDict(strict=True, extra="allow", allow_inf_nan=False)

    iteration_id: int
    timestamp_utc: str
    branch: str
    base_branch: str
    base_sha: str
    head_sha: str
    files_changed: list[str]
    tests_diff_empty: bool
    valid: bool
    cycles: Optional[int]
    delta_vs_best: Optional[int]
    strategy_tags: list[str]
    hypothesis: str
    change_summary: list[str]
    result_summary: str
    merged_to_main: Optional[bool] = None
    notes: Optional[str] = None
    # Newer shape only.
    scope_ok: Optional[bool] = None
    scope_disallowed_files: Optional[list[str]] = None
    scope_forbidden_files: Optional[list[str]] = None
    correctness_pass: Optional[bool] = None
    best_before: Optional[int] = None
    new_best: Optional[bool] = None
    threshold_met: Optional[bool] = None

    @field_validator("timestamp_utc")
    @classmethod
    def _utc_timestamp(cls, value: str) -> str:
        try:
            if not _TIMESTAMP_UTC.match(value):
                raise ValueError("layout")
            datetime.strptime(value, TIMESTAMP_UTC_FORMAT)
        except ValueError as exc:
            raise ValueError(f"not a UTC timestamp of the form %Y-%m-%dT%H:%M:%SZ: {value!r}") from exc
        return value

    @property
    def family(self) -> Optional[str]:
        """The strategy family (`strategy_tags[0]` when it is one of the three), else None."""
        tags = self.strategy_tags
        return tags[0] if tags and tags[0] in FAMILIES else None

    @property
    def is_full_shape(self) -> bool:
        """True for the newer shape (carries correctness and scope fields)."""
        return self.correctness_pass is not None or self.scope_ok is not None or self.best_before is not None \
            or self.new_best is not None


class DirectiveValidation(BaseModel):
    """How the coding agent checks a directive: commands and pass criteria (1-6 each)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    commands: list[StrictStr] = Field(min_length=1, max_length=6)
    pass_criteria: list[StrictStr] = Field(min_length=1, max_length=6)

    @field_validator("commands", "pass_criteria")
    @classmethod
    def _no_blank(cls, items: list[str]) -> list[str]:
        return _no_blank_items(items)


def _no_blank_items(items: list[str]) -> list[str]:
    for index, item in enumerate(items):
        if not item.strip():
            raise ValueError(f"item {index} is blank")
    return items


class OptimizationDirective(BaseModel):
    """The planner's output (formats.md §2.2): every key required, no extra keys."""

    model_config = ConfigDict(strict=True, extra="forbid")

    objective: StrictStr
    primary_hypothesis: StrictStr
    strategy_family: StrategyFamily
    strategy_modifiers: list[StrictStr] = Field(max_length=3)
    risk: Risk
    expected_effect_cycles: StrictInt
    change_summary: list[StrictStr] = Field(min_length=1, max_length=5)
    step_plan: list[StrictStr] = Field(min_length=3, max_length=12)
    validation: DirectiveValidation
    next_packet_requests: list[StrictStr] = Field(max_length=6)
    did_web_search: StrictBool

    @field_validator("strategy_modifiers", "change_summary", "step_plan", "next_packet_requests")
    @classmethod
    def _no_blank(cls, items: list[str]) -> list[str]:
        return _no_blank_items(items)


class FamilyConstraints(BaseModel):
    """Which strategy families the next directive may use (pivot protocol §2.4).

    As in the original, `allowed_families` always lists the three families in their fixed
    order; `blocked_families` (at most one) is what the next directive must avoid. `policy`
    and `reason` are the runner's: its limits, and why a family is blocked (None when none is).
    """

    model_config = ConfigDict(extra="allow")

    allowed_families: list[str] = Field(default_factory=lambda: list(FAMILIES))
    blocked_families: list[str] = Field(default_factory=list)
    current_family: Optional[str] = None
    current_family_streak_len: int = 0
    last_attempt_meaningful_win: bool = False
    max_consecutive: int = 2
    policy: dict[str, int] = Field(default_factory=lambda: {
        "max_consecutive_default": 2, "max_consecutive_bonus": 3, "bonus_min_improvement_cycles": 10})
    reason: Optional[str] = None

    def __getitem__(self, key: str) -> Any:
        """Dict-style read access (`constraints["blocked_families"]`), as in packets."""
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def get(self, key: str, default: Any = None) -> Any:
        """Dict-style `get`."""
        return getattr(self, key, default)

    def families_for_next(self) -> list[str]:
        """The families a directive may use: allowed minus blocked, or all three if that leaves none."""
        return [f for f in self.allowed_families if f not in self.blocked_families] or list(FAMILIES)


class PerformanceProfile(BaseModel):
    """Lower bounds and schedule estimate of the kernel (packet `performance_profile`)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_counts_by_engine: dict[str, int] = Field(default_factory=dict)
    min_cycles_by_engine: dict[str, int] = Field(default_factory=dict)
    resource_lb_cycles: Optional[int] = None
    cp_lb_cycles: Optional[int] = None
    tight_lb_cycles: Optional[int] = None
    schedule_cycles_estimate: Optional[int] = None
    schedule_slack_pct: Optional[float] = None


class ExperimentSummary(BaseModel):
    """Packet `experiment_summary`: bests, last attempts and invalid counts."""

    model_config = ConfigDict(extra="allow")

    best_cycles: Optional[int] = None
    best_cycles_by_family: dict[str, int] = Field(default_factory=dict)
    last_attempt: Optional[dict[str, Any]] = None
    last_valid_attempt: Optional[dict[str, Any]] = None
    recent_attempts: list[dict[str, Any]] = Field(default_factory=list)
    invalid_counts: dict[str, int] = Field(default_factory=dict)


class AdvisorPacket(BaseModel):
    """What the planner sees before each iteration (formats.md §2.3)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    goal: Literal["threshold", "best"] = "best"
    threshold_target: Optional[int] = None
    best_cycles: Optional[int] = None
    aspiration_cycles: Optional[int] = None
    plateau_valid_iters_since_best: Optional[int] = None
    strategy_family_constraints: FamilyConstraints = Field(default_factory=FamilyConstraints)
    # The original sends the raw JSONL lines (strings); parsed dicts are accepted too.
    experiment_log_tail: list[Union[str, dict[str, Any]]] = Field(default_factory=list)
    experiment_summary: ExperimentSummary = Field(default_factory=ExperimentSummary)
    performance_profile: Optional[PerformanceProfile] = None

    @property
    def best_so_far(self) -> Optional[int]:
        """The best cycles the next attempt starts from: the packet's (the runner's), else its summary's; None
        unless positive."""
        best = self.best_cycles if self.best_cycles is not None else self.experiment_summary.best_cycles
        return best if isinstance(best, int) and best > 0 else None
