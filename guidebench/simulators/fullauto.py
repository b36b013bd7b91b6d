"""Seeded simulator of the coding-agent loop that Full Auto decides for (formats.md §1, §1.4.1).

A session is one Codex thread working on a hidden task: plan steps that take one to three productive
turns each and failing tests the agent fixes along the way. After every turn the loop builds the
`FullAutoTurnSummary` the original builds (from the app server's notifications: the plan snapshot
`{threadId, turnId, explanation, plan}`, the turn's diff `{threadId, turnId, diff}`, token usage
nested as `tokenUsage.total`, pending approval and tool-input requests, compactions, the no-progress
counter of `runtime.next_progress_count`), asks a decision function, enforces
`runtime.apply_guardrails` with the session's config, and dispatches as the original does:
- continue: the next turn starts with `next_input` (empty means FALLBACK_PROMPT), in the same run;
- anything else (pause, stop; review becomes pause): the run ends (`run_paused` event) and the run
  state is dropped. A simulated user comes back or not. When a human was really needed (approval,
  tool input, a blocking question, a risky diff, a wrong stop) they act first and take minutes; when
  the pause was needless they re-enable at once and change nothing. Re-enabling starts a NEW run id
  on the same thread (`run_started`), whose counters (turn count, no progress, recent actions,
  pending counts, compactions) and snapshots start empty, as the original's fresh run state does;
- sometimes the user disables Full Auto while it runs (`run_disabled`); when that lands while a
  decision is being made, the decision is logged as the original logs it then: run id "unknown",
  sequence 0, the model's own action, no guardrail audit (an orphan), and its continue still starts
  the turn.
Only the four real event types are written. Hidden trouble: failed and interrupted turns, blockers only
a human can resolve (the agent may say so in its plan's explanation), no-progress loops ("spinning",
no plan or diff update) that a targeted instruction breaks, risky diffs.

True labels (`OutcomeLabel`, source `simulator`) come from the hidden state: failed -> stop,
interrupted -> pause, task done -> stop, pending approval/tool input or a blocker -> pause,
risky diff -> review, else continue with a targeted next input.

The logged lines are the runtime's models (`DecisionLogLine`, `RawDecisionLogLine`, `RunEvent`); the
summaries carry no `last_agent_message` / `last_guidance_directive` (empty), `raw_prediction` is
`{data, lm_usage}` and `parse_diagnostics` the original's struct; `fullauto_logs` writes them in the
original's exact serde shapes (f32s widened where nested).

Determinism: every session draws from its own streams seeded by (seed, index), so session k is the
same whatever the number of sessions and whatever other sessions' decision functions did; times
are integer nanoseconds. `FullAutoSimulator(seed).runs(n)` plays n sessions with the noisy deployed
policy; drive one yourself with `episode = sim.episode(k)`, `episode.observe()`,
`episode.step(decision)`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from runtime.fullauto import (
    ORPHAN_RUN,
    DecisionLogLine,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    next_progress_count,
)
from runtime.guardrails import apply_guardrails
from runtime.records import OutcomeLabel

from guidebench.simulators.fullauto_logs import decision_event_data, f32_direct
from guidebench.simulators.fullauto_policy import (
    chat_adapter_data,
    deployed_raw_output,
    lm_usage,
    original_decision,
    render_raw,
)
from guidebench.simulators.fullauto_world import (
    BLOCKERS, Decision, DECISION_MODEL, DIFF_LINES, EPOCH_NS, FALLBACK_PROMPT, GUARDRAIL_CHOICES, HiddenState,
    MAX_STEPS, new_uuid, pretty_json, rfc3339, RISKY_FILES, RunState, SECOND_NS, SESSION_SPACING_NS,
    SimConfig, SimRunEvent, StepResult, TASKS, TrueLabel, TURN_ERRORS
)


class FullAutoEpisode:
    """One simulated session (one thread, one or more runs), driven one decision at a time:
    `observe()` then `step(decision)`."""

    def __init__(self, seed: int, index: int, config: SimConfig = SimConfig()) -> None:
        self.config = config
        self.index = index
        self.env = random.Random(f"fullauto-env:{seed}:{index}")
        self.policy_rng = random.Random(f"fullauto-policy:{seed}:{index}")
        self.user = random.Random(f"fullauto-user:{seed}:{index}")
        self.ids = random.Random(f"fullauto-ids:{seed}:{index}")
        self.thread_id = new_uuid(self.ids)
        weights, configs = zip(*GUARDRAIL_CHOICES)
        self.guardrails: GuardrailConfig = self.env.choices(configs, weights=weights)[0]
        task = self.env.choice(TASKS)
        self.state = HiddenState(task=task, step_work=self.env.randint(1, 3),
                                 failing_tests=list(task.tests[:self.env.randint(1, len(task.tests))]))
        self.clock = EPOCH_NS + index * SESSION_SPACING_NS + self.env.randint(0, 3_600_000) * 1_000_000
        self.turns_played = 0
        self.agent_message = ""
        self.done = False
        self.run: Optional[RunState] = None
        self.run_ids: list[str] = []
        self.decision_lines: list[DecisionLogLine] = []
        self.raw_lines: list[RawDecisionLogLine] = []
        self.events: list[SimRunEvent] = []
        self.labels: list[TrueLabel] = []
        self._start_run()
        # the run file template: the same user and config for every run of the session (closed loops edit it)
        self.run_file = RunFile(run_id=self.run_id, workspace_id=config.workspace_id, thread_id=self.thread_id,
                                started_at=rfc3339(self.clock), decision_model=DECISION_MODEL,
                                min_confidence=self.guardrails.min_confidence, max_turns=self.guardrails.max_turns,
                                no_progress_limit=self.guardrails.no_progress_limit,
                                max_tokens=self.guardrails.max_tokens)
        self.summary = self._run_turn(task.goal)

    # -- runs and logging ------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The current run's id (the last run's once the session ended)."""
        return self.run_ids[-1]

    @property
    def sequence(self) -> int:
        """The current run's last decision sequence (0 before its first decision)."""
        return self.run.sequence if self.run is not None else 0

    def _tick(self, low_ms: int, high_ms: int) -> int:
        """Advance the clock by low..high ms plus a sub-millisecond part (timestamps carry nanoseconds)."""
        self.clock += self.env.randint(low_ms, high_ms) * 1_000_000 + self.env.randint(0, 999_999)
        return self.clock

    def _start_run(self) -> None:
        """Full Auto enabled on the thread: a new run id, a fresh run state, `run_started` (sequence 0)."""
        self.run = RunState(run_id=f"fullauto-{new_uuid(self.ids)}")
        self.run_ids.append(self.run.run_id)
        self._event("run_started", {"thread_id": self.thread_id}, 0, self.run.run_id)

    def _end_run(self) -> None:
        """The original drops the run state after a decision that is not continue (or on disable)."""
        self.run = None

    def _event(self, event_type: str, data: Any, sequence: int, run_id: str,
               decision_index: Optional[int] = None) -> None:
        self.events.append(SimRunEvent(timestamp=rfc3339(self.clock), sequence_id=sequence, event_type=event_type,
                                       data=data, run_id=run_id, decision_index=decision_index))

    # -- the world -------------------------------------------------------------------------------
    def _plan_value(self, turn_id: str, explanation: str) -> dict[str, Any]:
        steps = self.state.task.steps
        status = ["completed" if i < self.state.step_index else "inProgress" if i == self.state.step_index
                  else "pending" for i in range(len(steps))]
        return {"threadId": self.thread_id, "turnId": turn_id, "explanation": explanation,
                "plan": [{"step": step, "status": s} for step, s in zip(steps, status)]}

    def _diff_text(self, changed: list[str]) -> str:
        """The turn's unified diff (headers, one hunk and a line or two per file)."""
        env = self.env
        parts = []
        for name in changed:
            start, added, removed = env.randint(1, 300), env.randint(3, 60), env.randint(0, 15)
            lines = env.sample(DIFF_LINES, env.randint(1, 2))
            parts.append(f"diff --git a/{name} b/{name}\nindex {env.getrandbits(28):07x}..{env.getrandbits(28):07x} "
                         f"100644\n--- a/{name}\n+++ b/{name}\n@@ -{start},{removed + 3} +{start},{added + 3} @@\n"
                         + "\n".join(lines) + "\n")
        return "".join(parts)

    def _spend_tokens(self, run: RunState, turn_id: str) -> bool:
        """Token use of one turn (the thread's running totals); True when the context was compacted."""
        state, env = self.state, self.env
        fresh = env.randint(6_000, 30_000)
        last = {"inputTokens": state.context_tokens + fresh, "cachedInputTokens": int(state.context_tokens
                                                                                     * env.uniform(0.5, 0.9)),
                "outputTokens": env.randint(800, 6_000), "reasoningOutputTokens": env.randint(200, 4_000)}
        last["totalTokens"] = last["inputTokens"] + last["outputTokens"]
        for key, value in last.items():
            state.totals[key] += value
        state.context_tokens += fresh
        run.token_usage = {"threadId": self.thread_id, "turnId": turn_id, "tokenUsage": {
            "total": dict(state.totals), "last": {"totalTokens": last["totalTokens"], **{
                key: last[key] for key in ("inputTokens", "cachedInputTokens", "outputTokens",
                                           "reasoningOutputTokens")}},
            "modelContextWindow": self.config.context_window}}
        if state.context_tokens > int(self.config.context_window * 0.8):
            state.context_tokens = env.randint(15_000, 30_000)
            return True
        return False

    def _progress(self) -> tuple[list[str], str]:
        """One productive turn: work on the current step, maybe fix a test; (files changed, plan explanation)."""
        state, env = self.state, self.env
        task = state.task
        changed: list[str] = []
        if state.step_index < len(task.steps):
            changed.append(env.choice(task.files))
            state.step_work -= 1
            if state.step_work <= 0:
                state.step_index += 1
                state.step_work = env.randint(1, 3)
        if state.failing_tests and (state.step_index >= len(task.steps) or env.random() < 0.35):
            fixed = state.failing_tests.pop(0)
            changed.append(fixed.split("::")[0])
            message = f"Fixed {fixed}."
        else:
            message = f"Worked on: {task.steps[min(state.step_index, len(task.steps) - 1)]}."
        if state.done:
            return changed, f"{message} All plan steps are complete. All tests pass ({env.randint(40, 400)} passed)."
        if state.failing_tests:
            message += f" {len(state.failing_tests)} test(s) still failing: {', '.join(state.failing_tests)}."
        return changed, message

    def _complications(self) -> None:
        """New trouble that can appear after a productive turn."""
        state, env, cfg = self.state, self.env, self.config
        if state.done:
            return
        if env.random() < cfg.p_approval:
            state.pending_approvals = env.randint(1, 2)
        elif env.random() < cfg.p_tool_input:
            state.pending_tool_inputs = 1
        elif env.random() < cfg.p_blocker:
            state.blocker = env.choice(BLOCKERS)
            state.blocker_visible = env.random() < cfg.p_blocker_visible
            state.blocker_said = False
        elif env.random() < cfg.p_spin:
            state.spinning = True
        if env.random() < cfg.p_risky:
            state.risky_file = env.choice(RISKY_FILES)

    def _run_turn(self, directive: str, targeted: bool = False) -> FullAutoTurnSummary:
        """Play one agent turn started with `directive`; returns the summary the original builds after it."""
        state, env, cfg = self.state, self.env, self.config
        # a turn that runs while Full Auto is off (after a disable) updates no run state anyone keeps
        run = self.run if self.run is not None else RunState(run_id="")
        self.turns_played += 1
        self._tick(40_000, 400_000)
        turn_id = new_uuid(self.ids)
        status, error = "completed", ""
        plan_update: Optional[str] = None  # the explanation of a plan update in this turn
        changed: list[str] = []
        if env.random() < cfg.p_fail:
            status, error = "failed", env.choice(TURN_ERRORS)
            self.agent_message = "The turn ended with an error."
        elif env.random() < cfg.p_interrupt:
            status, self.agent_message = "interrupted", "Interrupted by the user."
        elif state.pending_approvals or state.pending_tool_inputs:
            self.agent_message = ("Waiting for approval to run a command." if state.pending_approvals
                                  else "Waiting for the requested tool input.")
        elif state.blocker:
            self.agent_message = (state.blocker if state.blocker_visible
                                  else "Still investigating the failing behaviour.")
            if state.blocker_visible and not state.blocker_said:  # the agent says it once, in its plan
                plan_update, state.blocker_said = f"Blocked: {state.blocker}", True
        elif state.spinning and not (targeted and env.random() < 0.7) and env.random() > 0.25:
            self.agent_message = "Re-ran the tests; same failures. Trying the same fix again."
        elif state.done:  # nothing left: the agent says so and changes nothing
            self.agent_message = "All plan steps are complete; nothing left to do."
        else:
            state.spinning = False
            state.risky_file = None
            changed, plan_update = self._progress()
            self._complications()
            if state.risky_file:
                changed.append(state.risky_file)
            self.agent_message = plan_update
        if changed and env.random() < cfg.p_secret:  # a fake secret in the diff: the import must redact it
            changed.append("scripts/dev_env.sh")
        # the notifications of the turn, as the original's thread state records them
        run.turn_count += 1
        if plan_update is not None:
            run.plan = self._plan_value(turn_id, plan_update)
        if changed:
            diff = self._diff_text(changed)
            if "scripts/dev_env.sh" in changed:
                diff += f"+export OPENAI_API_KEY=sk-test-{env.getrandbits(96):024x}\n"
            run.diff = {"threadId": self.thread_id, "turnId": turn_id, "diff": diff}
        if self._spend_tokens(run, turn_id):
            run.compactions += 1
        # pending requests are counted during the turn (reset when a turn starts)
        approvals, tool_inputs = state.pending_approvals, state.pending_tool_inputs
        plan_text = pretty_json(run.plan) if run.plan is not None else ""
        diff_text = pretty_json(run.diff) if run.diff is not None else ""
        signature = (f"plan:{plan_text.strip()}\ndiff:{diff_text.strip()}"
                     if plan_text.strip() or diff_text.strip() else None)
        run.no_progress_count = next_progress_count(run.last_signature, signature, run.no_progress_count)
        if signature is not None:
            run.last_signature = signature
        return FullAutoTurnSummary(
            thread_id=self.thread_id, turn_id=turn_id, last_turn_status=status, turn_error=error,
            turn_plan=plan_text, diff_summary=diff_text, token_usage=pretty_json(run.token_usage),
            pending_approvals=str(approvals), pending_tool_inputs=str(tool_inputs),
            recent_actions=pretty_json(run.recent) if run.recent else "[]", compaction_events=str(run.compactions),
            turn_count=run.turn_count, no_progress_count=run.no_progress_count)

    # -- truth -------------------------------------------------------------------------------------
    def truth(self) -> OutcomeLabel:
        """The right action after the current turn, from the hidden state."""
        state, summary = self.state, self.summary
        if summary.last_turn_status == "failed":
            return OutcomeLabel(action="stop", source="simulator", reason=f"the turn failed: {summary.turn_error}",
                                confidence=1.0)
        if summary.last_turn_status == "interrupted":
            return OutcomeLabel(action="pause", source="simulator", reason="the user interrupted the turn",
                                confidence=1.0)
        if state.done:
            return OutcomeLabel(action="stop", source="simulator", reason="every plan step is done and the tests pass",
                                confidence=1.0)
        if state.pending_approvals or state.pending_tool_inputs:
            return OutcomeLabel(action="pause", source="simulator", reason="a human must approve or answer first",
                                confidence=1.0)
        if state.blocker:
            return OutcomeLabel(action="pause", source="simulator", reason=f"blocked: {state.blocker}", confidence=1.0)
        if state.risky_file:
            return OutcomeLabel(action="review", source="simulator",
                                reason=f"the diff touches {state.risky_file}: a human should review it", confidence=1.0)
        step = state.task.steps[min(state.step_index, len(state.task.steps) - 1)]
        if state.spinning:
            next_input = f"Stop repeating the same fix. Re-read the failing test output, then: {step}"
        elif state.step_index >= len(state.task.steps) and state.failing_tests:
            next_input = f"Fix the failing test {state.failing_tests[0]}"
        else:
            next_input = f"Continue with the next plan step: {step}"
        return OutcomeLabel(action="continue", source="simulator", reason="work remains and nothing blocks it",
                            confidence=1.0, next_input=next_input)

    # -- the loop ------------------------------------------------------------------------------------
    def observe(self) -> FullAutoTurnSummary:
        """The summary of the last turn (what a decision function sees)."""
        return self.summary

    def deployed_decision(self) -> str:
        """The noisy deployed policy's LM completion for the current summary."""
        return deployed_raw_output(self.summary, self.policy_rng, self.config.policy)

    def _read(self, decision: Decision) -> tuple[GuidanceDecision, Any, dict[str, Any]]:
        """The model decision, the logged `raw_prediction` and the diagnostics, as the original reads an answer."""
        prompt_chars = sum(len(getattr(self.summary, name)) for name in (
            "turn_plan", "diff_summary", "token_usage", "recent_actions"))
        if isinstance(decision, GuidanceDecision):
            completion = render_raw(decision.action, decision.next_input, decision.reason, decision.confidence)
            data = {"action": decision.action, "next_input": decision.next_input, "reason": decision.reason,
                    "confidence": f32_direct(decision.confidence)}
            if data["confidence"] is None:  # an LM answers a non-finite confidence as text
                data["confidence"] = repr(float(decision.confidence))
        elif isinstance(decision, str):
            completion = decision
            data = chat_adapter_data(decision)
        else:
            data = {str(key): value for key, value in dict(decision).items()}
            completion = json.dumps(data, default=str)
        model, diagnostics = original_decision(data)
        raw_prediction = {"data": data, "lm_usage": lm_usage(prompt_chars, completion)}
        return model, raw_prediction, {**diagnostics, "raw_prediction": raw_prediction}

    def step(self, decision: Decision) -> StepResult:
        """Decide on the current turn: guardrails, logs, true label, then dispatch the next turn."""
        if self.done:
            raise RuntimeError(f"session {self.index} (thread {self.thread_id}) has ended; start another episode")
        model_decision, raw_prediction, diagnostics = self._read(decision)
        label = self.truth()
        context = GuardrailContext.from_summary(self.summary)
        enforced, audit = apply_guardrails(model_decision, context, self.guardrails)
        self._tick(800, 4_000)
        orphan = self.user.random() < self.config.p_orphan
        if orphan:  # the user turned Full Auto off while the model was deciding: the run state is gone
            self._event("run_disabled", {"workspace_id": self.config.workspace_id}, self.run.sequence, self.run_id)
            self._end_run()
            self._log(model_decision, None, raw_prediction, diagnostics, label)
            self._after_orphan(model_decision)
        else:
            self._log(enforced, audit, raw_prediction, diagnostics, label)
            self._dispatch(enforced, label)
        return StepResult(model_decision, enforced, audit, label, self.done, orphan)

    def _log(self, logged: GuidanceDecision, audit: Optional[GuardrailAudit], raw_prediction: Any,
             diagnostics: dict[str, Any], label: OutcomeLabel) -> None:
        """The decision line, raw line, events and true label of one decision (audit None: an orphan)."""
        run = self.run
        sequence, run_id = (0, ORPHAN_RUN) if run is None else (run.sequence + 1, run.run_id)
        if run is not None:
            run.sequence = sequence
            run.recent = (run.recent + [{"turn_id": self.summary.turn_id, "action": logged.action,
                                         "reason": logged.reason, "confidence": f32_direct(logged.confidence),
                                         "timestamp": self.clock // SECOND_NS}])[-5:]
        timestamp = rfc3339(self.clock)
        summary = self.summary
        line = DecisionLogLine(
            timestamp=timestamp, sequence_id=sequence, run_id=run_id, workspace_id=self.config.workspace_id,
            thread_id=self.thread_id, turn_id=summary.turn_id, action=logged.action,
            confidence=f32_direct(logged.confidence), reason=logged.reason,
            next_input_preview=logged.next_input[:140], state="running" if logged.action == "continue" else "paused",
            model=DECISION_MODEL, guardrail=audit, summary=summary.model_dump())
        self.decision_lines.append(line)
        self.raw_lines.append(RawDecisionLogLine(
            timestamp=timestamp, sequence_id=sequence, run_id=run_id, workspace_id=self.config.workspace_id,
            thread_id=self.thread_id, turn_id=summary.turn_id, raw_prediction=raw_prediction,
            parse_diagnostics=diagnostics))
        self.labels.append(TrueLabel(run_id, sequence, summary.turn_id, label))
        self._event("decision", decision_event_data(line), sequence, run_id, len(self.decision_lines) - 1)
        if logged.action != "continue":
            self._event("run_paused", {"action": logged.action, "reason": logged.reason}, sequence, run_id)

    def _after_orphan(self, model_decision: GuidanceDecision) -> None:
        """An orphan's continue still starts its turn (no decision follows it); then the user may re-enable."""
        if model_decision.action == "continue":
            self._run_turn(model_decision.next_input or FALLBACK_PROMPT)
        self._come_back(self.config.p_return_after_disable, (60_000, 1_200_000), "Carry on with the plan.")

    def _come_back(self, probability: float, wait_ms: tuple[int, int], message: str, targeted: bool = False) -> None:
        """The user re-enables Full Auto (a new run) and sends a message, or never comes back."""
        if self.user.random() >= probability or self.turns_played >= MAX_STEPS:
            self.done = True
            return
        self._tick(*wait_ms)
        self._start_run()
        self.summary = self._run_turn(message, targeted=targeted)

    def _dispatch(self, enforced: GuidanceDecision, label: OutcomeLabel) -> None:
        cfg = self.config
        if enforced.action == "continue":
            if self.turns_played >= MAX_STEPS:
                self.done = True
                return
            directive = enforced.next_input or FALLBACK_PROMPT
            targeted = "Re-read" in directive or "Fix the" in directive
            if self.user.random() < cfg.p_disable:  # turned off while the turn runs: it finishes without a decision
                self._tick(5_000, 30_000)
                self._event("run_disabled", {"workspace_id": cfg.workspace_id}, self.run.sequence, self.run_id)
                self._end_run()
                self._run_turn(directive, targeted=targeted)
                self._come_back(cfg.p_return_after_disable, (60_000, 1_200_000), "Carry on with the plan.")
                return
            self.summary = self._run_turn(directive, targeted=targeted)
            return
        self._end_run()  # pause or stop: the original drops the run state
        if label.action == "stop":
            self.done = True  # nothing left to resume for
            return
        if label.action == "continue":  # needless: re-enabled at once, nothing changed
            self._come_back(cfg.p_return_when_needless * (0.8 if enforced.action == "stop" else 1.0),
                            (15_000, 150_000), "continue")
            return
        guidance = self._human_help(label)
        self._come_back(cfg.p_return_when_needed, (180_000, 1_800_000), guidance, targeted=True)

    def _human_help(self, label: OutcomeLabel) -> str:
        """The human resolves what the pause was for; returns the message they send."""
        state = self.state
        if state.pending_approvals:
            state.pending_approvals = 0
            return "Approved. Go ahead and run it."
        if state.pending_tool_inputs:
            state.pending_tool_inputs = 0
            return "Here is the value you asked for; continue."
        if state.blocker:
            guidance = f"Answer: {state.blocker.split('?')[0][:60]} -> use the first option and keep going."
            state.blocker = None
            return guidance
        if state.risky_file:
            guidance = f"Reviewed {state.risky_file}; looks fine, continue."
            state.risky_file = None
            return guidance
        return "Resuming after the interruption; carry on with the plan."


@dataclass(frozen=True)
class SimRun:
    """A finished session (one thread, one or more runs) with everything the real loop logged, plus true labels.

    `run_file` is the session's run metadata (each run's file is it with that run's id and start, the
    time of its `run_started` event); `events` hold every run's events, each naming its run.
    """

    run_file: RunFile
    decisions: list[DecisionLogLine]
    raw: list[RawDecisionLogLine]
    events: list[RunEvent]
    labels: list[TrueLabel]

    def run_files(self) -> list[RunFile]:
        """The run file of each run of the session, in order."""
        files = []
        for event in self.events:
            if event.event_type == "run_started":
                run_id = getattr(event, "run_id", self.run_file.run_id)
                files.append(self.run_file.model_copy(update={"run_id": run_id, "started_at": event.timestamp}))
        return files


DecisionFunction = Callable[[FullAutoTurnSummary], Decision]


class FullAutoSimulator:
    """Seeded source of simulated Full Auto sessions; same seed, same sessions (byte for byte once written)."""

    def __init__(self, seed: int = 0, config: SimConfig = SimConfig()) -> None:
        self.seed = seed
        self.config = config

    def episode(self, index: int) -> FullAutoEpisode:
        """Session `index`, ready for `observe()` / `step(decision)`."""
        return FullAutoEpisode(self.seed, index, self.config)

    def play(self, index: int, decide: Optional[DecisionFunction] = None) -> SimRun:
        """Play session `index` to the end with a decision function (default: the noisy deployed policy)."""
        episode = self.episode(index)
        while not episode.done:
            episode.step(decide(episode.observe()) if decide else episode.deployed_decision())
        return SimRun(episode.run_file, episode.decision_lines, episode.raw_lines, episode.events, episode.labels)

    def runs(self, n: int, decide: Optional[DecisionFunction] = None, start: int = 0) -> Iterator[SimRun]:
        """Sessions start .. start+n-1, played one after the other (memory: one session at a time)."""
        for index in range(start, start + n):
            yield self.play(index, decide)
