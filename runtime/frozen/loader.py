"""Load a frozen module for production: verify it, then return a callable guidance or planner module.

`load_frozen(DIR)` refuses a folder, raising `FrozenModuleError` with a one-line reason, unless:
  1. `checksums.sha256` is canonical, lists every file, no file is missing or unlisted, every
     digest matches, and no file anywhere is a pickle (by name or by content);
  2. `manifest.json` is a valid `FrozenManifest` of a known format version, whose kind (and
     `compatible_with`) is the kind its main signature answers (a decision's or a directive's fields);
  3. the installed dspy has the exported major.minor version (program state is portable within
     a minor series; the Python version is recorded, not enforced: the state is JSON);
  4. every signature definition in the manifest hashes to its recorded hash, and the installed
     signature matches it (see below);
  5. `program.json` holds exactly the manifest's predictors, each with the recorded field count,
     the prompt text the manifest declares for it (its signature's instructions, field prefixes
     and descriptions, or the `prompt` an optimizer rewrote them to), state only for the
     signature's fields, and no LM state (endpoints and keys are never exported), and the demos the
     manifest counts;
  6. a module that picks its demos per input (`demo_selection`) has a `knn.json` whose k, fields,
     vectorizer and pool size are the manifest's and whose vectorizer state loads; a module without
     one has no `knn.json`;
  7. a module whose rules decide some turns before the LM (`rule_gate`, `full_auto.hybrid`) holds the
     same rules in program.json's `rule_gate` entry; a module without one has no such entry;
  8. a module with a decision model fit on the logs (`trained_model`: `full_auto.learned`, `full_auto.cascade`)
     holds a model state in program.json's `trained_model` entry that the runtime scorer accepts (every array
     of the declared shape, finite numbers) with the manifest's classes and feature count, and a cascade's
     `cascade` entry names the manifest's threshold and LM program; a module without one has neither entry;
  9. a planner with an outcome model fit on the logs (`outcome_model`: `planner.learned`) holds a model state in
     program.json's `outcome_model` entry that `runtime.outcome` accepts, with the manifest's families, feature
     count and scorer types; its rules are code, so it loads with program= (NumPy scores the model: no
     scikit-learn); a module without one has no such entry.
  10. a planner set to explore (`exploration`, format version 7) holds settings in range
     (`runtime.exploration.ExplorationSettings`) and is a program that can follow them (`directive_for`,
     `exploration_policies`: `planner.rules` epsilon, `planner.learned` epsilon and softmax).

A module with a rule gate applies `runtime.rules.rule_decision` first: a turn whose deciding rule is
gated gets the rule's decision without an LM call (standalone, `FrozenDecisionProgram` does it; an
installed program loads the gate from program.json and must hold one).

A `knn_fewshot` module runs its program through `runtime.frozen.modules.NearestDemosProgram`: for
each input, the k nearest pool examples (`runtime.frozen.knn`, the code the workbench selected with)
become every predictor's demos.

Where the signature comes from (the runtime must not import `signatures/` or `programs/`, which
sit above it): the manifest stores each predictor's full signature definition (field names,
types, constraints, instructions; `runtime.signature_spec`). Two ways to load:
  * standalone, `load_frozen(DIR)`: the runtime rebuilds the signature with dspy from that
    definition, checks the rebuilt class hashes to the recorded hash, and runs the single
    exported predictor under the program contract (`runtime.frozen.modules`). This is the
    production path for single-predictor programs and needs nothing from the upper layers.
  * installed, `load_frozen(DIR, program=...)`: the caller (the application layer) passes a
    fresh instance of the installed program; each of its predictors' signatures must hash to
    the manifest's, then the exported state is loaded into it. Multi-predictor stacks and
    rule-based programs (their logic is code) load this way.
"""

from __future__ import annotations

import json
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Optional, Union

from pydantic import ValidationError

from runtime.advisor import (AdvisorPacket, DirectiveValidation, ExperimentLogEntry, ExperimentSummary, FamilyConstraints,
                      OptimizationDirective, PerformanceProfile)
