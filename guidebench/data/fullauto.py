"""Import Full Auto decision logs (formats.md §1.4) into decision records.

PATH is a workspace folder (`fullauto-decisions.jsonl`, optional `fullauto-decisions-raw.jsonl`,
`runs/<run_id>.json`, `runs/<run_id>_events.jsonl`, and our own `labels.jsonl`), a folder
holding several workspaces, or one decisions JSONL file (its folder is then the workspace).

Pass 1 streams the decisions file: every line is validated as `runtime.DecisionLogLine`, joined
with its run file for the guardrail config in force (defaults when the file is missing or
unreadable, counted in `runs_missing_config`), deduplicated by inputs hash (summary + config),
and spooled to disk grouped by run. Decisions of run id "unknown" (made after the writer had
dropped their run) are their own orphan group, counted in `orphan_decisions`, not in `runs`.
Pass 2 (`guidebench.data.fullauto_threads`) takes one run at a time: joins the raw lines by (run_id, sequence_id),
reads the run's events, applies labels (see `guidebench.data.labels`) and emits the records, thread by thread in
shards that a killed import resumes from (`guidebench.data.shards`, `--num-proc`). The dataset splits them by
thread (`evals.data.group_of`: a thread's runs and its orphan decisions stay together). Only the primary decisions
file counts in `read`; unusable lines of side files go to `quarantine-side.jsonl` with their own counts. A workspace's shadow sidecar
(`shadow-decisions.jsonl`) is joined run by run too (`guidebench.data.shadow`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from pydantic import ValidationError

from runtime.fullauto import (
    DecisionLogLine,
    FullAutoTurnSummary,
    GuardrailConfig,
    RawDecisionLogLine,
    RunFile,
)
from runtime.fullauto import ORPHAN_RUN
from runtime.records import DecisionRecord, LoggedDecision, OutcomeLabel, SourceRef, inputs_hash

from guidebench.errors import GuidebenchError, refused_write
from guidebench.data.ingest import parse_json_object, validation_error_text
from guidebench.data.fullauto_threads import SAFE_RUN_ID, pass_two, side_file_unreadable
from guidebench.data.labels import LabelRuleConfig, SideLabel
from guidebench.data.redaction import might_hold_secret
from guidebench.data.registry import ImportContext, register_importer
from guidebench.data.shadow import ShadowJoin, judged_module
from guidebench.data.spool import GroupedSpool

DECISIONS_FILE = "fullauto-decisions.jsonl"
RAW_FILE = "fullauto-decisions-raw.jsonl"
RUNS_DIR = "runs"
LABELS_FILE = "labels.jsonl"
MAX_RUN_FILE_BYTES = 1024 * 1024
_RAW_KEYS = ("raw_prediction", "parse_diagnostics")


@dataclass(frozen=True)
class Workspace:
    """One workspace's log files."""

    root: Path
    decisions: Path
    raw: Optional[Path]
    labels: Optional[Path]

    @property
    def runs_dir(self) -> Path:
        """The folder of run files and event files."""
        return self.root / RUNS_DIR


def _workspace(root: Path, decisions: Path) -> Workspace:
    raw = root / RAW_FILE
    labels = root / LABELS_FILE
    return Workspace(root, decisions,
                     raw if raw.is_file() and raw.resolve() != decisions.resolve() else None,
                     labels if labels.is_file() else None)


def find_workspaces(path: Path) -> list[Workspace]:
    """The workspaces under PATH (a decisions file, a workspace folder, or a folder of them)."""
    if path.is_file():
        return [_workspace(path.parent, path)]
    if (path / DECISIONS_FILE).is_file():
        return [_workspace(path, path / DECISIONS_FILE)]
    if path.exists() and not path.is_dir():
        raise GuidebenchError(f"{path}: not a regular file or folder (give a workspace log folder or a decisions "
                              "JSONL file)")
    candidates = sorted(path.rglob(DECISIONS_FILE))
    found = [file for file in candidates if file.is_file()]
    if not found:
        folders = [file for file in candidates if file.is_dir()]
        if folders:
            raise GuidebenchError(f"{folders[0]}: is a directory; expected the decisions JSONL file")
        raise GuidebenchError(f"{path}: no {DECISIONS_FILE} found (give a workspace log folder or a decisions "
                              "JSONL file)")
    return [_workspace(file.parent, file) for file in found]


