"""Helpers shared by the LM tests: the request DSPy's chat adapter sends an engine."""

from __future__ import annotations

from dspy.lm15 import Config as RequestConfig
from dspy.lm15 import Message, Request

import programs
from guidebench.lm.engine import LOCAL_MODEL_ID
from programs.seeds import DECISION_SEEDS


def adapter_request(demos: int = 1, stop: tuple[str, ...] = ()) -> Request:
    """The Full Auto request of the third seed, with `demos` seed demos, as the engine receives it."""
    from dspy.adapters.chat_adapter import ChatAdapter

    from programs.seeds import decision_demos
    from signatures import FullAutoDecisionSignature

    messages = ChatAdapter().format(FullAutoDecisionSignature, decision_demos()[:demos],
                                    programs.decision_inputs(DECISION_SEEDS[2].summary))
    turns = [Message.user(m["content"]) if m["role"] == "user" else Message.assistant(m["content"])
             for m in messages[1:]]
    return Request(model=LOCAL_MODEL_ID, messages=tuple(turns), system=messages[0]["content"],
                   config=RequestConfig(max_tokens=64, temperature=0.2, stop=stop))