from runtime.checksums import verify_folder
from runtime.provenance import cross_checked
from runtime.frozen.knn import DemoSelector, KnnStateError
from runtime.frozen.manifest import (COMPATIBLE_WITH, FORMAT_VERSION, KNN_FILE, MANIFEST_FILE, PROGRAM_FILE,
                                     READABLE_FORMAT_VERSIONS, FrozenManifest, FrozenModuleError, OutcomeModelSpec,
                                     PredictorSpec, dspy_compatible)
from runtime.fullauto import FullAutoTurnSummary, GuardrailConfig, GuidanceDecision
from runtime.inputs import PACKET_INPUT_NAMES, SUMMARY_INPUT_NAMES
from runtime.outcome import OUTCOME_MODEL_KEY, OutcomeModel, OutcomeModelError
from runtime.rules import RULE_GATE_KEY
from runtime.trained import (CASCADE_KEY, FEATURES_VERSION, TRAINED_MODEL_KEY, TrainedDecisionModel,
                             TrainedModelError)
from runtime.signature_spec import SignatureSpec, SignatureSpecError, build_signature, spec_of

__all__ = ["FrozenModuleError", "load_frozen", "verify_frozen", "read_program_state", "read_demo_selection",
           "installed_dspy_version"]

# What a module of each kind answers: its main signature's outputs are among these (and `reasoning`).
_KIND_OUTPUTS: dict[str, frozenset[str]] = {"full_auto": frozenset(GuidanceDecision.model_fields),
                                            "planner": frozenset(OptimizationDirective.model_fields)}
# Types a signature field may name that the runtime itself can rebuild.
RUNTIME_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    AdvisorPacket, DirectiveValidation, ExperimentLogEntry, ExperimentSummary, FamilyConstraints,
    OptimizationDirective, PerformanceProfile, FullAutoTurnSummary, GuardrailConfig, GuidanceDecision)}


def installed_dspy_version() -> Optional[str]:
    """The installed dspy version (from package metadata, without importing dspy)."""
    try:
        return metadata.version("dspy")
    except metadata.PackageNotFoundError:
        return None


