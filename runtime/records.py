"""The workbench's own replayable records: decision records and planner examples."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .advisor import AdvisorPacket, ExperimentLogEntry
from .fullauto import Action, FullAutoTurnSummary, GuardrailAudit, GuardrailConfig
from .guardrails import logged_confidence
from .planner_log import PlannerLogged
from .shadow_log import ShadowOutcome

LABEL_SOURCES_HELP = "human | rule:<name> | simulator"


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str | bytes) -> str:
    """SHA-256 hex digest of text (UTF-8) or bytes."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def inputs_hash(summary: FullAutoTurnSummary, config: GuardrailConfig) -> str:
    """Identity of a decision's inputs: SHA-256 of canonical JSON of summary + config."""
    return sha256_hex(canonical_json({"summary": summary.model_dump(mode="json"),
                                      "config": config.model_dump(mode="json")}))


def packet_hash(packet: AdvisorPacket) -> str:
    """Identity of a planner record's inputs: SHA-256 of canonical JSON of the packet the planner sees."""
    return sha256_hex(canonical_json(packet.model_dump(mode="json")))


# ----- content identity: what provenance knows a record by (docs/workflow.md, "What a record is known by") -----
# The fields that name a record rather than say what it holds. A copy of a turn or of a packet under other ids
# (a re-import, every UUID renamed, another branch or sha) has the same content hash.
SUMMARY_ID_FIELDS: tuple[str, ...] = ("thread_id", "turn_id")
RECENT_ACTION_ID_KEYS: tuple[str, ...] = ("turn_id", "timestamp")
ATTEMPT_ID_KEYS: tuple[str, ...] = ("iteration_id", "timestamp_utc", "branch", "base_branch", "base_sha", "head_sha")
# The summary's JSON-text fields (formats.md 1.1: pretty JSON text, or numbers written as text): hashed by value.
SUMMARY_JSON_FIELDS: tuple[str, ...] = ("turn_plan", "diff_summary", "token_usage", "recent_actions",
                                        "pending_approvals", "pending_tool_inputs", "compaction_events")
# An archived packet's top-level keys that say when and where the runner ran, not what the planner was shown about
# the kernel (formats.md 2.3.2): re-dating the logs, renaming the branches or checking the repository out elsewhere
# (another worktree path, origin or web URL) leaves the record the same.
PACKET_VOLATILE_KEYS: tuple[str, ...] = ("iteration_id", "timestamp_utc", "branch", "base_branch", "base_sha", "repo")
# Identifiers inside any text: UUIDs (any case) and full git / SHA-256 hex digests, each replaced by `<id:N>`, N the
# order of its first appearance in the record, so a one-to-one renaming changes nothing and the pattern of which
# value repeats where is kept.
ID_PATTERN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
                        r"[0-9A-Fa-f]{12}|[0-9A-Fa-f]{64}|[0-9A-Fa-f]{40})(?![0-9A-Fa-f])")


# What `_id_spans` reads: the text one byte a character, hex digits as `h`, dashes kept, anything else `.`.
_HEX_MASK = bytes(ord("h") if chr(c) in "0123456789abcdefABCDEF" else ord("-") if c == ord("-") else ord(".")
                  for c in range(256))
_HEX_RUN = re.compile(rb"h+")
_UUID_MASK = b"hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh"


def _id_spans(text: str) -> list[tuple[int, int]]:
    """Where `ID_PATTERN` matches in `text`, found by substring search on a mask of it (a regex scan of a planner
    packet's 20 kB, at every character, was most of a content hash). The matches are whole hex runs of 40 or 64
    digits and UUIDs not touching another hex digit, which cannot overlap one another."""
    mask = text.encode("ascii", "replace").translate(_HEX_MASK)  # one byte a character: positions are kept
    spans, start = [], mask.find(b"h" * 40)
    while start >= 0:
        end = _HEX_RUN.match(mask, start).end()  # type: ignore[union-attr]
        if end - start in (40, 64):
            spans.append((start, end))
        start = mask.find(b"h" * 40, end)
    start = mask.find(_UUID_MASK)
    while start >= 0:
        end = start + len(_UUID_MASK)
        if (start == 0 or mask[start - 1] != ord("h")) and (end == len(mask) or mask[end] != ord("h")):
            spans.append((start, end))
        start = mask.find(_UUID_MASK, start + 1)
    return sorted(spans)


def _without_ids(text: str) -> str:
    """`text` with every identifier (`ID_PATTERN`) replaced by its order of first appearance (`<id:1>`, ...)."""
    seen: dict[str, str] = {}
    parts, last = [], 0
    for start, end in _id_spans(text):
        parts += (text[last:start], seen.setdefault(text[start:end].lower(), f"<id:{len(seen) + 1}>"))
        last = end
    return "".join(parts) + text[last:] if parts else text


def _drop_keys(item: Any, keys: tuple[str, ...]) -> Any:
    """A dict without `keys` (a JSON text of one is parsed first); anything else unchanged."""
    if isinstance(item, str):
        try:
            parsed = json.loads(item)
        except ValueError:
            return item
        return _drop_keys(parsed, keys) if isinstance(parsed, dict) else item
    return {k: v for k, v in item.items() if k not in keys} if isinstance(item, dict) else item


