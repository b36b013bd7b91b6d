"""`planner.logged`: the deployed planner's directives, replayed as its log recorded them.

Its answer for a record is the directive the logged attempt carried out (`programs.inputs.directive_from_entry`):
the family from the entry's strategy tags (`strategy_tags[0]`, as the pivot protocol reads it), the modifiers,
hypothesis and changes from the log. The log holds no forecast, so its effect calibration is not scored, and the
family is the logged one even when the packet had it blocked (the attempt was made: its compliance scores 0, its
improvement is still estimated). A line whose first tag is not a family (an older log) is not scored
(`unscored`): nothing says which family the planner chose. Like Full Auto's `logged`, it puts the deployed policy
on the planner board, where it is the default champion, and its estimated improvement can be checked against
what its attempts really brought (the off-policy report).
"""

from __future__ import annotations

from typing import Any

import dspy

from runtime.advisor import ExperimentLogEntry

from .batch import AnswersInBatches
from .inputs import directive_from_entry, packet_from_inputs
from .results import directive_prediction, safe_directive

NAME = "planner.logged"


class PlannerLogged(AnswersInBatches, dspy.Module):
    """Answers with the directive the log recorded for the record's packet (no LM)."""

    replays_log = True
    program_name = NAME
    kind = "planner"

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The logged attempt's directive from `programs.planner_inputs(record)` (its `logged_entry`)."""
        raw = inputs.get("logged_entry")
        packet = packet_from_inputs(inputs)
        if not raw or packet is None:
            raise ValueError("no logged entry in the inputs: planner.logged replays planner records only")
        entry = ExperimentLogEntry.model_validate_json(raw)
        if entry.family is None:
            tags = ", ".join(entry.strategy_tags[:2]) or "none"
            return directive_prediction(safe_directive(), logged_family=None,
                                        unscored=f"the log names no strategy family in strategy_tags[0] ({tags})")
        directive = directive_from_entry(entry, packet)
        if directive.strategy_family != entry.family:  # a blocked family was still tried: keep what was done
            directive = directive.model_copy(update={"strategy_family": entry.family})
        return directive_prediction(directive, logged_family=entry.family)
