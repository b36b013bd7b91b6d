"""Packages: named, versioned variants of a decision program, and where variants come from.

A package folder holds `package.json` (a `PackageManifest`) and, for a compiled package, the
program's state JSON (`program.json` by default). Variants resolve from four sources:
registry names, package folders (or a folder of them), exported frozen modules and MLflow runs
(the compiled program state artifact of a run, or every such run of an experiment).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runtime.provenance import NOTHING, Provenance, read_program_provenance

from guidebench.errors import GuidebenchError, refuse_unfitted

PACKAGE_FILE = "package.json"
DEFAULT_STATE_FILE = "program.json"
# An exported frozen module (guidebench export) carries these two files.
EXPORT_MANIFEST = "manifest.json"
EXPORT_CHECKSUMS = "checksums.sha256"
# The input contract each program kind consumes; a board only ranks packages of one contract.
COMPATIBILITY = {"full_auto": "GuidanceInputs@v1", "planner": "AdvisorPacket@v1"}
# Names a compile run may give its program-state artifact, most specific first.
STATE_ARTIFACT_NAMES = ("program.json", "program_state.json", "compiled_program.json", "state.json")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]*$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$")
_CONTRACT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*@v\d+$")


class SplitRef(BaseModel):
    """The frozen split a set of results was measured on."""

    model_config = ConfigDict(extra="forbid")

    dataset_id: str
    split: str
    split_hash: str

    def same_as(self, other: "SplitRef") -> bool:
        """True when both name the identical records (dataset id, split name and split hash)."""
        return (self.dataset_id, self.split, self.split_hash) == (other.dataset_id, other.split, other.split_hash)

    def describe(self) -> str:
        """Short human form: `dataset <id12>/<split> (hash <hash12>)`."""
        return f"dataset {self.dataset_id[:12]}/{self.split} (hash {self.split_hash[:12]})"


class PackageManifest(BaseModel):
    """The manifest of a package (`package.json`): what the variant is and what it claims."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="package name, unique on a board together with the version")
    version: str = Field(description="semantic version X.Y.Z")
    entry: str = Field(description="program registry name the state loads into")
    compatible_with: str = Field(default="", description="input contract, e.g. GuidanceInputs@v1")
    evals: list[str] = Field(default_factory=list,
                             description="eval suites the package is judged by: full_auto (fullauto) or planner "
                                         "(experiments); a board of another kind refuses the package")
    tags: list[str] = Field(default_factory=list)
    description: str = ""
    expected_metrics: dict[str, float] = Field(default_factory=dict,
                                               description="metric values the package claims")
    expected_on: Optional[SplitRef] = Field(default=None, description="split the expected metrics come from")
    state: Optional[str] = Field(default=None, description="program state JSON, relative to the package")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"name {value!r} must be letters, digits and . _ : + - (no spaces)")
        return value

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _VERSION.match(value):
            raise ValueError(f"version {value!r} is not X.Y.Z")
        return value

    @field_validator("compatible_with")
    @classmethod
    def _contract(cls, value: str) -> str:
        if value and not _CONTRACT.match(value):
            raise ValueError(f"compatible_with {value!r} is not <Contract>@v<N>")
        return value

    @field_validator("state")
    @classmethod
    def _state_is_json(cls, value: Optional[str]) -> Optional[str]:
        # State is JSON only: loading a pickle would run whatever code it carries.
        if value is not None and not value.endswith(".json"):
            raise ValueError(f"state {value!r} must be a .json file (pickles are never loaded)")
        return value


@dataclass
class Variant:
    """One entry of a leaderboard: a manifest plus how to build its program."""

    label: str
    manifest: PackageManifest
    origin: str
    state_path: Optional[Path] = None
    details: dict[str, Any] = field(default_factory=dict)
    # The records it learned from (`runtime.provenance`; None: unknown): a board checks its split against them.
    provenance: Optional[Provenance] = None

    @property
    def kind(self) -> str:
        """Program kind of the entry (`full_auto` or `planner`)."""
        import programs

        return programs.spec(self.manifest.entry).kind

    @property
    def uses_lm(self) -> bool:
        """True when the program calls an LM (so the board needs one configured)."""
        import programs

        return programs.spec(self.manifest.entry).uses_lm

    def build(self) -> Any:
        """A fresh program instance with the package's state loaded."""
        import programs

        if self.details.get("export_dir"):
            # Same path as `guidebench eval EXPORT_DIR`: verified again, then the runtime's own program.
            from guidebench.evaluation.inputs import load_export

            return load_export(Path(self.details["export_dir"])).program
        program = programs.get(self.manifest.entry)
        if self.state_path is not None:
            program = load_state_file(program, self.state_path, self.label)
        return program


