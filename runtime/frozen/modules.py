"""The callable modules `load_frozen` returns: a guidance module and a planner module.

A guidance module takes a turn summary and a guardrail config and returns the enforced
decision, its audit and a `DecisionRecord`; a planner module takes an advisor packet and returns
a validated `OptimizationDirective`. Any LM, adapter or parse error yields the safe default
(`pause` at confidence 0.0; a conservative directive), never an exception. Two things are the
caller's mistake and raise instead, before any LM call: an argument that does not read as its record
type (`runtime.frozen.arguments.FrozenInputError`, one line naming the field), and a module that calls
an LM when none is set, neither `load_frozen(DIR, lm=...)` nor `dspy.configure(lm=...)`
(`FrozenModuleError`, saying how to pass one): it would pause on every turn.

When the caller does not pass the installed program, the runtime runs the exported predictor
itself: `FrozenDecisionProgram` / `FrozenPlannerProgram` wrap one `dspy.Predict` rebuilt from
the manifest's signature definition and follow the program contracts of docs/architecture.md
(`forward(**inputs) -> Prediction` with `decision` / `directive` and `parse_errors`).

Without an `inputs=` mapping, a loaded module renders its inputs with `runtime.inputs`
(`summary_inputs` / `packet_inputs`), the very functions `programs.decision_inputs` /
`programs.planner_inputs` call for training: the prompt matches the demos and the training.
Those functions render both the original and the compact inputs (`full_auto.compact`,
`planner.compact`) under different field names; the exported signature's input names pick the
rendering, so a frozen compact module sends the compact prompt its training sent.

A module exported with a rule gate (`full_auto.hybrid`) decides the turns its gated rules take with
`runtime.rules.rule_decision`, the function the workbench's rule policy runs, and asks the LM about the
rest; the prediction's `decided_by` names the rule or says "lm". A module with a trained model
(`runtime.trained`) lets it decide every turn (`full_auto.learned`, no LM) or, for a cascade, the turns where
the probability of its answer reaches the threshold (`decided_by` "model"); the LM answers the rest. A cascade
loaded without an LM decides the turns its model is sure of and raises `FrozenModuleError` on the others only.
"""

from __future__ import annotations

import json
import re
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import dspy

from runtime.advisor import FAMILIES, AdvisorPacket, OptimizationDirective
from runtime.fullauto import GuardrailAudit, GuardrailContext, GuidanceDecision
from runtime.frozen.knn import DemoSelector, run_with_demos
from runtime.frozen.arguments import ConfigArg, PacketArg, SummaryArg, read_config, read_packet, read_summary
from runtime.frozen.manifest import FrozenManifest, FrozenModuleError
from runtime.guardrails import apply_guardrails, parse_decision
from runtime.inputs import input_text, packet_inputs, summary_inputs
from runtime.exploration import GREEDY, ExplorationSettings, draw, draw_fraction, open_families, probabilities
from runtime.pivot import validate_directive
from runtime.records import DecisionRecord, LMUsage, LoggedDecision, packet_hash
from runtime.rules import gated_decision
from runtime.signature_spec import SignatureSpec
from runtime.trained import TrainedDecisionModel, config_inputs

InputsFn = Callable[[Any], dict[str, Any]]
PREVIEW_CHARS = 140
_ERROR_CHARS = 300


class GuidanceResult(NamedTuple):
    """What a guidance module returns for one turn."""

    decision: GuidanceDecision
    audit: GuardrailAudit
    record: DecisionRecord


class PlannerResult(NamedTuple):
    """What a planner module returns for one packet."""

    directive: OptimizationDirective
    errors: list[str]
    used_default: bool


