"""The seeded coding-agent simulator: determinism, real log layout, real guardrails, step API."""

from __future__ import annotations

import filecmp
import json
from collections import Counter
from pathlib import Path

import pytest

from guidebench.data.simulators.fullauto import FALLBACK_PROMPT, FullAutoSimulator, SimConfig
from guidebench.cli import main
from guidebench.data.fullauto_writer import simulate_workspace
from guidebench.data.labels import SideLabel
from runtime.fullauto import (
    DecisionLogLine,
    GuardrailContext,
    GuidanceDecision,
    RawDecisionLogLine,
    RunEvent,
    RunFile,
    next_progress_count,
    tokens_from_usage,
)
from runtime.guardrails import apply_guardrails, parse_decision


def _files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


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


def test_every_written_line_matches_the_real_contracts(tmp_path: Path) -> None:
    counts = simulate_workspace(tmp_path, runs=15, seed=2)
    decisions = [DecisionLogLine.model_validate(json.loads(line))
                 for line in (tmp_path / "fullauto-decisions.jsonl").read_text().splitlines()]
    raws = [RawDecisionLogLine.model_validate(json.loads(line))
            for line in (tmp_path / "fullauto-decisions-raw.jsonl").read_text().splitlines()]
    labels = [SideLabel.model_validate(json.loads(line))
              for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert len(decisions) == len(raws) == len(labels) == counts.decisions
    assert [(d.run_id, d.sequence_id) for d in decisions] == [(r.run_id, r.sequence_id) for r in raws] == \
        [(label.run_id, label.sequence_id) for label in labels]
    run_ids = {d.run_id for d in decisions}
    assert len(run_ids) == counts.runs
    for run_id in run_ids:
        run = RunFile.model_validate_json((tmp_path / "runs" / f"{run_id}.json").read_text())
        assert run.run_id == run_id and run_id.startswith("fullauto-")
        events = [RunEvent.model_validate(json.loads(line))
                  for line in (tmp_path / "runs" / f"{run_id}_events.jsonl").read_text().splitlines()]
        assert events[0].event_type == "run_started"
        sequence = [e.sequence_id for e in events]
        assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence)
    assert all(label.label.source == "simulator" for label in labels)


def test_logged_decisions_are_the_real_guardrails_applied_to_the_raw_output() -> None:
    checked = 0
    for run in FullAutoSimulator(3).runs(30):
        config = run.run_file.guardrail_config()
        for line, raw in zip(run.decisions, run.raw):
            model = parse_decision(raw.raw_prediction)
            enforced, audit = apply_guardrails(model, GuardrailContext.from_summary(line.summary), config)
            assert line.guardrail == audit
            assert (line.action, line.confidence) == (enforced.action, enforced.confidence)
            assert line.next_input_preview == enforced.next_input[:140]
            assert (raw.parse_diagnostics is not None) == model.parse_failed
            checked += 1
    assert checked > 100


def test_summaries_evolve_like_the_real_loop() -> None:
    for run in FullAutoSimulator(8).runs(25):
        previous_signature, count, tokens, turn_count = None, 0, 0, 0
        seen_turns = set()
        for line in run.decisions:
            summary = line.summary
            if summary.turn_id in seen_turns:
                continue
            seen_turns.add(summary.turn_id)
            signature = summary.progress_signature()
            count = next_progress_count(previous_signature, signature, count)
            previous_signature = signature if signature is not None else previous_signature
            assert summary.no_progress_count == count
            assert summary.turn_count > turn_count
            turn_count = summary.turn_count
            used = tokens_from_usage(summary.token_usage)
            assert used is not None and used > tokens
            tokens = used
            assert json.loads(summary.recent_actions) is not None
        times = [line.timestamp for line in run.decisions]
        assert times == sorted(times)


