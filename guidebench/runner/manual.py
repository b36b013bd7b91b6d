"""`guidebench runner plan PACKET --module EXPORT --out DIRECTIVE`: the manual mode's planner.

After `tools/loop_runner.py manual-pack`, PACKET is `planner_packets/packet.json` (written on the `plan/NNNN-slug`
branch) with `directive_schema.json` beside it. This writes the checked directive to DIRECTIVE (normally
`planner_packets/directive.json`, which the person commits before `manual-apply`) and the sidecar line to the
repository's `experiments/planner-decisions.jsonl`, with the candidate's choice when one is installed.

`manual-apply` archives the packet rewritten on `iter/NNNN-slug` at apply time: another branch and timestamp, so
another `packet_hash`. The line carries `packet_stable_hash` (without those fields), on which the import joins it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional

from runtime.runner_packet import MANUAL_SCHEMA

from guidebench.errors import GuidebenchError
from guidebench.runner._base import Layout, RunnerConfig
from guidebench.runner.planner import PlanAnswer, PlanRefused, RunnerPlanner


def repository_of(path: Path) -> Path:
    """The git checkout a packet belongs to (its parent folder's parent when it is not in one)."""
    proc = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, check=False)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else path.parent.parent


def plan_packet(packet: Path, module: Path, out: Path, *, candidate: Optional[Path] = None,
                log_dir: Optional[Path] = None) -> tuple[PlanAnswer, Path]:
    """Plan one manual iteration (see the module); returns the answer and the sidecar's path."""
    from guidebench.runner.installation import check_module, root_commit

    if not packet.is_file():
        raise GuidebenchError(f"PACKET {packet}: not found (run `python3 tools/loop_runner.py manual-pack` first)")
    repo = repository_of(packet.absolute())
    layout = Layout(repo)
    installed = layout.read() if layout.config.is_file() else None
    if candidate is None and installed is not None and installed.candidate:
        candidate = Path(installed.candidate)
    config = RunnerConfig(
        repo=str(repo), module=str(module.absolute()), module_name=check_module(module, "--module"),
        candidate=str(candidate.absolute()) if candidate is not None else None, python="", project="",
        repository=installed.repository if installed is not None else root_commit(repo),
        log_dir=str((log_dir or repo / "experiments").absolute()))
    schema = packet.with_name(MANUAL_SCHEMA)
    planner = RunnerPlanner(config)
    try:
        answer = planner.plan(out=out, packet_path=packet, schema_path=schema if schema.is_file() else None)
    except PlanRefused as exc:
        raise GuidebenchError(str(exc)) from None
    finally:
        planner.close()
    if planner.shadow.write_errors:
        raise GuidebenchError(f"the directive is written to {out}, but its sidecar line is not: "
                              f"{planner.shadow.write_errors[0]}")
    return answer, planner.shadow.path


__all__ = ["plan_packet", "repository_of"]