def _guardrail_fields(obj: Any) -> Optional[GuardrailConfig]:
    """The guardrail config of a run file that fails its contract elsewhere, if those four fields are sound."""
    if not isinstance(obj, dict) or not all(key in obj for key in ("min_confidence", "max_turns", "no_progress_limit")):
        return None
    try:
        return GuardrailConfig.model_validate({key: obj.get(key) for key in GuardrailConfig.model_fields}, strict=True)
    except ValidationError:
        return None


class RunConfigs:
    """The guardrail config of each run from `runs/<run_id>.json`, loaded once per run."""

    def __init__(self, ctx: ImportContext, workspace: Workspace) -> None:
        self._ctx = ctx
        self._workspace = workspace
        self._cache: dict[str, tuple[GuardrailConfig, str]] = {}

    def _load(self, run_id: str) -> tuple[GuardrailConfig, str]:
        if not SAFE_RUN_ID.match(run_id):
            self._ctx.report.note(f"run id {run_id[:80]!r} is not a safe file name: no run file looked up")
            return GuardrailConfig(), "default"
        path = self._workspace.runs_dir / f"{run_id}.json"
        if not path.is_file():
            return GuardrailConfig(), "default"
        error, raw, obj = None, "", None
        try:
            if path.stat().st_size > MAX_RUN_FILE_BYTES:
                raise ValueError(f"run file larger than {MAX_RUN_FILE_BYTES} bytes")
            data = path.read_bytes()
            raw = data.decode("utf-8", errors="backslashreplace")
            obj, error = parse_json_object(data.decode("utf-8"))
            if obj is not None:
                run = RunFile.model_validate(obj)
                if run.run_id != run_id:
                    self._ctx.report.note(f"{path}: run_id {run.run_id!r} differs from the file name; used anyway")
                return run.guardrail_config(), "run_file"
        except ValidationError as exc:
            error = validation_error_text(exc)
            partial = _guardrail_fields(obj)
            if partial is not None:
                self._ctx.side_problem("run_files_invalid", path, 1,
                                       f"run file breaks the contract, its guardrail fields are used: {error}",
                                       self._ctx.redactor.text(raw[:4096]))
                return partial, "run_file_partial"
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            error = str(exc)
        self._ctx.side_problem("run_files_invalid", path, 1, f"run file unusable, defaults used: {error}",
                               self._ctx.redactor.text(raw[:4096]))
        return GuardrailConfig(), "default"

    def config_for(self, run_id: str) -> tuple[GuardrailConfig, str]:
        """(config, "run_file" | "default") for a run."""
        if run_id not in self._cache:
            self._cache[run_id] = self._load(run_id)
        return self._cache[run_id]


def _line_label(obj: dict[str, Any]) -> tuple[Optional[OutcomeLabel], Optional[str]]:
    value = obj.get("label")
    if value is None:
        return None, None
    try:
        return OutcomeLabel.model_validate(value), None
    except ValidationError as exc:
        return None, validation_error_text(exc, prefix="label")


