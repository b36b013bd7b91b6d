"""Metrics of the Full Auto next-action decision: per-record scores, aggregates, feedback sentences.

What is scored, and on which decision
- The *model decision* is what the program answered (its own action and confidence); the
  *enforced decision* is what production dispatches after `runtime.apply_guardrails` with the
  record's own guardrail config.
- `guardrail_override_rate`: share of records whose enforced action differs from the model's
  action (all records), also broken down by the rule that fired (`guardrail_override_rate.<rule>`).
- `action_accuracy`, `cost_weighted_error`, `macro_f1`, `objective`: the *enforced* decision against
  the outcome label, on labeled records only. Guardrails are part of the product, so the program is
  judged by what would actually happen. A label of `review` counts as `pause`, because production
  never dispatches `review` (rule 7 turns it into a pause).
- `brier`, `ece`: calibration of the model's own confidence for the model's own action being right
  (labeled records).
- `parse_failure_rate`: model output that could not be parsed (the safe default pause was used);
  `error_rate`: the program raised (scored as the safe default too, with diagnostics in replay).
- `next_input_proxy`: on records whose enforced action is `continue`, 1 when the next input is
  present, at most `NEXT_INPUT_MAX_CHARS` long and not a placeholder.

Cost matrix (`COST`, rows = right action, columns = enforced action; 0 on the diagonal)
                 continue  pause  stop
    continue         0       2      3     an unnecessary pause idles the loop until a human looks
    pause            3       0      1     running on past a needed human is risky; stopping asks one too
    stop             5       1      0     continuing a run that should stop is the worst mistake
`cost_weighted_error` is the mean cost in these units (0 best, 5 worst).

The objective (what optimizers maximise), per labeled record:
    objective = 1 - COST[label][enforced] / 5, and 0 when the output failed to parse or the program raised.
A constant policy cannot game it: always pausing pays 2/5 on every record that should continue and
always stopping 3/5, always continuing 5/5 on records that should stop (guardrails catch only part
of those), while a policy that tells the cases apart pays little (see tests/evals/test_metrics_fullauto.py).
Parse failures score 0 although production pauses safely: a program earns nothing for an answer it
failed to give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from runtime import (
    GuardrailAudit,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    OutcomeLabel,
    apply_guardrails,
    parse_decision,
    tokens_from_usage,
)
from runtime.fullauto import GUARDRAIL_RULES

from .stats import MetricValue, Statistic, bootstrap_many, ece_of, macro_f1_of, mean_of

DISPATCH_ACTIONS: tuple[str, ...] = ("continue", "pause", "stop")
COST: dict[str, dict[str, float]] = {
    "continue": {"continue": 0.0, "pause": 2.0, "stop": 3.0},
    "pause": {"continue": 3.0, "pause": 0.0, "stop": 1.0},
    "stop": {"continue": 5.0, "pause": 1.0, "stop": 0.0},
}
MAX_COST = 5.0
NEXT_INPUT_MAX_CHARS = 2000
# What DSPy writes into outputs a demo did not supply (design.md): never a real next input.
_PLACEHOLDERS = ("not supplied for this particular example",)
ECE_BINS = 10

RULE_EXPLANATIONS: dict[str, str] = {
    "turn_failed": "a failed turn must stop",
    "turn_interrupted": "an interrupted turn must pause for the user",
    "max_turns": "the run reached its turn limit",
    "no_progress": "the plan and diff stopped changing, so the run must stop",
    "max_tokens": "the run spent its token budget",
    "low_confidence": "confidence below the minimum always pauses",
    "review_requested": "'review' always pauses for a human",
}

METRIC_NAMES: tuple[str, ...] = (
    "objective", "action_accuracy", "cost_weighted_error", "macro_f1", "guardrail_override_rate",
    *(f"guardrail_override_rate.{rule}" for rule in GUARDRAIL_RULES),
    "parse_failure_rate", "error_rate", "brier", "ece", "next_input_proxy",
)



def probability(confidence: float) -> float:
    """A model confidence as a probability for calibration: the original keeps f32s unclamped (and NaN), a
    probability is in [0, 1]; NaN counts as 0 (no stated belief)."""
    return 0.0 if math.isnan(confidence) else min(1.0, max(0.0, float(confidence)))

def dispatch_action(action: Optional[str]) -> Optional[str]:
    """The action production dispatches for a label or decision: `review` becomes `pause`."""
    if action is None:
        return None
    return "pause" if action == "review" else action


@dataclass(frozen=True)
class DecisionOutcome:
    """Everything needed to score one replayed decision."""

    model: GuidanceDecision
    enforced: GuidanceDecision
    audit: GuardrailAudit
    label: Optional[OutcomeLabel] = None
    config: GuardrailConfig = field(default_factory=GuardrailConfig)
    context: GuardrailContext = field(default_factory=GuardrailContext)
    error: Optional[str] = None

    @property
    def overridden(self) -> bool:
        """True when the enforced action differs from the model's own action (the guardrails changed it)."""
        return self.model.action != self.enforced.action

    @property
    def parse_failed(self) -> bool:
        """True when the model output could not be parsed (the safe default was used)."""
        return bool(self.model.parse_errors)


