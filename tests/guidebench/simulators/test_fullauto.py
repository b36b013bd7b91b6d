"""The seeded coding-agent simulator: determinism, the real writer's exact shapes, real guardrails, run boundaries
as the original draws them (a pause or stop ends the run, a resume is a new run on the thread), step API."""

from __future__ import annotations

import filecmp
import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from guidebench.cli import main
from guidebench.data.fullauto_writer import simulate_workspace
from guidebench.data.labels import SideLabel
from guidebench.simulators.fullauto import FullAutoSimulator
from guidebench.simulators.fullauto_world import FALLBACK_PROMPT, SimConfig
from guidebench.simulators.fullauto_policy import chat_adapter_data, original_decision
from runtime.fullauto import (
    DecisionLogLine,
    GuardrailContext,
    GuidanceDecision,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    f32,
    next_progress_count,
    tokens_from_usage,
)
from runtime.guardrails import apply_guardrails, parse_decision

REAL_EVENTS = {"run_started", "decision", "run_paused", "run_disabled"}
SUMMARY_KEYS = ["thread_id", "turn_id", "last_turn_status", "turn_error", "turn_plan", "diff_summary", "token_usage",
                "pending_approvals", "pending_tool_inputs", "recent_actions", "compaction_events", "turn_count",
                "no_progress_count"]
DIAGNOSTICS_KEYS = ["raw_prediction", "action_raw", "next_input_raw", "reason_raw", "confidence_raw", "action_parsed",
                    "next_input_parsed", "reason_parsed", "confidence_parsed", "parse_errors"]


def _files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_same_seed_same_bytes_and_run_k_does_not_depend_on_n(tmp_path: Path) -> None:
    simulate_workspace(tmp_path / "a", runs=12, seed=5)
    simulate_workspace(tmp_path / "b", runs=12, seed=5)
    simulate_workspace(tmp_path / "c", runs=12, seed=6)
    names = _files(tmp_path / "a")
    assert names == _files(tmp_path / "b")
    match, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", names, shallow=False)
    assert mismatch == [] and errors == []
    assert (tmp_path / "a" / "fullauto-decisions.jsonl").read_bytes() != \
        (tmp_path / "c" / "fullauto-decisions.jsonl").read_bytes()
    five = [run.decisions for run in FullAutoSimulator(5).runs(5)]
    twelve = [run.decisions for run in FullAutoSimulator(5).runs(12)]
    assert five == twelve[:5]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("ws")
    counts = simulate_workspace(root, runs=30, seed=2)
    return root, counts


def test_every_written_line_has_the_real_writers_exact_shape(workspace) -> None:
    root, counts = workspace
    decisions, raws = _lines(root / "fullauto-decisions.jsonl"), _lines(root / "fullauto-decisions-raw.jsonl")
    labels = [SideLabel.model_validate(item) for item in _lines(root / "labels.jsonl")]
    assert len(decisions) == len(raws) == len(labels) == counts.decisions
    assert [(d["run_id"], d["sequence_id"], d["turn_id"]) for d in decisions] == \
        [(r["run_id"], r["sequence_id"], r["turn_id"]) for r in raws] == \
        [(label.run_id, label.sequence_id, label.turn_id) for label in labels]
    for line, raw in zip(decisions, raws):
        DecisionLogLine.model_validate(line)
        RawDecisionLogLine.model_validate(raw)
        assert list(line) == ["timestamp", "sequence_id", "run_id", "workspace_id", "thread_id", "turn_id", "action",
                              "confidence", "reason", "next_input_preview", "state", "model", "guardrail", "summary"]
        assert list(line["summary"]) == SUMMARY_KEYS  # the writing build has no agent message, no guidance
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z", line["timestamp"])
        assert set(raw["raw_prediction"]) == {"data", "lm_usage"}
        assert list(raw["parse_diagnostics"]) == DIAGNOSTICS_KEYS
        assert raw["parse_diagnostics"]["raw_prediction"] == raw["raw_prediction"]
        audit = line["guardrail"]
        if audit is not None:  # nested in a JSON value: the f32s are widened doubles; the direct field is not
            for key in ("original_confidence", "enforced_confidence"):
                assert audit[key] is None or audit[key] == f32(audit[key])
            if line["confidence"] is not None:
                assert f32(line["confidence"]) == audit["enforced_confidence"]
        parsed = raw["parse_diagnostics"]["confidence_parsed"]
        assert parsed is None or parsed == f32(parsed)
    assert any(audit["original_confidence"] != round(audit["original_confidence"], 6)
               for audit in (d["guardrail"] for d in decisions) if audit and audit["original_confidence"])
    assert all(label.label.source == "simulator" for label in labels)


