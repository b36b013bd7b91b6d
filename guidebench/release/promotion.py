"""Promotion of frozen modules through explicit gates: candidate -> staged -> promoted, and rollback.

`promote_module` first refuses, before any replay, a module whose evidence would hold records it learned
from (`runtime.provenance.check_overlap` against its manifest's provenance; a module without one, or with one
that does not hold together, whose provenance is unknown, is refused too: recompile and re-export it). The
champion is checked the same way: a champion that learned from some of the evidence's records (or whose
provenance is unknown) cannot judge a challenger there, since its scores on them are not evidence either; the
attempt is refused in one line that names the count and asks for a split neither learned from, unless
`baseline` names a program to judge the candidate against instead (the ledger then records the champion set
aside, and why). It then replays the candidate and the current champion (or, before any champion, a measured
baseline: the deployed policy's logged decisions) on the same held-out split, compares them with the evals
layer's paired statistics, and applies the gates (`guidebench.release.gates`). A module that passes is staged,
then registered in the MLflow model registry under alias `champion` (the replaced version becomes `previous`).
`rollback_module` restores `previous`.

Every attempt — refused, rejected, staged, promoted, rolled back — is appended to the promotion
ledger (`<GUIDEBENCH_HOME>/promotions.jsonl`, one `PromotionRecord` per line, rewritten atomically
under a lock) and logged as a run of the MLflow experiment `guidebench-promotions`. The export
folder itself never changes (its checksums are its identity, `folder_digest`): a module's state
lives in the ledger and in its registry version's `promotion_state` tag.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.checksums import module_checksum
from runtime.frozen.loader import verify_frozen
from runtime.frozen.manifest import CHECKSUMS_FILE, FrozenManifest, FrozenModuleError, MetricInterval
from runtime.provenance import OverlapCheck, Provenance, check_overlap, known

from guidebench.errors import GuidebenchError
from guidebench.lm.identity import LMIdentity, lm_identity
from guidebench.release.gates import GateCheck, GatesConfig, PairedDiff, evaluate_gates, load_gates
from guidebench.release.model_registry import CHAMPION, ModuleRegistry, RegisteredModule

Outcome = Literal["refused", "rejected", "staged", "shadow", "promoted", "rolled_back"]
LEDGER_FILE = "promotions.jsonl"
# Baseline measured when no champion exists yet: what production actually decided.
DEFAULT_BASELINES: dict[str, str] = {"full_auto": "logged", "planner": "planner.rules"}
HELD_OUT_SPLITS: tuple[str, ...] = ("dev", "test")


class ModuleRef(BaseModel):
    """Which frozen module an attempt concerns."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: str = ""
    package: str = ""
    digest: str = ""
    path: Optional[str] = None
    registry_version: Optional[str] = None


class PromotionEvidence(BaseModel):
    """The paired replay behind a verdict: both programs on the same split."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dataset_id: str
    split: str
    split_hash: str
    n_records: int
    baseline: str
    lm: Optional[LMIdentity] = None  # the LM both programs ran with; None when neither calls one
    candidate_metrics: dict[str, MetricInterval] = Field(default_factory=dict)
    baseline_metrics: dict[str, MetricInterval] = Field(default_factory=dict)
    paired: dict[str, PairedDiff] = Field(default_factory=dict)
    mcnemar: Optional[dict[str, Any]] = None
    learned_from: Optional[OverlapCheck] = None  # the candidate learned from none of these records
    # the champion's check on the same records (None: judged against a baseline program, which learned from none)
    champion_learned_from: Optional[OverlapCheck] = None
    champion_set_aside: str = ""  # why a champion that could not judge was replaced by the named baseline


class SequentialEvidence(BaseModel):
    """The shadow gate behind a verdict (`guidebench.release.shadow`): the candidate's shadow decisions and the
    deployed program's on the same labeled turns, and their confidence sequence."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dataset_id: str
    verdict: str
    n: int  # labeled paired decisions
    decided_at: Optional[int] = None  # the look at which the confidence sequence first crossed
    difference: Optional[float] = None  # candidate - deployed objective at that look (else at n)
    cs_low: Optional[float] = None
    cs_high: Optional[float] = None
    alpha: float
    min_effect: float
    max_decisions: int
    method: str = "empirical-Bernstein confidence sequence (Howard et al. 2021, stitching boundary)"
    candidate_objective: Optional[float] = None  # means over the n paired decisions
    deployed_objective: Optional[float] = None
    counts: dict[str, int] = Field(default_factory=dict)