def load_state_file(program: Any, path: Path, label: str) -> Any:
    """The program with a JSON state file loaded (`program.save` output or a bare `dump_state()` dict).

    Goes through `optimizers.load_compiled`, so states that need a wrapper (KNN demo selection)
    come back wrapped; returns the program to replay.
    """
    from optimizers import load_compiled

    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GuidebenchError(f"{path}: the state of {label!r} is not readable JSON: {exc}") from exc
    if not isinstance(state, dict):
        raise GuidebenchError(f"{path}: the state of {label!r} is not a JSON object")
    try:
        return load_compiled(program, state)
    except Exception as exc:
        raise GuidebenchError(f"{path}: cannot load the state of {label!r} into its program: "
                              f"{type(exc).__name__}: {exc}") from exc


def state_provenance(path: Path) -> Optional[Provenance]:
    """The provenance a state JSON file records (None: unknown); a malformed one is a one-line error."""
    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GuidebenchError(f"{path}: not readable JSON: {exc}") from exc
    try:
        return read_program_provenance(state) if isinstance(state, dict) else None
    except ValueError as exc:
        raise GuidebenchError(f"{path}: {exc}") from None


def contract_for(entry: str) -> str:
    """The input contract a registry program consumes (`GuidanceInputs@v1` or `AdvisorPacket@v1`)."""
    import programs

    return COMPATIBILITY.get(programs.spec(entry).kind, "")


def canonical_entry(entry: str, where: str) -> str:
    """The canonical registry name of an entry (aliases resolved); a clear error when unknown."""
    import programs

    try:
        return programs.spec(entry).name
    except LookupError as exc:
        raise GuidebenchError(f"{where}: unknown program {entry!r}; known programs: "
                              f"{', '.join(programs.names())}") from exc


# ----- registry names ---------------------------------------------------------------------------

def from_registry(names: Iterable[str]) -> list[Variant]:
    """Uncompiled variants straight from the program registry."""
    from guidebench import __version__

    variants = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        entry = canonical_entry(name, "--programs")
        refuse_unfitted(entry, "--programs")
        manifest = PackageManifest(name=name, version=__version__, entry=entry,
                                   compatible_with=contract_for(entry), tags=["registry"])
        variants.append(Variant(label=name, manifest=manifest, origin=f"registry:{name}", provenance=NOTHING))
    return variants


# ----- package folders --------------------------------------------------------------------------

