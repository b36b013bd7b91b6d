"""Pass two of the Full Auto import: join each run's raw lines, side labels and shadows, then label each thread's
decisions along its timeline, in shards that survive an interruption.

Pass one (`guidebench.data.fullauto`) reads the whole decisions file: duplicates are found across all of it, so
it is not sharded, and it spools the decisions, raw lines and side labels by run. Pass two is where a thread's
records meet its events and the labeling rules, and threads are independent of each other: batches of whole
threads (about `RECORDS_PER_SHARD` decisions each, in the order one pass takes them) are the units of
`guidebench.data.shards`, which keeps each batch's records, counts and side-quarantine lines in a shard beside the
output, runs the batches in `--num-proc` processes and merges them in order. An import killed during pass two
reads the decisions again (pass one) and labels only the threads no finished shard holds; a shard's fingerprint
names the three log files, the run and event files of its threads and the labeling rules, so a changed file is
read again. The dataset, report and quarantines are those one pass gives (tests/guidebench/data/test_fullauto_
shards.py). A workspace with a shadow sidecar is labeled in one pass: its join keeps state across runs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from pydantic import ValidationError

from runtime.fullauto import ORPHAN_RUN, RunEvent, f32_shortest
from runtime.records import DecisionRecord, LMUsage

from guidebench.errors import refused_write
from guidebench.data.labels import LabelRuleConfig, SideLabel, epoch_seconds, label_run
from guidebench.data.registry import ImportContext
from guidebench.data.shards import Unit, run_shards
from guidebench.data.spool import GroupedSpool

SAFE_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
RECORDS_PER_SHARD = 2000  # about 65 shards at 100x the sample: a resume loses little, a shard costs little


def _read_events(ctx: ImportContext, runs_dir: Path, run_id: str) -> list[RunEvent]:
    if not SAFE_RUN_ID.match(run_id):
        return []
    path = runs_dir / f"{run_id}_events.jsonl"
    if not path.is_file():
        return []
    ctx.report.add("runs_with_events")
    events: list[RunEvent] = []
    try:
        # events are only read for labeling, never stored: no redaction needed, no bar per file
        for _line, event, _obj in ctx.model_lines(path, RunEvent, side_counter="events_quarantined", redact=False):
            events.append(event)
    except OSError as exc:
        side_file_unreadable(ctx, path, exc)
    ctx.report.add("events_lines", len(events))
    return events


def side_file_unreadable(ctx: ImportContext, file: Path, exc: OSError) -> None:
    if refused_write(exc):  # a full disk ends the import: the rest of the file is not the file's to lose
        raise exc
    ctx.report.add("side_files_unreadable")
    ctx.report.note(f"{file}: cannot read: {exc.strerror or exc}")


def _usage_of(raw_prediction: Any) -> Optional[LMUsage]:
    """Token usage of the call, from the writer's `raw_prediction` object (`{data, lm_usage}`)."""
    usage = raw_prediction.get("lm_usage") if isinstance(raw_prediction, dict) else None
    if not isinstance(usage, dict):
        return None
    try:
        return LMUsage.model_validate({key: value for key, value in usage.items() if key != "provider_usage"})
    except ValidationError:
        return None


def _diagnostics_f32(diagnostics: Any) -> Any:
    # The diagnostics struct is nested as a JSON value: its f32 comes widened (0.800000011920929 -> 0.8).
    if isinstance(diagnostics, dict) and isinstance(diagnostics.get("confidence_parsed"), float):
        value = diagnostics["confidence_parsed"]
        return {**diagnostics, "confidence_parsed": f32_shortest(value) if math.isfinite(value) else value}
    return diagnostics


def _join_raw(ctx: ImportContext, records: list[DecisionRecord], raw_lines: list[dict[str, Any]]) -> None:
    """Attach each raw line to its decision: by (sequence_id, turn_id), else by sequence_id within a real run.

    Orphan decisions (run id "unknown") all have sequence_id 0, so only the turn id tells them apart.
    """
    by_key: dict[tuple[int, str], dict[str, Any]] = {}
    for raw in raw_lines:
        key = (raw["sequence_id"], raw["turn_id"])
        if key in by_key:
            ctx.report.add("raw_duplicates")
            continue
        by_key[key] = raw
    by_sequence = {sequence: raw for (sequence, _turn), raw in by_key.items()}
    for record in records:
        raw = by_key.pop((record.sequence_id, record.turn_id), None)
        if raw is None and record.run_id != ORPHAN_RUN:
            candidate = by_sequence.get(record.sequence_id)
            if candidate is not None and by_key.pop((candidate["sequence_id"], candidate["turn_id"]), None):
                raw = candidate
        if raw is not None:
            record.raw_prediction = raw["raw_prediction"]
            record.parse_diagnostics = _diagnostics_f32(raw["parse_diagnostics"])
            record.usage = record.usage or _usage_of(raw["raw_prediction"])
            ctx.report.add("raw_joined")
    ctx.report.add("raw_unmatched", len(by_key))