def content_hash(summary: FullAutoTurnSummary, config: GuardrailConfig) -> str:
    """Identity of a decision's content: SHA-256 of the canonical JSON of summary + config without identifiers
    (the summary's `thread_id` and `turn_id`, each recent action's `turn_id` and `timestamp`, and every UUID or
    full hex digest in any text replaced by `<id:N>`), its JSON-text fields (`SUMMARY_JSON_FIELDS`) by their parsed
    values: the same values re-serialised compactly or with sorted keys are the same record. Provenance knows
    records by it; the shadow sidecar joins on `inputs_hash`, which keeps the ids."""
    fields = summary.model_dump(mode="json", exclude=set(SUMMARY_ID_FIELDS))
    values = {name: json_value(fields[name]) for name in SUMMARY_JSON_FIELDS if isinstance(fields.get(name), str)}
    if isinstance(values.get("recent_actions"), list):
        values["recent_actions"] = [_drop_keys(action, RECENT_ACTION_ID_KEYS) for action in values["recent_actions"]]
    settings = config.model_dump(mode="json")
    try:
        text = canonical_json({"summary": {**fields, **values}, "config": settings})
    except RecursionError:  # a JSON text read back but nested too deep to write again: every text as written
        text = canonical_json({"summary": fields, "config": settings})
    return sha256_hex(_without_ids(text))


def json_value(text: str) -> Any:
    """The value a JSON text holds (its spacing and key order are the writer's, not content), or the text itself
    when it is not JSON, holds a bare string (kept as written, so no text is ever taken for another) or nests too
    deep to read. A parsed value never hashes like a text: it is an object, list, number, bool or null."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return text if isinstance(parsed, str) else parsed


def packet_content_hash(packet: AdvisorPacket) -> str:
    """Identity of a planner record's content: SHA-256 of the canonical JSON of its packet without identifiers
    and without what depends on when and where the runner ran (`PACKET_VOLATILE_KEYS`: the archived packet's
    iteration, timestamp, branches, base sha and `repo` block), each log-tail line, parsed, and each attempt of the
    experiment summary without `ATTEMPT_ID_KEYS`; every UUID or full hex digest in any text replaced by `<id:N>`."""
    data = packet.model_dump(mode="json")
    for key in PACKET_VOLATILE_KEYS:
        data.pop(key, None)
    data["experiment_log_tail"] = [_drop_keys(line, ATTEMPT_ID_KEYS) for line in data.get("experiment_log_tail") or []]
    summary = data.get("experiment_summary") or {}
    for key in ("last_attempt", "last_valid_attempt"):
        if isinstance(summary.get(key), dict):
            summary[key] = _drop_keys(summary[key], ATTEMPT_ID_KEYS)
    for key in ("recent_attempts", "recent_strategy_combos"):
        if isinstance(summary.get(key), list):
            summary[key] = [_drop_keys(item, ATTEMPT_ID_KEYS) for item in summary[key]]
    return sha256_hex(_without_ids(canonical_json(data)))


class OutcomeLabel(BaseModel):
    """What the right action was, with where that knowledge came from."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    action: Action
    source: str = Field(description=LABEL_SOURCES_HELP)
    reason: str = ""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    next_input: str = ""

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if value in ("human", "simulator") or (value.startswith("rule:") and value[len("rule:"):].strip()):
            return value
        raise ValueError(f"label source must be {LABEL_SOURCES_HELP}, got {value!r}")


class LoggedDecision(BaseModel):
    """The decision as the deployed loop logged it: model's own and enforced."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    action: Action
    confidence: Optional[float]  # None: the writer logged null (a NaN or infinite f32)
    model_action: str
    model_confidence: Optional[float]
    reason: str = ""
    next_input_preview: str = ""
    state: str = "running"


class LMUsage(BaseModel):
    """Token usage of one decision, when known."""

    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class SourceRef(BaseModel):
    """Where a record came from: file and 1-based line."""

    model_config = ConfigDict(extra="forbid")

    file: str
    line: int


class ShadowDecision(ShadowOutcome):
    """A candidate's decision on the record's turn, made beside the deployed one and never enforced: a line of
    `shadow-decisions.jsonl` (`runtime.shadow_log`) joined to its decision by `guidebench data import`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    timestamp: str = ""
    source: Optional[SourceRef] = None


