"""Write a loop runner's planner archive (`.advisor/`) exactly as `tools/loop_runner.py` writes it (formats.md §2.3.2).

Restated from the runner (meppum/original_performance_takehome, `cmd_manual_apply`, `_cmd_codex_plan_common`,
`_write_state`, `_planner_directive_schema`, `_build_iteration_packet`):
- manual mode: `.advisor/manual_archive/iter_NNNN/packet.json` and `directive.json` as
  `json.dumps(obj, indent=2, sort_keys=True) + "\\n"`, `prompt.md` (the prompt text as pasted), and
  `from_ref.txt` (the ref + newline) when `manual-apply --from-ref` was used;
- codex modes: `.advisor/codex/` (`codex-plan`) or `.advisor/codex_api/` (`codex-api-plan`):
  `iter_NNNN_packet.json` and `iter_NNNN_schema.json` (same dump), `iter_NNNN_prompt.md` (prompt + newline),
  `iter_NNNN_stdout.txt`, `iter_NNNN_stderr.txt`, `iter_NNNN_cmd.txt` and `iter_NNNN_last_message.txt` (what
  `codex exec --output-last-message` wrote: the planner's answer, the directive's JSON text);
- `.advisor/state.json`: the last plan's state (`iteration_id`, `branch`, `base_branch`, `base_sha`,
  `threshold_target`, `packet`, `directive`, `advisor_response_id`, `created_at_utc`), rewritten at every plan.

`runner_packet` adds to the packet's planner fields (formats.md §2.3) the keys `_build_iteration_packet` writes
around them (iteration, branch, base, `repo`, `constraints`, `code_context`, `advisor_model`). Used by the
experiments simulator (the sample's archives) and by the tests, which feed the import these exact shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from runtime.advisor import FAMILIES

ADVISOR = ".advisor"
MODES = ("manual", "codex", "codex_api")
ALLOWED_PATHS = ["perf_takehome.py"]
FORBIDDEN_GLOBS = ["tests/**", "problem.py"]
CONSTRAINT_NOTES = ["Never modify tests/ or benchmark semantics.", "Prefer changes in perf_takehome.py only."]
ADVISOR_MODELS = {"manual": "gpt-5.2-pro", "codex": "codex-default", "codex_api": "gpt-5.2"}


def dump(obj: Any) -> str:
    """The runner's archive dump: `json.dumps(obj, indent=2, sort_keys=True) + "\\n"`."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def directive_schema(blocked_families: Sequence[str] = ()) -> dict[str, Any]:
    """The runner's `_planner_directive_schema`: the JSON schema given to the planner (blocked families left out
    of the enum, all three when that leaves none)."""
    allowed = [f for f in FAMILIES if f not in set(blocked_families)] or list(FAMILIES)
    strings = {"type": "array", "items": {"type": "string"}}
    required = ["objective", "primary_hypothesis", "strategy_family", "strategy_modifiers", "risk",
                "expected_effect_cycles", "change_summary", "step_plan", "validation", "next_packet_requests",
                "did_web_search"]
    return {
        "type": "object", "additionalProperties": False,
        "properties": {
            "objective": {"type": "string"}, "primary_hypothesis": {"type": "string"},
            "strategy_family": {"type": "string", "enum": allowed},
            "strategy_modifiers": {**strings, "minItems": 0, "maxItems": 3},
            "risk": {"type": "string", "enum": ["Low", "Medium", "High"]},
            "expected_effect_cycles": {"type": "integer"},
            "change_summary": {**strings, "minItems": 1, "maxItems": 5},
            "step_plan": {**strings, "minItems": 3, "maxItems": 12},
            "validation": {"type": "object", "additionalProperties": False, "properties": {
                "commands": {**strings, "minItems": 1, "maxItems": 6},
                "pass_criteria": {**strings, "minItems": 1, "maxItems": 6}},
                "required": ["commands", "pass_criteria"]},
            "next_packet_requests": {**strings, "minItems": 0, "maxItems": 6},
            "did_web_search": {"type": "boolean"},
        },
        "required": required,
    }


