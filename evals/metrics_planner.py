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
- `cycles_improvement`: expected drop of the best cycles when the directive is applied in the
  simulated kernel (`evals.sim_kernel`) from the example's state, averaged over `ROLLOUTS` seeded
  rollouts. The state is rebuilt exactly from the packet's performance profile, else from the
  best cycles by the simulator's nominal prior.
- `improvement_ratio`: that drop over the best drop a plain directive (Medium risk, no modifiers)
  of any allowed family achieves on the same rollouts, clipped to [0, 1]; 1 when nothing can improve.
- `effect_abs_error`, `effect_calibration`: `expected_effect_cycles` is the expected change of the
  cycles (negative = fewer cycles, like `delta_vs_best`). Its error is |(-expected_effect_cycles) -
  cycles_improvement| in cycles; calibration = max(0, 1 - error / max(10, cycles_improvement)).
- `parse_failure_rate`, `error_rate`: unparseable output; the program raised.
A directive the loop runner would reject (unparseable, schema-invalid, blocked family, or the program
raised) scores 0 on compliance and on improvement: the loop makes no change that iteration. Its
effect calibration is left out.

Objective (what optimizers maximise), per record:
    objective = 0 when the directive is not schema-valid, the output failed to parse, the program raised,
                or its family is blocked (the loop runner rejects such a directive: formats.md §2.2);
    else 0.4 * pivot_compliance + 0.5 * improvement_ratio + 0.1 * effect_calibration.