class DecisionRecord(BaseModel):
    """One replayable Full Auto decision with its guardrail config, audit and outcome label."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    record_id: str
    inputs_hash: str
    run_id: str
    workspace_id: str = ""
    thread_id: str
    turn_id: str
    sequence_id: int = 0
    timestamp: str = ""
    summary: FullAutoTurnSummary
    config: GuardrailConfig = Field(default_factory=GuardrailConfig)
    config_source: str = "default"
    logged: Optional[LoggedDecision] = None
    guardrail: Optional[GuardrailAudit] = None
    model: str = ""
    package_version: str = ""
    usage: Optional[LMUsage] = None
    raw_prediction: Any = None
    parse_diagnostics: Any = None
    label: Optional[OutcomeLabel] = None
    source: Optional[SourceRef] = None
    # Left out of the record's JSON when None: a record without a shadow keeps the text (and the dataset hashes)
    # it had before shadow decisions existed.
    shadow: Optional[ShadowDecision] = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("summary", mode="before")
    @classmethod
    def _plain_summary(cls, value: Any) -> Any:
        # A summary taken from a log line is a LoggedTurnSummary (same fields, all required);
        # store the plain shape so that records compare equal after a JSON round trip.
        if isinstance(value, FullAutoTurnSummary) and type(value) is not FullAutoTurnSummary:
            return FullAutoTurnSummary.model_validate(value.model_dump())
        return value

    def _raw_confidence(self) -> Any:
        """The model's confidence as its raw prediction gave it (the diagnostics' `confidence_raw`)."""
        diagnostics = self.parse_diagnostics
        if isinstance(diagnostics, dict) and "confidence_raw" in diagnostics:
            return diagnostics["confidence_raw"]
        data = self.raw_prediction.get("data") if isinstance(self.raw_prediction, dict) else None
        return data.get("confidence") if isinstance(data, dict) else None

    def logged_model_confidence(self) -> Optional[float]:
        """The model's own logged confidence as the original compared it (a null one recovered as NaN, inf or
        -inf by `runtime.guardrails.logged_confidence`); None without a logged decision."""
        if self.logged is None:
            return None
        rule = self.guardrail.rule if self.guardrail is not None else None
        return logged_confidence(self.logged.model_confidence, rule=rule, reason=self.logged.reason,
                                 raw=self._raw_confidence())

    def logged_enforced_confidence(self) -> Optional[float]:
        """The enforced logged confidence, a null one recovered as the model's (only rules 1-5 change it, to 1.0)."""
        if self.logged is None:
            return None
        if self.logged.confidence is not None:
            return float(self.logged.confidence)
        return self.logged_model_confidence()

    @property
    def content_hash(self) -> str:
        """Identity of the record's content without its ids (`content_hash`): what provenance knows it by."""
        return content_hash(self.summary, self.config)

    @classmethod
    def build(cls, summary: FullAutoTurnSummary, config: GuardrailConfig, **fields: Any) -> "DecisionRecord":
        """Create a record whose id and inputs hash are derived from its content."""
        digest = inputs_hash(summary, config)
        run_id = fields.pop("run_id", "")
        sequence_id = fields.get("sequence_id", 0)
        record_id = fields.pop("record_id", None) or sha256_hex(f"{run_id}\n{sequence_id}\n{digest}")[:16]
        return cls(record_id=record_id, inputs_hash=digest, run_id=run_id, summary=summary, config=config,
                   thread_id=fields.pop("thread_id", summary.thread_id),
                   turn_id=fields.pop("turn_id", summary.turn_id), **fields)


ARCHIVE_MODES = ("manual", "codex", "codex_api")


class PlanArchive(BaseModel):
    """Where a planner record's packet and directive came from when the loop runner archived them (formats.md
    §2.3.2): the mode (`manual`: `.advisor/manual_archive/iter_NNNN/`; `codex` / `codex_api`:
    `.advisor/codex[_api]/iter_NNNN_*`), the files (relative to the imported folder) and the directive as the
    planner answered it (parsed JSON; it passed the runner's own check, which is looser than the strict one), None
    when the directive file could not be read (the packet is still the one the planner saw; left out of the JSON)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: str
    packet_file: str
    directive_file: str
    directive: Optional[dict[str, Any]] = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in ARCHIVE_MODES:
            raise ValueError(f"archive mode must be one of {ARCHIVE_MODES}, got {value!r}")
        return value


class PlannerRecord(BaseModel):
    """One planner example: the packet the planner saw and the entry that followed.

    The packet is the archived one when the loop runner kept it (`plan`, formats.md §2.3.2), else rebuilt from the
    episode's earlier entries (`plan` None: `packet_source` "rebuilt"). A record without an archive dumps the same
    JSON as before archives were read, so logs without `.advisor/` give the same dataset id.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    record_id: str
    episode_id: str
    iteration_id: int
    packet: AdvisorPacket
    outcome: Optional[ExperimentLogEntry] = None
    source: Optional[SourceRef] = None
    # The sidecar's line for this iteration (`runtime.planner_log`): the logged propensities. Left out of the
    # record's JSON when None, so records without one keep their text and the dataset its hashes.
    planner_log: Optional[PlannerLogged] = Field(default=None, exclude_if=lambda value: value is None)
    plan: Optional[PlanArchive] = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def packet_source(self) -> str:
        """"archive" when the packet is the one the runner archived, "rebuilt" when rebuilt from the log."""
        return "rebuilt" if self.plan is None else "archive"

    @property
    def inputs_hash(self) -> str:
        """Identity of the record's inputs (`packet_hash`), as a DecisionRecord's `inputs_hash` is of its own."""
        return packet_hash(self.packet)

    @property
    def content_hash(self) -> str:
        """Identity of the packet's content without its ids (`packet_content_hash`): what provenance knows it by."""
        return packet_content_hash(self.packet)
