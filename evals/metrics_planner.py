"""Metrics of the OptimizationDirective planner: per-record scores, aggregates, feedback sentences.

Per record (one packet, one directive):
- `schema_validity`: 1 when the output parsed and the directive validates against formats.md §2.2
  (`runtime.validate_directive`, blocked families not counted here).
- `directive_valid_strict`, `directive_valid_original`: the directive parsed and passes the strict
  check of §2.2 (the same as `schema_validity`), resp. the real loop runner's looser own check
  (`runtime.validate_directive_original`: blank items, 0 or 7 validation commands, a padded family,
  a boolean effect pass; a blocked family does not, as in the runner's schema). Both are scored so a
  board shows where the workbench is stricter than production (formats.md §2.3.1).
- `pivot_compliance`: 1 when the directive's family is allowed by the packet's constraints and,
  whenever `runtime.pivot_required` says a pivot is due, the directive pivots: it leaves the current
  family, and in the near-bound regime it picks a bound-lowering family (`family:reduce_loads` or
  `family:break_deps`). With no current family, any allowed family is a pivot.
- `cycles_improvement`: expected drop of the best cycles when the directive is carried out, by the record's
  cycles model (`evals.cycles`): the kernel simulator's seeded rollouts from the state the packet's
  performance profile rebuilds exactly (`sim`; only for packets that carry one), or the outcome model fit on
  the train and dev splits (`learned`, the directive's family from the packet alone). A record the model cannot
  estimate (no profile for the simulator, no best or a family never seen in train for the learned model) gets
  no value: it is left out of the mean, never filled in.
- `improvement_ratio`: that drop over the best drop a plain directive (Medium risk, no modifiers) of any
  allowed family achieves by the same model, clipped to [0, 1]; 1 when nothing can improve.
- `effect_abs_error`, `effect_calibration`: `expected_effect_cycles` is the expected change of the
  cycles (negative = fewer cycles, like `delta_vs_best`). Its error is |(-expected_effect_cycles) -
  cycles_improvement| in cycles; calibration = max(0, 1 - error / max(10, cycles_improvement)).
- `parse_failure_rate`, `error_rate`: unparseable output; the program raised.
A directive the loop runner would reject (unparseable, schema-invalid, blocked family, or the program
raised) scores 0 on compliance and on improvement: the loop makes no change that iteration. Its
effect calibration is left out. A program that replays the log (`planner.logged`, `replays_log`) was carried
out as logged: its improvement is estimated for the logged family even when that family was blocked (its
compliance and objective still score 0), its effect calibration is left out (the log holds no forecast) unless
the record carries the runner's archived directive (`logged_forecast`: the planner's own `expected_effect_cycles`),
and a record whose log names no family (`strategy_tags[0]`) is not scored at all (`unscored`).

Objective (what optimizers maximise), per record:
    objective = 0 when the directive is not schema-valid, the output failed to parse, the program raised,
                or its family is blocked (the loop runner rejects such a directive: formats.md §2.2);
    else 0.4 * pivot_compliance + 0.5 * improvement_ratio + 0.1 * effect_calibration (the last term's weight
    shared by the other two where nothing forecast an effect: a replayed log).
A record without an improvement estimate has no objective (NaN): the cycles model does not apply to its packet
(then not even a rejected directive is scored, so every program is judged on the same records), or it has no
estimate for the family chosen. Pivot compliance alone is never passed off as the objective: such records are
left out of it and counted (`left_out_reason`, `left_out_notes`; replay's summary `cycles_model.unscored`).
The DSPy metric alone falls back to compliance there (`training_signal`), to steer an optimizer.
Always planning the same family loses everything whenever that family is blocked and the pivot share
whenever a pivot is due, so it scores below the same planner that follows the protocol (see
tests/evals/test_metrics_planner.py).
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from runtime import (AdvisorPacket, OptimizationDirective, PlannerRecord, pivot_required, validate_directive,
                     validate_directive_original)
from runtime.advisor import FAMILIES
from runtime.pivot import HARD_PLATEAU, family_of, packet_pivot_inputs
from runtime.inputs import tail_entries
from runtime.records import packet_hash

from .cycles import ROLLOUTS, CyclesModel, SimulatorCycles
from .stats import MetricValue, Statistic, bootstrap_many, mean_of

BOUND_LOWERING = ("family:reduce_loads", "family:break_deps")
EFFECT_SCALE_FLOOR = 10.0
WEIGHTS = {"pivot_compliance": 0.4, "improvement_ratio": 0.5, "effect_calibration": 0.1}

METRIC_NAMES: tuple[str, ...] = (
    "objective", "schema_validity", "directive_valid_strict", "directive_valid_original", "pivot_compliance",
    "cycles_improvement", "improvement_ratio", "effect_abs_error", "effect_calibration", "parse_failure_rate",
    "error_rate",
)


@dataclass(frozen=True)
class PivotRequirement:
    """What the packet demands of the next directive."""

    required: bool
    reasons: tuple[str, ...]
    current_family: Optional[str]
    blocked: tuple[str, ...]
    allowed: tuple[str, ...]
    near_bound: bool


@dataclass(frozen=True)
class PlannerOutcome:
    """Everything needed to score one planner answer."""

    record_id: str
    packet: AdvisorPacket
    directive: Optional[dict[str, Any]]
    schema_errors: tuple[str, ...] = ()
    parse_errors: tuple[str, ...] = ()
    error: Optional[str] = None
    rollouts: int = ROLLOUTS
    extra: dict[str, Any] = field(default_factory=dict)
    original_errors: tuple[str, ...] = ()
    cycles: Optional[CyclesModel] = None  # None: the simulator (it applies only to packets with a profile)

    @property
    def cycles_model(self) -> CyclesModel:
        """The model that estimates this record's improvement."""
        return self.cycles if self.cycles is not None else _SIMULATOR


