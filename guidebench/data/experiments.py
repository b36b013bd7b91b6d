"""Import loop-runner experiment logs (formats.md §2.1) as planner records, one per iteration.

PATH is one `log.jsonl` or a folder of them (every `*.jsonl` below it, one episode per file,
in sorted path order; files under dot-folders or under the output folder are skipped). Both the
full and the older short shape are read. Each line is streamed, parsed strictly, redacted and
validated as `runtime.ExperimentLogEntry`; a failing line is quarantined with the field named.
A line that repeats an earlier line byte for byte is an entry like any other, as the runner reads it
(its record id differs by line number); nothing is dropped as a duplicate.

Every imported entry becomes a `PlannerRecord`: the packet rebuilt from the episode's imported
entries before it (`planner_packets.PacketBuilder`) and the entry itself as the outcome. A side
file `<name>.sim.jsonl` next to `<name>.jsonl` (written by `guidebench data simulate experiments`)
(its first line a header with `format` and `episode_id`, then one line per iteration) gives the
episode id, the goal and threshold target, and the performance profile before each iteration;
an unusable line goes to the side quarantine (counted in `side_lines_invalid`) and the packets it
would have informed are built without it.

The loop runner's planner archive (`.advisor/` of the log's repository: `<repo>/.advisor` for
`<repo>/experiments/log.jsonl`, or beside the log) gives the packet the planner really saw and the directive it
answered: `guidebench.data.planner_archive` reads it, `guidebench.data.archive_join` joins each plan to its log
line (or quarantines it with its reason), and the record keeps the archived packet instead of the rebuilt one
(`PlannerRecord.plan`); the rebuilt packet is still computed, and compared with the archived one field by field.

The logs are read in shards (`guidebench.data.shards`): one log a shard, or the logs of one repository (they share
its `.advisor/` archive) with every log between them, so an interrupted import resumes from its finished shards and
`num_proc` processes can read them; merged in file order, they give what one pass over the files gives.

Counts added to the report: `files` (logs read), `episodes` (logs with at least one imported
entry), `entries` (imported), `old_shape`, `new_shape`, `side_files`, `profiles` (packets with a
performance profile), `files_unreadable` (logs the OS would not let us read, or that lead out of the imported
folder or are no regular file: never opened; named in `notes`), `side_files_unusable` (side files refused the same
way). Nothing outside the imported folder is read (`guidebench.data.workspace`).
Without a side file the goal and threshold come from the log (`planner_packets.GoalEvidence`, a first
pass over its lines); `distributions.goal_sources` counts how each packet's goal was found, and a note
names the lines whose threshold target is inferred.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from guidebench.simulators.experiments import SIDE_FILE_FORMAT, SIDE_FILE_SUFFIX, SimulatedEpisode, write_episodes
from runtime.advisor import ExperimentLogEntry, PerformanceProfile
from runtime.records import PlannerRecord, SourceRef, canonical_json, sha256_hex

from guidebench.errors import GuidebenchError, refused_write
from guidebench.data import archive_join
from guidebench.data.archive_join import RecordArchive
from guidebench.data.ingest import validation_error_text
from guidebench.data.planner_packets import GoalEvidence, PacketBuilder, PacketOverflow, runner_packets, strict_int
from guidebench.data.planner_archive import advisor_folder_of, archive_files
from guidebench.data.planner_sidecar import SidecarJoin, is_sidecar, sidecar_of
from guidebench.data.redaction import PatternRedactor, might_hold_secret
from guidebench.data.registry import ImportContext, SimulatorSpec, register_importer, register_simulator
from guidebench.data.shards import Unit, run_shards
from guidebench.data.workspace import Workspace, workspace_root

KIND = "experiments"


@dataclass(frozen=True)
class IterationSide:
    """What the side file says about the packet before one iteration."""

    goal: str = "best"
    threshold_target: Optional[int] = None
    profile: Optional[PerformanceProfile] = None


@dataclass
class EpisodeSide:
    """An episode's side file: its id and per-iteration packet facts."""

    episode_id: Optional[str] = None
    iterations: dict[int, IterationSide] = field(default_factory=dict)


