"""The frozen-module format: folder layout, `manifest.json` model and the refusal error.

A frozen module is a folder:
    program.json        DSPy program state (JSON; never a pickle)
    manifest.json       `FrozenManifest`
    knn.json            only for a program that picks its demos per input (`knn_fewshot`): the pool,
                        k, the embedded fields and the fitted lexical vectorizer (`runtime.frozen.knn`)
    dsrs/manifest.json  the same module as the original runtime's CompiledModuleManifest
    dsrs/optimized/<signature_name>/<compiled_id>.json
                        that manifest plus the demos, where the original's hub stores a module
    checksums.sha256    SHA-256 of every other file, `sha256sum` format

Format versions: 1, the first; 2 adds `demo_selection` (with knn.json) and `dsrs_notes`; 3 adds
`rule_gate` (with program.json's `rule_gate` entry: the rules that decide before the LM, as
`full_auto.hybrid` runs them); 4 adds a predictor's `prompt` (the instructions and field prefixes and
descriptions its state runs with when an optimizer rewrote its signature's: COPRO, MIPROv2, GEPA), its
`max_tokens` (the answer cap the program's code sets, e.g. 80 tokens for `full_auto.compact`: DSPy's program
state does not save it) and `trained_model` (with program.json's `trained_model` entry: a decision model fit on the logs,
`full_auto.learned`, and for `full_auto.cascade` its `cascade` entry: the threshold at which the model
answers and the LM program that answers the rest); 5 adds `provenance` (`runtime.provenance`: the records the program learned from, by the
identity of their inputs, which `guidebench eval`, `leaderboard` and `promote` check their evidence against;
a manifest without it is reported as "provenance unknown", which promotion refuses); 6 adds `outcome_model`
(with program.json's `outcome_model` entry: a planner's outcome model fit on the logs, `planner.learned`,
scored by `runtime.outcome`); 7 adds `exploration` (`runtime.exploration.ExplorationSettings`: a planner that
draws its family from stated probabilities, epsilon-greedy or softmax with a floor, seeded). The runtime reads all
seven (each version is the next one without what the next
one added: a version 3 module's predictors run their signatures' own text).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime.exploration import ExplorationSettings
from runtime.provenance import Provenance
from runtime.rules import check_rules
from runtime.signature_spec import SignatureSpec

FORMAT_VERSION = 7
READABLE_FORMAT_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
PROGRAM_FILE = "program.json"
KNN_FILE = "knn.json"
MANIFEST_FILE = "manifest.json"
CHECKSUMS_FILE = "checksums.sha256"
DSRS_DIR = "dsrs"
DSRS_MANIFEST_FILE = "dsrs/manifest.json"
DSRS_HUB_DIR = "dsrs/optimized"  # + /<signature_name>/<compiled_id>.json, the original hub's layout

ModuleKind = Literal["full_auto", "planner"]
PromotionState = Literal["candidate", "staged", "shadow", "promoted", "rolled_back"]
COMPATIBLE_WITH: dict[str, str] = {"full_auto": "GuidanceInputs@v1", "planner": "AdvisorPacket@v1"}
_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class FrozenModuleError(Exception):
    """A frozen module the runtime refuses to load; the message is one line with the reason."""

    def __init__(self, reason: str, path: str = ""):
        self.reason = " ".join(str(reason).split())
        self.path = path
        super().__init__(f"frozen module {path} refused: {self.reason}" if path else self.reason)


class MetricInterval(BaseModel):
    """One metric with its interval, as `evals.stats.MetricValue` writes it."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0


class PromptField(BaseModel):
    """One field's prompt text, as DSPy's program state stores it."""

    model_config = ConfigDict(extra="forbid")

    prefix: str
    description: str


class PromptText(BaseModel):
    """The prompt text a predictor's state runs with: the `signature` entry of its program.json state
    (instructions, then each field's prefix and description, inputs then outputs in the signature's order)."""

    model_config = ConfigDict(extra="forbid")

    instructions: str
    fields: list[PromptField]

    @classmethod
    def of(cls, signature: SignatureSpec) -> "PromptText":
        """The signature's own prompt text (what its state holds until an optimizer rewrites it)."""
        fields = signature.inputs + signature.outputs
        return cls(instructions=signature.instructions,
                   fields=[PromptField(prefix=f.prefix, description=f.desc) for f in fields])

    @classmethod
    def rewritten(cls, signature: SignatureSpec, state: Mapping[str, Any]) -> Optional["PromptText"]:
        """The prompt text of a predictor's program.json `state` when it is not the signature's own (None when it is,
        or when the state has none: the loader then refuses it)."""
        saved = state.get("signature")
        if not isinstance(saved, dict):
            return None
        prompt = cls.model_validate(saved)
        return None if prompt == cls.of(signature) else prompt


class PredictorSpec(BaseModel):
    """One predictor of the program: its path in program.json and its installed signature."""

    model_config = ConfigDict(extra="forbid")

    name: str
    signature_name: str
    signature_hash: str
    signature: SignatureSpec
    demo_count: int = 0
    # Format version 4: the prompt text its state runs with, when an optimizer rewrote the signature's
    # (None: the signature's own, `PromptText.of(signature)`).
    prompt: Optional[PromptText] = None

    def state_prompt(self) -> PromptText:
        """The prompt text program.json must hold for this predictor."""
        return self.prompt or PromptText.of(self.signature)
    # Format version 4: the answer cap of the predictor's calls (None: the LM's own limit).
    max_tokens: Optional[int] = Field(default=None, ge=1)


