"""Join a planner decision sidecar (`planner-decisions.jsonl`, `runtime.planner_log`) to its experiment log.

The sidecar of `DIR/log.jsonl` is `DIR/planner-decisions.jsonl` (of `DIR/NAME.jsonl`: `DIR/NAME.planner-decisions.jsonl`).
Its lines are read before the log; each log entry that becomes a planner record takes the line of its
`iteration_id` when the line's `packet_hash` is the record's (`PlannerRecord.inputs_hash`, the packet as the import
rebuilds it), as `PlannerRecord.planner_log`; a line that carries `packet_stable_hash` also joins when that hash is
the record packet's without the fields the loop runner rewrites between planning and archiving (manual mode's
`manual-apply`: `runtime.runner_packet.stable_packet_hash`). Every non-blank line ends in exactly one count of
`import_report.json`, and every line not joined goes to `quarantine-side.jsonl` with its reason:

| count | the line |
|---|---|
| `planner_lines` | every non-blank line (the sum of the counts below) |
| `planner_joined` | joined to its log entry |
| `planner_invalid` | not JSON, not the contract, or another schema version |
| `planner_other_repository` | names another repository than the sidecar's (its first line's, or `--planner-repository`), or no line of the sidecar matches a packet of the log |
| `planner_wrong_module` | names another module than the sidecar's first line (two modules in one sidecar) |
| `planner_bad_probabilities` | probabilities NaN, infinite, negative, missing a family, or not summing to 1 |
| `planner_zero_chosen` | the chosen family has probability 0 |
| `planner_duplicates` | a second line for an iteration (the first counts) |
| `planner_unmatched` | its iteration is not in the log |
| `planner_packet_mismatch` | the log's entry of that iteration had another packet |
| `planner_family_mismatch` | the log's attempt of that iteration tried another family than the line chose |

A sidecar that is not a regular file inside the imported folder (a folder, a FIFO, a link leading out) is not read:
`planner_sidecar_unusable`, with a note.

A joined line's candidate part is kept when it is usable; otherwise the line still joins without it, counted in
`planner_candidate_dropped` (reason in the notes).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from runtime.exploration import check_probabilities
from runtime.planner_log import PLANNER_FILE, LoggedCandidate, PlannerDecisionLine, PlannerLogged
from runtime.records import PlannerRecord
from runtime.runner_packet import stable_packet_hash
from runtime.shadow_log import ShadowModule

from guidebench.data.ingest import validation_error_text
from guidebench.data.registry import ImportContext
from guidebench.data.workspace import Workspace, workspace_root

COUNTS = ("planner_lines", "planner_joined", "planner_invalid", "planner_other_repository", "planner_wrong_module",
          "planner_bad_probabilities", "planner_zero_chosen", "planner_duplicates", "planner_unmatched",
          "planner_packet_mismatch", "planner_family_mismatch", "planner_candidate_dropped")
REPOSITORY_OPTION = "planner_repository"


def is_sidecar(file: Path) -> bool:
    """Planner sidecars sit next to the logs but are not episodes."""
    return file.name.endswith(PLANNER_FILE)


def sidecar_of(log: Path) -> Path:
    """Where the sidecar of a log lives."""
    return log.parent / PLANNER_FILE if log.name == "log.jsonl" else log.with_name(f"{log.stem}.{PLANNER_FILE}")


@dataclass
class _Pending:
    line: int
    raw: str
    logged: PlannerLogged
    packet_hash: str
    stable_hash: Optional[str] = None  # the line's `packet_stable_hash` (a runner-installed planner writes it)


@dataclass
class SidecarJoin:
    """One sidecar's usable lines by iteration, joined to the log's records as they are built."""

    ctx: ImportContext
    path: Path
    pending: dict[int, _Pending] = field(default_factory=dict)
    mismatched: list[tuple[_Pending, str]] = field(default_factory=list)
    joined: int = 0
    repository: Optional[str] = None
    module: Optional[ShadowModule] = None
    candidate_module: Optional[ShadowModule] = None

    @classmethod
    def open(cls, ctx: ImportContext, log: Path) -> Optional["SidecarJoin"]:
        """The join of a log's sidecar (None without one); its unusable lines are quarantined now."""
        path = sidecar_of(log)
        if not os.path.lexists(path):
            return None
        refused = Workspace(workspace_root(ctx.path)).refusal(path, limit=None)
        if refused is not None:  # a folder, a FIFO, a link out of the imported folder: never opened
            why = "a dangling link" if refused.reason == "missing" else refused.reason
            ctx.report.add("planner_sidecar_unusable")
            ctx.report.note(f"{ctx.display(path)}: {why}; the sidecar is not read (no logged propensities for "
                            f"{ctx.display(log)})")
            return None
        for name in COUNTS:
            ctx.report.add(name, 0)
        join = cls(ctx, path, repository=ctx.options.get(REPOSITORY_OPTION) or None)
        try:
            with path.open("rb") as handle:
                for number, data in enumerate(handle, start=1):
                    text = data.decode("utf-8", errors="replace").rstrip("\r\n")
                    if text.strip():
                        ctx.report.add("planner_lines")
                        join._read(number, text)
        except OSError as exc:
            ctx.report.note(f"{ctx.display(path)}: cannot read: {exc.strerror or exc}")
        return join

    def _bad(self, counter: str, line: int, error: str, raw: str) -> None:
        self.ctx.side_problem(counter, self.path, line, error, raw)

    def _read(self, number: int, raw: str) -> None:
        try:  # a writer may write NaN: it is a bad probability, not bad JSON
            obj = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return self._bad("planner_invalid", number, f"not JSON: {' '.join(str(exc).split())[:120]}", raw)
        if not isinstance(obj, dict):
            return self._bad("planner_invalid", number, "not a JSON object", raw)
        if obj.get("schema_version") != 1:
            return self._bad("planner_invalid", number, f"schema_version {obj.get('schema_version')!r}: this "
                             "import reads schema version 1", raw)
        try:
            line = PlannerDecisionLine.model_validate(obj)
        except ValidationError as exc:
            return self._bad("planner_invalid", number, validation_error_text(exc), raw)
        problem = self._check(line)
        if problem is not None:
            return self._bad(problem[0], number, problem[1], raw)
        if line.iteration_id in self.pending:
            first = self.pending[line.iteration_id].line
            return self._bad("planner_duplicates", number, f"a second line for iteration {line.iteration_id} "
                             f"(line {first} counts)", raw)
        self.pending[line.iteration_id] = _Pending(number, raw, self._logged(line, number), line.packet_hash,
                                                   line.packet_stable_hash)

    def _check(self, line: PlannerDecisionLine) -> Optional[tuple[str, str]]:
        """(count, reason) of a line that cannot join whatever the log holds; None when it may."""
        if self.repository is None:
            self.repository = line.repository
        if line.repository != self.repository:
            return ("planner_other_repository", f"repository {line.repository!r}: this sidecar's is "
                    f"{self.repository!r}")
        if self.module is None:
            self.module = line.module
        if not line.module.same_module(self.module):
            return ("planner_wrong_module", f"module {line.module.package} ({line.module.checksum[:12]}): a second "
                    f"module in one sidecar, whose first line names {self.module.package} "
                    f"({self.module.checksum[:12]})")
        why = check_probabilities(line.probabilities)
        if why is not None:
            return "planner_bad_probabilities", why
        if line.probabilities[line.family] <= 0:
            return "planner_zero_chosen", f"chosen family {line.family} has probability 0"
        return None

    def _logged(self, line: PlannerDecisionLine, number: int) -> PlannerLogged:
        return PlannerLogged(module=line.module, exploration=line.exploration,
                             probabilities={f: float(p) for f, p in line.probabilities.items()}, family=line.family,
                             candidate=self._candidate(line, number), line=number)

    def _candidate(self, line: PlannerDecisionLine, number: int) -> Optional[LoggedCandidate]:
        candidate = line.candidate
        if candidate is None:
            return None
        if self.candidate_module is None:
            self.candidate_module = candidate.module
        why = None
        if not candidate.module.same_module(self.candidate_module):
            why = f"candidate {candidate.module.package}: another candidate than {self.candidate_module.package}"
        elif candidate.status == "ok":
            why = check_probabilities(candidate.probabilities or {})
            if why is None and candidate.probabilities[candidate.family] <= 0:  # type: ignore[index]
                why = f"candidate's family {candidate.family} has probability 0"
        if why is not None:
            self.ctx.report.add("planner_candidate_dropped")
            self.ctx.report.note(f"{self.ctx.display(self.path)}:{number}: candidate dropped: {why}")
            return None
        probs = {f: float(p) for f, p in candidate.probabilities.items()} if candidate.status == "ok" else None
        return LoggedCandidate(module=candidate.module, status=candidate.status,
                               family=candidate.family if candidate.status == "ok" else None,
                               probabilities=probs, error=candidate.error)

    def attach(self, record: PlannerRecord) -> PlannerRecord:
        """The record with its sidecar line when one joins (the first record of its iteration takes it)."""
        pending = self.pending.pop(record.iteration_id, None)
        if pending is None:
            return record
        digest = record.inputs_hash
        # manual mode: planned on the packet of plan/NNNN-slug, archived as rewritten on iter/NNNN-slug at apply time
        moved = pending.stable_hash is not None and pending.stable_hash == stable_packet_hash(record.packet)
        if pending.packet_hash != digest and not moved:
            self.mismatched.append((pending, f"packet_hash {pending.packet_hash[:12]}...: the log's iteration "
                                    f"{record.iteration_id} had packet {digest[:12]}..."))
            return record
        tried = record.outcome.family if record.outcome is not None else None
        if tried is not None and tried != pending.logged.family:
            self.ctx.side_problem("planner_family_mismatch", self.path, pending.line, f"the log's iteration "
                                  f"{record.iteration_id} tried {tried}, the line chose {pending.logged.family}",
                                  pending.raw)
            return record
        self.joined += 1
        self.ctx.report.add("planner_joined")
        return record.model_copy(update={"planner_log": pending.logged})

    def finish(self) -> None:
        """Quarantine what did not join: unknown iterations, other packets (all of them: another repository)."""
        for iteration, pending in sorted(self.pending.items()):
            self._bad("planner_unmatched", pending.line, f"iteration {iteration} is not in the log", pending.raw)
        other = self.joined == 0 and bool(self.mismatched)
        for pending, why in self.mismatched:
            if other:
                self._bad("planner_other_repository", pending.line, "no line of this sidecar matches a packet of "
                          f"the log: a sidecar of another repository or log ({why})", pending.raw)
            else:
                self._bad("planner_packet_mismatch", pending.line, why, pending.raw)
        self.pending.clear()
        self.mismatched.clear()


__all__ = ["COUNTS", "REPOSITORY_OPTION", "SidecarJoin", "is_sidecar", "sidecar_of"]
