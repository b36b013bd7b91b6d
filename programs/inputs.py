"""Program inputs and labeled examples built from the runtime's records."""

from __future__ import annotations

import json
from array import array
from typing import Any, Mapping, Optional, Sequence

import dspy
from pydantic import ValidationError

from runtime.advisor import FAMILIES, AdvisorPacket, DirectiveValidation, ExperimentLogEntry, OptimizationDirective
from runtime.fullauto import FullAutoTurnSummary
from runtime.inputs import (COMPACT_PACKET_NAMES, COMPACT_STATE_NAMES, COMPACT_SUMMARY_NAMES, clip_text,
                            compact_packet_inputs, packet_inputs, summary_inputs, tail_entries)
from runtime.records import DecisionRecord, OutcomeLabel, PlannerRecord
from runtime.trained import config_inputs, turn_features
from signatures import FULL_AUTO_INPUT_FIELDS, PLANNER_INPUT_FIELDS

# Inputs the original signature does not see but a better program (and the rule policies) may use,
# and the compact renderings of the same summary (`full_auto.compact`, `full_auto.compact_state`).
DECISION_EXTRA_FIELDS: tuple[str, ...] = tuple(dict.fromkeys((
    "turn_count", "no_progress_count", "last_agent_message", "last_guidance_directive", *COMPACT_SUMMARY_NAMES,
    *COMPACT_STATE_NAMES,
)))
# Present only when the inputs come from a DecisionRecord: what the deployed loop decided.
LOGGED_FIELDS: tuple[str, ...] = ("logged_action", "logged_confidence", "logged_reason", "logged_next_input")
# The whole packet, and the compact rendering of it (`planner.compact`; `goal` is shared).
PLANNER_EXTRA_FIELDS: tuple[str, ...] = ("packet", *COMPACT_PACKET_NAMES)
# Present only when the inputs come from a PlannerRecord: the log line of the attempt that followed.
# `logged_directive`: the directive the planner answered, when the loop runner archived it (`PlannerRecord.plan`).
PLANNER_LOGGED_FIELDS: tuple[str, ...] = ("logged_entry", "logged_directive")

# Confidence a labeled demonstration carries when its label does not state one: how much the
# label's source is trusted. Demos must carry a confidence (design.md), and a constant 1.0 would
# teach the model to always answer 1.0.
SOURCE_CONFIDENCE: dict[str, float] = {"human": 0.95, "simulator": 0.9, "rule": 0.8}
DEFAULT_REASONS: dict[str, str] = {
    "continue": "Work is progressing and the plan has open steps; continue with the next one.",
    "pause": "The loop needs a person before it can go on safely.",
    "stop": "The task is finished or cannot make further progress.",
    "review": "The changes are ready for a human review.",
}
DEFAULT_NEXT_INPUT = "Continue with the next step of the plan."
# Why the rule planner chose a family when no pivot rule is in force (`given_family_inputs`).
NO_PIVOT = "no pivot due: the least-tried allowed family"


def _summary_of(value: Any) -> tuple[FullAutoTurnSummary, Optional[DecisionRecord]]:
    if isinstance(value, DecisionRecord):
        return value.summary, value
    if isinstance(value, FullAutoTurnSummary):
        return value, None
    if isinstance(value, Mapping):
        if "summary" in value and "record_id" in value:
            record = DecisionRecord.model_validate(dict(value))
            return record.summary, record
        return FullAutoTurnSummary.model_validate(dict(value), strict=False), None
    raise TypeError(f"expected a DecisionRecord, FullAutoTurnSummary or dict, got {type(value).__name__}")


def decision_inputs(record_or_summary: Any) -> dict[str, str]:
    """Signature inputs plus extras (turn counts, agent message, the record's guardrail config, logged decision)
    as strings."""
    summary, record = _summary_of(record_or_summary)
    # The rendering a frozen guidance module uses in production (`runtime.inputs.summary_inputs`).
    text = summary_inputs(summary)
    inputs = {name: text[name] for name in (*FULL_AUTO_INPUT_FIELDS, *DECISION_EXTRA_FIELDS)}
    if record is not None:  # the run's guardrail config (a trained model weighs the confidence they demand)
        inputs.update(config_inputs(record.config))
    if record is not None and record.logged is not None:
        inputs.update({
            "logged_action": record.logged.model_action,
            # a null logged confidence was a NaN or infinite f32: "nan", "inf" and "-inf" parse back to it
            "logged_confidence": repr(record.logged_model_confidence()),
            "logged_reason": record.logged.reason,
            "logged_next_input": record.logged.next_input_preview,
        })
    return inputs