@dataclass
class InferredTargets:
    """The records of one episode whose threshold target is inferred: their count and first lines."""

    count: int = 0
    lines: list[int] = field(default_factory=list)
    SHOWN = 10

    def add(self, line: int) -> None:
        """Count one more record, at file line `line`."""
        self.count += 1
        if len(self.lines) < self.SHOWN:
            self.lines.append(line)

    def shown(self) -> str:
        """The lines for a note: the first few, "..." for the rest."""
        return ", ".join(map(str, self.lines)) + (", ..." if self.count > len(self.lines) else "")


def is_side_file(file: Path) -> bool:
    """Side files (`*.sim.jsonl`, planner sidecars) sit next to the logs but are not episodes."""
    return file.name.endswith(SIDE_FILE_SUFFIX) or is_sidecar(file)


def episode_files(path: Path, exclude: Optional[Path] = None, refused: Optional[list[tuple[Path, str]]] = None
                  ) -> list[Path]:
    """The logs to import: PATH itself, or every `*.jsonl` below it (side files excluded) in sorted order. A log that
    leads out of the workspace (a link) or is no regular file (a FIFO) is left out, and added to `refused` with
    why: it is never opened."""
    if path.is_file():
        return [path]
    skip = exclude.resolve() if exclude is not None else None
    workspace = Workspace(workspace_root(path))
    found = []
    for file in path.rglob("*.jsonl"):
        rel = file.relative_to(path)
        if is_side_file(file) or any(part.startswith(".") for part in rel.parts[:-1]):
            continue
        if skip is not None and file.resolve().is_relative_to(skip):
            continue
        why = workspace.refusal(file, limit=None)
        if why is not None:
            if refused is not None and why.reason != "missing":
                refused.append((file, why.reason))
            continue
        found.append(file)
    return sorted(found, key=lambda f: f.relative_to(path).as_posix())


def side_file_of(log: Path) -> Path:
    """Where the side file of a log lives: `log.jsonl` -> `log.sim.jsonl`."""
    return log.with_name(log.stem + SIDE_FILE_SUFFIX)


def _iteration_side(item: dict[str, Any]) -> tuple[Optional[int], IterationSide, Optional[str]]:
    """(iteration id, side facts, error) of one iteration line; never raises."""
    iteration_id = strict_int(item.get("iteration_id"))
    if iteration_id is None:
        return None, IterationSide(), "iteration_id: missing or not an integer"
    goal = "threshold" if item.get("goal") == "threshold" else "best"
    target = strict_int(item.get("threshold_target")) if goal == "threshold" else None
    profile = None
    if item.get("performance_profile") is not None:
        try:
            profile = PerformanceProfile.model_validate(item["performance_profile"])
        except ValidationError as exc:
            return iteration_id, IterationSide(goal, target), validation_error_text(exc, "performance_profile")
    return iteration_id, IterationSide(goal, target, profile), None


def read_side_file(ctx: ImportContext, log: Path) -> Optional[EpisodeSide]:
    """The episode's side file, if there is one; unusable lines go to the side quarantine, never raise."""
    path = side_file_of(log)
    if not os.path.lexists(path):
        return None
    refused = Workspace(workspace_root(ctx.path)).refusal(path, limit=None)
    if refused is not None:  # a folder, a FIFO, a link out of the imported folder: never opened
        ctx.report.add("side_files_unusable")
        ctx.report.note(f"{ctx.display(path)}: {refused.reason}; the side file is not read")
        return None
    side: Optional[EpisodeSide] = None
    for line, obj in ctx.json_lines(path, side_counter="side_lines_invalid", desc=path.name):
        if side is None:
            if obj.get("format") != SIDE_FILE_FORMAT:
                ctx.side_problem("side_lines_invalid", path, line.number,
                                 f"format: expected {SIDE_FILE_FORMAT!r} in the first line, got "
                                 f"{obj.get('format')!r}; side file ignored", line.raw)
                return None
            episode_id = obj.get("episode_id")
            side = EpisodeSide(episode_id=episode_id if isinstance(episode_id, str) and episode_id else None)
            continue
        iteration_id, facts, error = _iteration_side(obj)
        if error is not None:
            ctx.side_problem("side_lines_invalid", path, line.number, error, line.raw)
        if iteration_id is not None:
            side.iterations[iteration_id] = facts
    if side is not None:
        ctx.report.add("side_files")
    return side


