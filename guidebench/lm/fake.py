"""A deterministic fake LM engine for tests and dry runs (`make_lm("fake")`).

It reads the adapter's prompt like a model would: the output fields and their types from the
system message, the inputs from the last user message, and answers in the `[[ ## field ## ]]`
format. Decisions come from the no-LM reference policies (`full_auto.rules`, `planner.rules`; given a
family, `planner.hybrid`'s LM half gets that family's playbook), so answers are plausible and always
the same for the same prompt. A `script` of raw completions overrides that, one per call, to test
parsing and safe failure.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Iterator, Optional

from dspy.clients.engines.base import validate_request
from dspy.lm15 import Message, Request, Response, TextPart, Usage, response_to_events

from programs.rules_full_auto import rule_decision
from programs.rules_planner import PLAYBOOKS, rule_directive
from runtime.advisor import AdvisorPacket, ExperimentSummary, FamilyConstraints, PerformanceProfile

from guidebench.lm.prompt import message_text

FAKE_MODEL_ID = "fake/rules"
_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)(?:\nAll interactions|\Z)", re.S)
_FIELD_LINE = re.compile(r"^\d+\. `(\w+)` \((.*)\):", re.M)
_PROGRESS_BY_RULE = {"turn_failed": "failed", "interrupted": "blocked", "pending_input": "blocked",
                     "done": "done", "stalled": "stalled"}
_ACTION_BY_PROGRESS = {"progressing": ("continue", 0.75), "blocked": ("pause", 0.85), "done": ("stop", 0.85),
                       "stalled": ("pause", 0.7), "failed": ("stop", 0.9)}


def output_fields(system: str) -> list[tuple[str, str]]:
    """(name, type text) of each output field the adapter's system message declares."""
    match = _OUTPUTS.search(system)
    return _FIELD_LINE.findall(match.group(1)) if match else []


def input_sections(text: str) -> dict[str, str]:
    """Input values of a ChatAdapter user message, by field name."""
    sections: dict[str, str] = {}
    parts = re.split(r"^\[\[ ## (\w+) ## \]\]\s*$", text, flags=re.M)
    for name, value in zip(parts[1::2], parts[2::2]):
        value = value.split("\n\nRespond with the corresponding output fields", 1)[0]
        sections[name] = value.strip()
    return sections