class PlannerDecision(NamedTuple):
    """A planner module's decision with its stated probabilities (`FrozenPlannerModule.decide`).

    `probabilities` holds every family of FAMILIES (0 for a family the protocol blocks, 1 for the chosen family of
    a greedy planner); `family` is the directive's family, drawn from them; `greedy_family` the one the planner
    would take without exploring; `packet_hash` the decision's packet (`runtime.records.packet_hash`); `raised` the
    exception the program raised (one line) when the directive is the safe default because of it, else ""."""

    directive: OptimizationDirective
    errors: list[str]
    used_default: bool
    family: str
    probabilities: dict[str, float]
    greedy_family: str
    packet_hash: str
    exploration: ExplorationSettings
    raised: str = ""

    @property
    def result(self) -> PlannerResult:
        """The directive, its errors and whether it is the safe default."""
        return PlannerResult(self.directive, self.errors, self.used_default)


def _error_text(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:_ERROR_CHARS]


def _signature_inputs(spec: SignatureSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    # A str-typed input gets text (already text from `summary_inputs` / `packet_inputs`, the
    # rendering the programs train on); other types get the JSON value itself.
    return {f.name: (input_text(given[f.name]) if f.type == "str" else given[f.name])
            for f in spec.inputs if f.name in given}


def missing_inputs(spec: SignatureSpec, available: set[str]) -> list[str]:
    """Input fields of the signature that the runtime's own input mapping cannot fill."""
    return [name for name in spec.input_names if name not in available]


def _model_id(lm: Any) -> str:
    model = getattr(lm, "model", "") or ""
    # Keep the model id, never an endpoint that may have been folded into it.
    return re.sub(r"https?://\S+", "<endpoint>", str(model))


def _lm_scope(lm: Any):
    return dspy.context(lm=lm) if lm is not None else nullcontext()


def _predict(predictor: dspy.Predict, inputs: dict[str, Any]) -> Any:
    """Call the predictor as `programs` does: ChatAdapter without the JSON fallback unless configured, refusing
    ambiguous answers (`runtime.strict_adapter`)."""
    from runtime.strict_adapter import StrictChatAdapter

    # On a small local model the JSON fallback fails too and costs a second call (design.md).
    scope = nullcontext() if dspy.settings.adapter is not None \
        else dspy.context(adapter=StrictChatAdapter(use_json_adapter_fallback=False))
    with scope:
        return predictor(**inputs)


def _prediction(decision: GuidanceDecision, **extra: Any) -> dspy.Prediction:
    return dspy.Prediction(action=decision.action, next_input=decision.next_input, reason=decision.reason,
                           confidence=decision.confidence, decision=decision,
                           parse_errors=list(decision.parse_errors), **extra)


class FrozenDecisionProgram(dspy.Module):
    """The exported decision program run standalone (the contract of `programs`): the rule gate if any, then the
    trained model if any (all turns, or a cascade's sure ones), then the one exported predictor."""

    def __init__(self, predictor_name: Optional[str], predictor: Optional[dspy.Predict], spec: Optional[SignatureSpec],
                 rules: Optional[Sequence[str]] = None, model: Optional[TrainedDecisionModel] = None,
                 threshold: Optional[float] = None):
        super().__init__()
        self._predictor_name = predictor_name
        self._spec = spec
        # The gated rules (None: no gate, the predictor decides every turn); a plain tuple, not a dspy parameter:
        # the loader already checked them against program.json.
        self._rules = tuple(rules) if rules is not None else None
        # The trained model (None: none) and, for a cascade, the probability at which it answers (None: always).
        self._model = model
        self._threshold = threshold
        if predictor is not None and predictor_name is not None:
            _attach(self, predictor_name, predictor)

    @property
    def predictor(self) -> Optional[dspy.Predict]:
        """The rebuilt predictor (None for a trained model that decides every turn)."""
        return _find(self, self._predictor_name) if self._predictor_name else None

    @property
    def rules(self) -> Optional[tuple[str, ...]]:
        """The rules that decide before the predictor (None: no rule gate)."""
        return self._rules

    @property
    def model(self) -> Optional[TrainedDecisionModel]:
        """The decision model fit on the logs (None: none)."""
        return self._model

    def model_decision(self, inputs: Mapping[str, Any]) -> Optional[GuidanceDecision]:
        """The trained model's decision when it answers the turn (every turn without a threshold, a cascade's when
        sure), else None (as `programs.learned.FullAutoCascade.model_decision`)."""
        if self._model is None:
            return None
        decision = self._model.decide(inputs)
        return decision if self._threshold is None or decision.confidence >= self._threshold else None

    def answer_without_lm(self, inputs: Mapping[str, Any]) -> Optional[dspy.Prediction]:
        """The turn's prediction when no LM call is needed for it (a gated rule takes it, or the trained model is
        sure), else None. The rule gate and the model run once each at most."""
        if self._rules is not None:
            gated = gated_decision(inputs, self._rules)
            if gated is not None:
                decision, rule = gated
                return _prediction(decision, rule=rule, decided_by=rule)
        decision = self.model_decision(inputs)
        return _prediction(decision, decided_by="model") if decision is not None else None

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The gated rule's decision when one takes the turn; else the trained model's when it is sure; else
        predict, then parse into a validated decision (safe `pause` on any error)."""
        from dspy.utils.exceptions import AdapterParseError

        answered = self.answer_without_lm(inputs)
        if answered is not None:
            return answered
        raw: Any = None
        try:
            raw = _predict(self.predictor, _signature_inputs(self._spec, inputs))
            decision = parse_decision(raw)
        except AdapterParseError as exc:
            # The lenient parser may still read the sections the adapter refused.
            raw = exc.lm_response if isinstance(exc.lm_response, str) else str(exc.lm_response or "")
            decision = parse_decision(raw)
            if decision.parse_errors:
                decision = decision.model_copy(update={"parse_errors": [_error_text(exc), *decision.parse_errors]})
        except Exception as exc:  # LM and other errors end in the safe default
            decision = GuidanceDecision(action="pause", confidence=0.0, parse_errors=[_error_text(exc)])
        routed = self._rules is not None or self._model is not None
        return _prediction(decision, raw=raw, **({"decided_by": "lm"} if routed else {}))


class NearestDemosProgram(dspy.Module):
    """A program whose predictors get, for each call, the demos `knn_fewshot` would choose (`knn.json`)."""

    def __init__(self, program: dspy.Module, selector: DemoSelector):
        super().__init__()
        self.program = program
        self.selector = selector

    def nearest(self, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The demos chosen for these inputs (pool examples' data), in prompt order."""
        return self.selector.nearest(inputs)

    def forward(self, **inputs: Any) -> Any:
        """Run the program with the nearest demos on a copy of it (calls may run in parallel)."""
        return run_with_demos(self.program, self.selector.nearest(inputs), inputs)


def safe_default_directive(packet: Optional[AdvisorPacket] = None) -> OptimizationDirective:
    """A conservative, valid directive in an allowed family: re-measure, then ask for a new plan."""
    constraints = packet.strategy_family_constraints if packet else None
    allowed = [f for f in (constraints.allowed_families if constraints else FAMILIES) if f in FAMILIES] \
        or list(FAMILIES)
    blocked = set(constraints.blocked_families) if constraints else set()
    current = constraints.current_family if constraints else None
    candidates = [f for f in allowed if f not in blocked and f != current] or \
        [f for f in allowed if f not in blocked] or allowed
    return OptimizationDirective(
        objective="Re-establish a valid, measured state before the next optimization attempt",
        primary_hypothesis="The planner output was unusable; a small verified step keeps the loop safe",
        strategy_family=candidates[0],
        strategy_modifiers=[],
        risk="Low",
        expected_effect_cycles=0,
        change_summary=["No kernel change until a valid directive is available"],
        step_plan=["Check out the current best branch", "Run the correctness tests and measure cycles",
                   "Record the measurement and request a fresh directive"],
        validation={"commands": ["run the kernel correctness tests", "measure kernel cycles"],
                    "pass_criteria": ["correctness passes", "cycles do not regress against the best"]},
        next_packet_requests=[],
        did_web_search=False,
    )


def _directive_fields(raw: Any, spec: SignatureSpec) -> Any:
    """The directive object from a prediction: a `directive` output, or the directive's own fields."""
    value = getattr(raw, "directive", None)
    if value is None:
        keys = OptimizationDirective.model_fields.keys()
        present = {k: getattr(raw, k) for k in keys if k in spec.output_names}
        return {k: v.model_dump(mode="json") if hasattr(v, "model_dump") else v for k, v in present.items()} or None
    if isinstance(value, OptimizationDirective):
        return value.model_dump(mode="json")
    if isinstance(value, str):
        return json.loads(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


class FrozenPlannerProgram(dspy.Module):
    """One exported predictor run as a planner program: packet parts in, validated directive out."""

    def __init__(self, predictor_name: str, predictor: dspy.Predict, spec: SignatureSpec):
        super().__init__()
        self._predictor_name = predictor_name
        self._spec = spec
        _attach(self, predictor_name, predictor)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """Predict and validate against the strict directive schema and the blocked families."""
        blocked = _blocked(inputs)
        try:
            raw = _predict(_find(self, self._predictor_name), _signature_inputs(self._spec, inputs))
            obj = _directive_fields(raw, self._spec)
            errors = validate_directive(obj, blocked)
            parse_errors: list[str] = []
        except Exception as exc:  # LM, adapter and JSON errors all end in the safe default
            errors, parse_errors = [_error_text(exc)], [_error_text(exc)]
            obj = None
        if errors:
            directive = safe_default_directive(_packet_from(inputs))
        else:
            directive = OptimizationDirective.model_validate(obj)
        return dspy.Prediction(directive=directive, directive_errors=errors, parse_errors=parse_errors)


def _packet_from(inputs: Mapping[str, Any]) -> Optional[AdvisorPacket]:
    try:
        packet = inputs.get("packet")
        return AdvisorPacket.model_validate(json.loads(packet) if isinstance(packet, str) else packet)
    except Exception:  # the default directive still works without constraints
        return None


def _blocked(inputs: Mapping[str, Any]) -> list[str]:
    packet = _packet_from(inputs)
    return list(packet.strategy_family_constraints.blocked_families) if packet else []


def _attach(root: dspy.Module, dotted: str, predictor: dspy.Predict) -> None:
    """Place the predictor at its program.json path so save/load round-trip unchanged."""
    parts = dotted.split(".")
    node: Any = root
    for part in parts[:-1]:
        child = getattr(node, part, None)
        if child is None:
            child = dspy.Module()
            setattr(node, part, child)
        node = child
    setattr(node, parts[-1], predictor)


def _find(root: dspy.Module, dotted: str) -> dspy.Predict:
    node: Any = root
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def _usage(prediction: Any) -> Optional[LMUsage]:
    try:
        usage = prediction.get_lm_usage() or {}
    except Exception:  # custom programs need not support usage tracking
        return None
    totals = LMUsage()
    for entry in usage.values():
        totals.prompt_tokens += int(entry.get("prompt_tokens") or 0)
        totals.completion_tokens += int(entry.get("completion_tokens") or 0)
        totals.total_tokens += int(entry.get("total_tokens") or 0)
    return totals if usage else None


def _raw_of(prediction: Any) -> Any:
    raw = getattr(prediction, "raw", None)
    source = raw if raw is not None else prediction
    try:
        data = dict(source.items()) if hasattr(source, "items") else source
        if isinstance(data, dict):
            # The parsed decision is logged on its own line already; keep the model's fields.
            data = {k: v for k, v in data.items() if k not in ("decision", "raw")}
            decided_by = getattr(prediction, "decided_by", None)
            if decided_by is not None:  # a rule-gated module: which path decided is part of the record
                data.setdefault("decided_by", decided_by)
        return json.loads(json.dumps(data, default=input_text))
    except Exception:  # the raw output is diagnostic only
        return str(source)


class FrozenGuidanceModule:
    """A loaded Full Auto frozen module: `module(summary, config)` -> GuidanceResult.

    It pickles as the way it was loaded (`reload`, a picklable call of `load_frozen` with the same folder and
    arguments), not as its live objects: unpickling, in the shadow's own process for example, loads and verifies
    the folder again (an LM program's rebuilt signatures cannot be pickled at all)."""

    def __init__(self, manifest: FrozenManifest, program: dspy.Module, path: Path,
                 inputs: Optional[InputsFn] = None, lm: Any = None, reload: Optional[Callable[[], Any]] = None):
        self.manifest = manifest
        self.program = program
        self.path = path
        self.lm = lm
        self._inputs = inputs
        self._reload = reload

    def __repr__(self) -> str:
        return f"FrozenGuidanceModule({self.manifest.package}, entry={self.manifest.entry}, path={self.path})"

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        if self._reload is None:
            raise TypeError(f"{self!r} was not loaded by load_frozen: it cannot be pickled (load it from its folder)")
        return self._reload, ()

    def decide(self, summary: SummaryArg, config: ConfigArg = None) -> tuple[GuidanceDecision, Any, Any]:
        """The model's own decision for a summary (before guardrails), with raw output and usage; the guardrail
        config is an input too (a trained model weighs the confidence the guardrails demand).

        Raises `FrozenInputError` for a summary it cannot read and `FrozenModuleError` when the module calls an
        LM and none is set (every answer would be the safe pause; a cascade: on a turn its model hands over);
        any fault of the program itself is that pause.
        """
        summary = read_summary(summary)
        model = self.manifest.trained_model
        cascade = model is not None and model.threshold is not None
        if not cascade:
            require_lm(self)
        prediction: Any = None
        try:
            inputs = self._inputs(summary) if self._inputs else summary_inputs(summary)
            inputs = {**config_inputs(read_config(config)), **inputs}
            # Without an LM a cascade answers only the turns its model is sure of. Its model is asked once: that
            # answer is the turn's (running the program after it would run the model a second time).
            alone = cascade and not _has_lm(self)
            prediction = _answer_without_lm(self.program, inputs) if alone else None
        except Exception as exc:  # an input the program cannot read is a safe pause, as any fault below
            return GuidanceDecision(action="pause", confidence=0.0, parse_errors=[_error_text(exc)]), None, None
        if alone and prediction is None:
            require_lm(self, "hands this turn to its LM program (its model is not sure of it)")
        try:
            if prediction is None:
                with _lm_scope(self.lm), dspy.context(track_usage=True):
                    prediction = self.program(**inputs)
            decision = getattr(prediction, "decision", None)
            if not isinstance(decision, GuidanceDecision):
                decision = parse_decision(prediction)
        except Exception as exc:  # any failure of the program is a safe pause, never a crash
            decision = GuidanceDecision(action="pause", confidence=0.0, parse_errors=[_error_text(exc)])
        raw = _raw_of(prediction) if prediction is not None else None
        return decision, raw, _usage(prediction) if prediction is not None else None

    def __call__(self, summary: SummaryArg, config: ConfigArg = None, *, run_id: str = "", sequence_id: int = 0,
                 workspace_id: str = "") -> GuidanceResult:
        """Decide, enforce the guardrails and return (enforced decision, audit, decision record).

        `summary` and `config` may be the record types, dicts or JSON text (`runtime.frozen.arguments`).
        """
        started = time.time()
        summary, config = read_summary(summary), read_config(config)
        decision, raw, usage = self.decide(summary, config)
        return self.enforce(summary, decision, config, raw=raw, usage=usage, run_id=run_id,
                            sequence_id=sequence_id, workspace_id=workspace_id, started=started)

    def enforce(self, summary: SummaryArg, decision: GuidanceDecision, config: ConfigArg = None, *, raw: Any = None,
                usage: Optional[LMUsage] = None, run_id: str = "", sequence_id: int = 0, workspace_id: str = "",
                started: Optional[float] = None) -> GuidanceResult:
        """Apply the guardrails to a model decision of this module and build its decision record."""
        summary, config = read_summary(summary), read_config(config)
        enforced, audit = apply_guardrails(decision, GuardrailContext.from_summary(summary), config)
        lm = self.lm if self.lm is not None else dspy.settings.lm
        when = started if started is not None else time.time()
        record = DecisionRecord.build(
            summary, config,
            run_id=run_id, workspace_id=workspace_id, sequence_id=sequence_id,
            timestamp=datetime.fromtimestamp(when, timezone.utc).isoformat().replace("+00:00", "Z"),
            config_source="caller",
            logged=LoggedDecision(
                action=enforced.action, confidence=enforced.confidence,
                model_action=decision.action, model_confidence=decision.confidence,
                reason=enforced.reason, next_input_preview=enforced.next_input[:PREVIEW_CHARS],
                state="running" if enforced.action == "continue" else "paused"),
            guardrail=audit,
            model=_model_id(lm) if self.manifest.uses_lm else f"program:{self.manifest.entry}",
            package_version=self.manifest.package,
            usage=usage,
            raw_prediction=raw,
            parse_diagnostics={"parse_errors": decision.parse_errors} if decision.parse_errors else None,
        )
        return GuidanceResult(enforced, audit, record)


class FrozenPlannerModule:
    """A loaded planner frozen module: `module(packet)` -> PlannerResult (always a valid directive)."""

    def __init__(self, manifest: FrozenManifest, program: dspy.Module, path: Path,
                 inputs: Optional[InputsFn] = None, lm: Any = None):
        self.manifest = manifest
        self.program = program
        self.path = path
        self.lm = lm
        self._inputs = inputs

    def __repr__(self) -> str:
        return f"FrozenPlannerModule({self.manifest.package}, entry={self.manifest.entry}, path={self.path})"

    @property
    def exploration(self) -> ExplorationSettings:
        """How the module explores (`runtime.exploration`; greedy unless its manifest says otherwise)."""
        return self.manifest.exploration or GREEDY

    def __call__(self, packet: PacketArg) -> PlannerResult:
        """Plan the next iteration; an unusable output becomes the safe default directive.

        Raises `FrozenInputError` for a packet it cannot read and `FrozenModuleError` when the module calls an
        LM and none is set (every answer would be the safe default). An exploring module's directive is the one
        `decide` draws.
        """
        return self.decide(packet).result

    def decide(self, packet: PacketArg) -> PlannerDecision:
        """Plan the next iteration and state every family's probability next to the directive (see `PlannerDecision`;
        the errors of `__call__`)."""
        packet = read_packet(packet)
        require_lm(self)
        prediction, inputs, result, raised = self._greedy(packet)
        settings = self.exploration
        digest = packet_hash(packet)
        greedy = result.directive.strategy_family
        if not settings.explores:
            probs = {f: float(f == greedy) for f in FAMILIES}
            return PlannerDecision(*result, greedy, probs, greedy, digest, settings, raised)
        compliant = getattr(prediction, "compliant", None) if prediction is not None else None
        values = getattr(prediction, "estimate_shares", None) if prediction is not None else None
        probs = probabilities(settings, open_families(packet, compliant), greedy, values)
        family = draw(probs, draw_fraction(settings.seed, digest))
        directive, errors = result.directive, list(result.errors)
        if family != greedy:
            directive, note = self._directive_for(family, packet, inputs, directive)
            errors += [note] if note else []
        return PlannerDecision(directive, errors, result.used_default, family, probs, greedy, digest, settings, raised)

    def _greedy(self, packet: AdvisorPacket) -> tuple[Any, Optional[dict[str, Any]], PlannerResult, str]:
        """(the program's prediction or None, its inputs or None, the validated result, what the program raised)."""
        blocked = list(packet.strategy_family_constraints.blocked_families)
        prediction: Any = None
        inputs: Optional[dict[str, Any]] = None
        raised = ""
        try:
            inputs = self._inputs(packet) if self._inputs else packet_inputs(packet)
            with _lm_scope(self.lm):
                prediction = self.program(**inputs)
            directive = getattr(prediction, "directive", None)
            obj = directive.model_dump(mode="json") if isinstance(directive, OptimizationDirective) else directive
            # A program that already fell back reports why; its fallback is still checked here.
            reported = [str(e) for e in (getattr(prediction, "directive_errors", None) or [])] + \
                [str(e) for e in (getattr(prediction, "parse_errors", None) or [])]
            invalid = validate_directive(obj, blocked)
        except Exception as exc:  # any failure of the program is the safe default, never a crash
            raised = _error_text(exc)
            reported, invalid = [], [raised]
        if invalid:
            return prediction, inputs, PlannerResult(safe_default_directive(packet), reported + invalid, True), raised
        return (prediction, inputs, PlannerResult(OptimizationDirective.model_validate(obj), reported, bool(reported)),
                raised)

    def _directive_for(self, family: str, packet: AdvisorPacket, inputs: Optional[dict[str, Any]],
                       greedy: OptimizationDirective) -> tuple[OptimizationDirective, str]:
        """The program's directive for the drawn family; when it cannot write one, the greedy directive moved to that
        family with no modifiers and no expected effect (the drawn family always stands: its probability is logged)."""
        program = self.program
        while isinstance(program, NearestDemosProgram):
            program = program.program
        try:
            with _lm_scope(self.lm):
                obj = getattr(program, "directive_for")(family, **(inputs or {})).directive
            obj = obj.model_dump(mode="json") if isinstance(obj, OptimizationDirective) else obj
            blocked = list(packet.strategy_family_constraints.blocked_families)
            if not validate_directive(obj, blocked) and obj.get("strategy_family") == family:
                return OptimizationDirective.model_validate(obj), ""
            note = "its directive was not valid"
        except Exception as exc:  # the drawn family stands; the directive is the greedy one's, moved
            note = _error_text(exc)
        moved = greedy.model_copy(update={"strategy_family": family, "strategy_modifiers": [],
                                          "expected_effect_cycles": 0})
        return moved, f"explore {family}: the program wrote no directive for it ({note}); the greedy one, moved"


def _answer_without_lm(program: dspy.Module, inputs: Mapping[str, Any]) -> Optional[dspy.Prediction]:
    """A cascade's answer to a turn its model is sure of, None when the model hands the turn to its LM program (the
    standalone program or the installed one, inside its KNN demo wrapper if any, whose demos only the LM reads; a
    program that cannot say is taken to hand every turn over)."""
    while isinstance(program, NearestDemosProgram):
        program = program.program
    answer = getattr(program, "answer_without_lm", None)
    return answer(inputs) if answer is not None else None


def _has_lm(module: FrozenGuidanceModule | FrozenPlannerModule) -> bool:
    return module.lm is not None or dspy.settings.lm is not None


def require_lm(module: FrozenGuidanceModule | FrozenPlannerModule, what: str = "calls an LM") -> None:
    """Refuse to decide without an LM: each answer would be the safe default, with the reason hidden in its errors."""
    if not module.manifest.uses_lm or _has_lm(module):
        return
    raise FrozenModuleError(
        f"{module.manifest.entry} {what} and none is set: pass one, load_frozen(DIR, "
        "lm=dspy.LM(\"openai/gpt-4o-mini\")) with any LiteLLM model string (the workbench's embedded model: "
        "lm=guidebench.lm.factory.make_lm(\"local\")), or dspy.configure(lm=...) before deciding", str(module.path))