class PromotionRecord(BaseModel):
    """One promotion attempt or state change, with its reasons."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    attempt_id: str
    at: str
    action: Literal["promote", "rollback", "shadow"]
    module: ModuleRef
    from_state: str
    to_state: str
    outcome: Outcome
    reasons: list[str] = Field(default_factory=list)
    gates: Optional[GatesConfig] = None
    gates_file: Optional[str] = None
    checks: list[GateCheck] = Field(default_factory=list)
    champion: Optional[ModuleRef] = None
    evidence: Optional[PromotionEvidence] = None
    sequential: Optional[SequentialEvidence] = None
    mlflow_run_id: Optional[str] = None


# ----- the ledger --------------------------------------------------------------------------------

def default_ledger_path() -> Path:
    """`<GUIDEBENCH_HOME>/promotions.jsonl`."""
    from guidebench.tracking.runs import guidebench_home

    return guidebench_home() / LEDGER_FILE


class PromotionLedger:
    """Append-only record of promotion attempts; each write replaces the file atomically."""

    def __init__(self, path: Optional[Path] = None):
        self.path = Path(path) if path is not None else default_ledger_path()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def records(self) -> list[PromotionRecord]:
        """Every record, oldest first; a bad line is an error naming the file and line."""
        if not self.path.is_file():
            return []
        records = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(PromotionRecord.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "record"
                raise GuidebenchError(f"{self.path}:{number}: field {where}: {first['msg']}") from exc
        return records

    def append(self, record: PromotionRecord) -> None:
        """Add one record (temporary file, fsync, rename: a crash keeps the old ledger whole)."""
        with self._locked():
            text = self.path.read_text(encoding="utf-8") if self.path.is_file() else ""
            if text and not text.endswith("\n"):
                text += "\n"
            text += record.model_dump_json() + "\n"
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)

    def state_of(self, digest: str) -> str:
        """The promotion state of a module folder (by digest): its last recorded state, else candidate."""
        state = "candidate"
        for record in self.records():
            if record.module.digest == digest:
                state = record.to_state
        return state


# ----- helpers -----------------------------------------------------------------------------------

def folder_digest(module_dir: Path) -> str:
    """Identity of a frozen module folder: SHA-256 of its checksums file (which covers every file); a shadow line
    names its module by the same digest (`runtime.checksums.module_checksum`)."""
    return module_checksum(module_dir)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def module_ref(manifest: FrozenManifest, module_dir: Path, digest: str,
               registry_version: Optional[str] = None) -> ModuleRef:
    """The ledger's reference to an exported module folder."""
    return ModuleRef(name=manifest.name, version=manifest.version, package=manifest.package, digest=digest,
                     path=str(module_dir), registry_version=registry_version)


def registered_ref(module: RegisteredModule) -> ModuleRef:
    """The ledger's reference to a module in the registry."""
    name, _, version = module.package.partition("@")
    return ModuleRef(name=module.name, version=version, package=module.package, digest=module.digest,
                     path=module.source, registry_version=module.version)


def _metrics(values: dict[str, Any]) -> dict[str, MetricInterval]:
    out = {}
    for name, value in values.items():
        data = value.to_dict() if hasattr(value, "to_dict") else dict(value)
        clean = {k: (v if not (isinstance(v, float) and not math.isfinite(v)) else None) for k, v in data.items()}
        out[name] = MetricInterval.model_validate(clean)
    return out


def _paired(values: dict[str, Any]) -> dict[str, PairedDiff]:
    out = {}
    for name, value in values.items():
        data = value.model_dump() if hasattr(value, "model_dump") else dict(value)
        clean = {k: (v if not (isinstance(v, float) and not math.isfinite(v)) else None) for k, v in data.items()}
        out[name] = PairedDiff.model_validate(clean)
    return out


