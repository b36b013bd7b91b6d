"""The original runtime's export format (formats.md §1.5): CompiledModuleManifest and its hub file.

Mirrors the dsrs crate's serde structs (`manifest.rs`, `evaluate/promotion.rs`, `evaluate/scoring.rs`):
`compiled_id` = SHA-256 hex of the canonical JSON (sorted keys, no whitespace) of
`{"demo_count": N, "instruction": str|null, "optimizer": ..., "signature_name": ...}`;
`compiled_id`, `trainset_id` and `instruction` are omitted when absent, so are the empty lists of
`compatibility` and its unset `min_provider_reputation` (never 0.0), and an empty `eval_history`.
`eval_history` holds the original's `EvalRecord`s (timestamp, state, a complete `ScorecardResult`,
promotion_attempted, promotion_success, promotion_reason); the workbench's own evaluation metadata
(MLflow run, dataset id, split) lives in our `manifest.json`. The hub stores a module at
`optimized/<signature_name>/<compiled_id>.json` as `{"manifest", "demos"}`.

What these structs cannot carry for a module is said in our `manifest.json` (`dsrs_notes`, from
`carry_notes`), never in an extra field here: the original's serde structs have no place for it.
A `knn_fewshot` module chooses its demos per input; the original carries fixed demos only, so its
hub file holds the instruction and the scorecard with no demos (`demo_count` 0).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

from runtime.frozen.manifest import (DemoSelection, FrozenManifest, MetricInterval, OutcomeModelSpec, PromotionState,
                                     RuleGateSpec, TrainedModelSpec)
from runtime.records import canonical_json, sha256_hex

OMITTED_WHEN_ABSENT: tuple[str, ...] = ("compiled_id", "trainset_id", "instruction")
OBJECTIVE = "objective"
PARSE_FAILURE_METRIC = "parse_failure_rate"
# Scored against outcome labels like the objective (evals.metrics_fullauto); the rest are proxies.
TRUTH_METRICS: tuple[str, ...] = ("action_accuracy", "macro_f1", "cost_weighted_error")


class DsrsScorecard(BaseModel):
    """`scorecard` of a CompiledModuleManifest."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    proxy_metrics: dict[str, float] = Field(default_factory=dict)
    truth_metrics: dict[str, float] = Field(default_factory=dict)
    rollouts: int = 0
    median_score: float = 0.0
    p_fail: float = 0.0


PrivacyMode = Literal["public_ok", "no_pii", "private_repo_redacted", "private_repo_allowed"]


class DsrsCompatibility(BaseModel):
    """`compatibility` of a CompiledModuleManifest (empty lists and an unset reputation are not written)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    required_tools: list[str] = Field(default_factory=list)
    required_lanes: list[str] = Field(default_factory=list)
    privacy_modes_allowed: list[PrivacyMode] = Field(default_factory=list)
    min_provider_reputation: Optional[float] = None

    def to_json(self) -> dict[str, Any]:
        """As serde writes it: `skip_serializing_if` empty lists and a None reputation."""
        return {key: value for key, value in self.model_dump(mode="json").items() if value not in ([], None)}


class TaskScore(BaseModel):
    """The original's `TaskScore` (every field required)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    task_id: str
    score: float
    metrics: dict[str, float]
    rollouts_completed: int = Field(ge=0)
    proxy_passed: bool
    truth_evaluated: bool
    cost_msats: int = Field(ge=0)


class ScorecardResult(BaseModel):
    """The original's `ScorecardResult` (every field required, none defaulted by serde)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    overall_score: float
    per_metric: dict[str, float]
    per_task: dict[str, TaskScore]
    total_cost_msats: int = Field(ge=0)
    total_duration_ms: int = Field(ge=0)
    tasks_evaluated: int = Field(ge=0)
    tasks_skipped: int = Field(ge=0)


class EvalRecord(BaseModel):
    """One entry of `eval_history`: the original's `EvalRecord`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    timestamp: int = Field(ge=0)
    state: PromotionState
    scorecard: ScorecardResult
    promotion_attempted: bool
    promotion_success: Optional[bool] = None
    promotion_reason: Optional[str] = None