def test_the_simulated_world_has_every_situation_the_loop_meets() -> None:
    runs = list(FullAutoSimulator(7).runs(200))
    lines = [line for run in runs for line in run.decisions]
    statuses = Counter(line.summary.last_turn_status for line in lines)
    rules = Counter(line.guardrail.rule for line in lines)
    truths = Counter(label.label.action for run in runs for label in run.labels)
    assert statuses["failed"] and statuses["interrupted"]
    assert {"turn_failed", "turn_interrupted", "no_progress", "low_confidence", "review_requested"} <= set(rules)
    assert set(truths) == {"continue", "pause", "stop", "review"}
    assert any(line.summary.pending_approvals != "0" for line in lines)
    assert any(line.summary.pending_tool_inputs != "0" for line in lines)
    assert any(line.summary.compaction_events != "0" for line in lines)
    assert any("sk-test-" in line.summary.last_agent_message for line in lines)
    assert any(raw.parse_diagnostics for run in runs for raw in run.raw)
    events = Counter(event.event_type for run in runs for event in run.events)
    assert {"run_paused", "run_resumed", "user_input", "approval_granted", "run_stopped"} <= set(events)
    agreement = sum(line.action == label.label.action for run in runs
                    for line, label in zip(run.decisions, run.labels)) / len(lines)
    assert 0.5 < agreement < 0.9  # the deployed policy is noisy: room to improve, not random


def test_step_api_drives_a_run_with_any_decision_function() -> None:
    simulator = FullAutoSimulator(11)
    episode = simulator.episode(0)
    first = episode.observe()
    assert first.turn_count == 1 and first.last_guidance_directive == episode.state.task.goal
    result = episode.step(GuidanceDecision(action="pause", confidence=0.95, reason="check in"))
    assert result.enforced.action == "pause" and result.audit.triggered is False
    assert episode.decision_lines[-1].state == "paused"
    while not episode.done:
        episode.step({"action": "continue", "confidence": 0.9, "next_input": ""})
    assert episode.events[-1].event_type in ("run_stopped", "run_paused")
    with pytest.raises(RuntimeError, match="has ended"):
        episode.step(GuidanceDecision(action="continue", confidence=0.9))
    replay = simulator.play(0, lambda summary: GuidanceDecision(action="continue", confidence=0.9))
    assert replay.decisions[0].summary.model_dump() == first.model_dump()  # the environment stream does not depend on the policy
    resumed = [e for e in episode.events if e.event_type == "run_resumed"]
    if result.label.action == "continue":  # a needless pause is resumed without new guidance
        assert resumed and episode.decision_lines[1].summary.last_guidance_directive == FALLBACK_PROMPT


def test_good_decisions_finish_more_tasks_than_the_deployed_policy() -> None:
    simulator = FullAutoSimulator(13)

    def finished(oracle: bool) -> int:
        done = 0
        for index in range(80):
            episode = simulator.episode(index)
            while not episode.done:
                if oracle:
                    truth = episode.truth()
                    episode.step(GuidanceDecision(action=truth.action, confidence=0.9, next_input=truth.next_input))
                else:
                    episode.step(episode.deployed_decision())
            done += episode.state.done
        return done

    assert finished(oracle=True) > finished(oracle=False) + 10


def test_simulate_command_refuses_to_overwrite_without_force(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "ws")
    assert main(["data", "simulate", "fullauto", "--runs", "3", "--seed", "1", "--out", out]) == 0
    assert "wrote 3 runs" in capsys.readouterr().out
    assert main(["data", "simulate", "fullauto", "--runs", "3", "--seed", "1", "--out", out]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["data", "simulate", "fullauto", "--runs", "2", "--seed", "1", "--out", out, "--force",
                 "--no-labels"]) == 0
    assert not (tmp_path / "ws" / "labels.jsonl").exists()
    assert len(list((tmp_path / "ws" / "runs").glob("*.json"))) == 2


def test_config_rates_shape_the_world() -> None:
    calm = SimConfig(p_fail=0.0, p_interrupt=0.0, p_approval=0.0, p_tool_input=0.0, p_blocker=0.0, p_spin=0.0,
                     p_risky=0.0, p_secret=0.0)
    lines = [line for run in FullAutoSimulator(4, calm).runs(20) for line in run.decisions]
    assert {line.summary.last_turn_status for line in lines} == {"completed"}
    assert all(line.summary.pending_approvals == "0" for line in lines)
