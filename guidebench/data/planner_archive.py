"""Read the loop runner's planner archive: the packet each plan was given and the directive it answered.

The real runner (`tools/loop_runner.py`, formats.md §2.3.2) keeps, in the repository's git-ignored `.advisor/`:
- manual mode (`manual-apply`): `manual_archive/iter_NNNN/` with `packet.json` and `directive.json`
  (`json.dumps(..., indent=2, sort_keys=True)` + newline), `prompt.md`, `from_ref.txt` when a ref was given;
- codex modes (`codex-plan`, `codex-api-plan`): `codex/` or `codex_api/` with `iter_NNNN_packet.json`,
  `_schema.json`, `_prompt.md`, `_stdout.txt`, `_stderr.txt`, `_cmd.txt` and `_last_message.txt` (the
  directive's JSON text as the planner answered it, which the runner parses leniently: a ```json fence is
  allowed);
- `state.json`: the current plan only (rewritten every plan), so it adds nothing the files above do not keep.

`read_archive` indexes one `.advisor/` folder by iteration id. Nothing here raises on bad input, and nothing
outside the workspace is read (`guidebench.data.workspace`: links are resolved and must stay inside the imported
folder, only regular files are opened, at most `MAX_FILE_BYTES` of each): every plan that cannot be used is
quarantined (the side quarantine, with the file and the reason) and counted in `import_report.json` under
`archive_*` (`ARCHIVE_COUNTS`); `guidebench.data.archive_join` joins the rest to the log lines.

The archive is the runner's log's: `experiments/log.jsonl` (the only log the runner writes), or the only log of
its folder; another log beside it takes no plan from it (`advisor_folder_of`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from runtime.pivot import validate_directive_original

from guidebench.data.registry import ImportContext
from guidebench.data.workspace import MAX_FILE_BYTES, Refusal, Workspace, json_problems, workspace_root

ADVISOR = ".advisor"
RUNNER_LOG = "log.jsonl"  # `tools/loop_runner.py` writes `experiments/log.jsonl` and no other log
MANUAL_DIR = "manual_archive"
CODEX_DIRS = {"codex": "codex", "codex_api": "codex_api"}  # mode -> folder under .advisor/
# the runner names iterations `iter_{id:04d}`: ASCII digits only (`\d` would take other scripts' digits too)
_MANUAL_ITER = re.compile(r"^iter_([0-9]+)$")
_CODEX_PACKET = re.compile(r"^iter_([0-9]+)_packet\.json$")
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)  # the runner's `_parse_json_relaxed`
RAW_PREVIEW = 2000
PROFILE = "performance_profile"
# No cycle count or share comes near this; a profile number beyond it (1e308) overflows every ratio taken of it.
PROFILE_NUMBER_LIMIT = 2 ** 53

# Every count the archive import adds to the report (0 when nothing happened), and what it means.
ARCHIVE_COUNTS = {
    "archive_folders": ".advisor/ folders read",
    "archive_plans": "archived plans found (one per iteration and mode)",
    "archive_joined": "plans joined to their log line",
    "archive_without_log_line": "plans for an iteration the log never recorded",
    "archive_packet_unreadable": "packet file not readable (see the three counts below), not UTF-8, not JSON, "
                                 "nested too deep, not an object, or not a packet",
    "archive_directive_unreadable": "directive file missing, not JSON or not an object (an agreeing packet still "
                                    "joins, without its directive)",
    "archive_directive_invalid": "directive fails the runner's own directive check",
    "archive_contradicts_log": "packet for another iteration, branch, base or best than its log line",
    "archive_duplicate_iteration": "two or more archives for one iteration",
    "archive_other_repository": "packet from another repository than the rest of its .advisor/",
    "archive_folder_unusable": ".advisor/ that is a file, a dangling link, a symlink loop or leads out of the "
                               "imported folder",
    "archive_entries_unusable": "entries under .advisor/ that cannot hold a plan: manual_archive/, codex/ or "
                                "codex_api/ not a folder, an iteration not named iter_ and ASCII digits, a manual "
                                "iteration that is not a folder",
    "archive_outside_workspace": "archive paths that are links leading out of the imported folder: never read",
    "archive_not_regular_file": "archive files that are a FIFO, socket, device or folder: never opened",
    "archive_too_large": f"archive files over {MAX_FILE_BYTES} bytes: not read",
    "archive_profiles_unusable": "archived performance profiles the features cannot use (kept or dropped: notes)",
    "packets_archived": "records whose packet is the archived one",
    "packets_rebuilt": "records whose packet was rebuilt from the log (no usable archive)",
}
# What becomes of an archived plan: exactly one of these (archive_plans is their sum).
PLAN_OUTCOMES = ("archive_joined", "archive_without_log_line", "archive_packet_unreadable",
                 "archive_directive_invalid", "archive_contradicts_log", "archive_duplicate_iteration",
                 "archive_other_repository")


@dataclass
class ArchivedPlan:
    """One archived plan: its iteration, mode, files and parsed packet and directive (None: unreadable, so the
    packet joins without it); `profile_notes` say which profile fields were dropped and why."""

    iteration_id: int
    mode: str
    packet_file: Path
    directive_file: Path
    packet: dict[str, Any]
    directive: Optional[dict[str, Any]]
    profile_notes: list[str] = field(default_factory=list)


@dataclass
class AdvisorArchive:
    """The usable plans of one `.advisor/` folder by iteration id, and which of them a log line joined."""

    folder: Path
    root: Optional[Path] = None
    plans: dict[int, ArchivedPlan] = field(default_factory=dict)
    joined: set[int] = field(default_factory=set)
    finished: bool = False


def _is_log(name: str) -> bool:
    return name.endswith(".jsonl") and not name.endswith(".sim.jsonl") and not name.endswith("planner-decisions.jsonl")


def advisor_folder_of(log: Path) -> Optional[Path]:
    """The `.advisor/` of the repository a log belongs to: `<repo>/.advisor` for `<repo>/experiments/log.jsonl`,
    else one beside the log; None when there is none (a dangling or looping link is returned: it is reported).

    Only the runner's log takes it (`log.jsonl`, or the only log of its folder): another log beside it was not
    written by the runner that planned these iterations, and would take plans that are not its own."""
    if log.name != RUNNER_LOG:
        try:
            others = [name for name in os.listdir(log.parent) if name != log.name and _is_log(name)]
        except OSError:
            others = []
        if others:
            return None
    candidates = [log.parent / ADVISOR]
    if log.parent.name == "experiments":
        candidates.insert(0, log.parent.parent / ADVISOR)
    elif os.path.lexists(log.parent / "experiments" / RUNNER_LOG):  # the repository's own log takes its archive
        return None
    return next((c for c in candidates if os.path.lexists(c)), None)


def folder_problem(folder: Path, workspace: Optional[Workspace] = None) -> Optional[str]:
    """Why a `.advisor` path cannot be read as a folder (leads out of `workspace`, a file, a dangling link, a
    symlink loop), or None when it can."""
    refused = (workspace or Workspace(Path(os.path.realpath(folder.parent)))).refusal(folder, folder=True)
    if refused is None:
        return None
    return "a dangling link" if refused.reason == "missing" else refused.reason


def parse_relaxed(text: str, constants: bool = False) -> tuple[Any, Optional[str]]:
    """(JSON value, error) as the runner's `_parse_json_relaxed` reads a planner's answer (fences allowed);
    `constants`: NaN and Infinity are read, as `json.loads` reads what the runner's `json.dumps` wrote."""
    # the fence pattern scans every run of whitespace of an indented file: only run it where a fence can be
    stripped = (_FENCE.sub("", text) if "```" in text else text).strip()
    if not stripped:
        return None, "empty JSON content"
    try:
        return json.loads(stripped, **({} if constants else {"parse_constant": _no_constant})), None
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        return None, f"not JSON{f' (line {line})' if line else ''}: {exc}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _candidates(workspace: Workspace, folder: Path, odd: Callable[[Path, Refusal], None]
                ) -> list[tuple[int, str, Path, Path]]:
    """(iteration id, mode, packet file, directive file) of every archived plan, in a stable order; `odd` hears
    of every entry that cannot hold a plan, and why."""
    found: list[tuple[int, str, Path, Path]] = []
    for entry in _listing(workspace, folder / MANUAL_DIR, odd):
        match = _MANUAL_ITER.match(entry.name)
        refused = workspace.refusal(entry, folder=True) if match else None
        if match is None:
            odd(entry, Refusal(None, "not an iteration folder the runner writes (iter_ and ASCII digits)"))
        elif refused is not None:
            odd(entry, Refusal(refused.count, f"iteration {refused.reason}"))
        else:
            found.append((int(match.group(1)), "manual", entry / "packet.json", entry / "directive.json"))
    for mode, name in CODEX_DIRS.items():
        for entry in _listing(workspace, folder / name, odd):
            match = _CODEX_PACKET.match(entry.name)
            if match:
                stem = entry.name[: -len("_packet.json")]
                found.append((int(match.group(1)), mode, entry, entry.with_name(f"{stem}_last_message.txt")))
            elif entry.name.startswith("iter_") and entry.name.endswith("_packet.json"):
                odd(entry, Refusal(None, "not a packet file the runner writes (iter_, ASCII digits, _packet.json)"))
    return sorted(found, key=lambda item: (item[0], item[1]))


