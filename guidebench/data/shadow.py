"""Join a workspace's shadow sidecar (`shadow-decisions.jsonl`, `runtime.shadow_log`) to its decision records.

One module is judged per import: the one `--shadow-module DIR` names, else the module most lines of the first
sidecar name (the first named, on a tie). A line joins the decision record with its exact keys: the same
workspace id, run id, sequence id, thread id and turn id, the deployed action the line names, the guardrail
config the import judged that decision under, and the inputs hash (summary + config) that decision has
(computed before redaction, so a line whose summary held a secret still joins). Each line ends in exactly one
count of `import_report.json`:

    shadow_joined              attached to its decision (the record's `shadow`)
    shadow_invalid             not JSON, not the line contract, or a schema version this guidebench does not read
    shadow_wrong_module        names another module than the one judged
    shadow_checksum_mismatch   names the judged module's name and version with another checksum
    shadow_duplicates          a second line for a turn that already has one (the first in the file counts)
    shadow_unmatched           no decision in the log has its workspace, run, sequence, thread and turn
    shadow_inputs_mismatch     that decision had other inputs (hash) or another enforced action
    shadow_config_mismatch     the shadow was judged under other guardrails than the import gives that decision
                               (e.g. the run's file is missing, so the import used the defaults)

`shadow_lines` counts every non-blank line (the sum of the above); every line that is not joined goes to
`quarantine-side.jsonl` with its reason. `shadow_clock_backwards` counts joined lines stamped before their
decision (the keys join a line, never the clock; the gate orders turns by log position), and the
distribution `shadow_statuses` the joined lines' statuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from runtime.records import DecisionRecord, ShadowDecision, SourceRef, inputs_hash
from runtime.shadow import module_identity
from runtime.shadow_log import SHADOW_FILE, ShadowDecisionLine, ShadowModule

from guidebench.errors import GuidebenchError, refused_write
from guidebench.data.labels import epoch_seconds
from guidebench.data.registry import ImportContext
from guidebench.data.spool import GroupedSpool

REASONS: tuple[str, ...] = ("shadow_invalid", "shadow_wrong_module", "shadow_checksum_mismatch", "shadow_duplicates",
                            "shadow_unmatched", "shadow_inputs_mismatch", "shadow_config_mismatch")
COUNTS: tuple[str, ...] = ("shadow_lines", "shadow_joined", *REASONS, "shadow_clock_backwards")


def judged_module(path: Optional[str | Path]) -> Optional[ShadowModule]:
    """The module named by `--shadow-module DIR` (verified as the runtime verifies it), or None."""
    if path is None:
        return None
    from runtime.frozen.loader import verify_frozen
    from runtime.frozen.manifest import FrozenModuleError

    try:
        manifest = verify_frozen(Path(path))
    except FrozenModuleError as exc:
        raise GuidebenchError(f"--shadow-module {path}: {exc.reason}") from None
    return module_identity(manifest, Path(path))


def _most_named(file: Path) -> Optional[ShadowModule]:
    """The module most lines of a sidecar name (the first named on a tie); None when no line names one that reads."""
    from collections import Counter

    from pydantic import ValidationError

    from guidebench.data.ingest import read_lines

    named: Counter = Counter()
    modules: dict[tuple[str, str, str], ShadowModule] = {}
    for line in read_lines(file):
        try:
            module = ShadowModule.model_validate(json.loads(line.text or "")["module"])
        except (ValueError, KeyError, TypeError, ValidationError):
            continue  # the validating pass quarantines it
        key = (module.name, module.version, module.checksum)
        modules.setdefault(key, module)
        named[key] += 1
    return modules[named.most_common(1)[0][0]] if named else None


class ShadowJoin:
    """The shadow lines of an import: read per workspace, spooled by run, attached run by run."""

    def __init__(self, ctx: ImportContext, module: Optional[ShadowModule]):
        self.ctx = ctx
        self.module = module
        self.started = False
        self.file = Path(SHADOW_FILE)
        self.spool: Optional[GroupedSpool] = None
        # inputs hash of a redacted decision -> the hash it had as written (its shadow line names that one)
        self.unredacted: dict[str, str] = {}

    def begin(self, root: Path, spool: GroupedSpool) -> bool:
        """Start a workspace (its sidecar's lines will go to `spool`); False when it has no sidecar."""
        self.file, self.spool, self.unredacted = root / SHADOW_FILE, spool, {}
        if not self.file.is_file():
            return False
        if not self.started:
            self.started = True
            for key in COUNTS:
                self.ctx.report.add(key, 0)
        return True

    def read(self) -> None:
        """Validate the workspace's sidecar, check each line's module, spool the usable ones by run id."""
        file, spool, report = self.file, self.spool, self.ctx.report
        if self.module is None:
            self.module = _most_named(file)
        before = report.count("shadow_invalid")
        read = 0
        try:
            for line, item, _obj in self.ctx.model_lines(file, ShadowDecisionLine, side_counter="shadow_invalid",
                                                         desc=file.name):
                read += 1
                problem = self._module_problem(item.module)
                if problem is not None:
                    self._reject(file, line.number, *problem, line.raw)
                    continue
                spool.append(item.run_id, json.dumps([line.number, line.raw, item.model_dump_json()]))
        except OSError as exc:  # the lines read so far are used; the rest is lost, and said so
            if refused_write(exc):  # the machine refused to spool or quarantine: the input is not to blame
                raise
            report.add("side_files_unreadable")
            report.note(f"{file}: cannot read: {exc.strerror or exc}")
        # every non-blank line: the valid ones read plus those quarantined as invalid
        report.add("shadow_lines", read + report.count("shadow_invalid") - before)
        report.shadow_module = self.module.model_dump() if self.module else None  # type: ignore[attr-defined]

    def _module_problem(self, named: ShadowModule) -> Optional[tuple[str, str]]:
        if self.module is None:  # no line named a module that reads: this one is judged
            self.module = named
        if named.same_module(self.module):
            return None
        if (named.name, named.version) == (self.module.name, self.module.version):
            return ("shadow_checksum_mismatch", f"module {named.package} has checksum {named.checksum[:16]}..., the "
                    f"judged {self.module.package} has {self.module.checksum[:16]}...")
        return ("shadow_wrong_module", f"module {named.package} ({named.checksum[:16]}...) is not the judged "
                f"{self.module.package} ({self.module.checksum[:16]}...)")

    def _reject(self, file: Path, number: int, counter: str, error: str, raw: str) -> None:
        self.ctx.side_problem(counter, file, number, error, raw)

    def attach(self, run_id: str, records: list[DecisionRecord]) -> None:
        """Join the run's spooled shadow lines to its records (see the module docstring for the keys)."""
        spool, file = self.spool, self.file
        if spool is None or not spool.size(run_id):
            return
        by_key: dict[tuple[str, int, str, str], list[DecisionRecord]] = {}
        for record in records:
            by_key.setdefault((record.workspace_id, record.sequence_id, record.thread_id, record.turn_id),
                              []).append(record)
        for text in spool.read_group(run_id):
            number, raw, data = json.loads(text)
            line = ShadowDecisionLine.model_validate_json(data)
            candidates = by_key.get((line.workspace_id, line.sequence_id, line.thread_id, line.turn_id), [])
            problem = self._join_problem(line, candidates, self.unredacted)
            if isinstance(problem, tuple):
                self._reject(file, number, *problem, raw)
                continue
            self._join(problem, line, SourceRef(file=self.ctx.relative(file), line=number))

    def _join_problem(self, line: ShadowDecisionLine, candidates: list[DecisionRecord],
                      unredacted: dict[str, str]) -> DecisionRecord | tuple[str, str]:
        """The record a line joins, or (counter, reason) why it joins none."""
        where = f"workspace {line.workspace_id}, run {line.run_id}, sequence {line.sequence_id}, thread {line.thread_id}, turn {line.turn_id}"
        if not candidates:
            return "shadow_unmatched", f"no decision in the log has {where}"
        for record in candidates:
            if line.inputs_hash not in (record.inputs_hash, unredacted.get(record.inputs_hash)):
                if line.config != record.config and line.inputs_hash == inputs_hash(record.summary, line.config):
                    return ("shadow_config_mismatch", f"the shadow was judged under {line.config.model_dump()}, the "
                            f"import judged the decision ({where}) under {record.config.model_dump()} "
                            f"({record.config_source})")
                continue
            if record.logged is not None and record.logged.action != line.deployed_action:
                return ("shadow_inputs_mismatch", f"the line names deployed action {line.deployed_action}, the "
                        f"decision ({where}) logged {record.logged.action}")
            if record.shadow is not None:
                first = record.shadow.source.line if record.shadow.source else "?"
                return "shadow_duplicates", f"the decision ({where}) already has a shadow line (line {first})"
            return record
        return "shadow_inputs_mismatch", f"the decision with {where} had other inputs (inputs hash differs)"

    def _join(self, record: DecisionRecord, line: ShadowDecisionLine, source: SourceRef) -> None:
        record.shadow = ShadowDecision(**line.outcome(), timestamp=line.timestamp, source=source)
        report = self.ctx.report
        report.add("shadow_joined")
        report.tally("shadow_statuses", line.status)
        shadowed, decided = epoch_seconds(line.timestamp), epoch_seconds(record.timestamp)
        if shadowed is not None and decided is not None and shadowed < decided:
            report.add("shadow_clock_backwards")

    def finish(self, decided_runs: set[str]) -> None:
        """Quarantine the lines of runs that have no decision at all."""
        spool, file = self.spool, self.file
        for run_id in spool.groups():  # type: ignore[union-attr]
            if run_id in decided_runs:
                continue
            for text in spool.read_group(run_id):  # type: ignore[union-attr]
                number, raw, data = json.loads(text)
                line = ShadowDecisionLine.model_validate_json(data)
                self._reject(file, number, "shadow_unmatched", f"no decision in the log has run {line.run_id}", raw)