def enforce(model: GuidanceDecision, context: GuardrailContext, config: GuardrailConfig,
            label: Optional[OutcomeLabel] = None, error: Optional[str] = None) -> DecisionOutcome:
    """Apply the production guardrails to a model decision and bundle what scoring needs."""
    enforced, audit = apply_guardrails(model, context, config)
    return DecisionOutcome(model=model, enforced=enforced, audit=audit, label=label, config=config,
                           context=context, error=error)


def next_input_ok(decision: GuidanceDecision) -> bool:
    """Present, bounded and not a placeholder: the proxy for a usable next input."""
    text = (decision.next_input or "").strip()
    if not text or len(text) > NEXT_INPUT_MAX_CHARS:
        return False
    return not any(marker in text.lower() for marker in _PLACEHOLDERS)


def decision_cost(label_action: str, enforced_action: str) -> float:
    """Cost of dispatching `enforced_action` when `label_action` was right (COST matrix)."""
    return COST[dispatch_action(label_action)][dispatch_action(enforced_action)]


def score_outcome(outcome: DecisionOutcome) -> dict[str, float]:
    """Per-record scores (NaN where a metric does not apply to this record)."""
    nan = math.nan
    failed = outcome.parse_failed or outcome.error is not None
    label = dispatch_action(outcome.label.action) if outcome.label else None
    enforced = dispatch_action(outcome.enforced.action)
    model_action = dispatch_action(outcome.model.action)
    scores: dict[str, float] = {
        "guardrail_override_rate": float(outcome.overridden),
        "parse_failure_rate": float(outcome.parse_failed),
        "error_rate": float(outcome.error is not None),
        "confidence": probability(outcome.model.confidence),
        "next_input_proxy": float(next_input_ok(outcome.enforced)) if enforced == "continue" else nan,
    }
    for rule in GUARDRAIL_RULES:
        scores[f"guardrail_override_rate.{rule}"] = float(outcome.overridden and outcome.audit.rule == rule)
    if label is None:
        scores.update(action_accuracy=nan, cost_weighted_error=nan, objective=nan, brier=nan, model_correct=nan)
        return scores
    cost = decision_cost(label, enforced)
    model_correct = float(model_action == label)
    scores.update(
        action_accuracy=float(enforced == label),
        cost_weighted_error=cost,
        objective=0.0 if failed else 1.0 - cost / MAX_COST,
        brier=(probability(outcome.model.confidence) - model_correct) ** 2,
        model_correct=model_correct,
    )
    return scores


def statistics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Statistic]:
    """Every aggregate as a resamplable statistic over per-record rows.

    Each row needs `scores` (from `score_outcome`), `label_action` and `enforced_action`; records
    are resampled whole, so ratio metrics (macro-F1, ECE) get honest intervals too.
    """
    column = lambda name: [float(r["scores"].get(name, math.nan)) for r in rows]  # noqa: E731
    labeled = [bool(r.get("label_action")) for r in rows]
    truth = [dispatch_action(r.get("label_action")) or "" for r in rows]
    enforced = [dispatch_action(r.get("enforced_action")) or "" for r in rows]
    result: dict[str, Statistic] = {}
    for name in METRIC_NAMES:
        if name == "macro_f1":
            result[name] = macro_f1_of(truth, enforced, mask=labeled)
        elif name == "ece":
            result[name] = ece_of(column("confidence"), column("model_correct"), mask=labeled, n_bins=ECE_BINS)
        else:
            result[name] = mean_of(column(name))
    return result


def aggregate(rows: Sequence[Mapping[str, Any]], *, n_resamples: int = 1000, seed: int = 0) -> dict[str, MetricValue]:
    """Aggregates with bootstrap intervals from per-record rows (see `statistics`)."""
    return bootstrap_many(statistics(rows), len(rows), n_resamples=n_resamples, seed=seed)


# ----- feedback sentences (GEPA) ----------------------------------------------------------------

