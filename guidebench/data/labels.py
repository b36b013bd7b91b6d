"""Outcome labels of Full Auto decisions: from our own files first, else from labeling rules.

Precedence (first that applies): a `label` object on the decision line itself (our own format),
then a line of the side file `labels.jsonl` in the workspace (the simulator writes true labels
there with source `simulator`), then the labeling rules below. A decision no rule covers stays
unlabeled (counted as `unlabeled`); rules never guess.

Side file line: `{"run_id", "sequence_id" (int) and/or "turn_id", "label": OutcomeLabel}`,
matched by (run_id, sequence_id, turn_id) first, else (run_id, sequence_id) (not for the orphan
decisions of run "unknown", which all have sequence 0), else (run_id, turn_id).

Labeling rules (`LabelRuleConfig.rules`, in order; the first that fires wins; each label has
source `rule:<name>`). They read a thread's timeline: in the real writer a pause or stop ends the
run and re-enabling Full Auto starts a new run id on the same thread (formats.md §1.4.1), so
"next" means the next decision of the same thread in time order, whichever run it is in, and a
`run_started` event of the next run is the resume. "Ended the loop" means the logged (enforced)
action was pause or stop; a turn is *productive* when it completed, has a plan or diff, and its
plan/diff changed since the decision before it (the no-progress counter restarts with each run,
so the change is checked against the previous decision's summary itself).
1. `turn_status`: the turn failed -> stop was right; it was interrupted -> pause was right
   (guardrails 1-2 enforce exactly that).
2. `pending_human_input`: approvals or tool inputs are pending: the loop cannot go on by itself,
   pause was right.
3. `resumed_unchanged`: the decision ended the loop, the run was resumed within
   `resume_window_s` (resume event, else the next decision), nobody changed anything (no
   human-input event, guidance unchanged or a fallback prompt) and the next turn was productive:
   the pause/stop was wrong, continue was right.
4. `human_intervened`: the decision paused the loop and before the next turn a human acted
   (a human-input event, or the guidance changed to something the model had not proposed):
   pausing was right (review when the model asked for review). The real writer logs neither
   (its events are run_started, decision, run_paused and run_disabled; its summary has no
   guidance), so on its logs this rule does not fire and a slow resume stays unlabeled.
5. `continued_productively`: the loop continued and the next turn was productive: continue was right.
6. `stopped_at_end`: the model itself chose stop (no guardrail), it is the last decision of the
   run, the run was never resumed and the turn's plan (Codex plan JSON) has no open step.
Opt-in rules (add them to `rules`; measured against simulator truth they are mostly wrong, so
they are off by default):
- `guardrail_limit`: max_turns / no_progress / max_tokens fires under the run's config: label
  the enforced stop (what production does, not what was right: about 2% agreement).
- `continued_without_progress`: the loop continued although the last `spin_turns` turns made
  no progress, and the next turn made none either: it should have paused (about 1/3 agreement:
  short loops are usually broken by a sharper instruction).

Agreement with the simulator's true labels is measured by `tests/guidebench/data/test_fullauto.py`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Callable, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.fullauto import GuardrailContext, GuidanceDecision, RunEvent
from runtime.guardrails import apply_guardrails
from runtime.records import DecisionRecord, OutcomeLabel

STATUS_RULES = ("turn_failed", "turn_interrupted")
LIMIT_RULES = ("max_turns", "no_progress", "max_tokens")
RULE_NAMES: tuple[str, ...] = (
    "turn_status", "guardrail_limit", "pending_human_input", "resumed_unchanged", "human_intervened",
    "continued_productively", "stopped_at_end", "continued_without_progress",
)
OPT_IN_RULES: tuple[str, ...] = ("guardrail_limit", "continued_without_progress")
DEFAULT_RULES: tuple[str, ...] = tuple(name for name in RULE_NAMES if name not in OPT_IN_RULES)


class LabelRuleConfig(BaseModel):
    """Which labeling rules run (in order) and their thresholds; loadable from JSON."""

    model_config = ConfigDict(extra="forbid")

    rules: list[str] = Field(default_factory=lambda: list(DEFAULT_RULES))
    resume_window_s: float = Field(default=600.0, ge=0)
    spin_turns: int = Field(default=1, ge=1)
    resume_events: list[str] = Field(default_factory=lambda: ["run_started", "run_resumed", "resumed", "run_resume"])
    end_events: list[str] = Field(default_factory=lambda: ["run_stopped", "run_completed", "run_ended"])
    human_input_events: list[str] = Field(default_factory=lambda: [
        "user_input", "user_message", "guidance", "guidance_updated", "steer", "approval_granted",
        "approval_denied", "tool_input_provided", "human_input"])
    fallback_prompts: list[str] = Field(default_factory=lambda: ["", "continue", "continue.", "go on",
                                                                 "continue working on the task."])

    @model_validator(mode="after")
    def _known_rules(self) -> "LabelRuleConfig":
        unknown = [name for name in self.rules if name not in RULE_NAMES]
        if unknown:
            raise ValueError(f"rules: unknown labeling rule(s) {unknown}; known: {list(RULE_NAMES)}")
        return self


class SideLabel(BaseModel):
    """One line of the side file `labels.jsonl`: a true label for one decision."""

    model_config = ConfigDict(extra="forbid", strict=True)

    run_id: str
    sequence_id: Optional[int] = None
    turn_id: Optional[str] = None
    label: OutcomeLabel

    @model_validator(mode="after")
    def _has_key(self) -> "SideLabel":
        if self.sequence_id is None and not self.turn_id:
            raise ValueError("sequence_id: a side label needs sequence_id or turn_id")
        return self


def epoch_seconds(timestamp: object) -> Optional[float]:
    """Seconds since the epoch of an RFC 3339 timestamp (None when it does not parse)."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:  # Python 3.11 reads RFC 3339 with "Z" and fractions directly
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        pass
    text = timestamp.strip().replace("z", "Z").replace("Z", "+00:00")
    date, _, rest = text.partition("T")
    if "." in rest:  # Python takes at most 6 fraction digits; producers may write 9
        head, _, tail = rest.partition(".")
        digits = "".join(ch for ch in tail if ch.isdigit())
        rest = f"{head}.{digits[:6].ljust(6, '0')}{tail[len(digits):]}"
    try:
        return datetime.fromisoformat(f"{date}T{rest}").timestamp()
    except ValueError:
        return None