def test_runs_end_at_the_first_decision_that_is_not_continue(workspace) -> None:
    root, counts = workspace
    decisions = _lines(root / "fullauto-decisions.jsonl")
    runs: dict[str, list[dict]] = {}
    for line in decisions:
        runs.setdefault(line["run_id"], []).append(line)
    orphans = runs.pop("unknown", [])
    assert len(runs) == counts.run_ids and counts.run_ids > counts.runs  # sessions hold one or more runs
    threads = Counter(lines[0]["thread_id"] for lines in runs.values())
    assert max(threads.values()) > 1  # resumed as new runs on the same thread
    for run_id, lines in runs.items():
        assert [line["sequence_id"] for line in lines] == list(range(1, len(lines) + 1))
        assert all(line["action"] == "continue" for line in lines[:-1])  # a pause or stop ends the run
        assert [line["summary"]["turn_count"] for line in lines] == list(range(1, len(lines) + 1))  # from 0 anew
        assert json.loads(lines[0]["summary"]["recent_actions"]) == []
        run = RunFile.model_validate_json((root / "runs" / f"{run_id}.json").read_text())
        assert run.run_id == run_id and run.thread_id == lines[0]["thread_id"]
        assert not (root / "runs" / f"{run_id}.json").read_text().endswith("\n")  # to_string_pretty, no newline
        events = [RunEvent.model_validate(e) for e in _lines(root / "runs" / f"{run_id}_events.jsonl")]
        assert {e.event_type for e in events} <= REAL_EVENTS
        assert (events[0].event_type, events[0].sequence_id, events[0].data) == (
            "run_started", 0, {"thread_id": lines[0]["thread_id"]})
        assert events[0].timestamp == run.started_at
        decided = [e for e in events if e.event_type == "decision"]
        assert [e.data for e in decided] == [
            {**line, "confidence": None if line["confidence"] is None else f32(line["confidence"])} for line in lines]
        paused = [e for e in events if e.event_type == "run_paused"]
        if lines[-1]["action"] != "continue":
            assert [(e.sequence_id, e.data) for e in paused] == [
                (lines[-1]["sequence_id"], {"action": lines[-1]["action"], "reason": lines[-1]["reason"]})]
        else:  # the user turned Full Auto off while it ran
            assert not paused and events[-1].event_type == "run_disabled"
            assert (events[-1].sequence_id, events[-1].data) == (len(lines), {"workspace_id": "ws-sim-0001"})
    assert all(o["sequence_id"] == 0 and o["guardrail"] is None for o in orphans)
    if orphans:
        assert {e["event_type"] for e in _lines(root / "runs" / "unknown_events.jsonl")} <= REAL_EVENTS


def test_logged_decisions_are_the_real_guardrails_applied_to_the_raw_output() -> None:
    checked = orphans = 0
    for run in FullAutoSimulator(3).runs(30):
        config = run.run_file.guardrail_config()
        for line, raw in zip(run.decisions, run.raw):
            model = parse_decision(raw.raw_prediction["data"])  # the runtime's parser reads what the original read
            again, diagnostics = original_decision(raw.raw_prediction["data"])
            assert (model.action, model.reason, model.next_input) == (again.action, again.reason, again.next_input)
            assert model.confidence == again.confidence or (math.isnan(model.confidence) and
                                                            math.isnan(again.confidence))
            assert raw.parse_diagnostics["parse_errors"] == diagnostics["parse_errors"]
            if line.run_id == "unknown":  # an orphan: the model's own decision, no audit
                assert line.guardrail is None and line.action == model.action and line.sequence_id == 0
                orphans += 1
                continue
            enforced, audit = apply_guardrails(model, GuardrailContext.from_summary(line.summary), config)
            assert line.guardrail == audit
            assert line.action == enforced.action and line.next_input_preview == enforced.next_input[:140]
            assert line.confidence == enforced.confidence or (line.confidence is None
                                                              and not math.isfinite(enforced.confidence))
            checked += 1
    assert checked > 100 and orphans >= 1


