"""What a caller may hand a frozen module, read into the record types; anything else is a one-line error.

A guidance module takes the turn summary as a `FullAutoTurnSummary` (a `LoggedTurnSummary` is one), a
dict or JSON text, e.g. the `summary` of a `fullauto-decisions.jsonl` line; its guardrail config as a
`GuardrailConfig`, a `RunFile` (the `runs/<run_id>.json` of the run, whose limits are the config), or
either one as a dict or JSON text; no config means the defaults. A planner module takes an
`AdvisorPacket`, a dict or JSON text. A value that does not validate raises `FrozenInputError` naming
the argument and its first bad field; it never reaches the program, and never becomes a silent pause.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, TypeVar, Union

from pydantic import BaseModel, ValidationError

from runtime.advisor import AdvisorPacket
from runtime.fullauto import FullAutoTurnSummary, GuardrailConfig, RunFile

Model = TypeVar("Model", bound=BaseModel)
JsonText = Union[str, bytes, bytearray]
SummaryArg = Union[FullAutoTurnSummary, Mapping[str, Any], JsonText]
ConfigArg = Union[GuardrailConfig, RunFile, Mapping[str, Any], JsonText, None]
PacketArg = Union[AdvisorPacket, Mapping[str, Any], JsonText]
# Keys only a run file has: a dict holding them is read as one (its limits are the config).
_RUN_FILE_KEYS = ("run_id", "started_at", "decision_model")


class FrozenInputError(ValueError):
    """A summary, config or packet a frozen module cannot read; the message is one line naming the field."""


def _mapping(value: Any, what: str, expected: str) -> Mapping[str, Any]:
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise FrozenInputError(f"{what}: not JSON text: {exc}") from None
    if not isinstance(value, Mapping):
        raise FrozenInputError(f"{what}: expected {expected}, a dict or its JSON text; got {type(value).__name__}")
    return value


def _validated(model: type[Model], data: Mapping[str, Any], what: str) -> Model:
    try:
        return model.model_validate(dict(data), strict=False)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"]) or "value"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise FrozenInputError(f"{what}: {where}: {first['msg']}{more}") from None


def read_summary(summary: SummaryArg) -> FullAutoTurnSummary:
    """The turn summary a guidance module decides on."""
    if isinstance(summary, FullAutoTurnSummary):
        return summary
    data = _mapping(summary, "turn summary", "a FullAutoTurnSummary")
    if "summary" in data and "turn_plan" not in data:
        # A whole decision log line would validate as a summary of defaults (its ids are top-level too).
        raise FrozenInputError("turn summary: this is a decision log line; pass its `summary`")
    return _validated(FullAutoTurnSummary, data, "turn summary")


def read_config(config: ConfigArg) -> GuardrailConfig:
    """The guardrail config a guidance module enforces (None: the defaults)."""
    if config is None:
        return GuardrailConfig()
    if isinstance(config, GuardrailConfig):
        return config
    if isinstance(config, RunFile):
        return config.guardrail_config()
    data = _mapping(config, "guardrail config", "a GuardrailConfig, a RunFile")
    if any(key in data for key in _RUN_FILE_KEYS):
        return _validated(RunFile, data, "guardrail config (a run file)").guardrail_config()
    return _validated(GuardrailConfig, data, "guardrail config")


def read_packet(packet: PacketArg) -> AdvisorPacket:
    """The advisor packet a planner module plans from."""
    if isinstance(packet, AdvisorPacket):
        return packet
    return _validated(AdvisorPacket, _mapping(packet, "advisor packet", "an AdvisorPacket"), "advisor packet")