def _count(text: str) -> int:
    """A pending count written as text ("2", "[...]" JSON list, "" -> 0)."""
    text = (text or "").strip()
    if not text:
        return 0
    if text.lstrip("-").isdigit():
        return max(0, int(text))
    try:
        value = json.loads(text)
    except ValueError:
        return 0
    if isinstance(value, list):
        return len(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return max(0, int(value))
    return 0


def _productive(record: DecisionRecord, before: Optional[DecisionRecord] = None) -> bool:
    """The turn completed and changed its plan or diff (since `before`, when given)."""
    summary = record.summary
    signature = summary.progress_signature()
    if summary.last_turn_status != "completed" or signature is None:
        return False
    if before is not None:
        return signature != before.summary.progress_signature()
    return summary.no_progress_count == 0


def _enforced(record: DecisionRecord) -> str:
    return record.logged.action if record.logged else (record.guardrail.enforced_action if record.guardrail else "")


def _model_action(record: DecisionRecord) -> str:
    if record.logged:
        return record.logged.model_action
    return record.guardrail.original_action if record.guardrail else ""


class RunView:
    """One thread's decisions (in time order, across its runs) and events, with the "what happened next"
    questions rules ask."""

    def __init__(self, records: Sequence[DecisionRecord], events: Sequence[RunEvent], config: LabelRuleConfig):
        self.records = list(records)
        self.config = config
        self.times = [epoch_seconds(record.timestamp) for record in self.records]
        timed = [(epoch_seconds(event.timestamp), event.sequence_id, event) for event in events]
        self.events = sorted(((t, s, e) for t, s, e in timed if t is not None), key=lambda item: (item[0], item[1]))

    def next(self, index: int) -> Optional[DecisionRecord]:
        """The next decision of the thread (possibly in its next run), if any."""
        return self.records[index + 1] if index + 1 < len(self.records) else None

    def events_after(self, index: int) -> list[RunEvent]:
        """Events after decision `index` and up to the next decision (all later ones for the last)."""
        start = self.times[index]
        end = self.times[index + 1] if index + 1 < len(self.records) else None
        if start is None:
            return []
        return [event for time, _, event in self.events
                if time >= start and (end is None or time <= end)]

    def resumed_within_window(self, index: int) -> bool:
        """The loop came back within the window: a resume event, else the next decision itself."""
        start = self.times[index]
        if start is None:
            return False
        for event in self.events_after(index):
            if event.event_type in self.config.resume_events:
                time = epoch_seconds(event.timestamp)
                return time is not None and time - start <= self.config.resume_window_s
        following = self.next(index)
        end = self.times[index + 1] if following is not None else None
        return end is not None and end - start <= self.config.resume_window_s

    def human_acted(self, index: int) -> bool:
        """A human did something between this decision and the next turn."""
        if any(event.event_type in self.config.human_input_events for event in self.events_after(index)):
            return True
        record, following = self.records[index], self.next(index)
        if following is None:
            return False
        before = record.summary.last_guidance_directive.strip()
        after = following.summary.last_guidance_directive.strip()
        proposed = (record.logged.next_input_preview if record.logged else "").strip()
        fallbacks = {prompt.strip().lower() for prompt in self.config.fallback_prompts}
        if after == before or after.lower() in fallbacks:
            return False
        return not (proposed and after.startswith(proposed[:140]))

    def ended(self, index: int) -> bool:
        """The run never came back after this decision (no later decision, no resume event)."""
        if self.next(index) is not None:
            return False
        return not any(event.event_type in self.config.resume_events for event in self.events_after(index))


Rule = Callable[[RunView, int], Optional[tuple[str, str, float]]]


def _hard_guardrail(view: RunView, index: int, rules: tuple[str, ...]) -> Optional[tuple[str, str, float]]:
    record = view.records[index]
    probe = GuidanceDecision(action="continue", confidence=1.0)
    enforced, audit = apply_guardrails(probe, GuardrailContext.from_summary(record.summary), record.config)
    if audit.rule in rules:
        return enforced.action, f"guardrail {audit.rule} fires on this turn: {enforced.action} is enforced", 1.0
    return None


def _turn_status(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    return _hard_guardrail(view, index, STATUS_RULES)


def _guardrail_limit(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    return _hard_guardrail(view, index, LIMIT_RULES)


def _plan_finished(turn_plan: str) -> bool:
    """True when the plan JSON lists steps and none is still open."""
    try:
        plan = json.loads(turn_plan) if turn_plan.strip() else None
    except ValueError:
        return False
    steps = plan.get("plan") if isinstance(plan, dict) else plan
    if not isinstance(steps, list) or not steps:
        return False
    return all(isinstance(step, dict) and step.get("status") == "completed" for step in steps)


def _pending_human_input(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    summary = view.records[index].summary
    approvals, inputs = _count(summary.pending_approvals), _count(summary.pending_tool_inputs)
    if approvals or inputs:
        return "pause", f"{approvals} approval(s) and {inputs} tool input(s) wait for a human", 0.9
    return None


def _resumed_unchanged(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    record, following = view.records[index], view.next(index)
    if _enforced(record) not in ("pause", "stop") or following is None:
        return None
    if view.resumed_within_window(index) and not view.human_acted(index) and _productive(following, record):
        return "continue", "the run was resumed at once without any change and the next turn made progress", 0.8
    return None


def _human_intervened(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    record = view.records[index]
    if _enforced(record) != "pause" or view.next(index) is None or not view.human_acted(index):
        return None
    action = "review" if _model_action(record) == "review" else "pause"
    return action, "a human acted before the next turn: the loop needed them", 0.8


def _continued_productively(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    record, following = view.records[index], view.next(index)
    if _enforced(record) == "continue" and following is not None and _productive(following, record):
        return "continue", "the next turn made progress", 0.7
    return None


def _continued_without_progress(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    record, following = view.records[index], view.next(index)
    if _enforced(record) != "continue" or following is None:
        return None
    if record.summary.no_progress_count >= view.config.spin_turns and following.summary.no_progress_count > \
            record.summary.no_progress_count:
        return "pause", "the loop kept going without progress; a human should have looked", 0.6
    return None


def _stopped_at_end(view: RunView, index: int) -> Optional[tuple[str, str, float]]:
    record = view.records[index]
    audit_rule = record.guardrail.rule if record.guardrail else None
    if (_model_action(record) == "stop" and _enforced(record) == "stop" and audit_rule is None and view.ended(index)
            and _plan_finished(record.summary.turn_plan)):
        return "stop", "the model stopped with the plan finished and nobody resumed the run", 0.7
    return None


RULES: dict[str, Rule] = {
    "turn_status": _turn_status,
    "guardrail_limit": _guardrail_limit,
    "pending_human_input": _pending_human_input,
    "resumed_unchanged": _resumed_unchanged,
    "human_intervened": _human_intervened,
    "continued_productively": _continued_productively,
    "continued_without_progress": _continued_without_progress,
    "stopped_at_end": _stopped_at_end,
}


def rule_label(view: RunView, index: int) -> Optional[OutcomeLabel]:
    """The label of decision `index` from the first configured rule that fires, or None."""
    record = view.records[index]
    for name in view.config.rules:
        found = RULES[name](view, index)
        if found is not None:
            action, reason, confidence = found
            next_input = ""
            if action == "continue" and record.logged and record.logged.action == "continue":
                next_input = record.logged.next_input_preview
            return OutcomeLabel(action=action, source=f"rule:{name}", reason=reason, confidence=confidence,
                                next_input=next_input)
    return None


def label_run(records: Sequence[DecisionRecord], events: Sequence[RunEvent] = (),
              config: Optional[LabelRuleConfig] = None) -> list[Optional[OutcomeLabel]]:
    """Rule labels for one thread's decisions (in time order); existing labels are kept as they are."""
    view = RunView(records, events, config or LabelRuleConfig())
    return [record.label if record.label is not None else rule_label(view, index)
            for index, record in enumerate(view.records)]