def test_the_chat_adapter_and_the_originals_reading() -> None:
    completion = ("[[ ## action ## ]]\nProceed\n\n[[ ## reason ## ]]\nr\n\n[[ ## confidence ## ]]\n0.85 (fairly sure)"
                  "\n\n[[ ## completed ## ]]")
    data = chat_adapter_data(completion)
    assert data == {"action": "Proceed", "reason": "r", "confidence": 0.85}
    decision, diagnostics = original_decision(data)
    assert (decision.action, decision.confidence) == ("pause", 0.85)  # unknown action: pause, confidence kept
    assert diagnostics["next_input_raw"] == "" and diagnostics["parse_errors"] == []  # Prediction::get gives ""
    decision, diagnostics = original_decision(chat_adapter_data("[[ ## action ## ]]\ncontinue\n\n"
                                                                "[[ ## confidence ## ]]\nhigh"))
    assert (decision.action, decision.confidence) == ("continue", 0.0)
    assert diagnostics["parse_errors"] == ["confidence not parseable"] and diagnostics["confidence_raw"] == "high"
    assert chat_adapter_data("[[ ## confidence ## ]]\nNaN")["confidence"] == "NaN"  # serde_json refuses NaN
    decision, diagnostics = original_decision({"confidence": "NaN"})
    assert math.isnan(decision.confidence) and diagnostics["confidence_parsed"] is None
    assert original_decision({})[1]["parse_errors"] == ["confidence not parseable"]


def test_summaries_evolve_like_the_real_loop() -> None:
    for run in FullAutoSimulator(8).runs(25):
        tokens, previous_run, times = 0, None, []
        for line in run.decisions:
            summary = line.summary
            if line.run_id == "unknown":
                continue
            if line.run_id != previous_run:  # a new run: a fresh run state
                previous_run, signature, count, recent = line.run_id, None, 0, []
            new_signature = summary.progress_signature()
            count = next_progress_count(signature, new_signature, count)
            signature = new_signature if new_signature is not None else signature
            assert summary.no_progress_count == count
            assert (summary.last_agent_message, summary.last_guidance_directive) == ("", "")
            assert [item["turn_id"] for item in json.loads(summary.recent_actions)] == recent[-5:]
            recent.append(summary.turn_id)
            used = tokens_from_usage(summary.token_usage)  # nested as tokenUsage.total, growing over the thread
            assert used is not None and used > tokens and "tokenUsage" in json.loads(summary.token_usage)
            tokens = used
            times.append(line.timestamp)
        assert times == sorted(times)


def test_the_simulated_world_has_every_situation_the_loop_meets() -> None:
    runs = list(FullAutoSimulator(7).runs(200))
    lines = [line for run in runs for line in run.decisions]
    statuses = Counter(line.summary.last_turn_status for line in lines)
    rules = Counter(line.guardrail.rule for line in lines if line.guardrail)
    truths = Counter(label.label.action for run in runs for label in run.labels)
    assert statuses["failed"] and statuses["interrupted"]
    assert {"turn_failed", "turn_interrupted", "no_progress", "low_confidence", "review_requested"} <= set(rules)
    assert set(truths) == {"continue", "pause", "stop", "review"}
    assert any(line.summary.pending_approvals != "0" for line in lines)
    assert any(line.summary.pending_tool_inputs != "0" for line in lines)
    assert any(line.summary.compaction_events != "0" for line in lines)
    assert any("sk-test-" in line.summary.diff_summary for line in lines)
    assert any("Blocked:" in line.summary.turn_plan for line in lines)
    assert any(raw.parse_diagnostics["parse_errors"] for run in runs for raw in run.raw)
    assert any(line.confidence is None for line in lines)  # a NaN confidence, logged null
    assert any(line.run_id == "unknown" for line in lines)
    events = Counter(event.event_type for run in runs for event in run.events)
    assert set(events) == REAL_EVENTS
    agreement = sum(line.action == label.label.action for run in runs
                    for line, label in zip(run.decisions, run.labels)) / len(lines)
    assert 0.5 < agreement < 0.9  # the deployed policy is noisy: room to improve, not random


