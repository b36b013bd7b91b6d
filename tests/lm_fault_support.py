"""An injected LM for the LM-fault tests: it times out, raises provider errors and rate limits, loses its
connection, and returns empty or garbage text, on a plan.

The injected LM is a real `dspy.LM` with a custom engine: DSPy's error boundary turns the engine's
provider errors into its public LM errors exactly as it does for a remote provider. The scenarios that
use it (each in the test file of the module it exercises) record their counts in the reliability ledger:
`guidebench eval` (tests/guidebench/evaluation/test_run.py), a compile's retries (tests/optimizers/test_base.py),
`--resume` after an outage (tests/guidebench/test_compile.py), the exported runtime module
(tests/runtime/frozen/test_modules.py).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any, Callable, Iterator, Optional

import dspy
from dspy import lm15
from dspy.clients.engines.base import validate_request
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from evals.usage import instrument
from guidebench.lm.prompt import message_text
from guidebench.lm.fake import fake_answer, input_sections

FAULTS = ("timeout", "rate_limit", "server", "auth", "connection", "empty", "garbage")
RAISING = {"timeout": "LMTimeoutError", "rate_limit": "LMRateLimitError", "server": "LMServerError",
           "auth": "LMAuthError", "connection": "LMUnexpectedError"}
GARBAGE = "lorem ipsum ]] ## action ## [[ {\"confidence\": \"very\"} ```json\n{oops``` \x00\x07 \ud7ff end"


def raise_fault(fault: str) -> None:
    """Raise what a provider client raises for each fault."""
    if fault == "timeout":
        raise lm15.TimeoutError("the provider did not answer within 30 s", provider="injected", status=504)
    if fault == "rate_limit":
        raise lm15.RateLimitError("too many requests", provider="injected", status=429, retry_after=0.02)
    if fault == "server":
        raise lm15.ServerError("upstream overloaded", provider="injected", status=503)
    if fault == "auth":
        raise lm15.AuthError("invalid API key", provider="injected", status=401)
    if fault == "connection":
        raise ConnectionResetError("connection reset by peer")


class FaultEngine:
    """A DSPy engine answering like the fake model, except where `plan(call_index, inputs)` names a fault."""

    def __init__(self, plan: Optional[Callable[[int, dict[str, str]], Optional[str]]] = None) -> None:
        self.plan = plan or (lambda index, inputs: None)
        self.calls = 0
        self.faults: Counter[str] = Counter()
        self.answered: list[str] = []  # prompts that got an answer
        self._lock = threading.Lock()

    def complete(self, request: Any) -> Response:
        """Answer, or fail as planned."""
        validate_request(request)
        last_user = next((message_text(m) for m in reversed(request.messages) if m.role == "user"), "")
        with self._lock:
            index = self.calls
            self.calls += 1
        fault = self.plan(index, input_sections(last_user))
        if fault is not None:
            with self._lock:
                self.faults[fault] += 1
        if fault in RAISING:
            raise_fault(fault)
        text = "" if fault == "empty" else GARBAGE if fault == "garbage" else fake_answer(request)
        with self._lock:
            self.answered.append(json.dumps([request.system if isinstance(request.system, str) else None,
                                             [message_text(m) for m in request.messages]]))
        return Response(id=f"fault-{index}", model=request.model, message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=len(last_user.split()),
                                                          output_tokens=len(text.split())))

    def stream(self, request: Any) -> Iterator[Any]:
        """One final chunk."""
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release."""

    def dump_state(self) -> dict[str, Any]:
        """JSON state (the plan is code and is not saved)."""
        return {}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "FaultEngine":
        """A healthy engine."""
        return cls()


def fault_lm(engine: FaultEngine, *, retries: int = 0, cache: bool = False) -> dspy.LM:
    """The injected LM, instrumented like every LM of the workbench."""
    return instrument(dspy.LM("injected/faulty", engine=engine, temperature=0.2, max_tokens=512, cache=cache,
                              num_retries=retries))


def by_turn(faults: dict[str, str]) -> Callable[[int, dict[str, str]], Optional[str]]:
    """A plan failing every call about a given turn id the same way (independent of call order and threads)."""
    return lambda index, inputs: faults.get(inputs.get("turn_id", ""))