def _digest(obj: dict[str, Any]) -> bytes:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).digest()


def _tail_line(text: str) -> str:
    """A file line as the runner's tail holds it: unchanged, but for secrets (never stored; counted once)."""
    text = text.rstrip("\r")
    return PatternRedactor().text(text) if might_hold_secret(text) else text


def goal_evidence(log: Path) -> GoalEvidence:
    """What the log says about the runner's goal and threshold (a cheap first pass over its lines)."""
    evidence = GoalEvidence()
    with log.open("rb") as handle:  # lines numbered by "\n", as the import pass numbers them
        for index, raw in enumerate(handle, start=1):
            if b"result_summary" not in raw and b"threshold_met" not in raw:
                continue
            try:
                obj = json.loads(raw.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):  # the import pass quarantines such a line
                continue
            if isinstance(obj, dict):
                evidence.see(index, obj)
    return evidence


def import_episode(ctx: ImportContext, log: Path) -> None:
    """Stream one episode's log into planner records."""
    report = ctx.report
    side = read_side_file(ctx, log)
    join = SidecarJoin.open(ctx, log)
    evidence = goal_evidence(log) if side is None else None
    episode_id = (side.episode_id if side is not None else None) or ctx.relative(log)
    builder = PacketBuilder()
    archive = RecordArchive(ctx, log)
    imported = 0
    inferred = InferredTargets()
    report.add("files")
    with log.open("rb") as lines:  # numbered as the importer numbers them: by "\n"
        raw_lines = enumerate(lines, start=1)
        for line, obj in ctx.json_lines(log, desc=ctx.relative(log)):
            # lines that are no object (blank, broken) are in the runner's tail too, never in its entries
            for number, text in raw_lines:
                if number == line.number:
                    break
                builder.add_line(_tail_line(text.decode("utf-8", errors="replace").rstrip("\n")))
            imported += _import_entry(ctx, log, line, obj, builder, side, evidence, episode_id, inferred, archive,
                                      join)
    if join is not None:
        join.finish()
    if imported:
        report.add("episodes")
    if inferred.count:
        report.note(f"{ctx.display(log)}: threshold target inferred for {inferred.count} record(s), lines "
                    f"{inferred.shown()}: the line met a threshold the log does not state (docs/import.md)")


