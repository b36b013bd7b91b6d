"""Full Auto log lines in the shapes of formats.md §1.1-1.4, and the helpers that vary and validate them
(shared by tests/runtime/test_fullauto.py and tests/runtime/test_records.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

SUMMARY = {
    "thread_id": "thr_1", "turn_id": "turn_7", "last_turn_status": "completed", "turn_error": "",
    "last_agent_message": "Tests pass.", "last_guidance_directive": "",
    "turn_plan": "[\n  {\n    \"step\": \"fix\",\n    \"status\": \"completed\"\n  }\n]",
    "diff_summary": "{\n  \"diff\": \"+x\"\n}", "token_usage": "{\n  \"totalTokens\": 51234\n}",
    "pending_approvals": "0", "pending_tool_inputs": "0",
    "recent_actions": "[\n  {\n    \"turn_id\": \"turn_6\",\n    \"action\": \"continue\",\n    \"reason\": \"ok\",\n"
                      "    \"confidence\": 0.8,\n    \"timestamp\": 1767225600\n  }\n]",
    "compaction_events": "0", "turn_count": 7, "no_progress_count": 0,
}
AUDIT = {"triggered": True, "rule": "low_confidence", "original_action": "continue",
         "original_confidence": 0.4000000059604645, "enforced_action": "pause",
         "enforced_confidence": 0.4000000059604645}
LINE = {
    "timestamp": "2026-01-01T00:00:00.123456789Z", "sequence_id": 3,
    "run_id": "fullauto-0b6f1c52-3c1e-4c55-9d7e-5d8f0c7e2a11", "workspace_id": "ws_1",
    "thread_id": "thr_1", "turn_id": "turn_7", "action": "pause", "confidence": 0.4000000059604645,
    "reason": "Low confidence (0.40) decision; pausing Full Auto.", "next_input_preview": "",
    "state": "paused", "model": "codex:gpt-5.1-codex-mini", "guardrail": AUDIT, "summary": SUMMARY,
}


def changed(base: dict, path: str, value: Any = ..., delete: bool = False) -> dict:
    """A deep copy of `base` with the dotted `path` set to `value` (or deleted)."""
    obj = copy.deepcopy(base)
    *parents, last = path.split(".")
    target = obj
    for part in parents:
        target = target[part]
    if delete:
        del target[last]
    else:
        target[last] = value
    return obj


def error_fields(model: type[BaseModel], obj: Any) -> tuple[set[str], str]:
    """The dotted fields a failed validation names, and its message."""
    with pytest.raises(ValidationError) as info:
        model.model_validate(obj)
    return {".".join(str(p) for p in err["loc"]) for err in info.value.errors()}, str(info.value)


def roundtrip(model: type[BaseModel], obj: Any) -> BaseModel:
    """Validate the object as parsed from a JSONL line (the way an importer reads it)."""
    return model.model_validate(json.loads(json.dumps(obj)))