def runner_packet(planner_fields: Mapping[str, Any], *, iteration_id: int, timestamp_utc: str, branch: str,
                  base_branch: str, base_sha: str, worktree: str, origin_url: Optional[str], mode: str) -> dict[str, Any]:
    """The whole packet `_build_iteration_packet` writes: the planner fields plus the runner's own keys."""
    web = origin_url[:-4] if origin_url and origin_url.endswith(".git") else origin_url
    return {
        **planner_fields,
        "iteration_id": iteration_id, "timestamp_utc": timestamp_utc, "branch": branch, "base_branch": base_branch,
        "base_sha": base_sha,
        "repo": {"origin_url": origin_url, "github_web_url": web, "base_sha": base_sha, "worktree_path": worktree},
        "constraints": {"allowed_paths": list(ALLOWED_PATHS), "forbidden_globs": list(FORBIDDEN_GLOBS),
                        "notes": list(CONSTRAINT_NOTES)},
        "code_context": {}, "advisor_model": ADVISOR_MODELS[mode],
    }


def planner_prompt(packet: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """A planner prompt in the runner's layout (its wording is not read back by anything)."""
    return ("You are the optimization advisor for this repository.\n\nReturn ONLY a JSON object matching this "
            "schema:\n" + json.dumps(schema, indent=2, sort_keys=True) + "\n\nPacket:\n"
            + json.dumps(packet, indent=2, sort_keys=True))


def write_plan(repo: Path, mode: str, packet: Mapping[str, Any], directive: Mapping[str, Any], *,
               created_at_utc: str, from_ref: Optional[str] = None, answer: Optional[str] = None) -> Path:
    """Write one plan's archive files and `state.json` as the runner does; returns the packet file.

    `answer` is the planner's answer text as codex wrote it (default: the directive's JSON on one line)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    advisor = repo / ADVISOR
    iteration_id = int(packet["iteration_id"])
    constraints = packet.get("strategy_family_constraints") or {}
    schema = directive_schema(constraints.get("blocked_families") or ())
    prompt = planner_prompt(packet, schema)
    if mode == "manual":
        folder = advisor / "manual_archive" / f"iter_{iteration_id:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "packet.json").write_text(dump(packet), encoding="utf-8")
        (folder / "directive.json").write_text(dump(directive), encoding="utf-8")
        (folder / "prompt.md").write_text(prompt + "\n", encoding="utf-8")
        if from_ref:
            (folder / "from_ref.txt").write_text(from_ref.strip() + "\n", encoding="utf-8")
        packet_file = folder / "packet.json"
    else:
        folder = advisor / mode
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / f"iter_{iteration_id:04d}"
        packet_file = Path(f"{stem}_packet.json")
        packet_file.write_text(dump(packet), encoding="utf-8")
        Path(f"{stem}_schema.json").write_text(dump(schema), encoding="utf-8")
        Path(f"{stem}_prompt.md").write_text(prompt + "\n", encoding="utf-8")
        Path(f"{stem}_stdout.txt").write_text("", encoding="utf-8")
        Path(f"{stem}_stderr.txt").write_text("", encoding="utf-8")
        Path(f"{stem}_cmd.txt").write_text(
            f"codex exec --output-schema {stem.name}_schema.json --output-last-message {stem.name}_last_message.txt"
            " -\n", encoding="utf-8")
        Path(f"{stem}_last_message.txt").write_text(answer if answer is not None else json.dumps(directive),
                                                    encoding="utf-8")
    state = {"iteration_id": iteration_id, "branch": packet.get("branch"), "base_branch": packet.get("base_branch"),
             "base_sha": packet.get("base_sha"), "threshold_target": packet.get("threshold_target"),
             "packet": packet, "directive": directive, "advisor_response_id": None, "created_at_utc": created_at_utc}
    (advisor / "state.json").write_text(dump(state), encoding="utf-8")
    return packet_file


__all__ = ["ADVISOR", "MODES", "directive_schema", "dump", "runner_packet", "write_plan"]