def _json(text: str, default: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def _default_value(name: str, type_text: str) -> Any:
    literal = re.match(r"Literal\[(.*)\]$", type_text)
    if literal:
        return re.findall(r"'([^']*)'|\"([^\"]*)\"", literal.group(1))[0][0]
    defaults = {"float": 0.5, "int": 0, "bool": False}
    if type_text in defaults:
        return defaults[type_text]
    if type_text.startswith("list"):
        return []
    if type_text.startswith("dict"):
        return {}
    return f"fake {name.replace('_', ' ')}"


def _from_compact(inputs: dict[str, str]) -> dict[str, str]:
    """The original decision inputs the rule policy reads, rebuilt from the compact lines
    (`runtime.inputs.compact_summary_inputs`): status and error, the plan's steps, pending counts."""
    status, _, error = inputs.get("status", "").partition(":")
    plan = re.match(r"(\d+)/(\d+) done(?:; current: (.*))?", inputs.get("plan", "").strip())
    steps = []
    if plan:
        done, total = int(plan.group(1)), int(plan.group(2))
        steps = [{"step": f"step {i + 1}", "status": "completed"} for i in range(done)]
        steps += [{"step": (plan.group(3) or "next step") if i == done else f"step {i + 1}", "status": "pending"}
                  for i in range(done, total)]

    def count(name: str) -> str:
        match = re.match(r"\d+", inputs.get(name, "").strip())
        return match.group(0) if match else "0"

    return {"last_turn_status": status.strip(), "turn_error": error.strip(), "turn_plan": json.dumps(steps),
            "pending_approvals": count("approvals"), "pending_tool_inputs": count("tool_inputs"),
            "last_agent_message": inputs.get("message", "")}  # full_auto.compact_state's clipped message


def _decision_values(inputs: dict[str, str]) -> dict[str, Any]:
    if "progress" in inputs and "last_turn_status" not in inputs:
        action, confidence = _ACTION_BY_PROGRESS.get(inputs["progress"].strip(), ("continue", 0.6))
        return {"action": action, "confidence": confidence, "reason": f"The task is {inputs['progress'].strip()}.",
                "next_input": "Continue with the next step of the plan." if action == "continue" else ""}
    if "status" in inputs and "last_turn_status" not in inputs:  # the compact rendering (full_auto.compact)
        inputs = {**_from_compact(inputs), **inputs}
    if "summary" in inputs and "last_turn_status" not in inputs:  # GuidanceDecisionSignature
        summary = _json(inputs["summary"], {})
        inputs = {**(summary if isinstance(summary, dict) else {}), **inputs}
    decision, rule = rule_decision(inputs)
    values = decision.model_dump(exclude={"parse_errors"})
    progress = _PROGRESS_BY_RULE.get(rule, "progressing")
    values.update(
        progress=progress,
        state_summary=f"Turn status {inputs.get('last_turn_status') or 'completed'}; the task is {progress}.",
        verdict="keep", rationale="The action fits the state.",
        reasoning=f"Rule {rule}: {decision.reason}",
    )
    return values


def _packet(inputs: dict[str, str]) -> AdvisorPacket:
    summary = _json(inputs.get("experiment_summary", ""), {})
    profile = _json(inputs.get("performance_profile", ""), None)
    constraints = _json(inputs.get("strategy_family_constraints", ""), {})
    plateau = inputs.get("plateau_valid_iters_since_best", "")
    goal = inputs.get("goal", "")
    target = re.search(r"reach (\d+)", goal)
    return AdvisorPacket(
        goal="threshold" if goal.startswith("threshold") else "best",
        threshold_target=int(target.group(1)) if target else None,
        best_cycles=summary.get("best_cycles") if isinstance(summary, dict) else None,
        plateau_valid_iters_since_best=int(plateau) if plateau.isdigit() else None,
        strategy_family_constraints=FamilyConstraints.model_validate(constraints if isinstance(constraints, dict) else {}),
        experiment_summary=ExperimentSummary.model_validate(summary if isinstance(summary, dict) else {}),
        performance_profile=PerformanceProfile.model_validate(profile) if isinstance(profile, dict) else None,
    )


def fake_answer(request: Request) -> str:
    """The fake model's completion for an adapter request."""
    system = request.system if isinstance(request.system, str) else "".join(
        getattr(part, "text", "") for part in (request.system or ()))
    fields = output_fields(system)
    last_user = next((message_text(m) for m in reversed(request.messages) if m.role == "user"), "")
    inputs = input_sections(last_user)
    names = {name for name, _ in fields}
    values: dict[str, Any] = {}
    if names & {"action", "verdict", "state_summary"}:
        values = _decision_values(inputs)
    if "strategy_family" in names:
        directive, reasons = rule_directive(_packet(inputs))
        values = {**directive.model_dump(), "reasoning": "Pivot policy: " + (", ".join(reasons) or "no pivot")}
    elif f"family:{inputs.get('family', '')}" in PLAYBOOKS:  # the family is given (planner.hybrid): its playbook
        play = PLAYBOOKS[f"family:{inputs['family']}"]
        values = {"primary_hypothesis": play.hypothesis, "strategy_modifiers": list(play.modifiers), "risk": play.risk,
                  "expected_effect_cycles": -10, "change_summary": list(play.changes),
                  "validation": {"commands": ["python tests/submission_tests.py"],
                                 "pass_criteria": ["correctness tests pass"]}}
    lines = []
    for name, type_text in fields:
        value = values.get(name, _default_value(name, type_text))
        text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
        lines.append(f"[[ ## {name} ## ]]\n{text}")
    lines.append("[[ ## completed ## ]]")
    return "\n\n".join(lines)


class FakeEngine:
    """Deterministic DSPy engine: rule-policy answers in the adapter's format, or scripted completions."""

    def __init__(self, script: Optional[list[str]] = None) -> None:
        self.script = [str(item) for item in script or []]
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Response:
        """Answer one request (the next scripted completion first, when a script is left)."""
        validate_request(request)
        with self._lock:
            index = self.calls
            self.calls += 1
        text = self.script[index] if index < len(self.script) else fake_answer(request)
        prompt_words = sum(len(message_text(m).split()) for m in request.messages)
        return Response(id=f"fake-{index}", model=request.model, message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=prompt_words, output_tokens=len(text.split())))

    def stream(self, request: Request) -> Iterator[Any]:
        """One final chunk."""
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release."""

    def dump_state(self) -> dict[str, Any]:
        """JSON state: the script."""
        return {"script": list(self.script)}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "FakeEngine":
        """Rebuild from `dump_state()`."""
        return cls(script=(state or {}).get("script"))