def _import_entry(ctx: ImportContext, log: Path, line: Any, obj: dict[str, Any], builder: PacketBuilder,
                  side: Optional[EpisodeSide], evidence: Optional[GoalEvidence], episode_id: str,
                  inferred: InferredTargets, archive: RecordArchive, join: Optional[SidecarJoin] = None) -> int:
    """One object line: a planner record (1), or quarantined (0); the builder sees it either way."""
    report = ctx.report
    raw = _tail_line(line.text or "")
    try:
        entry = ExperimentLogEntry.model_validate(obj)
    except ValidationError as exc:
        ctx.reject(log, line, validation_error_text(exc))
        builder.add(obj, raw)  # the runner reads every object line, valid or not
        report.add("entries_seen_by_the_runner_only")
        return 0
    # A repeated line is still an entry: the runner reads every object line, so the packet after it counts it.
    digest = _digest(obj)
    if side is not None:
        facts = side.iterations.get(entry.iteration_id, IterationSide())
        source = "side_file" if entry.iteration_id in side.iterations else "side_file_missing"
    else:
        goal = evidence.goal_at(line.number)
        facts, source = IterationSide(goal.goal, goal.threshold_target), goal.source
    try:
        rebuilt = builder.packet(obj, goal=facts.goal, threshold_target=facts.threshold_target,
                                 profile=facts.profile)
        packet, plan = archive.packet_for(entry, rebuilt)
        record = PlannerRecord(
            record_id=sha256_hex(f"{episode_id}\n{line.number}\n{digest.hex()}")[:16],
            episode_id=episode_id, iteration_id=entry.iteration_id, packet=packet, outcome=entry,
            source=SourceRef(file=ctx.relative(log), line=line.number), plan=plan,
        )
    except (ValidationError, PacketOverflow) as exc:  # an entry the contract accepts but a packet cannot hold
        why = validation_error_text(exc) if isinstance(exc, ValidationError) else str(exc)
        ctx.reject(log, line, f"cannot build the planner record: {why}")
        builder.add(obj, raw)
        return 0
    ctx.emit(join.attach(record) if join is not None else record)
    builder.add(obj, raw)
    report.add("entries")
    report.add("new_shape" if entry.is_full_shape else "old_shape")
    report.add("profiles", int(packet.performance_profile is not None))
    report.add("packets_rebuilt" if plan is None else "packets_archived")
    report.tally("outcome_validity", "valid" if entry.valid else "invalid")
    report.tally("goals", packet.goal)
    report.tally("goal_sources", source if plan is None else "archive")
    if source == "target_inferred" and plan is None:
        inferred.add(line.number)
    return 1


def _start(ctx: ImportContext) -> None:
    """The counts every experiments report shows, in their order (0 until something happens)."""
    for name in ("files", "files_unreadable", "episodes", "entries", "old_shape", "new_shape", "side_files",
                 "side_lines_invalid", "profiles"):
        ctx.report.add(name, 0)
    archive_join.start(ctx)


def _import_unit(ctx: ImportContext, unit: Unit) -> None:
    """The episodes of one shard, in file order."""
    for log in unit.files:
        try:
            import_episode(ctx, log)
        except OSError as exc:  # lines read before the failure are counted; the rest of the file is lost
            if refused_write(exc):  # a full disk ends the import: the rest of the file is not the file's to lose
                raise
            ctx.report.add("files_unreadable")
            ctx.report.note(f"{ctx.display(log)}: cannot read: {exc.strerror or exc}")


def _reads(log: Path) -> list[Path]:
    """Every file importing `log` reads: the log, its side file and sidecar, its repository's archive."""
    advisor = advisor_folder_of(log)
    return [log, side_file_of(log), sidecar_of(log), *([advisor] if advisor is not None else [])]


def episode_units(files: list[Path], root: Optional[Path] = None) -> list[Unit]:
    """The logs in shards: each log alone, but logs that share an `.advisor/` archive (one repository's logs) in
    one shard, with every log between them, so that the shards in order read the files in their order. With the
    workspace `root`, a shard's stamps hold what its archive's packet and directive files hold (resolved through
    links), so a resumed import redoes a shard whose plan changed behind a link."""
    keys = [advisor_folder_of(log) or log for log in files]
    last = {key: position for position, key in enumerate(keys)}
    units: list[Unit] = []
    start = 0
    while start < len(files):
        end = last[keys[start]]
        position = start
        while position <= end:
            end = max(end, last[keys[position]])
            position += 1
        group = files[start:end + 1]
        folders = dict.fromkeys(folder for folder in (advisor_folder_of(log) for log in group) if folder is not None)
        stamps = tuple(stamp for folder in folders for stamp in archive_files(folder, root)) if root else ()
        units.append(Unit(index=len(units), files=tuple(group),
                          reads=tuple(dict.fromkeys(read for log in group for read in _reads(log))), stamps=stamps))
        start = end + 1
    return units