_RECENT_PACKETS = 8  # the last packets' requirements, by identity (`pivot_requirement`)
_recent: deque[tuple[AdvisorPacket, "PivotRequirement"]] = deque(maxlen=_RECENT_PACKETS)


def pivot_requirement(packet: AdvisorPacket) -> PivotRequirement:
    """The pivot rules in force for a packet (`_pivot_requirement`), the same object for the same packet when it
    was asked for just before: scoring one replayed record asks six times (its score, feedback, compliant families,
    row and slices), and each answer parses the packet's log tail again otherwise."""
    for seen, need in tuple(_recent):
        if seen is packet:
            return need
    need = _pivot_requirement(packet)
    _recent.append((packet, need))
    return need


def _pivot_requirement(packet: AdvisorPacket) -> PivotRequirement:
    """The pivot rules in force for a packet: `runtime.pivot_required` on its log tail and profile.

    The packet's best is the runner's (log and `best/*` tags) and is passed as the tags' best, so a
    best the log does not hold gives no plateau, as in the runner and the packet builder. The tail
    holds only the last 20 entries, so the packet's own `plateau_valid_iters_since_best` (computed on the
    whole log) is used when it states one; its constraints name the blocked family.
    """
    entries = tail_entries(packet)
    required, reasons = pivot_required(entries, packet.performance_profile, packet.threshold_target,
                                       **packet_pivot_inputs(packet))
    reasons = list(reasons)
    plateau = packet.plateau_valid_iters_since_best
    if plateau is not None and plateau >= HARD_PLATEAU and not any(r.startswith("hard_plateau") for r in reasons):
        reasons.append(f"hard_plateau: {plateau} valid attempts since the best (>= {HARD_PLATEAU})")
    constraints = packet.strategy_family_constraints
    blocked = tuple(f for f in constraints.blocked_families if f in FAMILIES)
    if blocked and not any(r.startswith("family_blocked") for r in reasons):
        reasons.append(f"family_blocked: {', '.join(blocked)}")
    current = constraints.current_family or (family_of(entries[-1]) if entries else None)
    allowed = tuple(f for f in constraints.allowed_families if f in FAMILIES and f not in blocked) or FAMILIES
    return PivotRequirement(required=bool(reasons), reasons=tuple(reasons), current_family=current,
                            blocked=blocked, allowed=allowed,
                            near_bound=any(r.startswith("near_bound") for r in reasons))


_SIMULATOR = SimulatorCycles()