def _record(line: DecisionLogLine, config: GuardrailConfig, config_source: str, label: Optional[OutcomeLabel],
            source: SourceRef) -> DecisionRecord:
    logged = LoggedDecision(action=line.action, confidence=line.confidence, model_action=line.model_action(),
                            model_confidence=line.model_confidence(), reason=line.reason,
                            next_input_preview=line.next_input_preview, state=line.state)
    # the logged summary is validated already: build the plain shape without validating it twice
    summary = FullAutoTurnSummary.model_construct(**{name: getattr(line.summary, name)
                                                     for name in FullAutoTurnSummary.model_fields})
    return DecisionRecord.build(summary, config, run_id=line.run_id, workspace_id=line.workspace_id,
                                thread_id=line.thread_id, turn_id=line.turn_id, sequence_id=line.sequence_id,
                                timestamp=line.timestamp, config_source=config_source, logged=logged,
                                guardrail=line.guardrail, model=line.model, label=label, source=source)


def _has_label_key(text: str) -> bool:
    """A decision line of our own format may carry a `label` object (read from the parsed dict)."""
    return '"label"' in text


# A JSON number overflows a double (and validates as infinity from JSON text) only with an exponent of three digits
# or more, or with a run of 19 digits or more (`might_overflow`: those lines go down the strict path already). A raw
# line whose text holds no such exponent needs no walk of its free-form values; one that does is read strictly,
# whose parser refuses the overflow and names the number.
_BIG_EXPONENT = re.compile(r"[:,\[]\s*-?[0-9]+(?:\.[0-9]+)?[eE][+-]?[0-9]{3}")


def _may_overflow_float(text: str) -> bool:
    return _BIG_EXPONENT.search(text) is not None


def _pass_one(ctx: ImportContext, workspace: Workspace, seen: set[bytes], spool: GroupedSpool,
              unredacted: Optional[dict[str, str]] = None) -> None:
    """Validate, join configs, deduplicate and spool the decision lines of one workspace (`unredacted`: collects
    the inputs hash each redacted decision had before redaction, which its shadow line names)."""
    try:
        _read_decisions(ctx, workspace, seen, spool, unredacted)
    except OSError as exc:  # e.g. no read permission: nothing of this file can be trusted to be complete
        if refused_write(exc):  # the spool or the quarantine could not be written: not the log's fault
            raise
        raise GuidebenchError(f"{workspace.decisions}: cannot read: {exc.strerror or exc}") from exc


def _unredacted_hash(text: str, config: GuardrailConfig) -> Optional[str]:
    """The inputs hash of a decision line as written, before redaction (None when it does not read)."""
    try:
        summary = DecisionLogLine.model_validate_json(text).summary
    except (ValidationError, ValueError):
        return None
    return inputs_hash(summary.as_turn_summary(), config)


def _read_decisions(ctx: ImportContext, workspace: Workspace, seen: set[bytes], spool: GroupedSpool,
                    unredacted: Optional[dict[str, str]]) -> None:
    configs = RunConfigs(ctx, workspace)
    source_name = ctx.relative(workspace.decisions)
    for line, logged, obj in ctx.model_lines(workspace.decisions, DecisionLogLine, desc="decisions",
                                             needs_dict=_has_label_key):
        label, error = _line_label(obj) if obj is not None else (None, None)
        if error:
            ctx.reject(workspace.decisions, line, error)
            continue
        # an orphan decision has no run file (the writer had dropped the run): defaults, never looked up
        config, config_source = ((GuardrailConfig(), "default") if logged.run_id == ORPHAN_RUN
                                 else configs.config_for(logged.run_id))
        try:
            record = _record(logged, config, config_source, label, SourceRef(file=source_name, line=line.number))
            text = record.model_dump_json()
        except (UnicodeEncodeError, ValueError) as exc:  # e.g. an unpaired \ud83d escape UTF-8 cannot store
            ctx.reject(workspace.decisions, line, f"text cannot be stored as UTF-8: {str(exc)[:200]}")
            continue
        if unredacted is not None and obj is not None and might_hold_secret(line.text or ""):
            original = _unredacted_hash(line.text or "", config)
            if original is not None and original != record.inputs_hash:
                unredacted[record.inputs_hash] = original
        digest = bytes.fromhex(record.inputs_hash)
        if digest in seen:
            ctx.report.add("duplicates")
            continue
        seen.add(digest)
        spool.append(record.run_id, text)
    for run_id in spool.groups():
        if run_id == ORPHAN_RUN:  # decisions made after their run state was dropped: no run, no run file
            ctx.report.add("orphan_decisions", spool.size(run_id))
            continue
        ctx.report.add("runs")
        config_source = configs.config_for(run_id)[1]
        ctx.report.tally("config_sources", config_source)
        if config_source == "default":
            ctx.report.add("runs_missing_config")