def _side_labels(ctx: ImportContext, records: list[DecisionRecord], lines: list[SideLabel]) -> None:
    # (sequence_id, turn_id) first: orphan decisions all have sequence_id 0, only their turn tells them apart
    by_pair = {(item.sequence_id, item.turn_id): item for item in lines
               if item.sequence_id is not None and item.turn_id}
    by_sequence = {item.sequence_id: item for item in lines if item.sequence_id is not None}
    by_turn = {item.turn_id: item for item in lines if item.turn_id}
    used: set[int] = set()
    for record in records:
        side = (by_pair.get((record.sequence_id, record.turn_id))
                or (by_sequence.get(record.sequence_id) if record.run_id != ORPHAN_RUN else None)
                or by_turn.get(record.turn_id))
        if side is None:
            continue
        used.add(id(side))
        if record.label is None:
            record.label = side.label
            ctx.report.add("labels_applied")
    ctx.report.add("labels_unmatched", len([item for item in lines if id(item) not in used]))


AttachShadows = Callable[[str, list[DecisionRecord]], None]


def _run_records(ctx: ImportContext, spool: GroupedSpool, raw: GroupedSpool, labels: GroupedSpool,
                 run_id: str, use_side_labels: bool, shadows: Optional[AttachShadows] = None) -> list[DecisionRecord]:
    """One run's records, ordered, with their raw lines, side labels and shadow lines joined."""
    records = [DecisionRecord.model_validate_json(text) for text in spool.read_group(run_id)]
    records.sort(key=lambda r: (r.sequence_id, r.source.line if r.source else 0))
    _join_raw(ctx, records, [json.loads(text) for text in raw.read_group(run_id)])
    if use_side_labels:
        _side_labels(ctx, records, [SideLabel.model_validate_json(text) for text in labels.read_group(run_id)])
    if shadows is not None:
        shadows(run_id, records)
    return records


def _timeline_key(record: DecisionRecord) -> tuple[float, int, int]:
    moment = epoch_seconds(record.timestamp)
    return (moment if moment is not None else math.inf, record.sequence_id, record.source.line if record.source else 0)


def _threads(spool: GroupedSpool, orphans: list[DecisionRecord]) -> dict[str, list[str]]:
    """The runs of each thread (a pause or stop ends a run; re-enabling starts a new one on the thread)."""
    threads: dict[str, list[str]] = {}
    for run_id in spool.groups():
        if run_id == ORPHAN_RUN:
            continue
        first = next(iter(spool.read_group(run_id)))
        threads.setdefault(json.loads(first)["thread_id"], []).append(run_id)
    for record in orphans:
        threads.setdefault(record.thread_id, [])
    return threads


def _tally(ctx: ImportContext, record: DecisionRecord) -> None:
    report = ctx.report
    if record.label is None:
        report.add("unlabeled")
        report.tally("label_sources", "(unlabeled)")
    else:
        report.add("labeled")
        report.tally("label_sources", record.label.source)
    if record.logged is not None:
        report.tally("logged_actions", record.logged.action)
        report.tally("model_actions", record.logged.model_action)
    rule = record.guardrail.rule if record.guardrail and record.guardrail.triggered else None
    report.tally("guardrail_rules", (rule or "(none fired)") if record.guardrail else "(no audit)")


@dataclass(frozen=True)
class SpoolView:
    """A spool's file and group offsets, to be read in place by another process (`GroupedSpool.adopt`)."""

    path: Path
    offsets: dict[str, Sequence[int]]

    @classmethod
    def of(cls, spool: GroupedSpool) -> "SpoolView":
        """The view of a spool's own lines (flushed to its file)."""
        return cls(spool.path, spool.index())

    def open(self, folder: Path, name: str, groups: Iterable[str]) -> GroupedSpool:
        """A spool reading these groups' lines (its own, empty file in `folder`)."""
        spool = GroupedSpool(folder / f"view-{name}.jsonl")
        spool.adopt(self.path, {group: self.offsets[group] for group in groups if group in self.offsets})
        return spool


@dataclass
class Threads:
    """What labels threads: the spooled runs, the joined orphan decisions by thread, the rules; `batches` holds each
    shard's (thread id, run ids). Pickled to `datasets`' worker processes as a shard's `work`."""

    runs_dir: Path
    decisions: SpoolView
    raw: SpoolView
    labels: SpoolView
    orphans: dict[str, list[str]]  # thread id -> its orphan decisions (JSON, joined already), in log order
    batches: list[list[tuple[str, list[str]]]]
    rules: LabelRuleConfig
    use_side_labels: bool

    def __call__(self, ctx: ImportContext, unit: Unit) -> None:
        batch = self.batches[unit.index]
        runs = [run_id for _thread, run_ids in batch for run_id in run_ids]
        spools = [view.open(ctx.workdir, name, runs) for name, view in
                  (("decisions", self.decisions), ("raw", self.raw), ("labels", self.labels))]
        try:
            orphans_of = {thread: [DecisionRecord.model_validate_json(text) for text in self.orphans[thread]]
                          for thread, _runs in batch if thread in self.orphans}
            label_threads(ctx, self.runs_dir, *spools, batch, orphans_of, self.rules,
                          self.use_side_labels)
        finally:
            for spool in spools:
                spool.close()


