"""Join the loop runner's archived plans (`planner_archive`) to the log lines they produced.

A log line of iteration N takes the archived plan of iteration N from its repository's `.advisor/` when the
packet agrees with the line: the same iteration, branch, base branch and base sha, and the best the line
records (`best_before`, the runner's overall best at record time) equal to the packet's. The record then keeps
the archived packet (profile, summary, family constraints, goal) and directive (`PlannerRecord.plan`). A plan
that contradicts its line is quarantined with the field that differs and the line's packet is rebuilt; so is a
line without a plan (counted in `packets_rebuilt`, the record's `packet_source` "rebuilt"). A plan no line
joined is quarantined at the end (`archive_without_log_line`). A second line of the same iteration (a
repeated `record`) gets the rebuilt packet: the plan was made for the first.

Where both exist, the rebuilt packet is compared with the archived one field by field
(`import_report.json` `archive_agreement`: per field, records compared and records that agree): the rebuild's
test on real data.

An archived performance profile with a missing or non-numeric bound, or a zero bound (every ratio divides by
it), is counted in `archive_profiles_unusable` with its reason: a profile that still validates is kept (the
outcome features and the simulator leave it out, as they do any unusable profile), one that does not is dropped
from the record's packet. A profile number that is not finite (NaN, Infinity) or out of range (1e308) loses its
field (`planner_archive`), counted the same way. Either way the rest of the archived packet is kept; so it is
when its directive cannot be read (`PlanArchive.directive` None: the planner saw that packet all the same).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from runtime.advisor import AdvisorPacket, ExperimentLogEntry, FamilyConstraints, PerformanceProfile
from runtime.records import PlanArchive, canonical_json

from guidebench.data.ingest import validation_error_text
from guidebench.data.planner_archive import (ARCHIVE_COUNTS, AdvisorArchive, ArchivedPlan, ArchiveReader,
                                             advisor_folder_of)
from guidebench.data.registry import ImportContext
from guidebench.data.workspace import workspace_root

_ARCHIVES = "_archives"  # ctx.options key: .advisor folder -> AdvisorArchive (one per repository)
PROFILE_BOUNDS = ("resource_lb_cycles", "cp_lb_cycles", "tight_lb_cycles", "schedule_cycles_estimate")
SUMMARY_KEYS = ("best_cycles", "best_cycles_by_family", "last_attempt", "last_valid_attempt", "recent_attempts",
                "recent_strategy_combos", "invalid_counts")
AGREEMENT_FIELDS: tuple[str, ...] = (
    "goal", "threshold_target", "best_cycles", "aspiration_cycles", "plateau_valid_iters_since_best",
    *(f"strategy_family_constraints.{name}" for name in FamilyConstraints.model_fields),
    "experiment_log_tail", *(f"experiment_summary.{name}" for name in SUMMARY_KEYS),
)


def start(ctx: ImportContext) -> None:
    """Zero the archive counts (so the report always shows them) and open the archive index."""
    for name in ARCHIVE_COUNTS:
        ctx.report.add(name, 0)
    ctx.options[_ARCHIVES] = {}


def archive_for(ctx: ImportContext, log: Path) -> Optional[AdvisorArchive]:
    """The archive of the repository `log` belongs to (read once per `.advisor/`), None when there is none."""
    folder = advisor_folder_of(log)
    if folder is None:
        return None
    archives: dict[Path, AdvisorArchive] = ctx.options.setdefault(_ARCHIVES, {})
    key = Path(folder).absolute()
    if key not in archives:
        archives[key] = ArchiveReader(ctx, folder, workspace_root(ctx.path)).read()
    return archives[key]


def finish(ctx: ImportContext) -> None:
    """Quarantine every plan no log line joined (an iteration planned and never recorded); note the agreement."""
    finish_plans(ctx)
    note_agreement(ctx)


def finish_plans(ctx: ImportContext) -> None:
    """Quarantine every plan no log line joined (an iteration planned and never recorded)."""
    for archive in ctx.options.get(_ARCHIVES, {}).values():
        if archive.finished:
            continue
        archive.finished = True
        reader = ArchiveReader(ctx, archive.folder, archive.root)
        for iteration_id, plan in sorted(archive.plans.items()):
            if iteration_id not in archive.joined:
                reader.problem("archive_without_log_line", plan.packet_file,
                               f"iteration {iteration_id} was planned ({plan.mode}) but its log has no line for it")


def note_agreement(ctx: ImportContext) -> None:
    """One note naming the fields where rebuilt packets agree least with the archived ones."""
    report = ctx.report
    agreement = (report.model_extra or {}).get("archive_agreement")
    if agreement:
        worst = sorted(agreement.items(), key=lambda item: item[1]["agree"] / max(1, item[1]["compared"]))[:3]
        report.note("rebuilt packets against archived ones: " + ", ".join(
            f"{name} {v['agree']}/{v['compared']}" for name, v in worst) + " agree (the least agreeing fields; "
            "all in archive_agreement)")


def agreement_summary(report: Any) -> Optional[str]:
    """One line for the import's printout: how the rebuilt packets compare with the archived ones, per field."""
    table = (report.model_extra or {}).get("archive_agreement") if hasattr(report, "model_extra") else None
    if not table:
        return None
    packets = max(row["compared"] for row in table.values())
    differ = [f"{name} {row['agree']}/{row['compared']}" for name, row in table.items() if row["agree"] < row["compared"]]
    head = f"rebuilt vs archived packets: {len(table)} fields compared on {packets} archived packet(s)"
    return head + (f"; agree on every field but {', '.join(differ)}" if differ else "; every field agrees") + \
        " (per field in import_report.json archive_agreement)"


