"""Export a decision program as a frozen module folder for production (see runtime.frozen.manifest).

The folder is written into a temporary sibling, verified with the runtime's own loader, and only
then renamed into place (`guidebench.outputs`): a crash leaves either the old folder or the new one,
never a partial one; the next export to the same place removes the staging folder a killed export
left behind (and puts back a previous export a kill caught between the two renames).
Program state is written as JSON (the format of `program.save("x.json")`); nothing is a pickle.
Every exported file goes through `guidebench.data.redaction` (no LM endpoint, key or secret).
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from pydantic import BaseModel, ValidationError

from runtime.checksums import write_checksums
from runtime.exploration import POLICIES, ExplorationSettings, default_settings
from runtime.frozen.loader import installed_dspy_version, load_frozen, verify_frozen
from runtime.frozen.knn import DemoSelector
from runtime.frozen.manifest import (COMPATIBLE_WITH, DSRS_MANIFEST_FILE, KNN_FILE, MANIFEST_FILE, PROGRAM_FILE,
                                     DemoSelection, FrozenManifest, FrozenModuleError, MetricInterval,
                                     OutcomeModelSpec, PredictorSpec, PromptText, RuleGateSpec, TrainedModelSpec,
                                     valid_name, valid_version)
from runtime.inputs import PACKET_INPUT_NAMES, SUMMARY_INPUT_NAMES
from runtime.outcome import OUTCOME_MODEL_KEY, OutcomeModel, OutcomeModelError
from runtime.provenance import NOTHING, Provenance, read_program_provenance
from runtime.rules import RULE_GATE_KEY
from runtime.trained import (CASCADE_KEY, FEATURES_VERSION, TRAINED_MODEL_KEY, TrainedDecisionModel,
                             TrainedModelError)
from runtime.signature_spec import SignatureSpec, SignatureSpecError, spec_of

from guidebench import __version__
from guidebench.release.dsrs import HubFile, build_hub, carry_notes
from guidebench.errors import GuidebenchError
from guidebench.evaluation.inputs import installed_signature, signature_classes
from guidebench.data.redaction import Redactor, redactor_for

# Signature of each program kind when a program has no predictor of its own (rule-based).
CONTRACT_SIGNATURES: dict[str, str] = {"full_auto": "FullAutoDecisionSignature",
                                       "planner": "OptimizationDirectiveSignature"}
_GENERIC_SIGNATURE_NAME = "StringSignature"


@dataclass
class ExportSource:
    """What to export: the program with its state, a fresh installed instance, and its provenance."""

    entry: str
    kind: str
    uses_lm: bool
    program: Any
    installed: Any
    optimizer: str = "none"
    mlflow_run_id: Optional[str] = None
    dataset_id: Optional[str] = None
    split: Optional[str] = None
    split_hash: Optional[str] = None
    trainset_id: Optional[str] = None
    scorecard: dict[str, MetricInterval] = field(default_factory=dict)
    lm_model: Optional[str] = None
    # The records it learned from (None: unknown, a state file that does not say); the manifest carries it.
    provenance: Optional[Provenance] = None


@dataclass
class ExportResult:
    """Where the module went and what it is."""

    path: Path
    manifest: FrozenManifest
    hub: HubFile
    redactions: int = 0
    dropped_keys: list[str] = field(default_factory=list)

    @property
    def compiled_id(self) -> str:
        """The dsrs compiled_id of the export."""
        return self.hub.manifest.compiled_id or ""


# ----- sources ---------------------------------------------------------------------------------

def _programs():
    import programs

    return programs


def read_state_file(path: Path) -> dict[str, Any]:
    """A program state JSON file (with or without dspy's `metadata`); refuses pickles."""
    if path.suffix.lower() != ".json":
        raise GuidebenchError(f"{path}: program state must be a .json file (pickles are never loaded)")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GuidebenchError(f"{path}: not readable JSON program state: {exc}") from exc
    if not isinstance(state, dict):
        raise GuidebenchError(f"{path}: program state must be a JSON object")
    return {k: v for k, v in state.items() if k != "metadata"}


def source_from_registry(entry: str, state_file: Optional[Path] = None, *,
                         label: Optional[str] = None) -> ExportSource:
    """An export source from a registered program, optionally with a compiled state file (`label` names it)."""
    import dspy
    from optimizers import load_compiled

    programs = _programs()
    try:
        spec = programs.spec(entry)
    except LookupError as exc:
        raise GuidebenchError(str(exc)) from exc
    program = spec.build()
    provenance: Optional[Provenance] = NOTHING  # a registry program as it is learned from no record
    if state_file is not None:
        state = read_state_file(Path(state_file))
        try:
            provenance = read_program_provenance(state)
        except ValueError as exc:
            raise GuidebenchError(f"{label or state_file}: {exc}") from None
        try:
            # Whatever recipe compiled it: a knn_fewshot state comes back as the program it wraps with its pool.
            program = load_compiled(program, state)
        except GuidebenchError:
            raise
        except Exception as exc:
            owners = programs_of_state(state, spec.kind)
            whose = f"the state of {' or '.join(owners)}, not of {spec.name}" if owners else \
                f"does not load into program {spec.name}"
            raise GuidebenchError(f"{label or state_file}: {whose}: {type(exc).__name__}: {exc}") from exc
    lm = dspy.settings.lm
    installed = spec.build()
    lm_program = getattr(getattr(program, "cascade", None), "lm_program", None)
    if lm_program is not None:  # a cascade's predictors are those of the LM program it was compiled with
        installed.configure(lm_program=lm_program)
    return ExportSource(entry=spec.name, kind=spec.kind, uses_lm=spec.uses_lm, program=program,
                        installed=installed, optimizer="none" if state_file is None else "unknown",
                        lm_model=getattr(lm, "model", None) if spec.uses_lm and lm is not None else None,
                        provenance=provenance)


def programs_of_state(state: Mapping[str, Any], kind: str) -> list[str]:
    """The registered programs of a kind that a state loads into, whole (what a refused state was compiled for)."""
    from optimizers import load_compiled

    programs = _programs()
    found = []
    for name in programs.names(kind):
        try:
            load_compiled(programs.get(name), state)
        except Exception:  # not this one
            continue
        found.append(name)
    return found


def scorecard_from_metrics(metrics: Mapping[str, float], n: int = 0, prefix: str = "") -> dict[str, MetricInterval]:
    """Metric intervals from flat MLflow metrics (`<prefix><name>`, `..._ci_low`, `..._ci_high`)."""
    card: dict[str, MetricInterval] = {}
    for key, value in metrics.items():
        if not key.startswith(prefix) or key.endswith(("_ci_low", "_ci_high")) or "_diff" in key:
            continue
        name = key[len(prefix):]
        if prefix == "" and "." in name:
            continue  # another split's metric (`dev.objective`) or a namespaced counter
        card[name] = MetricInterval(value=value, ci_low=metrics.get(f"{key}_ci_low"),
                                    ci_high=metrics.get(f"{key}_ci_high"), n=n)
    return card


def _int_param(params: Mapping[str, str], *keys: str) -> int:
    return next((int(params[k]) for k in keys if str(params.get(k, "")).isdigit()), 0)


def source_from_run(run_id: str, tracking_uri: Optional[str] = None) -> ExportSource:
    """An export source from an MLflow run: its program, state artifact, data and metrics.

    A compile run logs each split's metrics as `<split>.<metric>`: the test split is the scorecard
    (else dev); an eval run logs its one split's metrics unprefixed.
    """
    from mlflow.tracking import MlflowClient

    from guidebench.tracking import runs as tracking
    from guidebench.leaderboard.packages import from_mlflow_run

    uri = tracking.configure(tracking_uri)
    # the run's state is downloaded aside and loaded into the program at once: nothing stays in the temp dir
    with tempfile.TemporaryDirectory(prefix="guidebench-mlflow-") as cache:
        variant = from_mlflow_run(run_id, tracking_uri=uri, cache_dir=Path(cache))
        source = source_from_registry(variant.manifest.entry, variant.state_path, label=f"run {run_id}")
    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    params, metrics = run.data.params, run.data.metrics
    split = next((name for name in ("test", "dev") if f"{name}.objective" in metrics), None)
    if split is not None:
        source.scorecard = scorecard_from_metrics(metrics, _int_param(params, f"n_{split}", f"n_labeled.{split}"),
                                                  prefix=f"{split}.")
        source.split, source.split_hash = split, params.get(f"split_hash.{split}") or None
    else:
        source.scorecard = scorecard_from_metrics(metrics, _int_param(params, "n_records", "n"))
        source.split, source.split_hash = params.get("split") or None, params.get("split_hash") or None
    source.optimizer = params.get("optimizer_class") or params.get("optimizer") or "unknown"
    source.mlflow_run_id = run_id
    source.dataset_id = params.get("dataset_id") or None
    source.trainset_id = params.get("split_hash.train") or params.get("trainset_id") or None
    source.lm_model = params.get("lm") or source.lm_model
    return source


# ----- describing the program ------------------------------------------------------------------

def signature_name_for(signature: Any, kind: str) -> str:
    """The declared name of a predictor's signature (dspy renames copies to `StringSignature`)."""
    if signature.__name__ != _GENERIC_SIGNATURE_NAME:
        return signature.__name__
    inputs, outputs = list(signature.input_fields), set(signature.output_fields)
    for name, cls in signature_classes().items():
        if list(cls.input_fields) == inputs and set(cls.output_fields) <= outputs:
            return name
    return CONTRACT_SIGNATURES.get(kind, _GENERIC_SIGNATURE_NAME)


def describe_predictors(installed: Any, kind: str, state: Mapping[str, Any]) -> list[PredictorSpec]:
    """Each predictor's path, installed signature definition and hash, its demo count and answer cap."""
    specs = []
    for name, predictor in installed.named_predictors():
        signature_name = signature_name_for(predictor.signature, kind)
        try:
            spec = spec_of(predictor.signature, name=signature_name)
        except SignatureSpecError as exc:
            raise GuidebenchError(f"predictor {name!r}: {exc}") from exc
        specs.append(PredictorSpec(name=name, signature_name=signature_name, signature_hash=spec.hash(),
                                   signature=spec, demo_count=len(state.get(name, {}).get("demos", [])),
                                   max_tokens=(getattr(predictor, "config", None) or {}).get("max_tokens")))
    return specs


def main_signature(predictors: list[PredictorSpec], kind: str) -> SignatureSpec:
    """The module's declared signature: the installed class its main predictor is built on.

    The main predictor is the one on the kind's contract signature, else the only one; a module
    stack (several predictors, none on the contract) or a rule program (none) implements the
    contract as a whole. A predictor's own signature may extend the class (chain of thought adds
    `reasoning`), so the class itself is described when it is installed.
    """
    contract = CONTRACT_SIGNATURES.get(kind)
    chosen = next((p for p in predictors if p.signature_name == contract),
                  predictors[0] if len(predictors) == 1 else None)
    name = chosen.signature_name if chosen is not None else contract
    cls = signature_classes().get(name or "")
    if cls is not None:
        return spec_of(cls, name=name)
    if chosen is not None:
        return chosen.signature
    raise GuidebenchError(f"program kind {kind!r}: signature {contract} is not installed")


def program_state(program: Any) -> dict[str, Any]:
    """The program's state as JSON data, without LM state, with dspy's dependency metadata."""
    from dspy.utils.saving import get_dependency_versions

    try:
        state = json.loads(json.dumps(program.dump_state()))
    except (TypeError, ValueError) as exc:
        raise GuidebenchError(f"program state is not JSON-serialisable: {exc}") from exc
    for entry in state.values():
        if isinstance(entry, dict) and "demos" in entry:
            # A predictor's LM state can hold an endpoint or a key; the runtime brings its own LM.
            entry["lm"] = None
    state["metadata"] = {"dependency_versions": get_dependency_versions()}
    return state


# ----- writing ---------------------------------------------------------------------------------

def _now() -> tuple[str, int]:
    now = time.time()
    return datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"), int(now)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_tree(root: Path) -> None:
    for directory, _subdirs, files in os.walk(root):
        for name in files + ["."]:
            try:
                fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            except OSError:
                pass
            finally:
                os.close(fd)


def build_manifest(source: ExportSource, *, name: str, version: str, predictors: list[PredictorSpec],
                   created_at: str, tags: Iterable[str] = (), evals: Iterable[str] = (),
                   demo_selection: Optional[DemoSelection] = None,
                   rule_gate: Optional[RuleGateSpec] = None,
                   trained_model: Optional[TrainedModelSpec] = None,
                   outcome_model: Optional[OutcomeModelSpec] = None,
                   exploration: Optional[ExplorationSettings] = None) -> FrozenManifest:
    """The frozen manifest of a source (`demo_selection`: the demos it picks per input, if it does; `rule_gate`:
    the rules that decide before its LM, if any)."""
    from guidebench.tracking.runs import git_commit

    main = main_signature(predictors, source.kind)
    commit = git_commit()
    rendered = set(SUMMARY_INPUT_NAMES if source.kind == "full_auto" else PACKET_INPUT_NAMES)
    code_inputs = sorted({name for p in predictors for name in p.signature.input_names if name not in rendered})
    return FrozenManifest(
        name=name, version=version, entry=source.entry, kind=source.kind,
        compatible_with=COMPATIBLE_WITH[source.kind], uses_lm=source.uses_lm,
        signature_name=main.name, signature_hash=main.hash(), signature=main, predictors=predictors,
        optimizer=source.optimizer or "none", demo_count=sum(p.demo_count for p in predictors),
        dspy_version=installed_dspy_version() or "unknown", python_version=platform.python_version(),
        guidebench_version=__version__, lm_model=source.lm_model, dataset_id=source.dataset_id,
        split=source.split, split_hash=source.split_hash, scorecard=source.scorecard,
        mlflow_run_id=source.mlflow_run_id, git_commit=None if commit == "unknown" else commit,
        created_at=created_at, promotion_state="candidate", tags=sorted(set(tags)), evals=list(evals),
        demo_selection=demo_selection, rule_gate=rule_gate, trained_model=trained_model, provenance=source.provenance,
        outcome_model=outcome_model, exploration=exploration,
        dsrs_notes=carry_notes(demo_selection, rule_gate, {p.name: p.max_tokens for p in predictors if p.max_tokens},
                               trained_model, code_inputs, outcome_model),
    )


def _checked(name: str, payload: Any, secrets: set[str]) -> Any:
    """The payload itself, refused when it still holds a secret (editing it would break its hashes)."""
    check = Redactor(secrets=set(secrets))
    if check.clean(payload) != payload:
        where = ", ".join(check.dropped_keys[:3]) or "a text value"
        raise GuidebenchError(f"{name}: secret-looking content ({where}) in a hashed field; not exporting it")
    return payload


def _write_folder(folder: Path, manifest: FrozenManifest, state: dict[str, Any], hub: HubFile,
                  secrets: set[str], selection: Optional[dict[str, Any]] = None) -> None:
    _write_json(folder / PROGRAM_FILE, _checked(PROGRAM_FILE, state, secrets))
    if selection is not None:
        # The pool as the vectorizer was fitted on it: refused, not redacted, if it holds a secret.
        _write_json(folder / KNN_FILE, _checked(KNN_FILE, selection, secrets))
    _write_json(folder / MANIFEST_FILE, _checked(MANIFEST_FILE, manifest.model_dump(mode="json"), secrets))
    _write_json(folder / DSRS_MANIFEST_FILE, _checked(DSRS_MANIFEST_FILE, hub.manifest.to_json(), secrets))
    hub_file = f"dsrs/{hub.manifest.hub_path()}"
    (folder / hub_file).parent.mkdir(parents=True, exist_ok=True)
    _write_json(folder / hub_file, _checked(hub_file, hub.to_json(), secrets))
    write_checksums(folder)


def export_frozen(source: ExportSource, *, name: str, version: str, out: Path, force: bool = False,
                  tags: Iterable[str] = (), evals: Iterable[str] = (), lm: Any = None,
                  inputs: Iterable[Path] = (), exploration: Optional[ExplorationSettings] = None) -> ExportResult:
    """Write `source` as a frozen module at `out` (atomically) and verify it loads; returns the result.

    `exploration`: how an exported planner explores (`runtime.exploration`; None: greedy); a setting the program
    cannot follow is refused.

    `out` follows `guidebench.outputs` (an earlier export is replaced only with `force`; `inputs`,
    such as a state file, are never inside it).
    """
    import dspy

    from guidebench.outputs import claim_output

    if not valid_name(name):
        raise GuidebenchError(f"--name {name!r}: use letters, digits, '.', '_' or '-' (max 128)")
    if not valid_version(version):
        raise GuidebenchError(f"--version {version!r}: must be X.Y.Z (e.g. 0.1.0)")
    exploration = _exploration(source, exploration)
    output = claim_output(Path(out), "export", force=force, inputs=inputs)
    out = output.path

    redactor = redactor_for(lm if lm is not None else dspy.settings.lm)
    program, selection = _demo_selection(source)
    state = redactor.clean(program_state(program))
    if selection is not None:
        for entry in state.values():
            if isinstance(entry, dict) and "demos" in entry:
                entry["demos"] = []  # never used: every call gets the demos chosen for its input
    installed = {n for n, _ in source.installed.named_predictors()}
    exported = {k for k in state if k not in ("metadata", RULE_GATE_KEY, TRAINED_MODEL_KEY, CASCADE_KEY,
                                              OUTCOME_MODEL_KEY)}
    if installed != exported:
        raise GuidebenchError(f"program {source.entry}: state holds predictors {sorted(exported)}, "
                              f"the installed program has {sorted(installed)}")
    rule_gate = _rule_gate(source.entry, state.get(RULE_GATE_KEY))
    trained_model = _trained_model(source.entry, state)
    outcome_model = _outcome_model(source.entry, state)
    predictors = describe_predictors(source.installed, source.kind, state)
    for predictor in predictors:  # a prompt an optimizer rewrote is declared: the loader holds program.json to it
        predictor.prompt = PromptText.rewritten(predictor.signature, state.get(predictor.name, {}))
    created_at, created_unix = _now()
    if source.lm_model:
        source.lm_model = redactor.text(source.lm_model)
    manifest = build_manifest(source, name=name, version=version, predictors=predictors, created_at=created_at,
                              tags=[redactor.text(t) for t in tags], evals=[redactor.text(e) for e in evals],
                              demo_selection=None if selection is None else DemoSelection(
                                  k=selection.k, vectorizer=selection.vectorizer.name, fields=selection.fields,
                                  nearest_last=selection.nearest_last, pool_size=len(selection.pool)),
                              rule_gate=rule_gate, trained_model=trained_model, outcome_model=outcome_model,
                              exploration=exploration)
    hub = build_hub(manifest, state, created_at=created_unix, trainset_id=source.trainset_id)

    try:
        with output.writing() as staged:
            _write_folder(staged, manifest, state, hub, redactor.secrets,
                          None if selection is None else selection.to_state())
            _fsync_tree(staged)
            verify_frozen(staged)
            # The installed program must accept the state, exactly as production will load it.
            load_frozen(staged, program=_fresh(source), signature=installed_signature(manifest.signature_name))
    except FrozenModuleError as exc:
        raise GuidebenchError(f"export of {source.entry} failed its own verification: {exc.reason}") from exc
    return ExportResult(path=out, manifest=manifest, hub=hub, redactions=redactor.scrubbed_values,
                        dropped_keys=list(redactor.dropped_keys))


def exploration_settings(policy: Optional[str], **values: Any) -> Optional[ExplorationSettings]:
    """The settings `guidebench export --explore POLICY` asks for (unset values: the policy's defaults); a value out
    of range is one line."""
    if policy is None:
        if any(v is not None for v in values.values()):
            raise GuidebenchError("--epsilon, --temperature, --floor and --explore-seed go with --explore POLICY")
        return None
    if policy not in POLICIES:
        raise GuidebenchError(f"--explore {policy!r}: choose one of {', '.join(POLICIES)}")
    base = default_settings(policy).model_dump()
    base.update({k: v for k, v in values.items() if v is not None})
    try:
        return ExplorationSettings.model_validate(base)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "exploration"
        raise GuidebenchError(f"exploration {where}: {first['msg']} (got {first.get('input')!r})") from None


def _exploration(source: ExportSource, settings: Optional[ExplorationSettings]) -> Optional[ExplorationSettings]:
    """The settings checked against the program: a planner that can follow them (None or greedy: nothing to check)."""
    if settings is None:
        return None
    try:  # a dict or settings built without validation are checked here too
        settings = ExplorationSettings.model_validate(settings.model_dump() if isinstance(settings, BaseModel)
                                                      else settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise GuidebenchError(f"exploration {'.'.join(map(str, first['loc'])) or 'settings'}: {first['msg']}") from None
    if source.kind != "planner":
        raise GuidebenchError(f"program {source.entry} is a {source.kind} program; only planners explore")
    supported = tuple(getattr(source.installed, "exploration_policies", ()))
    if settings.explores and settings.policy not in supported:
        raise GuidebenchError(f"program {source.entry} cannot explore with policy {settings.policy!r} (it supports "
                              f"{', '.join(supported) or 'none'}): planner.rules explores epsilon-greedily, "
                              "planner.learned epsilon-greedily or by softmax")
    return settings


def _rule_gate(entry: str, gate: Any) -> Optional[RuleGateSpec]:
    """The manifest's summary of the state's rule gate (None without one); a gate the runtime cannot apply is refused."""
    if gate is None:
        return None
    try:
        return RuleGateSpec(rules=gate.get("rules") if isinstance(gate, dict) else gate)
    except ValidationError as exc:
        raise GuidebenchError(f"program {entry}: its {RULE_GATE_KEY} {gate!r} is not a list of the rule policy's "
                              f"rules: {exc.errors()[0]['msg']}") from None


def _trained_model(entry: str, state: Mapping[str, Any]) -> Optional[TrainedModelSpec]:
    """The manifest's summary of the state's trained model (None without one); an unfitted one is refused."""
    if TRAINED_MODEL_KEY not in state:
        return None
    try:
        model = TrainedDecisionModel.from_state((state[TRAINED_MODEL_KEY] or {}).get("model"))
    except TrainedModelError as exc:
        raise GuidebenchError(f"program {entry} has no usable trained model ({exc}); fit it first: `guidebench "
                              f"compile --program {entry} --optimizer fit --data DATASET`") from None
    cascade = state.get(CASCADE_KEY) or {}
    return TrainedModelSpec(features_version=FEATURES_VERSION, classes=model.classes,
                            n_features=int(model.coef.shape[1]), threshold=cascade.get("threshold"),
                            lm_program=cascade.get("lm_program"))


def _outcome_model(entry: str, state: Mapping[str, Any]) -> Optional[OutcomeModelSpec]:
    """The manifest's summary of the state's planner outcome model (None without one); an unfitted one is refused."""
    if OUTCOME_MODEL_KEY not in state:
        return None
    try:
        model = OutcomeModel.from_state((state[OUTCOME_MODEL_KEY] or {}).get("model"))
    except OutcomeModelError as exc:
        raise GuidebenchError(f"program {entry} has no usable outcome model ({exc}); fit it first: `guidebench "
                              f"compile --program {entry} --optimizer fit --data DATASET`") from None
    return OutcomeModelSpec.of(model)


def _demo_selection(source: ExportSource) -> tuple[Any, Optional[DemoSelector]]:
    """(the program whose state program.json holds, its per-input demo selection or None)."""
    from optimizers.knn_fewshot import NearestDemos, NotExportable

    if not isinstance(source.program, NearestDemos):
        return source.program, None
    try:
        return source.program.program, source.program.frozen_selection()
    except NotExportable as exc:
        raise GuidebenchError(f"program {source.entry} (knn_fewshot): {exc}") from None


def _fresh(source: ExportSource) -> Any:
    """A fresh installed instance (the source's `installed` one stays untouched for re-use)."""
    try:
        return _programs().get(source.entry)
    except Exception:  # a program built outside the registry: copy the given fresh instance
        return source.installed.deepcopy()


def load_exported(path: Path, *, lm: Any = None, label: str = "--module") -> Any:
    """Load a frozen module as the application runs it (`guidebench.evaluation.inputs.load_export`, the one path)."""
    from guidebench.evaluation.inputs import load_export

    return load_export(path, label, lm=lm).details["module"]