def label_threads(ctx: ImportContext, runs_dir: Path, spool: GroupedSpool, raw: GroupedSpool, labels: GroupedSpool,
                  threads: list[tuple[str, list[str]]], orphans_of: dict[str, list[DecisionRecord]],
                  rules: LabelRuleConfig, use_side_labels: bool, shadows: Optional[AttachShadows] = None,
                  progress: Any = None) -> None:
    """Label and emit the decisions of these threads, each along its timeline with its runs' events."""
    for thread_id, run_ids in threads:
        records = [record for run_id in run_ids
                   for record in _run_records(ctx, spool, raw, labels, run_id, use_side_labels, shadows)]
        records += orphans_of.get(thread_id, [])
        records.sort(key=_timeline_key)
        events = [event for run_id in run_ids for event in _read_events(ctx, runs_dir, run_id)]
        for record, label in zip(records, label_run(records, events, rules)):
            record.label = label
            _tally(ctx, record)
            ctx.emit(record)
        if progress is not None:
            progress.update(1)


def _no_start(ctx: ImportContext) -> None:
    """Nothing to set up in a shard: the counts it adds are declared by pass one."""


def _batches(spool: GroupedSpool, threads: dict[str, list[str]],
             orphans_of: dict[str, list[DecisionRecord]]) -> list[list[tuple[str, list[str]]]]:
    """Consecutive threads in batches of about RECORDS_PER_SHARD decisions (a thread is never split)."""
    batches: list[list[tuple[str, list[str]]]] = [[]]
    size = 0
    for thread_id, run_ids in threads.items():
        if size >= RECORDS_PER_SHARD:
            batches.append([])
            size = 0
        batches[-1].append((thread_id, run_ids))
        size += sum(spool.size(run_id) for run_id in run_ids) + len(orphans_of.get(thread_id, ()))
    return batches


def _units(ctx: ImportContext, files: tuple[Path, ...], runs_dir: Path,
           batches: list[list[tuple[str, list[str]]]]) -> list[Unit]:
    """One unit a batch: what its shard depends on is the logs, its runs' files and the labeling rules."""
    rules = ctx.options.get("label_rules")
    extra = (Path(rules),) if isinstance(rules, (str, Path)) else ()
    units = []
    for index, batch in enumerate(batches):
        runs = [runs_dir / f"{run_id}{suffix}" for _thread, run_ids in batch for run_id in run_ids
                if SAFE_RUN_ID.match(run_id) for suffix in (".json", "_events.jsonl")]
        units.append(Unit(index=index, files=files, reads=(*files, *extra, *runs)))
    return units


def pass_two(ctx: ImportContext, files: tuple[Path, ...], runs_dir: Path, spool: GroupedSpool, raw: GroupedSpool,
             labels: GroupedSpool, rules: LabelRuleConfig, shadows: Optional[AttachShadows] = None,
             scope: str = "") -> None:
    """Join raw lines and labels run by run, then label each thread's decisions along its timeline.

    "What happened next" after a pause or stop is in the next run of the same thread (formats.md
    §1.4.1), so the labeling rules see all of a thread's runs (and its orphan decisions) in time order,
    with the events of those runs. Without `shadows` the threads are labeled in shards (the module docstring);
    `files` are the workspace's logs and `scope` tells its shards from another workspace's.
    """
    use_side_labels = not ctx.options.get("ignore_side_labels", False)
    orphans = (_run_records(ctx, spool, raw, labels, ORPHAN_RUN, use_side_labels, shadows)
               if spool.size(ORPHAN_RUN) else [])
    threads = _threads(spool, orphans)
    orphans_of: dict[str, list[DecisionRecord]] = {}  # a thread's orphans, in log order (not a scan per thread)
    for record in orphans:
        orphans_of.setdefault(record.thread_id, []).append(record)
    if shadows is not None:
        with ctx.bar(len(threads), "label threads", unit="thread") as progress:
            label_threads(ctx, runs_dir, spool, raw, labels, list(threads.items()), orphans_of, rules,
                          use_side_labels, shadows, progress)
    else:
        batches = _batches(spool, threads, orphans_of)
        work = Threads(runs_dir, SpoolView.of(spool), SpoolView.of(raw), SpoolView.of(labels),
                       {thread: [record.model_dump_json() for record in records]
                        for thread, records in orphans_of.items()}, batches, rules, use_side_labels)
        run_shards(ctx, "fullauto", _units(ctx, files, runs_dir, batches), start=_no_start, work=work,
                   num_proc=ctx.num_proc, scope=scope)
    for run_id in raw.groups():
        if spool.size(run_id) == 0:
            ctx.report.add("raw_unmatched", raw.size(run_id))
    for run_id in labels.groups():
        if spool.size(run_id) == 0 and use_side_labels:
            ctx.report.add("labels_unmatched", labels.size(run_id))


__all__ = ["RECORDS_PER_SHARD", "SAFE_RUN_ID", "SpoolView", "Threads", "label_threads", "pass_two",
           "side_file_unreadable"]