def compliant_families(packet: AdvisorPacket) -> tuple[str, ...]:
    """The families a directive may choose at this packet and comply with the pivot protocol."""
    need = pivot_requirement(packet)
    return tuple(f for f in FAMILIES if _complies(f, need))


def directive_of(pred: Any) -> tuple[Optional[dict[str, Any]], list[str], list[str]]:
    """(directive dict or None, schema errors, parse errors) from a planner prediction, never raising."""
    parse_errors = [str(e) for e in (getattr(pred, "parse_errors", None) or [])]
    raw = getattr(pred, "directive", None)
    if raw is None and isinstance(pred, Mapping):
        raw = pred.get("directive", pred)
    if isinstance(raw, OptimizationDirective):
        directive = raw.model_dump()
    elif isinstance(raw, Mapping):
        directive = dict(raw)
    elif isinstance(raw, str):
        try:
            directive = json.loads(raw)
        except ValueError:
            return None, ["directive is not JSON"], parse_errors or ["directive is not JSON"]
    else:
        return None, ["no directive in the prediction"], parse_errors or ["no directive in the prediction"]
    if not isinstance(directive, dict):
        return None, ["directive is not a JSON object"], parse_errors or ["directive is not a JSON object"]
    errors = validate_directive(directive)
    errors += [str(e) for e in (getattr(pred, "directive_errors", None) or []) if str(e) not in errors]
    return directive, errors, parse_errors


def outcome_of(record: PlannerRecord, pred: Any, *, error: Optional[str] = None, rollouts: int = ROLLOUTS,
               cycles: Optional[CyclesModel] = None, replays_log: bool = False) -> PlannerOutcome:
    """Score-ready outcome of a planner prediction on a record (`replays_log`: the program replays the log)."""
    directive, schema_errors, parse_errors = directive_of(pred) if error is None else (None, ["program raised"], [])
    original = (validate_directive_original(directive, record.packet.strategy_family_constraints)
                if directive is not None else list(schema_errors))
    extra: dict[str, Any] = {}
    unscored = getattr(pred, "unscored", None) if error is None else None
    if unscored:
        extra["unscored"] = str(unscored)
    if replays_log and error is None:
        extra["replays_log"] = True
        if getattr(pred, "logged_forecast", False):  # the archived directive: the planner's own forecast
            extra["logged_forecast"] = True
    return PlannerOutcome(record_id=record.record_id, packet=record.packet, directive=directive,
                          schema_errors=tuple(schema_errors), parse_errors=tuple(parse_errors), error=error,
                          rollouts=rollouts, original_errors=tuple(original), extra=extra, cycles=cycles)


def _family(directive: Optional[Mapping[str, Any]]) -> Optional[str]:
    family = (directive or {}).get("strategy_family")
    return family if family in FAMILIES else None


def applied_family(outcome: PlannerOutcome, need: PivotRequirement) -> Optional[str]:
    """The family the loop runner carries out (None: none): a valid directive's family the pivot protocol allows,
    or a replayed log line's as logged, blocked or not. The metric's estimate and the off-policy choices both
    read it."""
    if outcome.extra.get("unscored"):
        return None
    family = _family(outcome.directive)
    replayed = bool(outcome.extra.get("replays_log"))
    # a replayed directive was carried out, also one only the runner's looser check accepted (an archived one)
    valid = (not outcome.schema_errors or replayed) and not outcome.parse_errors and outcome.error is None
    return family if valid and family is not None and (family in need.allowed or replayed) else None


def _complies(family: Optional[str], need: PivotRequirement) -> bool:
    if family is None or family not in need.allowed:
        return False
    if need.near_bound and family not in BOUND_LOWERING:
        return False
    # Near the bound alone, any bound-lowering family will do; the other rules demand a new family.
    must_leave = any(not reason.startswith("near_bound") for reason in need.reasons)
    return not must_leave or need.current_family is None or family != need.current_family


def _effect(directive: Optional[Mapping[str, Any]]) -> Optional[float]:
    value = (directive or {}).get("expected_effect_cycles")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return -float(value)