def contradiction(plan: ArchivedPlan, entry: ExperimentLogEntry) -> Optional[str]:
    """Why the archived packet cannot be the one that produced the log line, or None when it agrees."""
    packet = plan.packet
    own = packet.get("iteration_id")
    if own is not None and own != plan.iteration_id:
        return f"packet iteration_id {own!r}, but it is archived as iteration {plan.iteration_id}"
    for key in ("branch", "base_branch", "base_sha"):
        if key in packet and packet[key] != getattr(entry, key):
            return f"packet {key} {packet[key]!r}, log line {key} {getattr(entry, key)!r}"
    best = packet.get("best_cycles")
    if entry.best_before is not None and best is not None and best != entry.best_before:
        return f"packet best_cycles {best!r}, log line best_before {entry.best_before!r}"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def profile_problem(raw: Any) -> Optional[str]:
    """Why an archived `performance_profile` cannot serve as context, or None when it can."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return f"performance_profile: not an object but {type(raw).__name__}"
    if "error" in raw and not any(key in raw for key in PROFILE_BOUNDS):
        return f"performance_profile: the runner could not compute it ({str(raw['error'])[:200]})"
    for key in PROFILE_BOUNDS:
        if key not in raw or raw[key] is None:
            return f"performance_profile.{key}: missing"
        if not _number(raw[key]):
            return f"performance_profile.{key}: not a number ({raw[key]!r})"
        if raw[key] <= 0:
            return f"performance_profile.{key}: {raw[key]!r} (a zero bound divides every ratio)"
    engines = raw.get("min_cycles_by_engine")
    if not isinstance(engines, Mapping) or not engines or not all(_number(v) for v in engines.values()):
        return f"performance_profile.min_cycles_by_engine: not a map of engine to cycles ({engines!r})"[:300]
    slack = raw.get("schedule_slack_pct")
    if slack is not None and not _number(slack):
        return f"performance_profile.schedule_slack_pct: not a number ({slack!r})"
    return None


class RecordArchive:
    """The archive side of one log: which plan a line takes, and the counts and checks that go with it."""

    def __init__(self, ctx: ImportContext, log: Path) -> None:
        self.ctx = ctx
        self.log = log
        self.archive = archive_for(ctx, log)
        self.seen: set[int] = set()

    def packet_for(self, entry: ExperimentLogEntry, rebuilt: AdvisorPacket
                   ) -> tuple[AdvisorPacket, Optional[PlanArchive]]:
        """The packet the record keeps (archived when a plan joins, else `rebuilt`) and its archive reference (the
        importer counts `packets_archived` / `packets_rebuilt` once the record is made)."""
        joined = self._join(entry)
        if joined is None:
            return rebuilt, None
        packet, plan = joined
        self._agreement(rebuilt, plan.packet)
        self.ctx.report.add("archive_joined")
        directive = None if plan.directive is None else self.ctx.redactor.value(plan.directive)
        return packet, PlanArchive(mode=plan.mode, packet_file=self.ctx.relative(plan.packet_file),
                                   directive_file=self.ctx.relative(plan.directive_file), directive=directive)

    def _join(self, entry: ExperimentLogEntry) -> Optional[tuple[AdvisorPacket, ArchivedPlan]]:
        first = entry.iteration_id not in self.seen
        self.seen.add(entry.iteration_id)
        if self.archive is None or not first:
            return None
        # taken out of the archive (joined or quarantined: never offered to another line), so the archives of a
        # long import hold only their plans no line joined yet, not every packet read so far
        plan = self.archive.plans.pop(entry.iteration_id, None)
        if plan is None or entry.iteration_id in self.archive.joined:
            return None
        self.archive.joined.add(entry.iteration_id)
        reader = ArchiveReader(self.ctx, self.archive.folder, self.archive.root)
        reason = contradiction(plan, entry)
        if reason is not None:
            reader.problem("archive_contradicts_log", plan.packet_file,
                           f"{reason} ({self.ctx.relative(self.log)}): the line's packet is rebuilt")
            return None
        packet = self._packet(plan, reader)
        return None if packet is None else (packet, plan)

    def _packet(self, plan: ArchivedPlan, reader: ArchiveReader) -> Optional[AdvisorPacket]:
        raw = plan.packet = self.ctx.redactor.value(plan.packet)  # redacted (and counted) once
        problem = profile_problem(raw.get("performance_profile"))
        if plan.profile_notes:  # fields dropped on reading: said first, the rest of the profile judged as it is
            problem = "; ".join([*plan.profile_notes, *([problem] if problem else [])])
        try:
            if problem is not None and raw.get("performance_profile") is not None:
                PerformanceProfile.model_validate(raw["performance_profile"])
            kept = ("kept in the packet; the features and the simulator leave it out"
                    if raw.get("performance_profile") is not None else "the packet keeps no profile")
        except ValidationError:
            raw = {**raw, "performance_profile": None}
            kept = "dropped from the record's packet (it does not validate)"
        if problem is not None:
            reader.problem("archive_profiles_unusable", plan.packet_file, f"{problem}: {kept}")
        try:
            packet = AdvisorPacket.model_validate(raw)
            packet.model_dump_json()  # what the dataset and the hashes do with it: a packet that cannot, never joins
            return packet
        except ValidationError as exc:
            reader.problem("archive_packet_unreadable", plan.packet_file,
                           f"packet is not a planner packet: {validation_error_text(exc)}")
        except (PydanticSerializationError, ValueError, RecursionError) as exc:
            reader.problem("archive_packet_unreadable", plan.packet_file,
                           f"packet cannot be stored: {' '.join(str(exc).split())[:200]}")
        return None

    def _agreement(self, rebuilt: AdvisorPacket, archived: Mapping[str, Any]) -> None:
        extra = self.ctx.report.__pydantic_extra__
        table = extra.setdefault("archive_agreement", {})
        mine = rebuilt.model_dump(mode="json")
        for name in AGREEMENT_FIELDS:
            theirs, found = _path(archived, name)
            if not found:
                continue
            ours, _ = _path(mine, name)
            row = table.setdefault(name, {"compared": 0, "agree": 0})
            row["compared"] += 1
            row["agree"] += int(_same_json(ours, theirs) or canonical_json(ours) == canonical_json(theirs))


def _same_json(a: Any, b: Any) -> bool:
    """True only when both values have the same canonical JSON (same types, string keys, floats by repr); False
    means "compare their canonical JSON", which is what most fields of an agreeing packet spare."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return (len(a) == len(b) and all(isinstance(key, str) and key in b and _same_json(value, b[key])
                                          for key, value in a.items()))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a is None or isinstance(a, (str, int)) and a == b


def _path(obj: Mapping[str, Any], dotted: str) -> tuple[Any, bool]:
    for part in dotted.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            return None, False
        obj = obj[part]
    return obj, True


__all__ = ["AGREEMENT_FIELDS", "RecordArchive", "agreement_summary", "archive_for", "contradiction", "finish",
           "finish_plans", "note_agreement", "profile_problem", "start"]
