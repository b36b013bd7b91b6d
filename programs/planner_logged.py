"""`planner.logged`: the deployed planner's directives, replayed as its log (and its archive) recorded them.

When the loop runner archived the plan (`PlannerRecord.plan`, formats.md §2.3.2: the record's inputs carry it as
`logged_directive`), the answer is the directive the planner really gave: its family, modifiers, risk and
`expected_effect_cycles`, so its effect calibration is scored too. The runner's check accepts a little more than
the strict schema (a padded family, `expected_effect_cycles: true`, blank items, extra keys in `validation`):
such a directive is answered as the runner read it (family stripped, blank items dropped) with the strict check's
errors in `directive_errors`, so its strict validity scores what it was.

Without an archive the answer is the directive the logged attempt carried out (`programs.inputs.directive_from_entry`):
the family from the entry's strategy tags (`strategy_tags[0]`, as the pivot protocol reads it), the modifiers,
hypothesis and changes from the log. The log holds no forecast, so its effect calibration is not scored, and the
family is the logged one even when the packet had it blocked (the attempt was made: its compliance scores 0, its
improvement is still estimated). A line whose first tag is not a family (an older log) is not scored
(`unscored`): nothing says which family the planner chose. Like Full Auto's `logged`, it puts the deployed policy
on the planner board, where it is the default champion, and its estimated improvement can be checked against
what its attempts really brought (the off-policy report).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import dspy
from pydantic import ValidationError

from runtime.advisor import ExperimentLogEntry, OptimizationDirective
from runtime.pivot import validate_directive

from .batch import AnswersInBatches
from .inputs import directive_from_entry, packet_from_inputs
from .results import directive_prediction, safe_directive

NAME = "planner.logged"
_LIMITS = {"strategy_modifiers": 3, "change_summary": 5, "step_plan": 12, "next_packet_requests": 6}


def as_the_runner_read(raw: Mapping[str, Any]) -> dict[str, Any]:
    """An archived directive as the runner acted on it: family stripped, blank list items dropped, lists within
    their bounds, `expected_effect_cycles: true` as 1, `validation` with its two lists only."""
    fixed = dict(raw)
    if isinstance(fixed.get("strategy_family"), str):
        fixed["strategy_family"] = fixed["strategy_family"].strip()
    effect = fixed.get("expected_effect_cycles")
    if isinstance(effect, bool):
        fixed["expected_effect_cycles"] = int(effect)
    for key, limit in _LIMITS.items():
        if isinstance(fixed.get(key), list):
            fixed[key] = [item for item in fixed[key] if isinstance(item, str) and item.strip()][:limit]
    validation = fixed.get("validation")
    if isinstance(validation, dict):
        fixed["validation"] = {key: [item for item in validation.get(key) or [] if isinstance(item, str)
                                     and item.strip()][:6] for key in ("commands", "pass_criteria")}
    return fixed


def archived_directive(text: str) -> Optional[tuple[OptimizationDirective, list[str]]]:
    """(the archived directive as the runner read it, the strict check's errors on it as answered); None when even
    the runner's reading does not make a directive."""
    raw = json.loads(text)
    try:
        return OptimizationDirective.model_validate(as_the_runner_read(raw)), validate_directive(raw)
    except ValidationError:
        return None


class PlannerLogged(AnswersInBatches, dspy.Module):
    """Answers with the directive the log (or the runner's archive) recorded for the record's packet (no LM)."""

    replays_log = True
    program_name = NAME
    kind = "planner"

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The logged directive from `programs.planner_inputs(record)` (`logged_directive`, else `logged_entry`)."""
        raw = inputs.get("logged_entry")
        packet = packet_from_inputs(inputs)
        if (not raw and not inputs.get("logged_directive")) or packet is None:
            raise ValueError("no logged entry in the inputs: planner.logged replays planner records only")
        if inputs.get("logged_directive"):
            found = archived_directive(inputs["logged_directive"])
            if found is not None:
                directive, errors = found
                return directive_prediction(directive, errors, logged_family=directive.strategy_family,
                                            logged_forecast=True)
        entry = ExperimentLogEntry.model_validate_json(raw)
        if entry.family is None:
            tags = ", ".join(entry.strategy_tags[:2]) or "none"
            return directive_prediction(safe_directive(), logged_family=None,
                                        unscored=f"the log names no strategy family in strategy_tags[0] ({tags})")
        directive = directive_from_entry(entry, packet)
        if directive.strategy_family != entry.family:  # a blocked family was still tried: keep what was done
            directive = directive.model_copy(update={"strategy_family": entry.family})
        return directive_prediction(directive, logged_family=entry.family)