def _estimate(outcome: PlannerOutcome, need: PivotRequirement,
              applied: bool) -> tuple[Optional[float], Optional[float], Optional[tuple[float, str]]]:
    """(improvement, ratio, best plain option) of the directive by the record's cycles model; None: no estimate."""
    model, packet = outcome.cycles_model, outcome.packet
    if not model.applies(packet):
        return None, None, None
    if not applied:  # the loop runner rejects the directive (or runs the no-change safe default): nothing improves
        return 0.0, 0.0, None
    gain = model.improvement(outcome.record_id, packet, outcome.directive or {}, outcome.rollouts)
    best = model.best_allowed(outcome.record_id, packet, need.allowed, outcome.rollouts)
    if gain is None:
        return None, None, best
    if best is None:
        return gain, None, None
    return gain, (1.0 if best[0] <= 0 else min(1.0, max(0.0, gain / best[0]))), best


def score_outcome(outcome: PlannerOutcome) -> dict[str, float]:
    """Per-record scores (NaN where a metric does not apply)."""
    nan = math.nan
    need = pivot_requirement(outcome.packet)
    if outcome.extra.get("unscored"):
        return {name: nan for name in (*METRIC_NAMES, "pivot_required")}
    family = _family(outcome.directive)
    valid = not outcome.schema_errors and not outcome.parse_errors and outcome.error is None
    allowed = family is not None and family in need.allowed
    replayed = bool(outcome.extra.get("replays_log")) and not outcome.extra.get("logged_forecast")
    scores: dict[str, float] = {
        "schema_validity": float(valid),
        "directive_valid_strict": float(valid),
        "directive_valid_original": float(not outcome.original_errors and not outcome.parse_errors
                                          and outcome.error is None and outcome.directive is not None),
        "parse_failure_rate": float(bool(outcome.parse_errors)),
        "error_rate": float(outcome.error is not None),
        "pivot_compliance": float(valid and _complies(family, need)),
        "pivot_required": float(need.required),
        "cycles_improvement": nan, "improvement_ratio": nan, "effect_abs_error": nan, "effect_calibration": nan,
    }
    applied = applied_family(outcome, need) is not None
    gain, ratio, _ = _estimate(outcome, need, applied)
    if gain is not None:
        scores["cycles_improvement"] = gain
    if ratio is not None:
        scores["improvement_ratio"] = ratio
    predicted = _effect(outcome.directive)
    if applied and gain is not None and predicted is not None and not replayed:
        err = abs(predicted - gain)
        scores["effect_abs_error"] = err
        scores["effect_calibration"] = max(0.0, 1.0 - err / max(EFFECT_SCALE_FLOOR, gain))
    # No improvement estimate: compliance alone is not the objective, so the record has none (left out, counted)
    if not outcome.cycles_model.applies(outcome.packet):
        scores["objective"] = nan
    elif not valid or not allowed:
        scores["objective"] = 0.0
    elif ratio is None:
        scores["objective"] = nan
    else:
        # The effect term is absent where nothing forecast it (a replayed log): weigh the other two.
        known = {name: scores[name] for name in WEIGHTS if not math.isnan(scores[name])}
        weight = sum(WEIGHTS[name] for name in known)
        scores["objective"] = sum(WEIGHTS[n] * v for n, v in known.items()) / weight
    return scores


LEFT_OUT = {
    "no_logged_family": "the log names no family (strategy_tags[0]), so there is nothing to score",
    "model_does_not_apply": "the {model} cycles model does not apply to the packet ({why})",
    "no_estimate_for_family": "the {model} cycles model has no estimate for the chosen family (one the train "
                              "split never tried: {families})",
}


def left_out_reason(outcome: PlannerOutcome, scores: Mapping[str, float]) -> Optional[str]:
    """Why a record has no objective (a `LEFT_OUT` key), None when it has one."""
    if not math.isnan(scores.get("objective", math.nan)):
        return None
    if outcome.extra.get("unscored"):
        return "no_logged_family"
    if not outcome.cycles_model.applies(outcome.packet):
        return "model_does_not_apply"
    return "no_estimate_for_family"