class CompiledModuleManifest(BaseModel):
    """The original runtime's compiled-module manifest."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    signature_name: str
    optimizer: str
    created_at: int
    compiled_id: Optional[str] = None
    trainset_id: Optional[str] = None
    instruction: Optional[str] = None
    scorecard: DsrsScorecard = Field(default_factory=DsrsScorecard)
    compatibility: DsrsCompatibility = Field(default_factory=DsrsCompatibility)
    demo_count: int = 0
    promotion_state: PromotionState = "candidate"
    eval_history: list[EvalRecord] = Field(default_factory=list)

    def expected_compiled_id(self) -> str:
        """compiled_id recomputed from this manifest's own fields."""
        return compiled_id(self.signature_name, self.optimizer, self.instruction, self.demo_count)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict as serde writes it: absent optionals and an empty eval history left out."""
        data = self.model_dump(mode="json")
        for key in OMITTED_WHEN_ABSENT:
            if data.get(key) is None:
                data.pop(key, None)
        data["compatibility"] = self.compatibility.to_json()
        if not data["eval_history"]:
            data.pop("eval_history")
        return data

    def hub_path(self) -> str:
        """Where the original's hub stores this module: `optimized/<signature_name>/<compiled_id>.json`."""
        return f"optimized/{self.signature_name}/{self.compiled_id or self.expected_compiled_id()}.json"


class HubDemo(BaseModel):
    """One demo of the hub file: the example's data and which keys are inputs / outputs."""

    model_config = ConfigDict(extra="forbid")

    data: dict[str, Any]
    input_keys: list[str]
    output_keys: list[str]


class HubFile(BaseModel):
    """The hub file: the manifest plus the demos."""

    model_config = ConfigDict(extra="forbid")

    manifest: CompiledModuleManifest
    demos: list[HubDemo] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with the manifest's absent optional keys left out."""
        return {"manifest": self.manifest.to_json(), "demos": [d.model_dump(mode="json") for d in self.demos]}


def compiled_id(signature_name: str, optimizer: str, instruction: Optional[str], demo_count: int) -> str:
    """SHA-256 hex of the canonical JSON of the four identity fields (formats.md §1.5)."""
    return sha256_hex(canonical_json({"demo_count": demo_count, "instruction": instruction,
                                      "optimizer": optimizer, "signature_name": signature_name}))


def carry_notes(selection: Optional[DemoSelection], rule_gate: Optional[RuleGateSpec] = None,
                caps: Optional[dict[str, int]] = None, trained_model: Optional[TrainedModelSpec] = None,
                code_inputs: Sequence[str] = (), outcome_model: Optional[OutcomeModelSpec] = None) -> list[str]:
    """What the CompiledModuleManifest and its hub file can and cannot carry for a module (empty: everything);
    `caps`: the answer cap of each predictor that sets one; `code_inputs`: predictor inputs the program's code
    computes (the runtime's rendering has none of them)."""
    notes = []
    if selection is not None:
        notes.append(f"demos chosen per input are not carried: this {selection.method} module picks, for each input, "
                     f"the {selection.k} nearest of {selection.pool_size} pool examples ({selection.vectorizer} "
                     f"similarity over {', '.join(selection.fields)}; {selection.file}), and the original's "
                     "CompiledModuleManifest carries fixed demos only; dsrs/ carries its signature, optimizer, "
                     "instruction and scorecard with no demos (demo_count 0), so the original runtime would run it "
                     "zero-shot; run it with runtime.load_frozen")
    if rule_gate is not None:
        notes.append(f"the rule gate is not carried: this module decides the turns rules {', '.join(rule_gate.rules)} "
                     f"take with {rule_gate.policy} before asking its LM, and the original's CompiledModuleManifest "
                     "has no rules; the original runtime would ask the LM about every turn; run it with "
                     "runtime.load_frozen")
    if trained_model is not None:
        decides = ("every turn" if trained_model.threshold is None else
                   f"the turns where its answer's probability is at least {trained_model.threshold} (its LM program "
                   f"{trained_model.lm_program} answers the rest)")
        notes.append(f"the trained decision model is not carried: this module answers {decides} with a "
                     f"{trained_model.kind} model fit on the logs ({trained_model.scorer}, {trained_model.n_features} "
                     "features; program.json's trained_model), and the original runtime has no such model: it can "
                     "only prompt an LM; run it with runtime.load_frozen")
    if outcome_model is not None:
        notes.append(f"the outcome model is not carried: this planner chooses the allowed family of highest "
                     f"expected improvement by a model fit on the logs ({outcome_model.scorer}, "
                     f"{outcome_model.n_features} features, {outcome_model.gain} gain model; program.json's "
                     "outcome_model), and the original runtime has no such model: run it with runtime.load_frozen")
    if caps:
        notes.append("the answer cap is not carried: this module caps its answers at "
                     f"{', '.join(f'{cap} tokens ({name})' for name, cap in sorted(caps.items()))}, and the original's "
                     "CompiledModuleManifest has no LM settings (the original runtime calls with max_tokens 512); "
                     "run it with runtime.load_frozen")
    if code_inputs:
        notes.append(f"inputs the program's code computes are not carried: its LM reads {', '.join(code_inputs)}, "
                     "which the installed program computes before each call (e.g. planner.hybrid's family, chosen "
                     "by the pivot rules), and the original runtime has no such code; run it with "
                     "runtime.load_frozen(DIR, program=...)")
    return notes


