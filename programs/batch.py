"""Programs that call no LM answer a whole split in one call (`predict_batch`), which replay prefers.

A DSPy call per record costs its callbacks, and under a compile's MLflow autologging a trace written per record:
for a rule policy, a logged policy or a trained model that is most of the replay's time (milliseconds a record,
against microseconds for the answer). `predict_batch(inputs)` gives exactly what `forward(**inputs)` gives for each
record, without the call's machinery; replay (`evals.replay`) uses it when a program has it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import dspy


class AnswersInBatches:
    """Mixin of a `dspy.Module` without an LM: `predict_batch` is its `forward` over many inputs."""

    def predict_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[dspy.Prediction]:
        """`forward(**record)` of each record's inputs, in order (an exception is the whole batch's)."""
        # Through the class: DSPy warns on every `instance.forward` read outside its `__call__`.
        forward = type(self).forward  # type: ignore[attr-defined]
        return [forward(self, **record) for record in inputs]


__all__ = ["AnswersInBatches"]
