"""Every line the real Full Auto writer produces imports, replays and labels as the original behaves.

The logs come from `realshape_support.write_real_workspace`: the writer's exact serde shapes
(summaries without the later fields, null confidence, f32-widened nested floats, any turn status,
`raw_prediction` as `{data, lm_usage}`, diagnostics as a struct, orphan decisions of run "unknown",
runs that end at a pause and resume as a new run on the same thread, only the four event types).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import programs
from evals.data import load_records
from evals.replay import replay
from guidebench.data import import_logs
from realshape_support import write_real_workspace


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    writer = write_real_workspace(root / "logs")
    report = import_logs(root / "logs", "fullauto", root / "data", seed=0)
    records = load_records(root / "data", "all")
    return writer, report, records, json.loads((root / "data" / "import_report.json").read_text())


def test_no_line_of_the_real_writer_is_quarantined(imported):
    writer, report, records, saved = imported
    assert report.read == len(writer.decisions) == len(records)
    assert report.quarantined == 0 and saved["side_quarantined"] in (0, {}) and saved["duplicates"] == 0
    assert saved["raw_joined"] == len(writer.decisions) and saved["raw_unmatched"] == 0
    assert all(not events for events in [saved.get("events_quarantined")])


def test_null_confidence_unknown_status_and_f32_floats_are_kept(imported):
    _, _, records, _ = imported
    nan_decision = next(r for r in records if r.logged.confidence is None and r.guardrail.rule is None)
    assert nan_decision.logged.action == "continue" and nan_decision.guardrail.original_confidence is None
    assert math.isnan(nan_decision.logged_model_confidence())
    # -inf is logged null too, but it was below the minimum: the null is read back as -inf
    minus_inf = next(r for r in records if r.logged.confidence is None and r.guardrail.rule == "low_confidence")
    assert minus_inf.logged.reason == "Low confidence (-inf) decision; pausing Full Auto."
    assert minus_inf.logged_model_confidence() == -math.inf and minus_inf.logged.action == "pause"
    assert any(r.summary.last_turn_status == "cancelled" for r in records)
    low = next(r for r in records if r.guardrail and r.guardrail.rule == "low_confidence"
               and r.logged.model_confidence == 0.515)
    assert low.logged.reason == "Low confidence (0.51) decision; pausing Full Auto."
    assert low.guardrail.enforced_confidence == 0.515  # read back from 0.5149999856948853
    negative = next(r for r in records if r.logged.model_confidence == -0.2)
    assert negative.guardrail.rule == "low_confidence"  # not clamped
    assert all(r.usage is not None and r.usage.total_tokens == 853 for r in records)
    assert all(isinstance(r.raw_prediction, dict) and set(r.raw_prediction) == {"data", "lm_usage"} for r in records)


def test_orphan_decisions_are_their_own_group_joined_by_turn(imported):
    writer, _, records, saved = imported
    orphans = [r for r in records if r.run_id == "unknown"]
    assert len(orphans) == 2 and all(r.sequence_id == 0 and r.guardrail is None for r in orphans)
    # counted apart: the orphan group is no run and has no run file to miss
    runs = {decision["run_id"] for decision in writer.decisions} - {"unknown"}
    assert (saved["runs"], saved["runs_missing_config"], saved["orphan_decisions"]) == (len(runs), 0, 2)
    assert {r.raw_prediction["data"]["confidence"] for r in orphans} == {0.8, 0.6}


def test_logged_replay_reproduces_every_logged_audit(imported):
    _, _, records, _ = imported
    result = replay(programs.get("logged"), records, progress=False, n_resamples=50)
    assert result.errors == 0
    for record, row in zip(records, result.rows):
        # today's guardrails on the logged model decision give the enforced action the writer logged
        assert row["replay_enforced_action"] == record.logged.action, record.record_id
        if record.guardrail is None:
            continue
        decision = programs.get("logged")(**programs.decision_inputs(record)).decision
        from runtime import GuardrailContext, apply_guardrails

        enforced, audit = apply_guardrails(decision, GuardrailContext.from_summary(record.summary), record.config)
        logged = record.guardrail
        assert (audit.rule, audit.original_action, audit.enforced_action) == (
            logged.rule, logged.original_action, logged.enforced_action)
        for mine, theirs in ((audit.original_confidence, logged.original_confidence),
                             (audit.enforced_confidence, logged.enforced_confidence)):
            assert (mine is None and theirs is None) or math.isclose(mine, theirs, rel_tol=1e-6)
        assert enforced.reason == record.logged.reason or audit.rule is None


def test_labels_look_at_the_next_run_of_the_thread(imported):
    _, _, records, saved = imported
    by_time = sorted((r for r in records if r.thread_id == "thread-a" and r.run_id != "unknown"),
                     key=lambda r: r.timestamp)
    paused = by_time[2]
    assert paused.logged.action == "pause" and paused.guardrail.rule == "low_confidence"
    # the user re-enabled at once (a new run on the thread) and the next turn made progress
    assert paused.label is not None and (paused.label.action, paused.label.source) == (
        "continue", "rule:resumed_unchanged")
    sources = saved["distributions"]["label_sources"]
    assert sources["rule:resumed_unchanged"] == 2 and sources["rule:turn_status"] == 1
    assert sum(sources.values()) == len(records) and sources["(unlabeled)"] == saved["unlabeled"]


def test_only_the_four_real_event_types_are_written(imported, tmp_path):
    writer, *_ = imported
    types = set()
    for events in Path(writer.root, "runs").glob("*_events.jsonl"):
        types |= {json.loads(line)["event_type"] for line in events.read_text().splitlines()}
    assert types <= {"run_started", "decision", "run_paused", "run_disabled"}
    assert Path(writer.root, "runs", "unknown_events.jsonl").is_file()  # the orphans' events, never read