def _run_metrics(evidence: Optional[PromotionEvidence]) -> dict[str, float]:
    if evidence is None:
        return {}
    flat: dict[str, float] = {"n_records": float(evidence.n_records)}
    for prefix, metrics in (("candidate.", evidence.candidate_metrics), ("baseline.", evidence.baseline_metrics)):
        flat.update({f"{prefix}{k}": m.value for k, m in metrics.items() if m.value is not None})
    for name, diff in evidence.paired.items():
        if diff.diff is not None:
            flat[f"diff.{name}"] = diff.diff
        if diff.p_value is not None:
            flat[f"p_value.{name}"] = diff.p_value
    return {k.replace("@", "_"): float(v) for k, v in flat.items() if math.isfinite(v)}


# ----- evidence ---------------------------------------------------------------------------------

def evidence_split(manifest: FrozenManifest, data: Path, split: str) -> Any:
    """The held-out split the evidence comes from (`guidebench.evaluation.inputs.EvalData`), of the module's kind."""
    from guidebench.evaluation.inputs import load_eval_data

    if split not in HELD_OUT_SPLITS:
        raise GuidebenchError(f"--split {split}: promotion evidence must come from a held-out split "
                              f"({' or '.join(HELD_OUT_SPLITS)})")
    eval_data = load_eval_data(Path(data), split)
    if eval_data.kind != manifest.kind:
        raise GuidebenchError(f"--data {data} holds {eval_data.kind} records; {manifest.package} is a "
                              f"{manifest.kind} module")
    return eval_data


def gather_evidence(manifest: FrozenManifest, module_dir: Path, champion_dir: Optional[Path], baseline: str, *,
                    data: Path, split: str, lm: Optional[str], threads: int, seed: int,
                    n_resamples: int, progress: bool = False,
                    eval_data: Any = None) -> tuple[PromotionEvidence, Optional[str]]:
    """Replay candidate and champion (or baseline) on one split (`eval_data`, else read from `data`); returns
    evidence and why cost is moot."""
    from evals.replay import compare, replay

    from guidebench.lm.cost import Scoring, announce
    from guidebench.evaluation.inputs import load_export, load_program
    from guidebench.lm.factory import configure_lm

    eval_data = eval_data or evidence_split(manifest, data, split)
    candidate = load_export(module_dir)
    other = load_export(champion_dir) if champion_dir is not None else load_program(baseline)
    if other.kind != manifest.kind:
        raise GuidebenchError(f"baseline {other.name} is a {other.kind} program; {manifest.package} is {manifest.kind}")
    identity = None
    if candidate.uses_lm or other.uses_lm:
        spec = lm or "local"
        identity = lm_identity(spec, configure_lm(spec))
        announce(spec, [Scoring(p.name, p.program, eval_data.records, p.kind) for p in (candidate, other)
                                 if p.uses_lm])
    options: dict[str, Any] = dict(threads=threads, progress=progress, seed=seed, n_resamples=n_resamples)
    if eval_data.kind == "planner":  # the improvement by the dataset's cycles model, named on both replays
        from guidebench.evaluation.outcome_models import cycles_for

        cycles = cycles_for("auto", eval_data.records, eval_data.dataset_dir, split=eval_data.split, seed=seed)
        options["cycles_model"] = cycles.model
    ours = replay(candidate.program, eval_data.records, name=manifest.package, **options)
    theirs = replay(other.program, eval_data.records, name=other.name, **options)
    comparison = compare(ours, theirs, n_resamples=n_resamples, seed=seed)
    label = f"champion {other.name}" if champion_dir is not None else f"baseline program {other.name}"
    evidence = PromotionEvidence(
        dataset_id=eval_data.dataset_id, split=eval_data.split, split_hash=eval_data.split_hash,
        n_records=len(eval_data.records), baseline=label, lm=identity,
        candidate_metrics=_metrics(ours.metrics), baseline_metrics=_metrics(theirs.metrics),
        paired=_paired(comparison["metrics"]), mcnemar=comparison.get("mcnemar"))
    moot = None
    if getattr(other.program, "replays_log", False):
        moot = f"{label} replays the log and makes no LM call, so it has no measured cost"
    return evidence, moot