def label_confidence(label: OutcomeLabel) -> float:
    """The label's confidence when below 1.0, else the trust in its source.

    1.0 is the model's default and survives every JSON round trip, so it cannot tell a stated
    certainty from an unstated one; the source's trust is used for it.
    """
    if label.confidence < 1.0:
        return float(label.confidence)
    kind = label.source.split(":", 1)[0].strip().lower()
    return SOURCE_CONFIDENCE.get(kind, 0.75)


def decision_example(record: DecisionRecord | Mapping[str, Any]) -> dspy.Example:
    """A labeled example whose outputs are complete: action, next_input, reason, confidence."""
    if isinstance(record, Mapping):
        record = DecisionRecord.model_validate(dict(record))
    if record.label is None:
        raise ValueError(f"record {record.record_id} has no outcome label")
    label = record.label
    next_input = ""
    if label.action == "continue":
        logged_continue = record.logged is not None and record.logged.model_action == "continue"
        next_input = (label.next_input or (record.logged.next_input_preview if logged_continue else "")
                      or DEFAULT_NEXT_INPUT)
    inputs = decision_inputs(record)
    example = dspy.Example(
        **inputs,
        action=label.action,
        next_input=next_input,
        reason=label.reason or DEFAULT_REASONS[label.action],
        confidence=label_confidence(label),
        record_id=record.record_id,
        label_source=label.source,
    )
    return example.with_inputs(*inputs)


# Where an example that carries its turn features keeps them (`example_features`): an attribute, not a field, so
# no prompt, demo, copy or record of the example shows them.
CARRIED_FEATURES = "_turn_features"


def example_features(example: dspy.Example) -> tuple[str, Sequence[float]]:
    """`runtime.trained.turn_features` of a Full Auto example's inputs: the ones it carries (computed when its record
    was read, `decision_fit_fields`), else computed from its inputs."""
    carried = vars(example).get(CARRIED_FEATURES)
    return carried if carried is not None else turn_features(example.inputs().toDict())


def decision_fit_fields(record: DecisionRecord) -> tuple[dict[str, str], tuple[str, Sequence[float]]]:
    """What a trained decision model's fit reads of `decision_example(record)`, without building the example: (its
    record id, thread id and label action, the turn features of its inputs); ValueError, as `decision_example`, for
    a record without an outcome label. The numbers are a compact `array` (a year of examples holds them)."""
    if record.label is None:
        raise ValueError(f"record {record.record_id} has no outcome label")
    inputs = decision_inputs(record)
    text, numbers = turn_features(inputs)
    fields = {"record_id": record.record_id, "thread_id": inputs["thread_id"], "action": record.label.action}
    return fields, (text, array("d", numbers))


def _packet_of(value: Any) -> tuple[AdvisorPacket, Optional[PlannerRecord]]:
    if isinstance(value, PlannerRecord):
        return value.packet, value
    if isinstance(value, AdvisorPacket):
        return value, None
    if isinstance(value, Mapping):
        if "packet" in value and "record_id" in value:
            record = PlannerRecord.model_validate(dict(value))
            return record.packet, record
        return AdvisorPacket.model_validate(dict(value)), None
    raise TypeError(f"expected a PlannerRecord, AdvisorPacket or dict, got {type(value).__name__}")


def planner_inputs(packet: Any) -> dict[str, str]:
    """Signature inputs of the planner (compact text), the full packet JSON as `packet` and the compact fields;
    given a PlannerRecord, also its logged attempt as `logged_entry` (JSON; what `planner.logged` replays) and,
    when the runner archived the plan, the directive the planner answered as `logged_directive` (JSON).

    The rendering is `runtime.inputs.packet_inputs`, which a frozen planner loaded standalone uses too.
    """
    packet, record = _packet_of(packet)
    inputs = packet_inputs(packet)
    if record is not None and record.outcome is not None:
        inputs["logged_entry"] = record.outcome.model_dump_json()
    if record is not None and record.plan is not None and record.plan.directive is not None:
        inputs["logged_directive"] = json.dumps(record.plan.directive, sort_keys=True, ensure_ascii=False)
    return inputs


def given_family_inputs(packet: AdvisorPacket, family: str, reasons: Sequence[str]) -> dict[str, str]:
    """The inputs of `planner.hybrid`'s LM half (`PlannerGivenFamilySignature`): the family the pivot rules chose
    and why, and the compact goal, best and bound lines of the packet."""
    compact = compact_packet_inputs(packet)
    return {"family": family.split(":", 1)[-1], "why": "; ".join(reasons) or NO_PIVOT,
            **{name: compact[name] for name in ("goal", "best", "bound")}}