class DemoSelection(BaseModel):
    """Demos chosen per input: what `knn.json` holds, summarised (the loader checks both agree)."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["knn"] = "knn"
    file: Literal["knn.json"] = KNN_FILE
    k: int = Field(ge=1)
    vectorizer: Literal["tfidf", "hashing"]
    fields: list[str] = Field(min_length=1)
    nearest_last: bool = True
    pool_size: int = Field(ge=0)


class RuleGateSpec(BaseModel):
    """Turns the rule policy decides before the LM: program.json's `rule_gate`, summarised (the loader checks both agree)."""

    model_config = ConfigDict(extra="forbid")

    policy: Literal["runtime.rules.rule_decision"] = "runtime.rules.rule_decision"
    rules: list[str]

    @field_validator("rules")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        rules = check_rules(value)
        if rules != list(value):
            raise ValueError(f"rules must be listed once each, in the policy's order: {rules}")
        return rules


class TrainedModelSpec(BaseModel):
    """A decision model fit on the logs: program.json's `trained_model` (and `cascade`), summarised (the loader
    checks both agree)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    scorer: Literal["runtime.trained.TrainedDecisionModel"] = "runtime.trained.TrainedDecisionModel"
    kind: Literal["linear"] = "linear"
    features_version: int
    classes: list[str] = Field(min_length=2)
    n_features: int = Field(ge=1)
    # A cascade: the model answers when its answer's probability reaches the threshold; `lm_program` answers the rest.
    threshold: Optional[float] = Field(None, ge=0.0, le=1.0)
    lm_program: Optional[str] = None


class OutcomeModelSpec(BaseModel):
    """A planner's outcome model fit on the logs: program.json's `outcome_model`, summarised (the loader checks both
    agree)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    scorer: Literal["runtime.outcome.OutcomeModel"] = "runtime.outcome.OutcomeModel"
    features_version: int
    families: list[str] = Field(min_length=1)
    n_features: int = Field(ge=1)
    gain: Literal["trees", "linear"]
    valid: Literal["trees", "linear"]

    @classmethod
    def of(cls, model: Any) -> "OutcomeModelSpec":
        """The summary of a loaded `runtime.outcome.OutcomeModel`, as this runtime's features read it."""
        from runtime.outcome_features import FEATURES_VERSION, ROW_NAMES

        return cls(features_version=FEATURES_VERSION, families=model.families, n_features=len(ROW_NAMES),
                   gain=model.gain.type, valid=model.valid.type)


class FrozenManifest(BaseModel):
    """`manifest.json` of a frozen module."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    format_version: int = FORMAT_VERSION
    name: str
    version: str
    entry: str
    kind: ModuleKind
    compatible_with: str
    uses_lm: bool
    signature_name: str
    signature_hash: str
    signature: SignatureSpec
    predictors: list[PredictorSpec] = Field(default_factory=list)
    optimizer: str = "none"
    demo_count: int = 0
    dspy_version: str
    python_version: str
    guidebench_version: str = ""
    lm_model: Optional[str] = None
    dataset_id: Optional[str] = None
    split: Optional[str] = None
    split_hash: Optional[str] = None
    # Each metric of the replay on that split with its bootstrap interval; "objective" is the score.
    scorecard: dict[str, MetricInterval] = Field(default_factory=dict)
    mlflow_run_id: Optional[str] = None
    git_commit: Optional[str] = None
    created_at: str
    promotion_state: PromotionState = "candidate"
    tags: list[str] = Field(default_factory=list)
    evals: list[str] = Field(default_factory=list)
    # Format version 2: demos chosen per input (None: the demos in program.json are fixed), and what the
    # original runtime's manifest under dsrs/ cannot carry for this module (its structs have no such field).
    demo_selection: Optional[DemoSelection] = None
    dsrs_notes: list[str] = Field(default_factory=list)
    # Format version 3: the rules that decide a turn before the LM is asked (None: the program decides every turn).
    rule_gate: Optional[RuleGateSpec] = None
    # Format version 4: the decision model fit on the logs (None: the program has none).
    trained_model: Optional[TrainedModelSpec] = None
    # Format version 5: the records the program learned from (None: unknown; no hash: it learned from none).
    provenance: Optional[Provenance] = None
    # Format version 6: a planner's outcome model fit on the logs (None: the program has none).
    outcome_model: Optional[OutcomeModelSpec] = None
    # Format version 7: how a planner explores (None: greedy; `runtime.exploration`).
    exploration: Optional[ExplorationSettings] = None

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not _SEMVER.match(value):
            raise ValueError(f"version must be X.Y.Z, got {value!r}")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"name must be letters, digits, '.', '_' or '-' (max 128), got {value!r}")
        return value

    @property
    def package(self) -> str:
        """`name@version`, the package id recorded in decision records."""
        return f"{self.name}@{self.version}"


def valid_name(name: str) -> bool:
    """True when `name` is usable as a package name (and a registry / folder name)."""
    return bool(_NAME.match(name))


def valid_version(version: str) -> bool:
    """True for an X.Y.Z version."""
    return bool(_SEMVER.match(version))


def dspy_compatible(exported: str, installed: str) -> bool:
    """Program state is portable within one dspy minor series: same major and minor version."""
    def major_minor(version: str) -> Optional[tuple[int, int]]:
        match = re.match(r"^(\d+)\.(\d+)", version.strip())
        return (int(match.group(1)), int(match.group(2))) if match else None

    a, b = major_minor(exported), major_minor(installed)
    return a is not None and a == b