# ----- promote and roll back --------------------------------------------------------------------

def new_record(**fields: Any) -> PromotionRecord:
    """A ledger entry of a new attempt (its id and time set here)."""
    return PromotionRecord(attempt_id=uuid.uuid4().hex[:12], at=_now(), **fields)


def log_promotion_run(registry: ModuleRegistry, record: PromotionRecord,
                      module_dir: Optional[Path] = None) -> Optional[str]:
    """An MLflow run of a promotion attempt (its params, evidence and files); its id, None when it cannot log."""
    params = {"action": record.action, "package": record.module.package or record.module.name,
              "digest": record.module.digest, "outcome": record.outcome, "from_state": record.from_state,
              "to_state": record.to_state, "attempt_id": record.attempt_id,
              "gates": json.dumps(record.gates.model_dump() if record.gates else None, sort_keys=True)[:6000]}
    if record.evidence is not None:
        params.update(dataset_id=record.evidence.dataset_id, split=record.evidence.split,
                      split_hash=record.evidence.split_hash, baseline=record.evidence.baseline,
                      lm=record.evidence.lm.describe() if record.evidence.lm else "none")
        champion_check = record.evidence.champion_learned_from
        if champion_check is not None:
            params.update({f"champion_{k}": v for k, v in champion_check.params().items()})
    tags = {"guidebench.run_type": "promotion", "guidebench.outcome": record.outcome}
    with tempfile.TemporaryDirectory(prefix="guidebench-promotion-") as tmp:
        attempt = Path(tmp) / "promotion_record.json"
        attempt.write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
        run_id, _ = registry.log_attempt(run_name=f"{record.action} {record.module.package or record.module.name}",
                                         params=params, metrics=_run_metrics(record.evidence), tags=tags,
                                         module_dir=module_dir, artifacts={"record": attempt})
    return run_id


