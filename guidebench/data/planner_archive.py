"""Read the loop runner's planner archive: the packet each plan was given and the directive it answered.

The real runner (`tools/loop_runner.py`, formats.md §2.3.2) keeps, in the repository's git-ignored `.advisor/`:
- manual mode (`manual-apply`): `manual_archive/iter_NNNN/` with `packet.json` and `directive.json`
  (`json.dumps(..., indent=2, sort_keys=True)` + newline), `prompt.md`, `from_ref.txt` when a ref was given;
- codex modes (`codex-plan`, `codex-api-plan`): `codex/` or `codex_api/` with `iter_NNNN_packet.json`,
  `_schema.json`, `_prompt.md`, `_stdout.txt`, `_stderr.txt`, `_cmd.txt` and `_last_message.txt` (the
  directive's JSON text as the planner answered it, which the runner parses leniently: a ```json fence is
  allowed);
- `state.json`: the current plan only (rewritten every plan), so it adds nothing the files above do not keep.

`read_archive` indexes one `.advisor/` folder by iteration id. Nothing here raises on bad input: every plan that
cannot be used is quarantined (the side quarantine, with the file and the reason) and counted in
`import_report.json` under `archive_*` (`ARCHIVE_COUNTS`); `guidebench.data.archive_join` joins the rest to the
log lines.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from runtime.pivot import validate_directive_original

from guidebench.data.registry import ImportContext

ADVISOR = ".advisor"
MANUAL_DIR = "manual_archive"
CODEX_DIRS = {"codex": "codex", "codex_api": "codex_api"}  # mode -> folder under .advisor/
_MANUAL_ITER = re.compile(r"^iter_(\d+)$")
_CODEX_PACKET = re.compile(r"^iter_(\d+)_packet\.json$")
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)  # the runner's `_parse_json_relaxed`
RAW_PREVIEW = 2000

# Every count the archive import adds to the report (0 when nothing happened), and what it means.
ARCHIVE_COUNTS = {
    "archive_folders": ".advisor/ folders read",
    "archive_plans": "archived plans found (one per iteration and mode)",
    "archive_joined": "plans joined to their log line",
    "archive_without_log_line": "plans for an iteration the log never recorded",
    "archive_packet_unreadable": "packet file not JSON, not an object, or not a packet",
    "archive_directive_unreadable": "directive file missing, not JSON or not an object",
    "archive_directive_invalid": "directive fails the runner's own directive check",
    "archive_contradicts_log": "packet for another iteration, branch, base or best than its log line",
    "archive_duplicate_iteration": "two or more archives for one iteration",
    "archive_other_repository": "packet from another repository than the rest of its .advisor/",
    "archive_folder_unusable": ".advisor/ that is a file, a dangling link or a symlink loop",
    "archive_profiles_unusable": "archived performance profiles the features cannot use (kept or dropped: notes)",
    "packets_archived": "records whose packet is the archived one",
    "packets_rebuilt": "records whose packet was rebuilt from the log (no usable archive)",
}


@dataclass
class ArchivedPlan:
    """One archived plan: its iteration, mode, files and parsed packet and directive."""

    iteration_id: int
    mode: str
    packet_file: Path
    directive_file: Path
    packet: dict[str, Any]
    directive: dict[str, Any]


@dataclass
class AdvisorArchive:
    """The usable plans of one `.advisor/` folder by iteration id, and which of them a log line joined."""

    folder: Path
    plans: dict[int, ArchivedPlan] = field(default_factory=dict)
    joined: set[int] = field(default_factory=set)
    finished: bool = False


def advisor_folder_of(log: Path) -> Optional[Path]:
    """The `.advisor/` of the repository a log belongs to: `<repo>/.advisor` for `<repo>/experiments/log.jsonl`,
    else one beside the log; None when there is none (a dangling or looping link is returned: it is reported)."""
    candidates = [log.parent / ADVISOR]
    if log.parent.name == "experiments":
        candidates.insert(0, log.parent.parent / ADVISOR)
    return next((c for c in candidates if os.path.lexists(c)), None)


def folder_problem(folder: Path) -> Optional[str]:
    """Why a `.advisor` path cannot be read as a folder, or None when it can."""
    try:
        if folder.is_symlink():
            folder.resolve(strict=True)
        if folder.is_dir():
            return None
    except RuntimeError:  # Python < 3.13 raises this for a loop
        return "a symlink loop"
    except OSError as exc:
        return "a symlink loop" if exc.errno == 40 else f"unreadable ({exc.strerror or exc})"
    return "a file, not a folder" if folder.exists() else "a dangling link"


def parse_relaxed(text: str) -> tuple[Any, Optional[str]]:
    """(JSON value, error) as the runner's `_parse_json_relaxed` reads a planner's answer (fences allowed)."""
    # the fence pattern scans every run of whitespace of an indented file: only run it where a fence can be
    stripped = (_FENCE.sub("", text) if "```" in text else text).strip()
    if not stripped:
        return None, "empty JSON content"
    try:
        return json.loads(stripped, parse_constant=_no_constant), None
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        return None, f"not JSON{f' (line {line})' if line else ''}: {exc}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _read_text(file: Path) -> tuple[Optional[str], Optional[str]]:
    try:
        return file.read_text(encoding="utf-8", errors="replace"), None
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"


def _candidates(folder: Path) -> list[tuple[int, str, Path, Path]]:
    """(iteration id, mode, packet file, directive file) of every archived plan, in a stable order."""
    found: list[tuple[int, str, Path, Path]] = []
    manual = folder / MANUAL_DIR
    for entry in _listing(manual):
        match = _MANUAL_ITER.match(entry.name)
        if match:
            found.append((int(match.group(1)), "manual", entry / "packet.json", entry / "directive.json"))
    for mode, name in CODEX_DIRS.items():
        for entry in _listing(folder / name):
            match = _CODEX_PACKET.match(entry.name)
            if match:
                stem = entry.name[: -len("_packet.json")]
                found.append((int(match.group(1)), mode, entry, entry.with_name(f"{stem}_last_message.txt")))
    return sorted(found, key=lambda item: (item[0], item[1]))


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return []


class ArchiveReader:
    """Reads one `.advisor/` folder into an `AdvisorArchive`, quarantining and counting what it cannot use."""

    def __init__(self, ctx: ImportContext, folder: Path) -> None:
        self.ctx = ctx
        self.folder = folder

    def problem(self, counter: str, file: Path, reason: str, raw: str = "", line: int = 0) -> None:
        """Quarantine one archived file (side quarantine) with its reason, and count it."""
        self.ctx.side_problem(counter, file, line, reason, raw[:RAW_PREVIEW])
        self.ctx.report.tally("archive_quarantine_reasons", counter.removeprefix("archive_"))

    def read(self) -> AdvisorArchive:
        """Every usable plan, by iteration id (duplicates and other repositories' plans quarantined)."""
        archive = AdvisorArchive(folder=self.folder)
        reason = folder_problem(self.folder)
        if reason is not None:
            self.ctx.report.add("archive_folder_unusable")
            self.ctx.report.note(f"{self.ctx.display(self.folder)}: {reason}; its log's packets are rebuilt")
            return archive
        self.ctx.report.add("archive_folders")
        plans: dict[int, list[ArchivedPlan]] = {}
        for iteration_id, mode, packet_file, directive_file in _candidates(self.folder):
            self.ctx.report.add("archive_plans")
            self.ctx.report.tally("archive_modes", mode)
            plan = self._plan(iteration_id, mode, packet_file, directive_file)
            if plan is not None:
                plans.setdefault(iteration_id, []).append(plan)
        kept = self._one_repository([p for group in plans.values() for p in group])
        for iteration_id, group in plans.items():
            group = [p for p in group if id(p) in kept]
            if len(group) > 1:
                files = ", ".join(self.ctx.relative(p.packet_file) for p in group)
                for plan in group:
                    self.problem("archive_duplicate_iteration", plan.packet_file,
                                 f"{len(group)} archives for iteration {iteration_id} ({files}): which one the "
                                 "planner answered for cannot be told; the log line's packet is rebuilt")
            elif group:
                archive.plans[iteration_id] = group[0]
        return archive

    def _plan(self, iteration_id: int, mode: str, packet_file: Path, directive_file: Path) -> Optional[ArchivedPlan]:
        packet = self._packet(packet_file)
        if packet is None:
            return None
        directive = self._directive(directive_file, packet)
        if directive is None:
            return None
        return ArchivedPlan(iteration_id, mode, packet_file, directive_file, packet, directive)

    def _packet(self, file: Path) -> Optional[dict[str, Any]]:
        text, error = _read_text(file)
        if text is None:
            self.problem("archive_packet_unreadable", file, f"packet {error}")
            return None
        value, error = parse_relaxed(text)
        if error is None and not isinstance(value, dict):
            error = f"not a JSON object but {type(value).__name__}"
        if error is not None:
            self.problem("archive_packet_unreadable", file, f"packet {error}", text)
            return None
        return value

    def _directive(self, file: Path, packet: dict[str, Any]) -> Optional[dict[str, Any]]:
        text, error = _read_text(file) if os.path.lexists(file) else (None, "missing (the planner never answered)")
        if text is None:
            self.problem("archive_directive_unreadable", file, f"directive {error}")
            return None
        value, error = parse_relaxed(text)
        if error is None and not isinstance(value, dict):
            error = f"not a JSON object but {type(value).__name__}"
        if error is not None:
            self.problem("archive_directive_unreadable", file, f"directive {error}", text)
            return None
        constraints = packet.get("strategy_family_constraints")
        blocked = constraints.get("blocked_families") if isinstance(constraints, dict) else None
        errors = validate_directive_original(value, blocked if isinstance(blocked, list) else ())
        if errors:
            self.problem("archive_directive_invalid", file,
                         f"directive fails the runner's directive check: {errors[0]}", text)
            return None
        return value

    def _one_repository(self, plans: list[ArchivedPlan]) -> set[int]:
        """Ids of the plans of this folder's repository: the most common `repo.origin_url` (else worktree path)
        among the packets that name one; a packet naming another is quarantined. A tie keeps all (the join's
        checks against the log lines decide)."""
        names = {id(p): _repository(p.packet) for p in plans}
        counts = Counter(name for name in names.values() if name is not None)
        if len(counts) < 2:
            return set(names)
        (first, n1), (_, n2) = counts.most_common(2)
        if n1 == n2:
            return set(names)
        kept = set()
        for plan in plans:
            name = names[id(plan)]
            if name is None or name == first:
                kept.add(id(plan))
            else:
                self.problem("archive_other_repository", plan.packet_file,
                             f"packet from repository {name!r}, the other {n1} packets of "
                             f"{self.ctx.relative(self.folder)} are from {first!r}: archives of two repositories "
                             "mixed in one folder")
        return kept


def _repository(packet: dict[str, Any]) -> Optional[str]:
    repo = packet.get("repo")
    if not isinstance(repo, dict):
        return None
    for key in ("origin_url", "worktree_path"):
        if isinstance(repo.get(key), str) and repo[key]:
            return repo[key]
    return None


def read_archive(ctx: ImportContext, folder: Path) -> AdvisorArchive:
    """The usable plans of one `.advisor/` folder (see `ArchiveReader`); never raises on bad input."""
    return ArchiveReader(ctx, folder).read()


__all__ = ["ADVISOR", "ARCHIVE_COUNTS", "AdvisorArchive", "ArchiveReader", "ArchivedPlan", "advisor_folder_of",
           "folder_problem", "parse_relaxed", "read_archive"]