def packet_from_inputs(inputs: Mapping[str, Any]) -> Optional[AdvisorPacket]:
    """The packet carried in planner inputs (`packet` JSON), or None when absent or invalid."""
    raw = inputs.get("packet")
    if isinstance(raw, AdvisorPacket):
        return raw
    if not raw:
        return None
    try:
        return AdvisorPacket.model_validate_json(raw) if isinstance(raw, str) else AdvisorPacket.model_validate(raw)
    except (ValidationError, ValueError):
        return None


def blocked_families(inputs: Mapping[str, Any]) -> list[str]:
    """Blocked families from the packet or the constraints JSON of planner inputs."""
    packet = packet_from_inputs(inputs)
    if packet is not None:
        return list(packet.strategy_family_constraints.blocked_families)
    try:
        constraints = json.loads(inputs.get("strategy_family_constraints") or "{}")
    except ValueError:
        return []
    blocked = constraints.get("blocked_families") if isinstance(constraints, dict) else None
    return [family for family in blocked or [] if family in FAMILIES]


def objective_text(packet: AdvisorPacket) -> str:
    """The objective a directive states for this packet's goal."""
    if packet.goal == "threshold" and packet.threshold_target is not None:
        return f"Reach {packet.threshold_target} cycles"
    if packet.best_cycles is not None:
        return f"Beat the best of {packet.best_cycles} cycles"
    return "Lower the cycle count"


def directive_from_entry(entry: ExperimentLogEntry, packet: AdvisorPacket) -> OptimizationDirective:
    """The directive that the logged attempt carried out, rebuilt from its log entry."""
    family = entry.family
    if family is None or family in packet.strategy_family_constraints.blocked_families:
        family = packet.strategy_family_constraints.families_for_next()[0]
    modifiers = [tag for tag in entry.strategy_tags[1:] if tag.strip() and tag not in FAMILIES][:3]
    changes = [clip_text(item, 200) for item in entry.change_summary if str(item).strip()][:5]
    hypothesis = clip_text(entry.hypothesis, 300) or f"A {family.split(':')[1]} change lowers the cycle count."
    if not changes:
        changes = [hypothesis]
    objective = objective_text(packet)
    effect = entry.delta_vs_best if entry.valid and isinstance(entry.delta_vs_best, int) else 0
    steps = [*(f"Implement: {change}" for change in changes[:4]),
             "Run the correctness tests and confirm the tests are unchanged",
             "Measure the cycle count and compare it with the best"]
    return OptimizationDirective(
        objective=objective,
        primary_hypothesis=hypothesis,
        strategy_family=family,
        strategy_modifiers=modifiers,
        risk="Low" if abs(effect) < 10 else ("Medium" if abs(effect) < 100 else "High"),
        expected_effect_cycles=int(effect),
        change_summary=changes,
        step_plan=steps,
        validation=DirectiveValidation(
            commands=["python tests/submission_tests.py"],
            pass_criteria=["correctness tests pass", "cycles below the best before the change"],
        ),
        next_packet_requests=[],
        did_web_search=False,
    )


def planner_labeled(record: PlannerRecord) -> None:
    """The ValueError `planner_example` raises for a record that cannot be an example, without rendering its
    inputs (a compile that keeps only the ids of its examples asks this of a year of records)."""
    planner_directive(record)


def planner_directive(record: PlannerRecord) -> OptimizationDirective:
    """The directive the record's logged outcome carried out; ValueError without an outcome."""
    if record.outcome is None:
        raise ValueError(f"planner record {record.record_id} has no outcome entry")
    return directive_from_entry(record.outcome, record.packet)


def planner_example(record: PlannerRecord | Mapping[str, Any]) -> dspy.Example:
    """A labeled example: the packet as inputs, the directive its logged outcome carried out as outputs."""
    if isinstance(record, Mapping):
        record = PlannerRecord.model_validate(dict(record))
    directive = planner_directive(record)
    inputs = planner_inputs(record.packet)
    # The directive needs a family even when the logged attempt had none (an old log's tags): `logged_family` says
    # which attempts were really in theirs (`planner.hybrid` learns only from attempts in the family it is given).
    example = dspy.Example(**inputs, **directive.model_dump(), record_id=record.record_id,
                           episode_id=record.episode_id, outcome_valid=record.outcome.valid,
                           outcome_cycles=record.outcome.cycles, logged_family=record.outcome.family)
    return example.with_inputs(*inputs)


__all__ = [
    "DECISION_EXTRA_FIELDS", "FULL_AUTO_INPUT_FIELDS", "LOGGED_FIELDS", "PLANNER_EXTRA_FIELDS", "PLANNER_LOGGED_FIELDS",
    "PLANNER_INPUT_FIELDS", "blocked_families", "decision_example", "decision_inputs", "directive_from_entry",
    "given_family_inputs", "label_confidence", "objective_text", "packet_from_inputs", "tail_entries",
    "planner_example", "planner_inputs", "planner_labeled",
]