Always planning the same family loses everything whenever that family is blocked and the pivot share
whenever a pivot is due, so it scores below the same planner that follows the protocol (see
tests/evals/test_metrics_planner.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Optional, Sequence

from runtime import (AdvisorPacket, OptimizationDirective, PlannerRecord, pivot_required, validate_directive,
                     validate_directive_original)
from runtime.advisor import FAMILIES
from runtime.pivot import HARD_PLATEAU, family_of, packet_pivot_inputs
from runtime.inputs import tail_entries

from . import sim_kernel
from .stats import MetricValue, Statistic, bootstrap_many, mean_of

ROLLOUTS = 32
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


def pivot_requirement(packet: AdvisorPacket) -> PivotRequirement:
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


def kernel_state(packet: AdvisorPacket) -> Optional[sim_kernel.KernelState]:
    """The simulated kernel state behind a packet (exact from its profile, else the nominal prior)."""
    if packet.performance_profile is not None:
        try:
            return sim_kernel.state_from_profile(packet.performance_profile)
        except ValueError:
            pass
    best = packet.best_cycles if packet.best_cycles is not None else packet.experiment_summary.best_cycles
    return sim_kernel.nominal_state(best) if best is not None else None


def _seed(record_id: str) -> int:
    return sim_kernel.derive_seed("cycles_improvement", record_id)


@lru_cache(maxsize=65536)
def _improvement(state_json: str, family: str, modifiers: tuple[str, ...], risk: str, seed: int,
                 rollouts: int) -> float:
    state = sim_kernel.KernelState.model_validate_json(state_json)
    directive = {"strategy_family": family, "strategy_modifiers": list(modifiers), "risk": risk}
    return sim_kernel.expected_improvement(state, directive, seed=seed, rollouts=rollouts)


def expected_cycles_improvement(state: sim_kernel.KernelState, directive: Mapping[str, Any], seed: int,
                                rollouts: int = ROLLOUTS) -> float:
    """Mean drop of the best cycles over seeded rollouts of the directive from the state (cached)."""
    modifiers = tuple(m for m in directive.get("strategy_modifiers") or () if isinstance(m, str))
    risk = directive.get("risk") if directive.get("risk") in ("Low", "Medium", "High") else "Medium"
    return _improvement(state.model_dump_json(), directive["strategy_family"], modifiers, risk, seed, rollouts)


def best_plain_improvement(state: sim_kernel.KernelState, families: Sequence[str], seed: int,
                           rollouts: int = ROLLOUTS) -> tuple[float, str]:
    """The best expected drop among plain directives (Medium risk, no modifiers) of the given families."""
    options = [(expected_cycles_improvement(state, {"strategy_family": f, "risk": "Medium"}, seed, rollouts), f)
               for f in families]
    return max(options, key=lambda item: (item[0], -FAMILIES.index(item[1])))


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


def outcome_of(record: PlannerRecord, pred: Any, *, error: Optional[str] = None,
               rollouts: int = ROLLOUTS) -> PlannerOutcome:
    """Score-ready outcome of a planner prediction on a record."""
    directive, schema_errors, parse_errors = directive_of(pred) if error is None else (None, ["program raised"], [])
    original = (validate_directive_original(directive, record.packet.strategy_family_constraints)
                if directive is not None else list(schema_errors))
    return PlannerOutcome(record_id=record.record_id, packet=record.packet, directive=directive,
                          schema_errors=tuple(schema_errors), parse_errors=tuple(parse_errors), error=error,
                          rollouts=rollouts, original_errors=tuple(original))


def _family(directive: Optional[Mapping[str, Any]]) -> Optional[str]:
    family = (directive or {}).get("strategy_family")
    return family if family in FAMILIES else None


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


def score_outcome(outcome: PlannerOutcome) -> dict[str, float]:
    """Per-record scores (NaN where a metric does not apply)."""
    nan = math.nan
    need = pivot_requirement(outcome.packet)
    family = _family(outcome.directive)
    valid = not outcome.schema_errors and not outcome.parse_errors and outcome.error is None
    allowed = family is not None and family in need.allowed
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
    state = kernel_state(outcome.packet)
    if state is not None and not (valid and allowed):
        # The loop runner rejects the directive (or runs the no-change safe default): nothing improves.
        scores["cycles_improvement"] = 0.0
        scores["improvement_ratio"] = 0.0
    elif state is not None:
        seed = _seed(outcome.record_id)
        gain = expected_cycles_improvement(state, outcome.directive, seed, outcome.rollouts)
        best, _ = best_plain_improvement(state, need.allowed, seed, outcome.rollouts)
        scores["cycles_improvement"] = gain
        scores["improvement_ratio"] = 1.0 if best <= 0 else min(1.0, max(0.0, gain / best))
        predicted = _effect(outcome.directive)
        if predicted is not None:
            err = abs(predicted - gain)
            scores["effect_abs_error"] = err
            scores["effect_calibration"] = max(0.0, 1.0 - err / max(EFFECT_SCALE_FLOOR, gain))
    if not valid or not allowed:
        scores["objective"] = 0.0
    else:
        parts = {name: scores[name] for name in WEIGHTS}
        # Without a kernel state the improvement terms are unknown: weigh what is known.
        known = {name: value for name, value in parts.items() if not math.isnan(value)}
        weight = sum(WEIGHTS[name] for name in known)
        scores["objective"] = sum(WEIGHTS[n] * v for n, v in known.items()) / weight if weight else 0.0
    return scores


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
    state = kernel_state(outcome.packet)
    usable = not outcome.schema_errors and not outcome.parse_errors and outcome.error is None \
        and family is not None and family in need.allowed
    if state is not None and not usable:
        notes["cycles_improvement"] = "The loop runner rejects this directive, so the kernel does not improve."
    elif state is not None:
        seed = _seed(outcome.record_id)
        gain = expected_cycles_improvement(state, outcome.directive, seed, outcome.rollouts)
        best, best_family = best_plain_improvement(state, need.allowed, seed, outcome.rollouts)
        bound = f"slack {state.slack_fraction:.1%} of the tight bound {state.tight_lb_cycles}, binding {state.binding_bound}"
        if best > 0 and gain < 0.8 * best:
            notes["cycles_improvement"] = (f"{family} is expected to cut the best by {gain:.1f} cycles, while "
                                           f"{best_family} would cut {best:.1f} ({bound}).")
        else:
            notes["cycles_improvement"] = f"{family} is expected to cut the best by {gain:.1f} cycles ({bound})."
        predicted = _effect(outcome.directive)
        if predicted is not None and abs(predicted - gain) > max(EFFECT_SCALE_FLOOR, gain):
            notes["effect_calibration"] = (f"expected_effect_cycles {-predicted:g} is off: the simulator expects "
                                           f"{-gain:.0f} (negative means fewer cycles).")
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
    record_id = str(_get(example, "record_id") or "example")
    return PlannerRecord(record_id=record_id, episode_id="", iteration_id=0, packet=packet)


def metric(example: Any, pred: Any, trace: Any = None) -> float:
    """DSPy metric: the per-record objective; while bootstrapping demos (trace set) 1.0 only when near-best."""
    value = score_outcome(outcome_of(record_of_example(example), pred))["objective"]
    if trace is not None:
        return 1.0 if value >= 0.9 else 0.0
    return float(value)


def gepa_metric(gold: Any, pred: Any, trace: Any = None, pred_name: Optional[str] = None,
                pred_trace: Any = None) -> Any:
    """GEPA metric: `dspy.Prediction(score=..., feedback=...)` for one planner example."""
    import dspy

    outcome = outcome_of(record_of_example(gold), pred)
    return dspy.Prediction(score=float(score_outcome(outcome)["objective"]), feedback=feedback(outcome))