def promote_module(module_dir: Path, *, data: Path, split: str = "test", gates_file: Optional[Path] = None,
                   baseline: Optional[str] = None, stage_only: bool = False, lm: Optional[str] = None,
                   threads: int = 1, seed: int = 0, n_resamples: int = 1000, tracking_uri: Optional[str] = None,
                   ledger: Optional[PromotionLedger] = None, progress: bool = False) -> PromotionRecord:
    """Gate a frozen module against the champion and promote it when every gate passes."""
    if split not in HELD_OUT_SPLITS:
        raise GuidebenchError(f"--split {split}: promotion evidence must come from a held-out split "
                              f"({' or '.join(HELD_OUT_SPLITS)})")
    gates = load_gates(gates_file)
    ledger = ledger or PromotionLedger()
    module_dir = Path(module_dir).absolute()
    common = dict(action="promote", gates=gates, gates_file=str(gates_file) if gates_file else None)
    try:
        manifest = verify_frozen(module_dir)
    except FrozenModuleError as exc:
        digest = folder_digest(module_dir) if (module_dir / CHECKSUMS_FILE).is_file() else ""
        record = new_record(module=ModuleRef(name=module_dir.name, digest=digest, path=str(module_dir)),
                            from_state="candidate", to_state="candidate", outcome="refused",
                            reasons=[f"refused by the runtime loader: {exc.reason}"], **common)
        record.mlflow_run_id = log_promotion_run(ModuleRegistry(tracking_uri), record)
        ledger.append(record)
        return record
    try:  # the gates of this loop's modules (a planner has no guardrail gate), before any work: gates.py
        gates = gates.for_kind(manifest.kind)
    except ValueError as exc:
        raise GuidebenchError(f"{gates_file}: {exc}") from None
    common["gates"] = gates
    registry = ModuleRegistry(tracking_uri)
    digest = folder_digest(module_dir)
    state = ledger.state_of(digest)
    champion = registry.alias(manifest.name, CHAMPION)
    if champion is not None and champion.digest == digest:
        raise GuidebenchError(f"{manifest.package} ({module_dir}) is already the champion "
                              f"(registry version {champion.version})")
    eval_data = evidence_split(manifest, data, split)
    learned = check_overlap(manifest.provenance, eval_data.records, dataset_id=eval_data.dataset_id,
                            split=eval_data.split)
    if learned.status != "clean":  # before any replay: no evidence can come from records it learned from
        record = new_record(module=module_ref(manifest, module_dir, digest), from_state=state, to_state=state,
                            outcome="refused", reasons=[learned.line()], **common)
        record.mlflow_run_id = log_promotion_run(registry, record)
        ledger.append(record)
        return record
    champion_copy: Optional[Path] = None
    try:
        judge: Optional[Path] = None
        champion_check: Optional[OverlapCheck] = None
        set_aside = ""
        if champion is not None:
            champion_copy = registry.download(champion)
            champion_provenance, champion_check = champion_learned_from(champion_copy, eval_data)
            if champion_check.status == "clean":
                judge = champion_copy
            elif baseline is None:  # a champion that learned from the evidence cannot judge: refuse, before any replay
                record = new_record(module=module_ref(manifest, module_dir, digest), from_state=state,
                                    to_state=state, outcome="refused", champion=registered_ref(champion),
                                    reasons=[champion_refusal(champion, champion_check,
                                                              (manifest.provenance, champion_provenance), eval_data)],
                                    **common)
                record.mlflow_run_id = log_promotion_run(registry, record)
                ledger.append(record)
                return record
            else:
                set_aside = (f"champion {champion.package} (registry version {champion.version}) set aside: "
                             f"{champion_check.line('the champion')}")
        evidence, cost_moot = gather_evidence(
            manifest, module_dir, judge, baseline or DEFAULT_BASELINES[manifest.kind], data=data,
            split=split, lm=lm, threads=threads, seed=seed, n_resamples=n_resamples, progress=progress,
            eval_data=eval_data)
    finally:
        if champion_copy is not None:
            shutil.rmtree(champion_copy.parent, ignore_errors=True)
    evidence.learned_from = learned
    evidence.champion_learned_from = champion_check if judge is not None else None
    evidence.champion_set_aside = set_aside
    checks = evaluate_gates(gates, evidence.candidate_metrics, evidence.baseline_metrics, evidence.paired,
                            evidence.n_records, cost_uncomparable=cost_moot, kind=manifest.kind)
    failed = [check for check in checks if not check.passed]
    champion_ref = registered_ref(champion) if champion is not None else None
    ref = module_ref(manifest, module_dir, digest)
    if failed:
        record = new_record(module=ref, from_state=state, to_state=state, outcome="rejected",
                            reasons=[check.reason for check in failed], checks=checks, champion=champion_ref,
                            evidence=evidence, **common)
        record.mlflow_run_id = log_promotion_run(registry, record)
        ledger.append(record)
        return record
    staged = new_record(module=ref, from_state=state, to_state="staged", outcome="staged",
                        reasons=[check.reason for check in checks], checks=checks, champion=champion_ref,
                        evidence=evidence, **common)
    if stage_only:
        staged.mlflow_run_id = log_promotion_run(registry, staged)
        ledger.append(staged)
        return staged
    # The registered copy is the one production fetches: log the folder with the attempt.
    run_id = log_promotion_run(registry, staged, module_dir=module_dir)
    staged.mlflow_run_id = run_id
    registered = register_once(registry, manifest, module_dir, digest, run_id)
    staged.module.registry_version = registered.version
    ledger.append(staged)
    replaced = registry.make_champion(manifest.name, registered.version)
    promoted = new_record(module=staged.module, from_state="staged", to_state="promoted", outcome="promoted",
                          reasons=[champion_reason(registered, replaced)],
                          champion=registered_ref(replaced) if replaced else None, mlflow_run_id=run_id,
                          checks=checks, evidence=evidence, **common)
    ledger.append(promoted)
    return promoted


