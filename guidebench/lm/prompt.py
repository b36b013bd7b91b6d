"""The prompt a base model completes: a DSPy chat request flattened into one completion prompt.

System text, demonstrations and the record end with the first output marker the adapter asks for
(`[[ ## action ## ]]`), so the model continues the answer; the stops end it where a base model would go
on to invent the next example. The embedded engine, the LM server and the fake LM render alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # DSPy is imported where a request is handled: `guidebench --help` stays light
    from dspy.lm15 import Message, Request

# Stops for text the base model might go on to write after its answer: the end marker, a new
# demonstration, or the adapter's closing instruction.
_BASE_STOPS: tuple[str, ...] = (
    "[[ ## completed ## ]]",
    "\nThis is an example of the task",
    "\nRespond with the corresponding output fields",
)
_CLOSING = "Respond with the corresponding output fields"
_FIRST_MARKER = re.compile(r"starting with the field `(\[\[ ## \w+ ## \]\])`")
_LINE_MARKER = re.compile(r"^\[\[ ## (\w+) ## \]\]\s*$", re.M)


def message_text(message: Message) -> str:
    """The plain text of a message (text parts joined)."""
    from dspy.lm15 import TextPart

    return "".join(part.text for part in message.parts if isinstance(part, TextPart))


def _system_text(request: Request) -> str:
    system = request.system
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "".join(getattr(part, "text", "") for part in system)


def first_output_marker(text: str) -> Optional[str]:
    """The output marker the adapter asks the answer to start with, e.g. `[[ ## action ## ]]`."""
    match = _FIRST_MARKER.search(text)
    return match.group(1) if match else None


def input_markers(text: str) -> list[str]:
    """Field markers that open a line of the final user message: the inputs."""
    return [f"[[ ## {name} ## ]]" for name in _LINE_MARKER.findall(text)]


@dataclass(frozen=True)
class RenderedPrompt:
    """A chat request flattened for a base model."""

    prompt: str
    prefill: str
    stops: tuple[str, ...]
    system: str = ""
    chat_format: bool = False  # the request asks for ChatAdapter's `[[ ## field ## ]]` sections
    prefix: str = ""  # the part before the last message: instruction, fields and demos, constant per program


def render_prompt(request: Request, *, prefill: bool = True) -> RenderedPrompt:
    """Flatten system + demos + query into one completion prompt, ending with the first output marker.

    The adapter's closing instruction ("Respond with the corresponding output fields, ...") is the
    same for every record but stands after the record's inputs; it moves to the end of the system
    block, so the whole constant part is one reusable prefix and the record ends the prompt the way
    every demonstration's inputs end (up to 259 tokens a call fewer to evaluate for the planner).
    """
    system = _system_text(request)
    last_user = next((message_text(m) for m in reversed(request.messages) if m.role == "user"), "")
    messages = [message_text(message).strip() for message in request.messages if message_text(message).strip()]
    instruction = ""
    if messages and _CLOSING in messages[-1]:
        record, _, rest = messages[-1].partition(_CLOSING)
        messages[-1], instruction = record.strip(), (_CLOSING + rest).strip()
    blocks = ["\n\n".join(part for part in (system.strip(), instruction) if part)] if system.strip() or instruction else []
    blocks += [message for message in messages if message]
    marker = first_output_marker(last_user)
    head = marker + "\n" if marker and prefill else ""
    # A new input section after the answer means the model began inventing the next example.
    stops = tuple(dict.fromkeys([*_BASE_STOPS, *(f"\n{m}" for m in input_markers(last_user)),
                                 *request.config.stop]))
    prefix = "\n\n".join(blocks[:-1]) + "\n\n" if len(blocks) > 1 else ""
    return RenderedPrompt(prompt="\n\n".join(blocks) + "\n\n" + head, prefill=head, stops=stops,
                          system=system, chat_format=marker is not None, prefix=prefix)