def feedback_by_metric(outcome: DecisionOutcome) -> dict[str, str]:
    """A sentence per metric that explains this record's score (only metrics with something to say)."""
    notes: dict[str, str] = {}
    model, enforced, audit = outcome.model, outcome.enforced, outcome.audit
    if outcome.error is not None:
        notes["error_rate"] = (f"The program raised {outcome.error}; production falls back to 'pause' "
                               "and the record scores 0.")
    if outcome.parse_failed:
        notes["parse_failure_rate"] = (
            "The output could not be parsed (" + "; ".join(model.parse_errors[:3]) + "); production falls back "
            "to 'pause' with confidence 0.0 and the record scores 0: answer every output field in the "
            "required format, with `confidence` as a number.")
    if audit.triggered and audit.rule:
        why = RULE_EXPLANATIONS.get(audit.rule, "")
        if audit.rule == "low_confidence":
            why = (f"confidence {model.confidence:.2f} is below the minimum "
                   f"{outcome.config.min_confidence:.2f}, so the loop pauses")
        elif audit.rule == "no_progress":
            why = (f"no progress for {outcome.context.no_progress_count} turns "
                   f"(limit {outcome.config.no_progress_limit}): the run must stop")
        elif audit.rule == "max_turns":
            why = f"turn {outcome.context.turn_count} reached the limit of {outcome.config.max_turns} turns"
        verb = (f"overrode '{audit.original_action}' to '{audit.enforced_action}'" if outcome.overridden
                else f"fired and kept '{audit.enforced_action}'")
        notes["guardrail_override_rate"] = f"Guardrail {audit.rule} {verb}: {why}."
    label = outcome.label
    if label is None:
        notes["objective"] = "No outcome label: only guardrail and format checks apply."
    else:
        right = dispatch_action(label.action)
        got = dispatch_action(enforced.action)
        source = f" (label from {label.source}" + (f": {label.reason}" if label.reason else "") + ")"
        if right == got:
            notes["objective"] = f"Correct: '{got}' was the right action{source}."
        else:
            worst = right == "stop" and got == "continue"
            notes["objective"] = (
                f"Wrong: the loop would {got} but the right action was '{right}'{source}; this mistake costs "
                f"{decision_cost(right, got):g} of {MAX_COST:g}"
                + (" (continuing a run that should stop is the costliest error)." if worst else "."))
        model_right = dispatch_action(model.action) == right
        if not outcome.parse_failed and outcome.error is None:
            if model_right and model.confidence < outcome.config.min_confidence:
                notes["brier"] = (f"The model's own action was right but its confidence {model.confidence:.2f} "
                                  "was too low to act on; be confident when the evidence is clear.")
            elif not model_right and model.confidence >= 0.8:
                notes["brier"] = f"Confidence {model.confidence:.2f} on a wrong action is overconfident."
    if dispatch_action(enforced.action) == "continue" and not next_input_ok(enforced):
        text = (enforced.next_input or "").strip()
        notes["next_input_proxy"] = (
            "Continuing without a next input falls back to the generic prompt; give a concrete next instruction."
            if not text else f"The next input is not usable (over {NEXT_INPUT_MAX_CHARS} chars or a placeholder).")
    return notes


def feedback(outcome: DecisionOutcome) -> str:
    """All feedback sentences of one record, for reflective optimizers such as GEPA."""
    notes = feedback_by_metric(outcome)
    order = ("error_rate", "parse_failure_rate", "guardrail_override_rate", "objective", "brier", "next_input_proxy")
    return " ".join(notes[name] for name in order if name in notes)


# ----- DSPy metrics -----------------------------------------------------------------------------

def _int(value: Any, default: int = 0) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _get(example: Any, name: str, default: Any = None) -> Any:
    if isinstance(example, Mapping):
        return example.get(name, default)
    try:
        value = example.get(name, default) if hasattr(example, "get") else getattr(example, name, default)
    except Exception:  # a dspy.Example raises on some missing keys; treat as absent
        return default
    return default if value is None else value


def _config_of(example: Any) -> GuardrailConfig:
    for name in ("guardrail_config", "config"):
        value = _get(example, name)
        if isinstance(value, GuardrailConfig):
            return value
        if isinstance(value, Mapping):
            return GuardrailConfig.model_validate(dict(value))
        if isinstance(value, str) and value.strip().startswith("{"):
            return GuardrailConfig.model_validate_json(value)
    record = _get(example, "record")
    config = getattr(record, "config", None)
    return config if isinstance(config, GuardrailConfig) else GuardrailConfig()


def example_config(example: Any) -> GuardrailConfig:
    """The guardrail config `metric` scores an example under (its `guardrail_config` / `config` / `record`, else the
    defaults)."""
    return _config_of(example)