def _listing(workspace: Workspace, folder: Path, odd: Callable[[Path, Refusal], None]) -> list[Path]:
    if not os.path.lexists(folder):
        return []
    entries, refused = workspace.listing(folder)
    if refused is not None:
        odd(folder, Refusal(refused.count, f"{folder.name}/ is {refused.reason}" if refused.count is None
                            else refused.reason))
    return entries


def archive_files(folder: Path, root: Path) -> list[tuple[str, str]]:
    """(file, what it holds now) of every packet and directive file the archive's import reads: its resolved path
    and the digest of its content, or why it is not read; a shard's fingerprint covers them (a plan behind a
    link can change while the link does not)."""
    import hashlib

    workspace = Workspace(root)
    if folder_problem(folder, workspace) is not None:
        return []
    stamps = []
    for _, _, packet_file, directive_file in _candidates(workspace, folder, lambda path, why: None):
        for file in (packet_file, directive_file):
            data, refused = workspace.read_bytes(file)
            held = hashlib.sha256(data).hexdigest() if data is not None else f"- {refused.reason if refused else ''}"
            stamps.append((f"{file} -> {workspace.real(file)}", held))
    return stamps


class ArchiveReader:
    """Reads one `.advisor/` folder into an `AdvisorArchive`, quarantining and counting what it cannot use; reads
    nothing outside `root` (the workspace: `workspace_root` of the imported path by default)."""

    def __init__(self, ctx: ImportContext, folder: Path, root: Optional[Path] = None) -> None:
        self.ctx = ctx
        self.folder = folder
        self.root = root if root is not None else workspace_root(ctx.path)
        self.workspace = Workspace(self.root)

    def problem(self, counter: str, file: Path, reason: str, raw: str = "", line: int = 0) -> None:
        """Quarantine one archived file (side quarantine) with its reason, and count it."""
        self.ctx.side_problem(counter, file, line, reason, raw[:RAW_PREVIEW])
        self.ctx.report.tally("archive_quarantine_reasons", counter.removeprefix("archive_"))

    def refused(self, counter: str, file: Path, what: str, refusal: Refusal) -> None:
        """Quarantine a file that was not read (nothing of it is copied), counted in `counter` and in the count of
        why (outside the workspace, not a regular file, too large) when there is one."""
        if refusal.count is not None:
            self.ctx.report.add(refusal.count)
        self.problem(counter, file, f"{what} {refusal.reason}")

    def read(self) -> AdvisorArchive:
        """Every usable plan, by iteration id (duplicates and other repositories' plans quarantined)."""
        archive = AdvisorArchive(folder=self.folder, root=self.root)
        refusal = self.workspace.refusal(self.folder, folder=True)
        if refusal is not None:
            reason = "a dangling link" if refusal.reason == "missing" else refusal.reason
            if refusal.count is not None:
                self.ctx.report.add(refusal.count)
            self.ctx.report.add("archive_folder_unusable")
            self.ctx.report.note(f"{self.ctx.display(self.folder)}: {reason}; its log's packets are rebuilt")
            return archive
        self.ctx.report.add("archive_folders")
        plans: dict[int, list[ArchivedPlan]] = {}
        for iteration_id, mode, packet_file, directive_file in _candidates(self.workspace, self.folder, self._odd):
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

    def _odd(self, entry: Path, refusal: Refusal) -> None:
        self.refused("archive_entries_unusable", entry, f"{entry.name!r}:", refusal)

    def _plan(self, iteration_id: int, mode: str, packet_file: Path, directive_file: Path) -> Optional[ArchivedPlan]:
        packet = self._packet(packet_file)
        if packet is None:
            return None
        packet, notes = packet
        directive = self._directive(directive_file, packet)
        if directive is False:
            return None
        return ArchivedPlan(iteration_id, mode, packet_file, directive_file, packet, directive, notes)

    def _packet(self, file: Path) -> Optional[tuple[dict[str, Any], list[str]]]:
        text, refusal = self.workspace.read_text(file)
        if text is None:
            self.refused("archive_packet_unreadable", file, "packet", refusal or Refusal(None, "unreadable"))
            return None
        value, error = parse_relaxed(text, constants=True)  # the runner's json.dumps writes NaN as NaN
        if error is None and not isinstance(value, dict):
            error = f"not a JSON object but {type(value).__name__}"
        numbers: list[tuple[tuple[Any, ...], str]] = []
        if error is None:
            error, numbers = json_problems(value)
            numbers += _out_of_range(value.get(PROFILE), (PROFILE,)) if error is None else []
        if error is None:
            error = next((f"{_dotted(path)}: {why} (only the performance profile's fields can be dropped)"
                          for path, why in numbers if path[:1] != (PROFILE,)), None)
        if error is not None:
            self.problem("archive_packet_unreadable", file, f"packet {error}", text)
            return None
        return value, [_drop(value, path, why) for path, why in dict(reversed(numbers)).items()]

    def _directive(self, file: Path, packet: dict[str, Any]) -> Any:
        """The directive (a dict), None when it cannot be read (the packet joins without it), False when the
        runner's check refuses it (the plan is quarantined)."""
        if os.path.lexists(file):
            text, refusal = self.workspace.read_text(file)
        else:
            text, refusal = None, Refusal(None, "missing (the planner never answered)")
        if text is None:
            self.refused("archive_directive_unreadable", file, "directive", refusal or Refusal(None, "unreadable"))
            return None
        value, error = parse_relaxed(text)
        if error is None and not isinstance(value, dict):
            error = f"not a JSON object but {type(value).__name__}"
        if error is None:
            error = json_problems(value)[0]
        if error is not None:
            self.problem("archive_directive_unreadable", file, f"directive {error}: the packet is kept", text)
            return None
        constraints = packet.get("strategy_family_constraints")
        blocked = constraints.get("blocked_families") if isinstance(constraints, dict) else None
        errors = validate_directive_original(value, blocked if isinstance(blocked, list) else ())
        if errors:
            self.problem("archive_directive_invalid", file,
                         f"directive fails the runner's directive check: {errors[0]}", text)
            return False
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


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in path) or "(the packet)"