def champion_learned_from(champion_dir: Path, eval_data: Any) -> tuple[Optional[Provenance], OverlapCheck]:
    """The champion's provenance (its registered copy's) and how many of the evidence's records it learned from;
    unknown when its manifest cannot be read or records no provenance that holds together."""
    try:
        provenance = verify_frozen(champion_dir).provenance
    except FrozenModuleError:
        provenance = None
    return provenance, check_overlap(provenance, eval_data.records, dataset_id=eval_data.dataset_id,
                                     split=eval_data.split)


def champion_refusal(champion: RegisteredModule, check: OverlapCheck, learned: tuple[Optional[Provenance], ...],
                     eval_data: Any) -> str:
    """The one line of an attempt refused because the champion cannot judge on these records: how many it learned
    from (or that nobody knows), and what to do instead."""
    where = f"split {eval_data.split} of dataset {eval_data.dataset_id[:12]}"
    who = f"the champion {champion.package} (registry version {champion.version})"
    if check.overlaps:
        head = (f"{who} learned from {check.n_overlap} of the {check.n_records} records of {where} "
                f"({check.learned_from}): it cannot judge a challenger there")
    else:
        why = check.unknown_because or "it does not record which records it learned from"
        head = f"{who} cannot judge a challenger on {where}: its provenance is unknown ({why})"
    sure = [known(p) for p in learned]  # the candidate's and the champion's
    free = [name for name in HELD_OUT_SPLITS if name != eval_data.split and all(
        p is not None and (p.dataset_id in (None, eval_data.dataset_id)) and not p.splits.get(name) for p in sure)]
    instead = (f"promote on split {free[0]}, which neither learned from, or on logs neither saw" if free
               else "promote on logs neither learned from")
    return f"{head}; {instead}, or name a program to judge it against instead with --baseline"


def register_once(registry: ModuleRegistry, manifest: FrozenManifest, module_dir: Path, digest: str,
                  run_id: str) -> RegisteredModule:
    """The registry version of the module folder logged with run `run_id` (registered on first use of its digest)."""
    return registry.find(manifest.name, digest) or registry.register(
        manifest.name, source=_artifact_source(registry, run_id), run_id=run_id, package=manifest.package,
        digest=digest, tags={"guidebench.entry": manifest.entry, "guidebench.export_path": str(module_dir)})


def champion_reason(registered: RegisteredModule, replaced: Optional[RegisteredModule]) -> str:
    """The ledger's reason for a new champion."""
    return (f"alias {CHAMPION} -> version {registered.version}"
            + (f"; previous champion {replaced.package} (version {replaced.version}) is now alias previous"
               if replaced else "; first champion"))


def _artifact_source(registry: ModuleRegistry, run_id: str) -> str:
    from guidebench.release.model_registry import ARTIFACT_DIR

    return f"{registry.client.get_run(run_id).info.artifact_uri}/{ARTIFACT_DIR}"


def rollback_module(name_or_dir: str, *, reason: str = "", tracking_uri: Optional[str] = None,
                    ledger: Optional[PromotionLedger] = None) -> PromotionRecord:
    """Make the previous champion the champion again; records the rolled-back module's new state."""
    ledger = ledger or PromotionLedger()
    path = Path(name_or_dir)
    name = name_or_dir
    if path.is_dir() and (path / "manifest.json").is_file():
        try:
            name = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["name"]
        except (ValueError, KeyError, OSError) as exc:
            raise GuidebenchError(f"{path}: cannot read the module name from manifest.json: {exc}") from exc
    registry = ModuleRegistry(tracking_uri)
    restored, rolled_back = registry.roll_back(name)
    record = new_record(action="rollback", module=registered_ref(rolled_back), from_state="promoted",
                        to_state="rolled_back", outcome="rolled_back",
                        reasons=[reason or "manual rollback",
                                 f"alias {CHAMPION} -> version {restored.version} ({restored.package})"],
                        champion=registered_ref(restored))
    record.mlflow_run_id = log_promotion_run(registry, record)
    ledger.append(record)
    ledger.append(new_record(action="rollback", module=registered_ref(restored), from_state=restored.state,
                             to_state="promoted", outcome="promoted", mlflow_run_id=record.mlflow_run_id,
                             reasons=[f"restored as {CHAMPION} by the rollback of {rolled_back.package}"]))
    return record