def left_out_notes(rows: Sequence[Mapping[str, Any]], model: str) -> list[str]:
    """One line per reason records were left out of the objective, with their count (none: no line)."""
    n = len(rows)
    notes = []
    for reason, text in LEFT_OUT.items():
        hit = [row for row in rows if row.get("left_out") == reason]
        if not hit:
            continue
        families = sorted({str(row.get("strategy_family")) for row in hit if row.get("strategy_family")})
        why = "no performance profile" if model == "sim" else "no best so far"
        detail = text.format(model=model, why=why, families=", ".join(families) or "none")
        if model == "none" and reason == "model_does_not_apply":
            detail = "no cycles model estimates anything here (none applies or could be fit)"
        notes.append(f"{len(hit)} of {n} records left out of objective, cycles_improvement and improvement_ratio: "
                     f"{detail}")
    return notes


def training_signal(scores: Mapping[str, float]) -> float:
    """The DSPy metric's value of one example: its objective, or where no improvement estimate exists its pivot
    compliance (what the loop's rules alone say of it). It steers an optimizer; no reported number uses it."""
    value = scores.get("objective", math.nan)
    if math.isnan(value):
        value = scores.get("pivot_compliance", math.nan)
    return 0.0 if math.isnan(value) else float(value)


def statistics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Statistic]:
    """Every aggregate as a resamplable statistic over rows carrying `scores` (from `score_outcome`)."""
    return {name: mean_of([float(r["scores"].get(name, math.nan)) for r in rows]) for name in METRIC_NAMES}


def aggregate(rows: Sequence[Mapping[str, Any]], *, n_resamples: int = 1000, seed: int = 0) -> dict[str, MetricValue]:
    """Aggregates with bootstrap intervals from rows carrying `scores` (from `score_outcome`)."""
    return bootstrap_many(statistics(rows), len(rows), n_resamples=n_resamples, seed=seed)


# ----- feedback sentences -----------------------------------------------------------------------

def feedback_by_metric(outcome: PlannerOutcome) -> dict[str, str]:
    """A sentence per metric explaining this record's score."""
    notes: dict[str, str] = {}
    need = pivot_requirement(outcome.packet)
    family = _family(outcome.directive)
    if outcome.error is not None:
        notes["error_rate"] = f"The program raised {outcome.error}; the record scores 0."
    if outcome.parse_errors:
        notes["parse_failure_rate"] = ("The output could not be parsed (" + "; ".join(outcome.parse_errors[:3])
                                       + "); the record scores 0.")
    if outcome.schema_errors and outcome.error is None:
        notes["schema_validity"] = ("The directive breaks the schema: " + "; ".join(outcome.schema_errors[:4])
                                    + ". Every key is required, no extra keys, lists within their bounds.")
    if family is not None:
        if family not in need.allowed:
            notes["pivot_compliance"] = (f"strategy_family {family} is blocked for this directive "
                                         f"({'; '.join(need.reasons) or 'blocked family'}); choose one of "
                                         f"{', '.join(need.allowed)}.")
        elif need.required and not _complies(family, need):
            target = ("a bound-lowering family (family:reduce_loads or family:break_deps)" if need.near_bound
                      else f"a family other than {need.current_family}")
            notes["pivot_compliance"] = (f"A pivot is required ({'; '.join(need.reasons)}) but the directive "
                                         f"keeps {family}; pick {target}.")
        elif need.required:
            notes["pivot_compliance"] = f"Pivoted to {family} as required ({'; '.join(need.reasons)})."
    if outcome.extra.get("unscored"):
        notes["cycles_improvement"] = f"Not scored: {outcome.extra['unscored']}."
        return notes
    model = outcome.cycles_model
    usable = applied_family(outcome, need) is not None
    gain, _, best = _estimate(outcome, need, usable)
    if not model.applies(outcome.packet):
        notes["cycles_improvement"] = (f"No improvement estimate: the {model.name} cycles model does not apply to "
                                       f"this packet ({model.context(outcome.record_id, outcome.packet)}).")
    elif not usable:
        notes["cycles_improvement"] = "The loop runner rejects this directive, so the kernel does not improve."
    elif gain is None:
        notes["cycles_improvement"] = (f"No improvement estimate for {family}: the {model.name} model has none "
                                       "(a family the train split never tried).")
    else:
        context = model.context(outcome.record_id, outcome.packet)
        if best is not None and best[0] > 0 and gain < 0.8 * best[0]:
            notes["cycles_improvement"] = (f"{family} is expected to cut the best by {gain:.1f} cycles, while "
                                           f"{best[1]} would cut {best[0]:.1f} ({context}).")
        else:
            notes["cycles_improvement"] = f"{family} is expected to cut the best by {gain:.1f} cycles ({context})."
        predicted = _effect(outcome.directive)
        if predicted is not None and abs(predicted - gain) > max(EFFECT_SCALE_FLOOR, gain) \
                and (not outcome.extra.get("replays_log") or outcome.extra.get("logged_forecast")):
            notes["effect_calibration"] = (f"expected_effect_cycles {-predicted:g} is off: the {model.name} model "
                                           f"expects {-gain:.0f} (negative means fewer cycles).")
    return notes