def _read_json(root: Path, name: str) -> Any:
    try:
        return json.loads((root / name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FrozenModuleError(f"{name} is not readable JSON: {' '.join(str(exc).split())[:200]}") from None


def _manifest(root: Path) -> FrozenManifest:
    data = _read_json(root, MANIFEST_FILE)
    try:
        manifest = FrozenManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "manifest"
        raise FrozenModuleError(f"{MANIFEST_FILE} is invalid: {where}: {first['msg']}") from None
    if manifest.format_version not in READABLE_FORMAT_VERSIONS:
        raise FrozenModuleError(f"{MANIFEST_FILE} has format version {manifest.format_version}; this runtime reads "
                                f"versions {', '.join(map(str, READABLE_FORMAT_VERSIONS))} (current {FORMAT_VERSION})")
    if manifest.format_version < 4 and any(predictor.prompt is not None for predictor in manifest.predictors):
        raise FrozenModuleError(f"{MANIFEST_FILE} has format version {manifest.format_version}, which has no "
                                "predictor prompt (version 4 added it)")
    # What each format version added: a field set in an older manifest is refused, as are Full Auto parts elsewhere.
    for field, version, only in (("demo_selection", 2, None), ("rule_gate", 3, "full_auto"),
                                 ("trained_model", 4, "full_auto"), ("provenance", 5, None),
                                 ("outcome_model", 6, "planner"), ("exploration", 7, "planner")):
        if getattr(manifest, field) is None:
            continue
        if manifest.format_version < version:
            raise FrozenModuleError(f"{MANIFEST_FILE} has format version {manifest.format_version}, which has no "
                                    f"{field} (version {version} added it)")
        if only is not None and manifest.kind != only:
            raise FrozenModuleError(f"{MANIFEST_FILE} declares a {field} for a {manifest.kind} module; "
                                    f"only {only} modules have one")
    _check_kind(manifest)
    capped = [p.name for p in manifest.predictors if p.max_tokens is not None]
    if capped and manifest.format_version < 4:
        raise FrozenModuleError(f"{MANIFEST_FILE} has format version {manifest.format_version}, which has no "
                                f"max_tokens (version 4 added it; predictor {capped[0]} sets one)")
    return manifest


def _check_kind(manifest: FrozenManifest) -> None:
    """The kind decides which records a module reads and which contract it answers, so it must be the kind its
    main signature answers (a decision's fields or a directive's): an edited kind is refused on every path."""
    outputs = set(manifest.signature.output_names) - {"reasoning"}
    answered = [kind for kind, fields in _KIND_OUTPUTS.items() if outputs and outputs <= fields]
    if answered != [manifest.kind]:
        what = f"a {answered[0]} module's" if answered else "no module kind's"
        raise FrozenModuleError(f"{MANIFEST_FILE} declares kind {manifest.kind}, but its signature "
                                f"{manifest.signature_name} answers {what} fields {sorted(outputs)}")
    if manifest.compatible_with != COMPATIBLE_WITH[manifest.kind]:
        raise FrozenModuleError(f"{MANIFEST_FILE} declares compatible_with {manifest.compatible_with!r}; a "
                                f"{manifest.kind} module reads {COMPATIBLE_WITH[manifest.kind]!r}")


def _check_dspy(manifest: FrozenManifest) -> None:
    installed = installed_dspy_version()
    if installed is None:
        raise FrozenModuleError("dspy is not installed")
    if not dspy_compatible(manifest.dspy_version, installed):
        raise FrozenModuleError(f"dspy version mismatch: exported with dspy {manifest.dspy_version}, "
                                f"installed {installed} (needs the same major.minor)")


def _check_signature_hashes(manifest: FrozenManifest) -> None:
    recorded = manifest.signature.hash()
    if recorded != manifest.signature_hash:
        raise FrozenModuleError(f"signature hash mismatch: {manifest.signature_name} definition in {MANIFEST_FILE} "
                                f"hashes to {recorded[:12]}..., manifest says {manifest.signature_hash[:12]}...")
    for predictor in manifest.predictors:
        recorded = predictor.signature.hash()
        if recorded != predictor.signature_hash:
            raise FrozenModuleError(f"signature hash mismatch: predictor '{predictor.name}' definition hashes to "
                                    f"{recorded[:12]}..., manifest says {predictor.signature_hash[:12]}...")


def read_program_state(root: Path, manifest: FrozenManifest) -> dict[str, Any]:
    """program.json as {predictor: state} (and its `rule_gate` entry, if any), checked against the manifest's
    predictors and rule gate."""
    state = _read_json(root, PROGRAM_FILE)
    if not isinstance(state, dict):
        raise FrozenModuleError(f"{PROGRAM_FILE} must be a JSON object")
    state = {k: v for k, v in state.items() if k != "metadata"}
    _check_rule_gate(state.get(RULE_GATE_KEY), manifest)
    read_trained_model(state, manifest)
    read_outcome_model(state, manifest)
    expected = sorted(p.name for p in manifest.predictors)
    found = sorted(k for k in state if k not in (RULE_GATE_KEY, TRAINED_MODEL_KEY, CASCADE_KEY, OUTCOME_MODEL_KEY))
    if found != expected:
        raise FrozenModuleError(f"{PROGRAM_FILE} holds predictors {found}, the manifest lists {expected}")
    demos = 0
    for predictor in manifest.predictors:
        entry = state[predictor.name]
        fields = (entry.get("signature") or {}).get("fields") if isinstance(entry, dict) else None
        if not isinstance(fields, list) or not isinstance(entry.get("demos"), list):
            raise FrozenModuleError(f"{PROGRAM_FILE} predictor '{predictor.name}' has no signature fields or demos")
        want = len(predictor.signature.inputs) + len(predictor.signature.outputs)
        if len(fields) != want:
            raise FrozenModuleError(f"{PROGRAM_FILE} predictor '{predictor.name}' has {len(fields)} fields, "
                                    f"its signature {predictor.signature_name} has {want}")
        _check_prompt(predictor, entry, manifest.format_version)
        if entry.get("lm") is not None:
            raise FrozenModuleError(f"{PROGRAM_FILE} predictor '{predictor.name}' carries LM state "
                                    "(an export never holds an LM endpoint or key)")
        demos += len(entry["demos"])
    if demos != manifest.demo_count:
        raise FrozenModuleError(f"{PROGRAM_FILE} holds {demos} demos, the manifest counts {manifest.demo_count}")
    return state


def _check_prompt(predictor: PredictorSpec, entry: dict[str, Any], format_version: int) -> None:
    """The predictor's state runs the prompt text the manifest declares, and holds state only for its fields."""
    declared = predictor.state_prompt()
    whose = "its rewritten prompt" if predictor.prompt is not None else f"its signature {predictor.signature_name}"
    # Before format 4 a manifest could not declare a prompt an optimizer rewrote: such a module is not
    # necessarily edited, but what it runs is declared nowhere either.
    edited = (f"{PROGRAM_FILE} no longer matches the module as exported; re-export it" if format_version >= 4 else
              f"{PROGRAM_FILE} was edited, or holds a prompt an optimizer rewrote that format version "
              f"{format_version} cannot declare; re-export the module")
    saved = entry["signature"]
    if saved.get("instructions") != declared.instructions:
        raise FrozenModuleError(f"{PROGRAM_FILE} predictor '{predictor.name}' runs other instructions than "
                                f"{MANIFEST_FILE} declares ({whose}): {edited}")
    names = predictor.signature.input_names + predictor.signature.output_names
    if len(declared.fields) != len(names):
        raise FrozenModuleError(f"{MANIFEST_FILE} predictor '{predictor.name}' prompt has {len(declared.fields)} "
                                f"fields, its signature {predictor.signature_name} has {len(names)}")
    for name, field, want in zip(names, saved["fields"], declared.fields):
        if field != want.model_dump():
            raise FrozenModuleError(f"{PROGRAM_FILE} predictor '{predictor.name}' field '{name}' has another prefix "
                                    f"or description than {MANIFEST_FILE} declares ({whose}): {edited}")
    field_state = entry.get("fields") or {}
    unknown = sorted(set(field_state) - set(names)) if isinstance(field_state, dict) else [field_state]
    if unknown:
        raise FrozenModuleError(f"{PROGRAM_FILE} predictor '{predictor.name}' holds state for fields {unknown} that "
                                f"its signature {predictor.signature_name} does not have: {edited}")


def _check_rule_gate(gate: Any, manifest: FrozenManifest) -> None:
    declared = manifest.rule_gate
    if declared is None:
        if gate is not None:
            raise FrozenModuleError(f"{PROGRAM_FILE} holds a {RULE_GATE_KEY} but {MANIFEST_FILE} declares none")
        return
    if gate is None:
        raise FrozenModuleError(f"{PROGRAM_FILE} has no {RULE_GATE_KEY}, {MANIFEST_FILE} declares rules "
                                f"{declared.rules!r}")
    rules = gate.get("rules") if isinstance(gate, dict) else None
    if rules != declared.rules:
        raise FrozenModuleError(f"{PROGRAM_FILE} {RULE_GATE_KEY} holds rules {rules!r}, {MANIFEST_FILE} declares "
                                f"{declared.rules!r}")


def read_trained_model(state: dict[str, Any], manifest: FrozenManifest) -> Optional[TrainedDecisionModel]:
    """program.json's trained model (None without one), checked against the manifest's `trained_model`."""
    declared, entry, cascade = manifest.trained_model, state.get(TRAINED_MODEL_KEY), state.get(CASCADE_KEY)
    if declared is None:
        if entry is not None or cascade is not None:
            raise FrozenModuleError(f"{PROGRAM_FILE} holds a {TRAINED_MODEL_KEY if entry is not None else CASCADE_KEY}"
                                    f" but {MANIFEST_FILE} declares no trained_model")
        return None
    try:
        model = TrainedDecisionModel.from_state(entry.get("model") if isinstance(entry, dict) else None)
    except TrainedModelError as exc:
        raise FrozenModuleError(f"{PROGRAM_FILE} {TRAINED_MODEL_KEY} is invalid: {exc}") from None
    found = {"kind": "linear", "features_version": FEATURES_VERSION, "classes": model.classes,
             "n_features": int(model.coef.shape[1])}
    for key, value in found.items():
        if getattr(declared, key) != value:
            raise FrozenModuleError(f"{PROGRAM_FILE} {TRAINED_MODEL_KEY} has {key} {value!r}, {MANIFEST_FILE} "
                                    f"declares {getattr(declared, key)!r}")
    settings = cascade if isinstance(cascade, dict) else {}
    if (cascade is None) != (declared.threshold is None) or settings.get("threshold") != declared.threshold \
            or settings.get("lm_program") != declared.lm_program:
        raise FrozenModuleError(f"{PROGRAM_FILE} {CASCADE_KEY} is {cascade!r}, {MANIFEST_FILE} declares threshold "
                                f"{declared.threshold!r} and lm_program {declared.lm_program!r}")
    if declared.threshold is not None and len(manifest.predictors) != 1:
        raise FrozenModuleError(f"a cascade hands unsure turns to one LM predictor; {MANIFEST_FILE} lists "
                                f"{len(manifest.predictors)}")
    return model


def read_outcome_model(state: dict[str, Any], manifest: FrozenManifest) -> Optional[OutcomeModel]:
    """program.json's planner outcome model (None without one), checked against the manifest's `outcome_model`."""
    declared, entry = manifest.outcome_model, state.get(OUTCOME_MODEL_KEY)
    if declared is None:
        if entry is not None:
            raise FrozenModuleError(f"{PROGRAM_FILE} holds an {OUTCOME_MODEL_KEY} but {MANIFEST_FILE} declares none")
        return None
    try:
        model = OutcomeModel.from_state(entry.get("model") if isinstance(entry, dict) else None)
    except OutcomeModelError as exc:
        raise FrozenModuleError(f"{PROGRAM_FILE} {OUTCOME_MODEL_KEY} is invalid: {exc}") from None
    for key, value in OutcomeModelSpec.of(model).model_dump(exclude={"scorer"}).items():
        if getattr(declared, key) != value:
            raise FrozenModuleError(f"{PROGRAM_FILE} {OUTCOME_MODEL_KEY} has {key} {value!r}, {MANIFEST_FILE} "
                                    f"declares {getattr(declared, key)!r}")
    return model


def read_demo_selection(root: Path, manifest: FrozenManifest) -> Optional[DemoSelector]:
    """knn.json as a `DemoSelector` (None for fixed demos), checked against the manifest's demo_selection."""
    declared = manifest.demo_selection
    if declared is None:
        if (root / KNN_FILE).exists():
            raise FrozenModuleError(f"{KNN_FILE} is present but {MANIFEST_FILE} declares no demo_selection")
        return None
    try:
        selector = DemoSelector.from_state(_read_json(root, KNN_FILE))
    except KnnStateError as exc:
        raise FrozenModuleError(f"{KNN_FILE} is invalid: {exc}") from None
    found = {"k": selector.k, "vectorizer": selector.vectorizer.name, "fields": selector.fields,
             "nearest_last": selector.nearest_last, "pool_size": len(selector.pool)}
    for key, value in found.items():
        if getattr(declared, key) != value:
            raise FrozenModuleError(f"{KNN_FILE} has {key} {value!r}, {MANIFEST_FILE} declares "
                                    f"{getattr(declared, key)!r}")
    return selector


def verify_frozen(path: Union[str, Path]) -> FrozenManifest:
    """Every check of `load_frozen` that needs no program: integrity, manifest, versions, hashes, state."""
    root = Path(path)
    try:
        if not root.is_dir():
            raise FrozenModuleError("not a directory")
        verify_folder(root)
        manifest = _manifest(root)
        _check_dspy(manifest)
        _check_signature_hashes(manifest)
        state = read_program_state(root, manifest)
        read_demo_selection(root, manifest)
        # A provenance its own fitted model contradicts (re-signed or not) is unknown to every reader of the module.
        manifest.provenance = cross_checked(manifest.provenance, state)
        return manifest
    except FrozenModuleError as exc:
        raise FrozenModuleError(exc.reason, str(root)) from None


def _installed_program(program: Any, manifest: FrozenManifest, state: dict[str, Any],
                       signature: Any) -> Any:
    instance = program() if isinstance(program, type) or not hasattr(program, "named_predictors") else program
    if not hasattr(instance, "named_predictors") or not hasattr(instance, "load_state"):
        raise FrozenModuleError(f"program= must be a dspy.Module or a factory of one, got {type(instance).__name__}")
    if manifest.trained_model is not None and manifest.trained_model.lm_program and hasattr(instance, "configure"):
        # A cascade's predictors are its LM program's: build that one before comparing signatures.
        instance.configure(lm_program=manifest.trained_model.lm_program)
    installed = dict(instance.named_predictors())
    expected = {p.name: p for p in manifest.predictors}
    if sorted(installed) != sorted(expected):
        raise FrozenModuleError(f"installed program {manifest.entry} has predictors {sorted(installed)}, "
                                f"the module was exported with {sorted(expected)}")
    for name, predictor in installed.items():
        digest = spec_of(predictor.signature, name=expected[name].signature_name).hash()
        if digest != expected[name].signature_hash:
            raise FrozenModuleError(
                f"signature mismatch: installed predictor '{name}' ({expected[name].signature_name}) hashes to "
                f"{digest[:12]}..., the module was exported with {expected[name].signature_hash[:12]}... "
                "(field names, types or instructions changed)")
    if signature is not None:
        _check_installed_signature(signature, manifest)
    parameters = dict(instance.named_parameters())
    if manifest.trained_model is not None and TRAINED_MODEL_KEY not in parameters:
        raise FrozenModuleError(f"installed program {manifest.entry} has no {TRAINED_MODEL_KEY}; the module was "
                                "exported with a decision model fit on the logs")
    if manifest.outcome_model is not None and OUTCOME_MODEL_KEY not in parameters:
        raise FrozenModuleError(f"installed program {manifest.entry} has no {OUTCOME_MODEL_KEY}; the module was "
                                "exported with an outcome model fit on the logs")
    gate = parameters.get(RULE_GATE_KEY)
    if manifest.rule_gate is not None and gate is None:
        # dspy's load_state skips entries the program has no parameter for: the rules would be dropped silently.
        raise FrozenModuleError(f"installed program {manifest.entry} has no {RULE_GATE_KEY}; the module was exported "
                                f"with rules {'+'.join(manifest.rule_gate.rules)} deciding before its LM")
    try:
        instance.load_state(state)
    except Exception as exc:  # dspy's own refusal, reported as the module's
        raise FrozenModuleError(f"{PROGRAM_FILE} does not load into {manifest.entry}: "
                                f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    return instance


def _check_installed_signature(signature: Any, manifest: FrozenManifest) -> None:
    digest = spec_of(signature, name=manifest.signature_name).hash()
    if digest != manifest.signature_hash:
        raise FrozenModuleError(f"signature mismatch: installed {manifest.signature_name} hashes to {digest[:12]}..., "
                                f"the module was exported with {manifest.signature_hash[:12]}... "
                                "(field names, types or instructions changed)")


def _standalone_program(manifest: FrozenManifest, state: dict[str, Any], signature: Any) -> Any:
    from runtime.frozen.modules import FrozenDecisionProgram, FrozenPlannerProgram, missing_inputs

    model = read_trained_model(state, manifest)
    if model is not None and not manifest.predictors:  # full_auto.learned: the model decides every turn
        return FrozenDecisionProgram(None, None, None, model=model)
    if not manifest.uses_lm or len(manifest.predictors) != 1:
        raise FrozenModuleError(
            f"entry {manifest.entry} has {len(manifest.predictors)} predictors and its logic is code: "
            "load it with program= (a fresh instance of the installed program)")
    if signature is not None:
        _check_installed_signature(signature, manifest)
    predictor_spec = manifest.predictors[0]
    spec: SignatureSpec = predictor_spec.signature
    # What the runtime's own rendering (`runtime.inputs`, shared with training) provides: the original
    # and the compact inputs, under different names, so the signature's field names pick the rendering.
    available = set(SUMMARY_INPUT_NAMES) if manifest.kind == "full_auto" else set(PACKET_INPUT_NAMES)
    missing = missing_inputs(spec, available)
    if missing:
        raise FrozenModuleError(f"signature {predictor_spec.signature_name} needs inputs {missing} that the runtime "
                                "cannot fill on its own: load it with program=")
    try:
        rebuilt = build_signature(spec, RUNTIME_TYPES)
    except SignatureSpecError as exc:
        raise FrozenModuleError(str(exc)) from None
    digest = spec_of(rebuilt, name=spec.name).hash()
    if digest != predictor_spec.signature_hash:
        raise FrozenModuleError(f"signature mismatch: rebuilt {predictor_spec.signature_name} hashes to "
                                f"{digest[:12]}..., the manifest says {predictor_spec.signature_hash[:12]}...")
    import dspy

    # DSPy's state does not hold the program's call settings: the manifest carries the answer cap.
    cap = predictor_spec.max_tokens
    predictor = dspy.Predict(rebuilt, **({} if cap is None else {"max_tokens": cap}))
    try:
        predictor.load_state(state[predictor_spec.name])
    except Exception as exc:  # dspy's own refusal, reported as the module's
        raise FrozenModuleError(f"{PROGRAM_FILE} does not load: {type(exc).__name__}: "
                                f"{' '.join(str(exc).split())[:200]}") from None
    if manifest.kind == "full_auto":
        rules = manifest.rule_gate.rules if manifest.rule_gate is not None else None
        threshold = manifest.trained_model.threshold if manifest.trained_model is not None else None
        return FrozenDecisionProgram(predictor_spec.name, predictor, spec, rules=rules, model=model,
                                     threshold=threshold)
    return FrozenPlannerProgram(predictor_spec.name, predictor, spec)


def load_frozen(path: Union[str, Path], *, program: Any = None, signature: Any = None,
                inputs: Optional[Callable[[Any], dict[str, Any]]] = None, lm: Any = None) -> Any:
    """Verify a frozen module folder and return its callable guidance or planner module.

    `program`: a fresh installed program (or its factory) to load the state into; `signature`:
    the installed main signature class to compare; `inputs`: maps a summary / packet to the
    program's keyword inputs; `lm`: the dspy LM to call (default: the configured one).
    Raises `FrozenModuleError` with a one-line reason.
    """
    root = Path(path)
    manifest = verify_frozen(root)
    try:
        state = read_program_state(root, manifest)
        if program is not None:
            instance = _installed_program(program, manifest, state, signature)
        else:
            instance = _standalone_program(manifest, state, signature)
        selector = read_demo_selection(root, manifest)
    except FrozenModuleError as exc:
        raise FrozenModuleError(exc.reason, str(root)) from None
    from runtime.frozen.modules import FrozenGuidanceModule, FrozenPlannerModule, NearestDemosProgram

    if selector is not None:
        instance = NearestDemosProgram(instance, selector)

    if manifest.exploration is not None:
        _check_exploration(manifest, instance, root)
    if manifest.kind == "full_auto":
        # pickled as this very call (the shadow's process loads the module again from its folder)
        reload = partial(load_frozen, root, program=program, signature=signature, inputs=inputs, lm=lm)
        return FrozenGuidanceModule(manifest, instance, root, inputs=inputs, lm=lm, reload=reload)
    return FrozenPlannerModule(manifest, instance, root, inputs=inputs, lm=lm)


def _check_exploration(manifest: FrozenManifest, program: Any, root: Path) -> None:
    """An exploring planner must write a directive for a family it is given (`directive_for`) and know the policy
    (softmax needs estimates: `exploration_policies`); a greedy setting needs nothing."""
    settings = manifest.exploration
    if settings is None or not settings.explores:
        return
    supported = tuple(getattr(program, "exploration_policies", ()))
    if settings.policy not in supported or not callable(getattr(program, "directive_for", None)):
        raise FrozenModuleError(f"{MANIFEST_FILE} sets exploration policy {settings.policy!r}, which {manifest.entry} "
                                f"cannot follow (it supports {list(supported) or 'none'}): export it without "
                                "exploration, or export planner.rules (epsilon) or planner.learned (epsilon, softmax)",
                                str(root))