def _finite_values(scorecard: dict[str, MetricInterval]) -> dict[str, float]:
    # serde has no NaN for an f32 or f64: an undefined metric is left out
    return {name: float(m.value) for name, m in scorecard.items() if m.value is not None and math.isfinite(m.value)}


def _dsrs_scorecard(scorecard: dict[str, MetricInterval]) -> DsrsScorecard:
    values = _finite_values(scorecard)
    objective = values.get(OBJECTIVE)
    # The objective scores enforced decisions against outcome labels: the truth. Every other
    # metric (rates, calibration, agreement, cost) is a proxy of the outcome.
    truth = {name: v for name, v in values.items() if name == OBJECTIVE or name in TRUTH_METRICS}
    proxy = {name: v for name, v in values.items() if name not in truth}
    rollouts = max((m.n for m in scorecard.values()), default=0)
    return DsrsScorecard(
        proxy_metrics=proxy, truth_metrics=truth, rollouts=rollouts,
        median_score=float(objective if objective is not None else 0.0),
        p_fail=float(values.get(PARSE_FAILURE_METRIC, 0.0)),
    )


def _hub_demos(manifest: FrozenManifest, program_state: dict[str, Any]) -> list[HubDemo]:
    demos: list[HubDemo] = []
    for predictor in manifest.predictors:
        inputs, outputs = predictor.signature.input_names, predictor.signature.output_names
        for demo in program_state.get(predictor.name, {}).get("demos", []):
            data = {k: v for k, v in demo.items() if k in inputs or k in outputs}
            demos.append(HubDemo(data=data, input_keys=[k for k in inputs if k in data],
                                 output_keys=[k for k in outputs if k in data]))
    return demos


def main_instruction(manifest: FrozenManifest, program_state: dict[str, Any]) -> Optional[str]:
    """The instruction the module runs with: its main predictor's compiled instruction."""
    for predictor in manifest.predictors:
        if predictor.signature_name == manifest.signature_name:
            instruction = (program_state.get(predictor.name, {}).get("signature") or {}).get("instructions")
            if isinstance(instruction, str) and instruction:
                return instruction
    return manifest.signature.instructions or None


def eval_record(manifest: FrozenManifest, *, timestamp: int) -> EvalRecord:
    """The evaluation a module was exported with, as the original's EvalRecord (no promotion attempted)."""
    values = _finite_values(manifest.scorecard)
    evaluated = max((m.n for m in manifest.scorecard.values()), default=0)
    scorecard = ScorecardResult(overall_score=values.get(OBJECTIVE, 0.0), per_metric=values, per_task={},
                                total_cost_msats=0, total_duration_ms=0, tasks_evaluated=evaluated, tasks_skipped=0)
    return EvalRecord(timestamp=timestamp, state=manifest.promotion_state, scorecard=scorecard,
                      promotion_attempted=False)


def build_hub(manifest: FrozenManifest, program_state: dict[str, Any], *, created_at: int,
              trainset_id: Optional[str] = None, eval_history: Optional[list[EvalRecord]] = None) -> HubFile:
    """The CompiledModuleManifest (with its compiled_id) and the hub file of a frozen module."""
    demos = _hub_demos(manifest, program_state)
    instruction = main_instruction(manifest, program_state)
    if eval_history is None and manifest.scorecard:
        # The scorecard the module was exported with is its first evaluation (its MLflow run, dataset
        # and split are in our manifest.json, not here: the original's EvalRecord has no such fields).
        eval_history = [eval_record(manifest, timestamp=created_at)]
    compiled = CompiledModuleManifest(
        signature_name=manifest.signature_name,
        optimizer=manifest.optimizer,
        created_at=created_at,
        trainset_id=trainset_id,
        instruction=instruction,
        scorecard=_dsrs_scorecard(manifest.scorecard),
        demo_count=len(demos),
        promotion_state=manifest.promotion_state,
        eval_history=eval_history or [],
    )
    compiled.compiled_id = compiled.expected_compiled_id()
    return HubFile(manifest=compiled, demos=demos)
