"""What one evaluation reads: a frozen split (a dataset folder, or a raw log imported on the fly into a temporary
dataset, evaluated whole as split `all`) and a program (a registry name, or an exported frozen-module folder loaded
by `runtime.load_frozen`, the one way every command loads one).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the CLI registers `eval` without importing DSPy and SciPy (`guidebench --help`)
    from runtime.provenance import Provenance

from guidebench.errors import GuidebenchError, refuse_unfitted, refused_write

DATASET_KIND_TO_PROGRAM_KIND = {"fullauto": "full_auto", "experiments": "planner"}
# What `--data` accepts: a dataset folder, logs written by a command, or logs no command wrote (None).
DATA_WRITERS = ("data import", "data simulate fullauto", "data simulate experiments", "run-loop", "plan-loop",
                None)
SPLIT_CHOICES = ("train", "dev", "test", "all")
DEFAULT_SPLIT = "test"


@dataclass
class EvalData:
    """The records of one frozen split and the identity of that split."""

    kind: str  # program kind: full_auto | planner
    records: list[Any]
    dataset_id: str
    split: str
    split_hash: str
    source: str
    dataset_dir: Path
    notes: list[str] = field(default_factory=list)


@dataclass
class LoadedProgram:
    """A program ready for replay, with what tracking needs to know about it."""

    program: Any
    name: str
    kind: str
    uses_lm: bool
    source: str  # "registry" | "export"
    details: dict[str, Any] = field(default_factory=dict)
    # What it learned from (`runtime.provenance`; None: unknown). A registry program learned from no record.
    provenance: Optional[Provenance] = None


# ----- data -------------------------------------------------------------------------------------

def raw_log_kind(path: Path) -> str:
    """`fullauto` for a workspace log folder or a decisions JSONL file, else `experiments`."""
    if path.is_dir():
        # A workspace, or a folder of workspaces, holds decision files; experiment logs do not.
        if (path / "fullauto-decisions.jsonl").is_file() or any(path.rglob("fullauto-decisions.jsonl")):
            return "fullauto"
        return "experiments" if any(path.rglob("*.jsonl")) else "fullauto"
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if raw.strip():
                    head = json.loads(raw)
                    return "experiments" if isinstance(head, dict) and "iteration_id" in head else "fullauto"
    except (OSError, ValueError):
        pass
    return "fullauto"


def _import_raw_log(path: Path, kind: str, work: Path) -> Path:
    """Import a raw log into a temporary dataset folder with the data engineers' importer."""
    from guidebench.data import import_logs
    from guidebench.data.pipeline import NothingImportedError

    target = work / "dataset"
    try:
        import_logs(path, kind, target, progress=False)
    except NothingImportedError as exc:  # its quarantine is in a temporary folder: name the counts, not the file
        report = exc.report
        raise GuidebenchError(f"{path}: not a dataset folder, and nothing in it reads as a {kind} log "
                              f"({report.read} line(s) read, {report.quarantined} unusable); give a dataset folder "
                              f"(`guidebench data import`) or a log folder") from None
    except GuidebenchError:
        raise
    except Exception as exc:
        if refused_write(exc):  # the machine's, not the log's
            raise
        raise GuidebenchError(f"{path}: cannot import the log: {type(exc).__name__}: {exc}") from exc
    return target