def _drop(packet: dict[str, Any], path: tuple[Any, ...], why: str) -> str:
    """Drop the profile field holding an unstorable number (the nearest object key above it); say what went."""
    cut = max((i for i in range(1, len(path)) if isinstance(_at(packet, path[:i]), dict)), default=0)
    holder = _at(packet, path[:cut])
    if isinstance(holder, dict):
        holder.pop(path[cut], None)
    return f"{_dotted(path)}: {why}: {_dotted(path[:cut + 1])} dropped"


def _out_of_range(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    """(path, why) of every finite profile number beyond `PROFILE_NUMBER_LIMIT` (non-finite ones are found
    already); the profile is small and its depth checked."""
    if isinstance(value, dict):
        return [found for key, child in value.items() for found in _out_of_range(child, (*path, key))]
    if isinstance(value, list):
        return [found for index, child in enumerate(value) for found in _out_of_range(child, (*path, index))]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and abs(value) > PROFILE_NUMBER_LIMIT:
        return [(path, f"{value!r} is out of range (beyond {PROFILE_NUMBER_LIMIT})")]
    return []


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


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


__all__ = ["ADVISOR", "ARCHIVE_COUNTS", "PLAN_OUTCOMES", "RUNNER_LOG", "AdvisorArchive", "ArchiveReader",
           "ArchivedPlan", "advisor_folder_of", "archive_files", "folder_problem", "parse_relaxed", "read_archive"]