def read_manifest(path: Path) -> PackageManifest:
    """Read and validate a `package.json`, naming the file and field on error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GuidebenchError(f"{path}: cannot read package manifest: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise GuidebenchError(f"{path}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    try:
        return PackageManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise GuidebenchError(f"{path}: field {where}: {first['msg']}") from exc


def write_package(folder: Path, manifest: PackageManifest, program: Any = None) -> Path:
    """Write a package folder: `package.json` and, given a program, its state JSON (`program.save`)."""
    folder.mkdir(parents=True, exist_ok=True)
    if program is not None:
        manifest = manifest.model_copy(update={"state": manifest.state or DEFAULT_STATE_FILE})
        program.save(str(folder / manifest.state))
    (folder / PACKAGE_FILE).write_text(manifest.model_dump_json(indent=2, exclude_none=True) + "\n",
                                       encoding="utf-8")
    return folder


def from_package_folder(folder: Path) -> Variant:
    """A variant from one package folder (`package.json` plus its state file)."""
    manifest_path = folder / PACKAGE_FILE
    manifest = read_manifest(manifest_path)
    manifest = manifest.model_copy(update={"entry": canonical_entry(manifest.entry, f"{manifest_path}: field entry")})
    expected = contract_for(manifest.entry)
    if manifest.compatible_with and expected and manifest.compatible_with != expected:
        raise GuidebenchError(f"{manifest_path}: field compatible_with: {manifest.compatible_with!r} does not "
                              f"match program {manifest.entry!r}, which takes {expected}")
    if not manifest.compatible_with:
        manifest = manifest.model_copy(update={"compatible_with": expected})
    state_path = None
    if manifest.state:
        state_path = (folder / manifest.state).resolve()
        if folder.resolve() not in state_path.parents:
            raise GuidebenchError(f"{manifest_path}: field state: {manifest.state!r} points outside the package")
        if not state_path.is_file():
            raise GuidebenchError(f"{manifest_path}: field state: file {state_path} does not exist")
    return Variant(label=f"{manifest.name}@{manifest.version}", manifest=manifest,
                   origin=f"package:{folder}", state_path=state_path,
                   provenance=NOTHING if state_path is None else state_provenance(state_path))


def is_export_folder(folder: Path) -> bool:
    """True for an exported frozen module (manifest plus checksums)."""
    return (folder / EXPORT_MANIFEST).is_file() and (folder / EXPORT_CHECKSUMS).is_file()


def from_export_folder(folder: Path) -> Variant:
    """A variant from an exported frozen module, verified by the runtime loader (checksums, signature, versions)."""
    from runtime.frozen.loader import verify_frozen
    from runtime.frozen.manifest import FrozenModuleError

    try:
        frozen = verify_frozen(folder)
    except FrozenModuleError as exc:
        raise GuidebenchError(f"{folder}: refused by the runtime loader: {exc}") from exc
    entry = canonical_entry(frozen.entry, f"{folder / EXPORT_MANIFEST}: field entry")
    split = None
    if frozen.dataset_id and frozen.split and frozen.split_hash:
        split = SplitRef(dataset_id=frozen.dataset_id, split=frozen.split, split_hash=frozen.split_hash)
    try:
        manifest = PackageManifest(
            name=frozen.name, version=frozen.version, entry=entry, compatible_with=frozen.compatible_with,
            evals=list(frozen.evals), tags=sorted(set(frozen.tags) | {"frozen"}),
            expected_metrics=_scorecard_values(frozen.scorecard), expected_on=split, state=DEFAULT_STATE_FILE)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise GuidebenchError(f"{folder / EXPORT_MANIFEST}: field {'.'.join(map(str, first['loc']))}: "
                              f"{first['msg']}") from exc
    return Variant(label=f"{manifest.name}@{manifest.version}", manifest=manifest, origin=f"export:{folder}",
                   details={"export_dir": str(folder), "promotion_state": frozen.promotion_state,
                            "mlflow_run_id": frozen.mlflow_run_id}, provenance=frozen.provenance)


def _scorecard_values(scorecard: Any) -> dict[str, float]:
    """Metric values of an export scorecard (`{metric: MetricInterval}`), those that have one."""
    values: dict[str, float] = {}
    for name, item in (scorecard or {}).items():
        value = getattr(item, "value", None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values[name] = float(value)
    return values


def from_path(path: Path) -> list[Variant]:
    """Variants at a path: a package folder, an exported module, a package.json, or a folder of those."""
    path = Path(path)
    if path.is_file() and path.name == PACKAGE_FILE:
        return [from_package_folder(path.parent)]
    if not path.is_dir():
        raise GuidebenchError(f"{path}: no such package folder")
    if (path / PACKAGE_FILE).is_file():
        return [from_package_folder(path)]
    if is_export_folder(path):
        return [from_export_folder(path)]
    variants = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if (child / PACKAGE_FILE).is_file():
            variants.append(from_package_folder(child))
        elif is_export_folder(child):
            variants.append(from_export_folder(child))
    if not variants:
        raise GuidebenchError(f"{path}: holds no package ({PACKAGE_FILE}) and no exported module "
                              f"({EXPORT_MANIFEST} + {EXPORT_CHECKSUMS}), nor any folder of them")
    return variants


# ----- MLflow runs ------------------------------------------------------------------------------

def _run_artifacts(client: Any, run_id: str) -> tuple[Optional[str], dict[str, str]]:
    """A run's program state JSON (breadth-first, most specific name first) and its per-split eval folders.

    An eval folder is a top-level artifact folder named after a split (`test`, `dev`, ...) holding
    `summary.json` and `results.parquet`, as a compile writes them (its `baseline/` is another program).
    """
    queue, states, files = [""], [], {}
    while queue:
        folder = queue.pop(0)
        for item in client.list_artifacts(run_id, folder or None):
            if item.is_dir:
                queue.append(item.path)
            else:
                files.setdefault(str(Path(item.path).parent), set()).add(Path(item.path).name)
                if Path(item.path).name in STATE_ARTIFACT_NAMES:
                    states.append(item.path)
    state = min(states, key=lambda p: (STATE_ARTIFACT_NAMES.index(Path(p).name), p.count("/"), p)) if states else None
    evals = {name: name for name in ("train", "dev", "test", "all")
             if {"summary.json", "results.parquet"} <= files.get(name, set())}
    return state, evals


def _run_entry(run: Any) -> Optional[str]:
    params, tags = run.data.params, run.data.tags
    for key in ("program", "entry", "program_name"):
        if params.get(key):
            return params[key]
        if tags.get(f"guidebench.{key}"):
            return tags[f"guidebench.{key}"]
    return None


def from_mlflow_run(run_id: str, tracking_uri: Optional[str] = None, cache_dir: Optional[Path] = None) -> Variant:
    """A variant from one MLflow run: its program (param `program`) with its state artifact."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        raise GuidebenchError(f"MLflow run {run_id}: not found in {tracking_uri or 'the default store'}: "
                              f"{exc.message}") from exc
    variant = _variant_of_run(client, run, cache_dir)
    if variant is None:
        raise GuidebenchError(f"MLflow run {run_id}: has no program (param 'program') or no program state "
                              f"artifact ({', '.join(STATE_ARTIFACT_NAMES)})")
    return variant