def _side_spool(ctx: ImportContext, file: Optional[Path], counter: str, model: type, spool: GroupedSpool,
                needs_dict: Optional[Callable[[str], bool]] = None) -> None:
    """Validate the lines of a side file (raw or labels) and spool them by run id (`needs_dict`: which lines
    to read strictly, see `ImportContext.model_lines`)."""
    if file is None:
        return
    quarantined = f"{counter}_quarantined"
    before = ctx.report.count(quarantined)
    usable = 0
    try:
        for _line, item, _obj in ctx.model_lines(file, model, side_counter=quarantined, desc=file.name,
                                                 needs_dict=needs_dict):
            usable += 1
            spool.append(item.run_id, item.model_dump_json())
    except OSError as exc:  # the lines read so far are used; the rest of the side file is lost, and said so
        side_file_unreadable(ctx, file, exc)
    # every non-blank line of the side file: usable + quarantined
    ctx.report.add(f"{counter}_lines", usable + ctx.report.count(quarantined) - before)



def label_rules_from(value: Any) -> LabelRuleConfig:
    """Labeling-rule config from None, a dict, a LabelRuleConfig or a JSON file path."""
    if value is None:
        return LabelRuleConfig()
    if isinstance(value, LabelRuleConfig):
        return value
    if isinstance(value, dict):
        return LabelRuleConfig.model_validate(value)
    path = Path(value)
    try:
        return LabelRuleConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GuidebenchError(f"{path}: cannot read the labeling rules: {exc.strerror}") from exc
    except ValidationError as exc:
        raise GuidebenchError(f"{path}: {validation_error_text(exc)}") from exc


def import_fullauto(ctx: ImportContext) -> None:
    """Importer of kind `fullauto` (see the module docstring)."""
    rules = label_rules_from(ctx.options.get("label_rules"))
    shadow_join = ShadowJoin(ctx, judged_module(ctx.options.get("shadow_module")))
    seen: set[bytes] = set()
    for key in ("runs", "runs_missing_config", "orphan_decisions", "labeled", "unlabeled"):
        ctx.report.add(key, 0)
    for index, workspace in enumerate(find_workspaces(ctx.path)):
        with GroupedSpool(ctx.workdir / f"decisions-{index}.jsonl") as spool, \
                GroupedSpool(ctx.workdir / f"raw-{index}.jsonl") as raw, \
                GroupedSpool(ctx.workdir / f"labels-{index}.jsonl") as labels, \
                GroupedSpool(ctx.workdir / f"shadow-{index}.jsonl") as shadow:
            shadowed = shadow_join.begin(workspace.root, shadow)
            _pass_one(ctx, workspace, seen, spool, shadow_join.unredacted if shadowed else None)
            _side_spool(ctx, workspace.raw, "raw", RawDecisionLogLine, raw,
                        needs_dict=_may_overflow_float)
            _side_spool(ctx, workspace.labels, "labels", SideLabel, labels)
            if shadowed:
                shadow_join.read()
            pass_two(ctx, tuple(file for file in (workspace.decisions, workspace.raw, workspace.labels) if file),
                     workspace.runs_dir, spool, raw, labels, rules, shadow_join.attach if shadowed else None,
                     scope=f"ws{index:04d}-")
            if shadowed:
                shadow_join.finish(set(spool.groups()))


register_importer("fullauto", import_fullauto)