def no_dataset_json(path: Path) -> str:
    """Why a folder `guidebench data import` wrote has no dataset.json, from its report: the import imported
    nothing, or the file was deleted since (and how to get it back: import the same logs again)."""
    try:
        report = json.loads((path / "import_report.json").read_text(encoding="utf-8"))
        imported, source, kind = int(report["imported"]), report["path"], report["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        imported, source, kind = 0, None, None
    if not imported:
        return (f"--data {path}: the `guidebench data import` that wrote it imported nothing (see "
                f"{path / 'import_report.json'}); fix the logs and run `guidebench data import` again with --force")
    return (f"--data {path}: its dataset.json is missing (the import wrote it with {imported:,} records; it was "
            f"deleted since): import the logs again with the seed of the first import (its README.md names it): "
            f"`guidebench data import {source} --kind {kind} --out {path} --force --seed SEED`")


def load_eval_data(path: Path, split: Optional[str], work_dir: Optional[Path] = None,
                   max_records: Optional[int] = None) -> EvalData:
    """The records of a split of a dataset folder, or of a whole raw log imported on the fly.

    `max_records` keeps the first N records in stored order; the split is then named
    `<split>[:N]` and its hash covers exactly those records, so a subset never passes for the split.
    """
    from evals.data import DatasetFormatError, dataset_info, load_records, split_hash

    from guidebench.outputs import check_input, written_by

    path = check_input(Path(path), "--data", DATA_WRITERS, "a dataset folder or a log folder")
    if split is not None and split not in SPLIT_CHOICES:
        raise GuidebenchError(f"--split {split!r}: use one of {', '.join(SPLIT_CHOICES)}")
    notes: list[str] = []
    source = "dataset"
    dataset_dir = path
    if not (path / "dataset.json").is_file():
        if written_by(path) == "data import":
            raise GuidebenchError(no_dataset_json(path))
        kind = raw_log_kind(path)
        work = Path(work_dir or tempfile.mkdtemp(prefix="guidebench-eval-"))
        dataset_dir = _import_raw_log(path, kind, work)
        source = f"raw log ({kind}), imported on the fly"
        if split not in (None, "all"):
            notes.append(f"--split {split} ignored: a raw log is evaluated whole (split all)")
        split = "all"
    split = split or DEFAULT_SPLIT
    try:
        info = dataset_info(dataset_dir)
        records = load_records(dataset_dir, split)
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    if max_records is not None and 0 <= max_records < len(records):
        records = records[:max_records]
        split = f"{split}[:{max_records}]"
        digest = split_hash(records)
    elif split == "all":
        digest = split_hash(records)
    else:
        digest = info["splits"][split]["hash"]  # reading the split checked its rows against this hash
    return EvalData(kind=DATASET_KIND_TO_PROGRAM_KIND[info["kind"]], records=records,
                    dataset_id=str(info.get("dataset_id", "")), split=split, split_hash=digest,
                    source=source, dataset_dir=dataset_dir, notes=notes)


# ----- program ----------------------------------------------------------------------------------

def load_program(name_or_dir: str) -> LoadedProgram:
    """A registry program by name, or an exported frozen module from its folder."""
    import programs

    from guidebench.outputs import interrupted

    path = Path(name_or_dir)
    why = interrupted(path, "--program")
    if why:
        raise GuidebenchError(why)
    if path.is_dir():
        return load_export(path)
    try:
        spec = programs.spec(name_or_dir)
    except LookupError as exc:
        raise GuidebenchError(f"--program {name_or_dir!r}: not a folder, and {exc}") from exc
    refuse_unfitted(spec.name, "--program")
    from runtime.provenance import NOTHING

    return LoadedProgram(program=spec.build(), name=spec.name, kind=spec.kind, uses_lm=spec.uses_lm,
                         source="registry", provenance=NOTHING)


def signature_classes() -> dict[str, Any]:
    """The installed signature classes (`signatures`), by name."""
    import dspy

    import signatures

    return {name: obj for name, obj in vars(signatures).items()
            if isinstance(obj, type) and issubclass(obj, dspy.Signature) and obj is not dspy.Signature}


def installed_signature(name: str) -> Any:
    """The installed signature class of that name (from `signatures`), or None."""
    return signature_classes().get(name)


def load_export(path: Path, label: str = "--program", *, lm: Any = None) -> LoadedProgram:
    """An exported frozen module, loaded the one way every command loads one (eval, promote, leaderboard,
    run-loop): `runtime.load_frozen` with every check it makes, against the installed program, its main
    signature and its input mapping; `details["module"]` is the loaded module, `program` its program."""
    import programs
    from runtime.frozen.loader import load_frozen, verify_frozen
    from runtime.frozen.manifest import FrozenModuleError

    from guidebench.outputs import check_input

    path = check_input(Path(path), label, ("export",), "an exported module folder")
    try:
        manifest = verify_frozen(path)
        try:
            factory = programs.spec(manifest.entry).factory
        except LookupError:
            factory = None  # the runtime rebuilds the exported predictor on its own
        inputs = programs.decision_inputs if manifest.kind == "full_auto" else programs.planner_inputs
        module = load_frozen(path, program=factory, signature=installed_signature(manifest.signature_name),
                             inputs=inputs, lm=lm)
    except FrozenModuleError as exc:
        raise GuidebenchError(f"{label} {path}: {exc}") from exc
    return LoadedProgram(program=module.program, name=f"{manifest.package}", kind=manifest.kind,
                         uses_lm=bool(getattr(manifest, "uses_lm", True)), source="export",
                         details={"export_dir": str(path), "entry": manifest.entry, "module": module},
                         provenance=manifest.provenance)
