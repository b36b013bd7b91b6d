"""What a planning call of the loop runner hands the planner, read back: the packet, the schema, the directive check.

The runner writes `.advisor/codex[_api]/iter_NNNN_{packet,schema,prompt}.*` and passes the schema's path to
`codex exec --output-schema`; the packet sits beside it (`iter_NNNN_packet.json`). A call without that file (another
caller of the same command line) still has the packet in its prompt: the last fenced JSON object of the prompt that
is not a JSON schema. In manual mode the packet is `planner_packets/packet.json`, with `directive_schema.json`
beside it.

`check_directive` checks a directive against the JSON schema the runner passed (the subset of JSON Schema the
runner's schema uses: type, enum, required, properties, additionalProperties, items, minItems, maxItems) and
against the directive contract (`runtime.pivot.validate_directive`: every key, no blank item, no blocked family,
and `validate_directive_original`, the runner's own looser check); a directive that fails any is never written.

`stable_packet_hash` is the packet's identity without what the runner rewrites between planning and archiving.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from runtime.advisor import AdvisorPacket
from runtime.records import canonical_json, sha256_hex

SCHEMA_SUFFIX = "_schema.json"
PACKET_SUFFIX = "_packet.json"
MANUAL_SCHEMA = "directive_schema.json"
_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_ITERATION = re.compile(r"iter_(\d+)")
# What the loop runner rewrites in a packet between planning it and archiving it (manual-apply: the iter/* branch,
# the apply time), and the checkout's path: none of it is what the planner decided on.
VOLATILE_PACKET_KEYS: tuple[str, ...] = ("timestamp_utc", "branch", "base_branch")
VOLATILE_REPO_KEYS: tuple[str, ...] = ("worktree_path",)
_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                       "integer": (int,), "number": (int, float), "null": (type(None),)}


class PacketError(ValueError):
    """A packet or schema that cannot be read; its text names the file and what is wrong."""


def stable_packet_hash(packet: AdvisorPacket) -> str:
    """SHA-256 of the packet's canonical JSON (as `runtime.records.packet_hash` reads it) without
    `VOLATILE_PACKET_KEYS` and `repo.worktree_path`: the same for the packet a planner saw at pack time and the one
    the runner archived at apply time."""
    data = packet.model_dump(mode="json")
    for key in VOLATILE_PACKET_KEYS:
        data.pop(key, None)
    repo = data.get("repo")
    if isinstance(repo, dict):
        data["repo"] = {k: v for k, v in repo.items() if k not in VOLATILE_REPO_KEYS}
    return sha256_hex(canonical_json(data))


def read_json_file(path: Path, what: str) -> Any:
    """A JSON file's value; PacketError names the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PacketError(f"{what} {path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PacketError(f"{what} {path}: not readable ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PacketError(f"{what} {path}: line {exc.lineno} column {exc.colno}: not JSON ({exc.msg})") from None


def packet_beside(schema: Path) -> Optional[Path]:
    """The packet the runner archived next to a schema (`iter_NNNN_schema.json` -> `iter_NNNN_packet.json`;
    `planner_packets/directive_schema.json` -> `packet.json`), None when there is none."""
    if schema.name.endswith(SCHEMA_SUFFIX):
        candidate = schema.with_name(schema.name[: -len(SCHEMA_SUFFIX)] + PACKET_SUFFIX)
    elif schema.name == MANUAL_SCHEMA:
        candidate = schema.with_name("packet.json")
    else:
        return None
    return candidate if candidate.is_file() else None


def packet_in_prompt(prompt: str) -> Optional[dict[str, Any]]:
    """The last fenced JSON object of a prompt that is not a JSON schema (the runner's prompt ends with its
    packet), None when there is none."""
    for block in reversed(_FENCE.findall(prompt or "")):
        try:
            value = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and not ("properties" in value and value.get("type") == "object"):
            return value
    return None


def iteration_of(packet: dict[str, Any], path: Optional[Path]) -> int:
    """The packet's `iteration_id`, else the NNNN of its file name; PacketError when neither is a number >= 0."""
    value = packet.get("iteration_id")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _ITERATION.search(path.name) if path is not None else None
    if match:
        return int(match.group(1))
    raise PacketError(f"packet{f' {path}' if path else ''}: no iteration_id (an integer >= 0)")


def schema_errors(value: Any, schema: Any, where: str = "directive") -> list[str]:
    """Where `value` breaks the JSON schema (the subset the loop runner's directive schema uses)."""
    if not isinstance(schema, dict):
        return [f"{where}: the schema is not an object"]
    errors: list[str] = []
    kind = schema.get("type")
    if isinstance(kind, str):
        allowed = _TYPES.get(kind, (object,))
        if not isinstance(value, allowed) or (kind in ("integer", "number") and isinstance(value, bool)):
            return [f"{where}: not {kind} but {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{where}: {len(value)} items, the schema allows {schema.get('minItems', 0)}.."
                          f"{schema.get('maxItems', 'any')}")
        for index, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), f"{where}[{index}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [f"{where}.{key}: missing" for key in schema.get("required", []) if key not in value]
        if schema.get("additionalProperties") is False:
            errors += [f"{where}.{key}: not allowed" for key in value if key not in properties]
        for key, sub in properties.items():
            if key in value:
                errors += schema_errors(value[key], sub, f"{where}.{key}")
    return errors


def check_directive(directive: dict[str, Any], schema: Optional[Any], blocked: list[str]) -> list[str]:
    """Every reason the directive may not be written: the runner's schema, then the directive contract."""
    from runtime.pivot import validate_directive, validate_directive_original

    errors = schema_errors(directive, schema) if schema is not None else []
    errors += [f"directive: {e}" for e in validate_directive(directive, blocked)]
    return errors + [f"directive (the runner's check): {e}" for e in validate_directive_original(directive, blocked)]


__all__ = ["PacketError", "VOLATILE_PACKET_KEYS", "check_directive", "iteration_of", "packet_beside",
           "packet_in_prompt", "read_json_file", "schema_errors", "stable_packet_hash"]
