"""One planning call of the loop runner, answered by a frozen planner: packet -> checked directive -> sidecar line.

`RunnerPlanner` loads the exported planner once (as every command loads an export, `load_exported`) and, when a
candidate is installed, starts its shadow (`runtime.planner_shadow.PlannerShadow`: the candidate decides in a
process of its own). `plan(...)`:
  1. checks the module's folder against its checksums again (a module changed since it was loaded is refused);
  2. reads the packet (beside the schema, or in the prompt) and the schema the runner passed;
  3. decides with the module, exploring as it was exported (`FrozenPlannerModule.decide`);
  4. checks the directive against that schema and the directive contract; refuses its safe default;
  5. writes the directive to OUT (a temporary file renamed over it: OUT is whole or absent);
  6. queues the sidecar line (`planner-decisions.jsonl`), which the shadow's worker thread writes once the
     candidate has chosen: the caller, and so the runner, never waits for the candidate or the file.
Any step that fails raises `PlanRefused` with one line, and OUT is not written.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from runtime.advisor import AdvisorPacket
from runtime.planner_shadow import PlannerShadow
from runtime.runner_packet import (PacketError, check_directive, iteration_of, packet_beside, packet_in_prompt,
                                   read_json_file, stable_packet_hash)

from guidebench.errors import GuidebenchError
from guidebench.runner._base import RunnerConfig


class PlanRefused(Exception):
    """A planning call the module cannot answer; the text is the one line the runner shows."""


class RunnerShadow(PlannerShadow):
    """The planner shadow whose lines also carry `packet_stable_hash` (the join key that survives manual-apply's
    rewrite of the packet: `runtime.runner_packet.stable_packet_hash`)."""

    def _line(self, job: Any) -> Any:
        line = super()._line(job)
        return line.model_copy(update={"packet_stable_hash": stable_packet_hash(job.packet)})


@dataclass
class PlanAnswer:
    """What one call planned."""

    iteration_id: int
    family: str
    greedy_family: Optional[str]
    probability: float
    latency_s: float
    packet_source: str

    @property
    def message(self) -> str:
        explored = "" if self.family == self.greedy_family else f", explored: greedy {self.greedy_family}"
        return (f"iteration {self.iteration_id}: {self.family} (probability {self.probability:.3f}{explored}), "
                f"decided in {self.latency_s * 1000:.0f} ms from {self.packet_source}")


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def write_whole(path: Path, text: str) -> None:
    """Write a file so that it is whole or absent (temporary file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class RunnerPlanner:
    """The installed frozen planner, loaded once, answering planning calls (see the module)."""

    def __init__(self, config: RunnerConfig, *, deadline_s: float = 5.0):
        from guidebench.release.export import load_exported

        self.config = config
        self.module_dir = Path(config.module)
        self.module = load_exported(self.module_dir, label="--module")
        if self.module.manifest.kind != "planner":
            raise GuidebenchError(f"--module {self.module_dir}: is a {self.module.manifest.kind} module; the loop "
                                  "runner needs a planner")
        candidate = None
        if config.candidate:
            candidate = load_exported(Path(config.candidate), label="--candidate")
            if candidate.manifest.kind != "planner":
                raise GuidebenchError(f"--candidate {config.candidate}: is a {candidate.manifest.kind} module; a "
                                      "planner shadows only a planner")
        self.shadow = RunnerShadow(self.module, config.log_dir, candidate=candidate, repository=config.repository,
                                   deadline_s=deadline_s)
        self.calls = 0
        self.refused = 0

    def _packet(self, schema_path: Optional[Path], prompt: str, packet_path: Optional[Path]
                ) -> tuple[AdvisorPacket, int, str]:
        from pydantic import ValidationError

        from guidebench.data.ingest import validation_error_text

        path = packet_path or (packet_beside(schema_path) if schema_path is not None else None)
        raw = read_json_file(path, "packet") if path is not None else packet_in_prompt(prompt)
        source = str(path) if path is not None else "the prompt"
        if not isinstance(raw, dict):
            raise PacketError(f"packet in {source}: " + ("not a JSON object" if raw is not None else
                              "none found (no iter_NNNN_packet.json beside the schema, no JSON packet in the prompt)"))
        try:
            packet = AdvisorPacket.model_validate(raw)
        except ValidationError as exc:
            raise PacketError(f"packet {source}: {validation_error_text(exc)}") from None
        return packet, iteration_of(raw, path), source

    def plan(self, *, out: Path, schema_path: Optional[Path] = None, prompt: str = "",
             packet_path: Optional[Path] = None) -> PlanAnswer:
        """Plan one iteration and write its directive to `out` (see the module); PlanRefused otherwise."""
        from runtime.checksums import verify_folder
        from runtime.frozen.manifest import FrozenModuleError

        self.calls += 1
        try:
            verify_folder(self.module_dir)
            packet, iteration_id, source = self._packet(schema_path, prompt, packet_path)
            schema = read_json_file(schema_path, "schema") if schema_path is not None else None
            started = time.perf_counter()
            decision = self.module.decide(packet)
            latency = time.perf_counter() - started
        except FrozenModuleError as exc:
            self.refused += 1
            raise PlanRefused(f"module {self.module_dir} refused: {_one_line(exc.reason)}: export it again and run "
                              "`guidebench runner install` again") from None
        except (PacketError, OSError) as exc:
            self.refused += 1
            raise PlanRefused(_one_line(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the module's own failure: the runner shows one line
            self.refused += 1
            raise PlanRefused(f"module {self.config.module_name} could not plan: {_one_line(exc)}") from None
        directive = decision.directive.model_dump(mode="json")
        blocked = list(packet.strategy_family_constraints.blocked_families)
        problems = check_directive(directive, schema, blocked)
        if decision.used_default:
            problems = [f"the module gave only its safe default ({'; '.join(decision.errors) or 'no reason'})"]
        if problems:
            self.refused += 1
            raise PlanRefused(f"iteration {iteration_id}: no directive written: {_one_line('; '.join(problems))}")
        write_whole(out, json.dumps(directive, indent=2, sort_keys=True) + "\n")
        self.shadow.submit(packet, decision, iteration_id, latency_s=latency)
        return PlanAnswer(iteration_id, decision.family, decision.greedy_family,
                          float(decision.probabilities[decision.family]), latency, source)

    def close(self) -> None:
        """Write every queued sidecar line and stop the candidate's process."""
        self.shadow.close()


__all__ = ["PlanAnswer", "PlanRefused", "RunnerPlanner", "RunnerShadow", "write_whole"]