def test_step_api_drives_a_session_with_any_decision_function() -> None:
    simulator = FullAutoSimulator(11)
    episode = simulator.episode(0)
    first = episode.observe()
    assert first.turn_count == 1 and first.last_guidance_directive == ""
    first_run = episode.run_id
    result = episode.step(GuidanceDecision(action="pause", confidence=0.95, reason="check in"))
    assert result.enforced.action == "pause" and result.audit.triggered is False
    assert episode.decision_lines[-1].state == "paused"
    if not episode.done:  # the user came back: a new run on the same thread, counters from 0
        assert episode.run_id != first_run and episode.observe().turn_count == 1
        assert episode.observe().thread_id == first.thread_id
    while not episode.done:
        episode.step({"action": "continue", "confidence": 0.9, "next_input": ""})
    assert episode.events[-1].event_type in ("run_paused", "run_disabled", "decision")
    with pytest.raises(RuntimeError, match="has ended"):
        episode.step(GuidanceDecision(action="continue", confidence=0.9))
    replay = simulator.play(0, lambda summary: GuidanceDecision(action="continue", confidence=0.9))
    # the environment stream does not depend on the policy
    assert replay.decisions[0].summary.model_dump() == first.model_dump()
    assert FALLBACK_PROMPT.startswith("Continue immediately.")  # the original's DEFAULT_CONTINUE_PROMPT


def test_good_decisions_finish_more_tasks_with_fewer_interruptions() -> None:
    simulator = FullAutoSimulator(13)

    def finished(oracle: bool) -> tuple[int, int]:
        done = runs = 0
        for index in range(80):
            episode = simulator.episode(index)
            while not episode.done:
                if oracle:
                    truth = episode.truth()
                    episode.step(GuidanceDecision(action=truth.action, confidence=0.9, next_input=truth.next_input))
                else:
                    episode.step(episode.deployed_decision())
            done += episode.state.done
            runs += len(episode.run_ids)
        return done, runs

    (good, good_runs), (deployed, deployed_runs) = finished(oracle=True), finished(oracle=False)
    # wrong pauses and stops are resumed by the user (each resume a new run): they cost interruptions
    assert good > deployed and good_runs / good < 0.75 * deployed_runs / deployed


def test_simulate_command_refuses_to_overwrite_without_force(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "ws")
    assert main(["data", "simulate", "fullauto", "--runs", "3", "--seed", "1", "--out", out]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"wrote 3 sessions \((\d+) runs\)", printed)
    assert main(["data", "simulate", "fullauto", "--runs", "3", "--seed", "1", "--out", out]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["data", "simulate", "fullauto", "--runs", "2", "--seed", "1", "--out", out, "--force",
                 "--no-labels"]) == 0
    runs = int(re.search(r"wrote 2 sessions \((\d+) runs\)", capsys.readouterr().out).group(1))
    assert not (tmp_path / "ws" / "labels.jsonl").exists()
    assert len(list((tmp_path / "ws" / "runs").glob("*.json"))) == runs


def test_config_rates_shape_the_world() -> None:
    calm = SimConfig(p_fail=0.0, p_interrupt=0.0, p_approval=0.0, p_tool_input=0.0, p_blocker=0.0, p_spin=0.0,
                     p_risky=0.0, p_secret=0.0)
    lines = [line for run in FullAutoSimulator(4, calm).runs(20) for line in run.decisions]
    assert {line.summary.last_turn_status for line in lines} == {"completed"}
    assert all(line.summary.pending_approvals == "0" for line in lines)
