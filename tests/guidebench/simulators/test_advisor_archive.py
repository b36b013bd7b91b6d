"""The planner archive written as `tools/loop_runner.py` writes it: file names, dumps, state.json, the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guidebench.simulators.advisor_archive import directive_schema, dump, runner_packet, write_plan
from runtime.pivot import validate_directive_original

DIRECTIVE = {"objective": "o", "primary_hypothesis": "h", "strategy_family": "family:schedule",
             "strategy_modifiers": ["list_scheduling"], "risk": "Low", "expected_effect_cycles": -12,
             "change_summary": ["c"], "step_plan": ["a", "b", "c"],
             "validation": {"commands": ["python tests/submission_tests.py"], "pass_criteria": ["ok"]},
             "next_packet_requests": [], "did_web_search": False}


def packet(iteration: int = 7, blocked: tuple[str, ...] = ()) -> dict:
    fields = {"goal": "best", "threshold_target": None, "best_cycles": 1500, "aspiration_cycles": 1499,
              "strategy_family_constraints": {"blocked_families": list(blocked)}, "experiment_log_tail": [],
              "performance_profile": {"tight_lb_cycles": 1400}}
    return runner_packet(fields, iteration_id=iteration, timestamp_utc="2025-01-01T00:00:00Z", branch="iter/0007-x",
                         base_branch="main", base_sha="a" * 40, worktree="/w", origin_url="https://x/r.git",
                         mode="manual")


def test_manual_mode_writes_the_runners_files_and_dumps(tmp_path: Path) -> None:
    written = write_plan(tmp_path, "manual", packet(), DIRECTIVE, created_at_utc="t", from_ref="origin/plan/0007-x ")
    folder = tmp_path / ".advisor" / "manual_archive" / "iter_0007"
    assert written == folder / "packet.json"
    assert sorted(p.name for p in folder.iterdir()) == ["directive.json", "from_ref.txt", "packet.json", "prompt.md"]
    assert (folder / "packet.json").read_text() == json.dumps(packet(), indent=2, sort_keys=True) + "\n"
    assert (folder / "directive.json").read_text() == json.dumps(DIRECTIVE, indent=2, sort_keys=True) + "\n"
    assert (folder / "from_ref.txt").read_text() == "origin/plan/0007-x\n"
    state = json.loads((tmp_path / ".advisor" / "state.json").read_text())
    assert state["iteration_id"] == 7 and state["directive"] == DIRECTIVE and state["advisor_response_id"] is None
    assert set(state) == {"iteration_id", "branch", "base_branch", "base_sha", "threshold_target", "packet",
                          "directive", "advisor_response_id", "created_at_utc"}


@pytest.mark.parametrize("mode", ["codex", "codex_api"])
def test_codex_modes_write_the_runners_files(tmp_path: Path, mode: str) -> None:
    write_plan(tmp_path, mode, packet(12, blocked=("family:break_deps",)), DIRECTIVE, created_at_utc="t")
    folder = tmp_path / ".advisor" / mode
    assert sorted(p.name for p in folder.iterdir()) == [f"iter_0012_{name}" for name in (
        "cmd.txt", "last_message.txt", "packet.json", "prompt.md", "schema.json", "stderr.txt", "stdout.txt")]
    assert json.loads((folder / "iter_0012_last_message.txt").read_text()) == DIRECTIVE
    schema = json.loads((folder / "iter_0012_schema.json").read_text())
    assert schema["properties"]["strategy_family"]["enum"] == ["family:schedule", "family:reduce_loads"]
    assert (folder / "iter_0012_schema.json").read_text() == dump(schema)


def test_the_schema_and_the_runners_check_agree() -> None:
    schema = directive_schema()
    assert sorted(schema["required"]) == sorted(DIRECTIVE) and schema["additionalProperties"] is False
    assert not validate_directive_original(DIRECTIVE)
    everything = ("family:schedule", "family:reduce_loads", "family:break_deps")
    assert directive_schema(everything)["properties"]["strategy_family"]["enum"] == list(everything)


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode"):
        write_plan(tmp_path, "offline", packet(), DIRECTIVE, created_at_utc="t")