def _variant_of_run(client: Any, run: Any, cache_dir: Optional[Path]) -> Optional[Variant]:
    entry = _run_entry(run)
    # A leaderboard's own runs re-score variants, and an optimizer's candidates and a search's trials are steps
    # of a compile or a search: none is a variant of its own (a search's best is ranked from its test re-score).
    run_type = run.data.tags.get("guidebench.run_type", "")
    if not entry or run_type.startswith(("leaderboard", "search")) or run_type == "candidate":
        return None
    artifact, result_artifacts = _run_artifacts(client, run.info.run_id)
    if artifact is None:
        return None
    entry = canonical_entry(entry, f"MLflow run {run.info.run_id}: param program")
    target = Path(cache_dir or tempfile.mkdtemp(prefix="guidebench-mlflow-")) / run.info.run_id
    target.mkdir(parents=True, exist_ok=True)
    from guidebench.tracking.runs import download_artifact

    local = Path(download_artifact(client, run.info.run_id, artifact, target))
    params = run.data.params
    optimizer = params.get("optimizer", "")
    run_name = run.info.run_name or ""
    name = re.sub(r"[^A-Za-z0-9._:+-]+", "-", run_name or f"{entry}+{optimizer or 'compiled'}").strip("-._:+")
    expected, expected_on = _run_claims(run)
    manifest = PackageManifest(
        name=name or entry, version=f"0.0.0+{run.info.run_id[:8]}", entry=entry,
        compatible_with=contract_for(entry), tags=[t for t in ("mlflow", optimizer) if t],
        description=f"MLflow run {run.info.run_id}", state=local.name, expected_metrics=expected,
        expected_on=expected_on)
    return Variant(label=f"{manifest.name}#{run.info.run_id[:8]}", manifest=manifest,
                   origin=f"mlflow:{run.info.run_id}", state_path=local,
                   details={"mlflow_run_id": run.info.run_id, "optimizer": optimizer,
                            "dataset_id": params.get("dataset_id"), "seed": params.get("seed"),
                            "result_artifacts": result_artifacts, "tracking_uri": client.tracking_uri},
                   provenance=state_provenance(local))