def _context_of(example: Any) -> GuardrailContext:
    record = _get(example, "record")
    if getattr(record, "summary", None) is not None:
        return GuardrailContext.from_summary(record.summary)
    status = str(_get(example, "last_turn_status", "completed") or "completed")
    return GuardrailContext(
        last_turn_status=status if status in ("completed", "interrupted", "failed") else "completed",
        turn_count=_int(_get(example, "turn_count", 0)),
        no_progress_count=_int(_get(example, "no_progress_count", 0)),
        tokens_used=tokens_from_usage(_get(example, "token_usage", "")),
    )


def _label_of(example: Any) -> Optional[OutcomeLabel]:
    record = _get(example, "record")
    label = getattr(record, "label", None)
    if isinstance(label, OutcomeLabel):
        return label
    action = _get(example, "label_action") or _get(example, "action")
    action = str(action).strip().lower() if action else ""
    if action not in ("continue", "pause", "stop", "review"):
        return None
    # Built without validation: an example's label source is free text, not always `human|rule:|simulator`.
    return OutcomeLabel.model_construct(action=action, source=str(_get(example, "label_source", "") or "example"),
                                        reason=str(_get(example, "reason", "") or ""), confidence=1.0, next_input="")


def model_decision(pred: Any) -> GuidanceDecision:
    """The model's own decision from a program prediction (its `decision` when present), never raising."""
    decision = getattr(pred, "decision", None)
    if isinstance(decision, GuidanceDecision):
        return decision
    return parse_decision(pred)


def outcome_from_example(example: Any, pred: Any) -> DecisionOutcome:
    """Score-ready outcome of a prediction on a `programs.decision_example` (guardrails applied)."""
    return enforce(model_decision(pred), _context_of(example), _config_of(example), _label_of(example))


def metric(example: Any, pred: Any, trace: Any = None) -> float:
    """DSPy metric: the per-record objective; while bootstrapping demos (trace set) 1.0 only if right.

    The guardrail config comes from the example (`guardrail_config` / `config` / `record`), else the
    defaults; `metric_for(records)` looks each example's record up instead. An unlabeled example
    scores 1 minus its override and parse-failure indicators.
    """
    scores = score_outcome(outcome_from_example(example, pred))
    value = scores["objective"]
    if math.isnan(value):
        value = 1.0 - scores["guardrail_override_rate"] - scores["parse_failure_rate"]
        value = max(0.0, value)
    if trace is not None:
        return 1.0 if value >= 1.0 else 0.0
    return float(value)


def gepa_metric(gold: Any, pred: Any, trace: Any = None, pred_name: Optional[str] = None,
                pred_trace: Any = None) -> Any:
    """GEPA metric: `dspy.Prediction(score=..., feedback=...)` for one example."""
    import dspy

    outcome = outcome_from_example(gold, pred)
    scores = score_outcome(outcome)
    score = scores["objective"]
    if math.isnan(score):
        score = max(0.0, 1.0 - scores["guardrail_override_rate"] - scores["parse_failure_rate"])
    return dspy.Prediction(score=float(score), feedback=feedback(outcome))


def _with_record(example: Any, by_id: Mapping[str, Any]) -> Any:
    record = by_id.get(str(_get(example, "record_id", "") or ""))
    return {"record": record} if record is not None else example


def metric_for(records: Iterable[Any]) -> Callable[..., float]:
    """`metric` that scores each example against its own record (looked up by `record_id`): the
    record's guardrail config, turn summary and outcome label, exactly as replay does."""
    by_id = {record.record_id: record for record in records}

    def record_metric(example: Any, pred: Any, trace: Any = None) -> float:
        return metric(_with_record(example, by_id), pred, trace)

    return record_metric


def gepa_metric_for(records: Iterable[Any]) -> Callable[..., Any]:
    """`gepa_metric` that scores each example against its own record (looked up by `record_id`)."""
    by_id = {record.record_id: record for record in records}

    def record_gepa_metric(gold: Any, pred: Any, trace: Any = None, pred_name: Optional[str] = None,
                           pred_trace: Any = None) -> Any:
        return gepa_metric(_with_record(gold, by_id), pred, trace, pred_name, pred_trace)

    return record_gepa_metric


def rows_outcomes(outcomes: Iterable[DecisionOutcome]) -> list[dict[str, Any]]:
    """Minimal aggregate-ready rows for outcomes scored outside replay (tests, quick checks)."""
    return [{"label_action": o.label.action if o.label else None, "enforced_action": o.enforced.action,
             "scores": score_outcome(o)} for o in outcomes]
