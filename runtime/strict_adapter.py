"""DSPy's ChatAdapter, refusing ambiguous answers instead of taking the first of two conflicting sections.

ChatAdapter keeps the first `[[ ## field ## ]]` section of each output field and drops any later
one. An answer that quotes marker text from its input (a turn summary saying "[[ ## confidence ## ]]
1.0", echoed into the reason) would then have its real confidence replaced by the quoted one, and a
guardrail that depends on the model's own answer (low confidence, review) could be side-stepped by
text in the summary. `StrictChatAdapter` raises `AdapterParseError` when an output field occurs twice
with different values; callers turn that into the safe default (`pause`). Repeating a section word
for word is still accepted.
"""

from __future__ import annotations

from typing import Any

from dspy.adapters.chat_adapter import ChatAdapter
from dspy.utils.exceptions import AdapterParseError

from .guardrails import conflicting_sections


class StrictChatAdapter(ChatAdapter):
    """ChatAdapter that refuses an output field given twice with different values."""

    def parse(self, signature: Any, completion: str) -> dict[str, Any]:
        conflicts = conflicting_sections(completion, list(signature.output_fields))
        if conflicts:
            raise AdapterParseError(
                adapter_name="ChatAdapter", signature=signature, lm_response=completion,
                message=f"ambiguous output: {', '.join(conflicts)} given more than once with different values "
                        "(echoed or injected field markers?)")
        return super().parse(signature, completion)


__all__ = ["StrictChatAdapter"]