def feedback(outcome: PlannerOutcome) -> str:
    """All feedback sentences of one record, for reflective optimizers such as GEPA."""
    notes = feedback_by_metric(outcome)
    order = ("error_rate", "parse_failure_rate", "schema_validity", "pivot_compliance", "cycles_improvement",
             "effect_calibration")
    return " ".join(notes[name] for name in order if name in notes) or "The directive is valid and compliant."


# ----- DSPy metrics -----------------------------------------------------------------------------

def _get(example: Any, name: str) -> Any:
    if isinstance(example, Mapping):
        return example.get(name)
    try:
        return example.get(name) if hasattr(example, "get") else getattr(example, name, None)
    except Exception:  # a dspy.Example raises on some missing keys; treat as absent
        return None


def record_of_example(example: Any) -> PlannerRecord:
    """The planner record behind a `programs.planner_example` (its `record`, else its `packet`)."""
    record = _get(example, "record")
    if isinstance(record, PlannerRecord):
        return record
    if isinstance(record, Mapping):
        return PlannerRecord.model_validate(dict(record))
    if isinstance(record, str) and record.strip().startswith("{"):
        return PlannerRecord.model_validate_json(record)
    packet = _get(example, "packet")
    if isinstance(packet, str):
        packet = AdvisorPacket.model_validate_json(packet)
    elif isinstance(packet, Mapping):
        packet = AdvisorPacket.model_validate(dict(packet))
    if not isinstance(packet, AdvisorPacket):
        raise ValueError("planner example carries neither `record` nor `packet`")
    # Without an id the packet names the record: the cycles models key their seeds and caches by it.
    record_id = str(_get(example, "record_id") or f"packet-{packet_hash(packet)[:16]}")
    return PlannerRecord(record_id=record_id, episode_id="", iteration_id=0, packet=packet)


def metric(example: Any, pred: Any, trace: Any = None, *, cycles: Optional[CyclesModel] = None) -> float:
    """DSPy metric: the per-record objective (`training_signal`); while bootstrapping demos (trace set) 1.0 only
    when near-best."""
    value = training_signal(score_outcome(outcome_of(record_of_example(example), pred, cycles=cycles)))
    if trace is not None:
        return 1.0 if value >= 0.9 else 0.0
    return float(value)


def gepa_metric(gold: Any, pred: Any, trace: Any = None, pred_name: Optional[str] = None,
                pred_trace: Any = None, *, cycles: Optional[CyclesModel] = None) -> Any:
    """GEPA metric: `dspy.Prediction(score=..., feedback=...)` for one planner example."""
    import dspy

    outcome = outcome_of(record_of_example(gold), pred, cycles=cycles)
    return dspy.Prediction(score=training_signal(score_outcome(outcome)), feedback=feedback(outcome))


def metrics_with(cycles: Optional[CyclesModel]) -> tuple[Any, Any]:
    """(metric, gepa_metric) that estimate the improvement with `cycles` (None: the simulator)."""
    def scored(example: Any, pred: Any, trace: Any = None) -> float:
        return metric(example, pred, trace, cycles=cycles)

    def reflective(gold: Any, pred: Any, trace: Any = None, pred_name: Optional[str] = None,
                   pred_trace: Any = None) -> Any:
        return gepa_metric(gold, pred, trace, pred_name, pred_trace, cycles=cycles)

    scored.__name__, reflective.__name__ = f"metric[{getattr(cycles, 'name', 'sim')}]", "gepa_metric"
    return scored, reflective