def import_experiments(ctx: ImportContext) -> None:
    """The `experiments` importer: every episode log under `ctx.path`, in shards (`guidebench.data.shards`)."""
    if not ctx.path.is_file() and not ctx.path.is_dir():
        raise GuidebenchError(f"{ctx.path}: not a regular file or folder (give a log.jsonl or a folder of them)")
    refused: list[tuple[Path, str]] = []
    files = episode_files(ctx.path, exclude=ctx.out, refused=refused)
    if not files:
        raise GuidebenchError(f"{ctx.path}: no *.jsonl experiment logs found"
                              + (f" ({len(refused)} refused: {refused[0][0]}: {refused[0][1]})" if refused else ""))
    _start(ctx)
    for file, why in refused:  # never opened: counted with the logs the OS would not let us read
        ctx.report.add("files_unreadable")
        ctx.report.note(f"{ctx.display(file)}: {why}; the log is not read")
    run_shards(ctx, KIND, episode_units(files, workspace_root(ctx.path)), start=_start, work=_import_unit,
               finish=archive_join.finish_plans, num_proc=ctx.num_proc)
    archive_join.note_agreement(ctx)


def _simulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--episodes", type=int, default=24, help="episodes to write (default 24)")
    parser.add_argument("--seed", type=int, default=0, help="seed: same seed, same bytes (default 0)")
    parser.add_argument("--out", required=True, help="folder for episode-NNNN/log.jsonl and log.sim.jsonl")
    parser.add_argument("--old-shape-fraction", type=float, default=0.2,
                        help="share of episodes written in the older short log shape (default 0.2)")
    parser.add_argument("--force", action="store_true", help="replace --out when it holds an earlier simulation")
    parser.add_argument("--no-archive", action="store_true",
                        help="write no .advisor/ planner archives (by default every episode in the current log "
                             "shape gets one, as the loop runner keeps it)")
    parser.add_argument("--archive-episodes", type=int, default=None, metavar="N",
                        help="archive only the first N episodes in the current log shape (default: all)")


def episode_packets(episode: SimulatedEpisode) -> list[dict[str, Any]]:
    """The runner's packet (planner fields) before each of a simulated episode's entries, from its log."""
    lines = episode.log_text().splitlines()
    goals = [(item["goal"], item["threshold_target"]) for item in episode.side["iterations"]]
    return runner_packets(episode.entries, lines, goals)


def simulate_experiments(args: argparse.Namespace) -> int:
    """`guidebench data simulate experiments`: write seeded loop-runner logs from the kernel environment."""
    if args.episodes < 1:
        raise GuidebenchError(f"--episodes must be at least 1, got {args.episodes}")
    if args.archive_episodes is not None and args.archive_episodes < 0:
        raise GuidebenchError(f"--archive-episodes must be 0 or more, got {args.archive_episodes}")
    if not 0.0 <= args.old_shape_fraction <= 1.0:
        raise GuidebenchError(f"--old-shape-fraction must be within [0, 1], got {args.old_shape_fraction}")
    from guidebench.outputs import claim_output

    out = Path(args.out)
    # Old episodes never mix with new ones: an earlier simulation is replaced whole, and only with --force.
    output = claim_output(out, "data simulate experiments", force=args.force)
    with output.writing() as staging:
        summary = write_episodes(staging, args.episodes, args.seed, old_shape_fraction=args.old_shape_fraction,
                                 archive_packets=None if args.no_archive else episode_packets,
                                 archive_episodes=args.archive_episodes)
    print(f"wrote {summary.episodes} episodes ({summary.entries} log lines, {summary.old_shape_episodes} in the "
          f"older short shape, {summary.archived_plans} plans archived under .advisor/) to {out}")
    print(f"import them with: guidebench data import {out} --kind {KIND} --out DATASET_DIR")
    return 0


register_importer(KIND, import_experiments)
register_simulator(SimulatorSpec(kind=KIND, help="seeded loop-runner logs of the simulated VLIW kernel environment",
                                 add_arguments=_simulate_arguments, run=simulate_experiments))