def _run_claims(run: Any, split: str = "test") -> tuple[dict[str, float], Optional[SplitRef]]:
    """What a compile run measured on a split (`<split>.<metric>` metrics) and that split's identity."""
    params, metrics = run.data.params, run.data.metrics
    prefix = f"{split}."
    # `<split>.usage.*` and `<split>.wall_s` describe the run, not the program's quality.
    values = {key[len(prefix):]: float(value) for key, value in metrics.items()
              if key.startswith(prefix) and not key.endswith(("_ci_low", "_ci_high"))
              and not key[len(prefix):].startswith(("usage.", "wall_s"))}
    dataset_id, split_hash = params.get("dataset_id"), params.get(f"split_hash.{split}")
    if not values or not dataset_id or not split_hash:
        return {}, None
    return values, SplitRef(dataset_id=dataset_id, split=split, split_hash=split_hash)


def package_from_run(run_id: str, out: Path, *, name: Optional[str] = None, version: str = "0.1.0",
                     tracking_uri: Optional[str] = None) -> Path:
    """Freeze an MLflow compile run into a package folder: its state, and its own test metrics as claims."""
    with tempfile.TemporaryDirectory(prefix="guidebench-package-") as work:
        variant = from_mlflow_run(run_id, tracking_uri, Path(work))
        manifest = variant.manifest.model_copy(update={
            "name": name or variant.manifest.name, "version": version, "state": DEFAULT_STATE_FILE,
            "description": f"compiled in MLflow run {run_id}"})
        PackageManifest.model_validate(manifest.model_dump())  # the new name and version must be valid too
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(variant.state_path, out / DEFAULT_STATE_FILE)
    (out / PACKAGE_FILE).write_text(manifest.model_dump_json(indent=2, exclude_none=True) + "\n", encoding="utf-8")
    return out


def from_mlflow_experiment(experiment: str, tracking_uri: Optional[str] = None,
                           cache_dir: Optional[Path] = None) -> list[Variant]:
    """Variants from every finished run of an MLflow experiment (name or id) that has program state."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None and experiment.isdigit():
        try:
            found = client.get_experiment(experiment)
        except Exception:
            found = None
    if found is None:
        raise GuidebenchError(f"--from-mlflow: no experiment named {experiment!r} in "
                              f"{tracking_uri or 'the default tracking store'}")
    runs = client.search_runs([found.experiment_id], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time ASC"], max_results=5000)
    variants = [v for v in (_variant_of_run(client, run, cache_dir) for run in runs) if v is not None]
    if not variants:
        raise GuidebenchError(f"--from-mlflow: experiment {experiment!r} has no finished run with a program "
                              f"and a program state artifact ({', '.join(STATE_ARTIFACT_NAMES)})")
    return variants


# ----- all sources together ---------------------------------------------------------------------

def resolve_variants(programs: Sequence[str] = (), packages: Sequence[Path] = (),
                     mlflow_experiment: Optional[str] = None, tracking_uri: Optional[str] = None,
                     cache_dir: Optional[Path] = None, required: bool = True) -> list[Variant]:
    """Every requested variant, in order: registry names, package paths, MLflow runs; labels unique."""
    variants = from_registry(programs)
    for path in packages:
        variants.extend(from_path(Path(path)))
    if mlflow_experiment:
        variants.extend(from_mlflow_experiment(mlflow_experiment, tracking_uri, cache_dir))
    if required and not variants:
        raise GuidebenchError("no variants to rank: give --programs, --packages or --from-mlflow")
    return unique_labels(variants)


def unique_labels(variants: list[Variant]) -> list[Variant]:
    """Refuse the same package twice; disambiguate equal labels of different origins."""
    seen: dict[str, Variant] = {}
    for variant in variants:
        if variant.label in seen:
            if seen[variant.label].origin == variant.origin:
                raise GuidebenchError(f"variant {variant.label!r} is listed twice ({variant.origin})")
            variant.label = f"{variant.label} [{variant.origin.split(':', 1)[0]}]"
            if variant.label in seen:
                raise GuidebenchError(f"two variants are both called {variant.label!r}: "
                                      f"{seen[variant.label].origin} and {variant.origin}")
        seen[variant.label] = variant
    return variants
