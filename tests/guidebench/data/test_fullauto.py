"""Import of Full Auto workspace logs: exact counts, exact quarantined line numbers, joins, labels."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evals.data import dataset_info, load_records
from guidebench.cli import main
from guidebench.data import NothingImportedError, import_logs
from guidebench.data.fullauto_writer import simulate_workspace
from guidebench.data.labels import LabelRuleConfig, label_run
from runtime.fullauto import FullAutoTurnSummary, GuardrailAudit, GuardrailConfig, RunEvent
from runtime.records import DecisionRecord, LoggedDecision, OutcomeLabel

SECRET = "sk-test-" + "9f8e7d6c5b4a39281706f5e4"
REPO = Path(__file__).resolve().parents[3]


def summary(turn: str, count: int, **fields: object) -> dict:
    """A complete logged turn summary (the producer writes every field)."""
    base = {"thread_id": "thread-1", "turn_id": turn, "last_turn_status": "completed", "turn_error": "",
            "last_agent_message": "Worked on the parser.", "last_guidance_directive": "Fix the parser",
            "turn_plan": f'{{"plan": [{{"step": "fix {turn}", "status": "in_progress"}}]}}',
            "diff_summary": f" src/parser.py | {count} +", "token_usage": '{"totalTokens": 1000}',
            "pending_approvals": "0", "pending_tool_inputs": "0", "compaction_events": "0",
            "recent_actions": "[]", "turn_count": count, "no_progress_count": 0}
    base.update(fields)
    return base


def decision(run: str, seq: int, turn: str, count: int, action: str = "continue", confidence: float = 0.8,
             minute: int = 0, **summary_fields: object) -> dict:
    """A complete, valid `fullauto-decisions.jsonl` line."""
    audit = {"triggered": False, "rule": None, "original_action": action, "original_confidence": confidence,
             "enforced_action": action, "enforced_confidence": confidence}
    return {"timestamp": f"2025-06-02T10:{minute:02d}:00Z", "sequence_id": seq, "run_id": run,
            "workspace_id": "ws-1", "thread_id": "thread-1", "turn_id": turn, "action": action,
            "confidence": confidence, "reason": "work remains",
            "next_input_preview": "Continue" if action == "continue" else "",
            "state": "running" if action == "continue" else "paused", "model": "gpt-test", "guardrail": audit,
            "summary": summary(turn, count, **summary_fields)}


def dumps(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


RUN_A, RUN_B = "fullauto-aaaa", "fullauto-bbbb"


def write_fixture(root: Path) -> dict[str, list[int]]:
    """The hand-written workspace: every kind of line, at known physical line numbers."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "runs").mkdir()
    good_a1 = dumps(decision(RUN_A, 1, "a1", 1, minute=1))
    wrong_typed = decision(RUN_A, 4, "a4", 4, minute=4)
    wrong_typed["summary"]["turn_count"] = "4"
    incomplete = decision(RUN_A, 5, "a5", 5, minute=5)
    del incomplete["summary"]["no_progress_count"]
    with_secret = decision(RUN_B, 2, "b2", 2, minute=12, last_agent_message=f"export OPENAI_API_KEY={SECRET}")
    string_confidence = decision(RUN_B, 3, "b3", 3, minute=13)
    string_confidence["confidence"] = "0.9"
    lines = [
        good_a1,                                                          # 1 imported
        dumps(decision(RUN_A, 2, "a2", 2, minute=2)),                      # 2 imported
        good_a1,                                                          # 3 duplicate of line 1
        "",                                                               # 4 blank: not read
        dumps(decision(RUN_A, 3, "a3", 3, minute=3))[:150],                # 5 truncated JSON
        dumps(wrong_typed),                                               # 6 wrong-typed summary.turn_count
        dumps(incomplete),                                                # 7 incomplete summary
        dumps(decision(RUN_B, 1, "b1", 1, minute=11)),                     # 8 imported (run B: no run file)
        dumps(decision(RUN_B, 9, "b9", 9)).replace('"confidence":0.8,', '"confidence":NaN,', 1),  # 9 NaN
        "   ",                                                            # 10 whitespace only
        dumps(with_secret),                                               # 11 imported, secret redacted
        dumps(string_confidence),                                         # 12 wrong-typed confidence
        "[1, 2]",                                                         # 13 not an object
        '{"timestamp": "2025-06-02T10:00:00Z", "sequence_id": 7, "run_id": "fullauto-aaaa"}',  # 14 incomplete
    ]
    data = "\n".join(lines).encode() + b"\n" + b'{"reason": "caf\xe9"}\n'  # 15 invalid UTF-8
    data += dumps(decision(RUN_B, 4, "b4", 4, minute=14, turn_plan="done")).encode()  # 16 imported, no final newline
    (root / "fullauto-decisions.jsonl").write_bytes(data)
    run_file = {"run_id": RUN_A, "workspace_id": "ws-1", "thread_id": "thread-1",
                "started_at": "2025-06-02T10:00:00Z", "decision_model": "gpt-test", "min_confidence": 0.7,
                "max_turns": 50, "no_progress_limit": 2, "max_tokens": None}
    (root / "runs" / f"{RUN_A}.json").write_text(json.dumps(run_file, indent=2))
    return {"imported": [1, 2, 8, 11, 16], "duplicates": [3], "quarantined": [5, 6, 7, 9, 10, 12, 13, 14, 15]}


def quarantine_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]


def test_counts_and_quarantined_line_numbers_are_exact(tmp_path: Path) -> None:
    expected = write_fixture(tmp_path / "ws")
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out", seed=1)
    assert (report.read, report.imported, report.quarantined, report.duplicates, report.blank_lines) == (15, 5, 9, 1, 1)
    assert report.read == report.imported + report.quarantined + report.duplicates
    assert (report.runs, report.runs_missing_config) == (2, 1)
    saved = json.loads((tmp_path / "out" / "import_report.json").read_text())
    for key in ("read", "imported", "quarantined", "duplicates", "runs", "runs_missing_config", "blank_lines",
                "redactions"):
        assert saved[key] == getattr(report, key), key
    entries = quarantine_of(tmp_path / "out")
    assert [entry["line"] for entry in entries] == expected["quarantined"]
    assert {entry["source"] for entry in entries} == {str(tmp_path / "ws" / "fullauto-decisions.jsonl")}
    errors = {entry["line"]: entry["error"] for entry in entries}
    assert errors[5].startswith("invalid JSON at column 1") and "Unterminated" in errors[5]
    assert errors[6] == "summary.turn_count: Input should be a valid integer"
    assert errors[7] == "summary.no_progress_count: Field required"
    assert "NaN" in errors[9]
    assert errors[10] == "line holds only whitespace"
    assert errors[12] == "confidence: Input should be a valid number"
    assert errors[13] == "expected a JSON object, got list"
    assert errors[14].startswith("workspace_id: Field required")
    assert errors[15].startswith("invalid UTF-8 at byte 15")
    assert entries[-1]["raw"] == '{"reason": "caf\\xe9"}'  # the bytes are kept, escaped
    records = load_records(tmp_path / "out", "all")
    assert sorted(r.source.line for r in records) == expected["imported"]


def test_run_files_give_the_config_in_force_and_missing_ones_are_counted(tmp_path: Path) -> None:
    write_fixture(tmp_path / "ws")
    import_logs(tmp_path / "ws", "fullauto", tmp_path / "out")
    by_run = {r.run_id: r for r in load_records(tmp_path / "out", "all")}
    assert by_run[RUN_A].config == GuardrailConfig(min_confidence=0.7, max_turns=50, no_progress_limit=2)
    assert by_run[RUN_A].config_source == "run_file"
    assert by_run[RUN_B].config == GuardrailConfig() and by_run[RUN_B].config_source == "default"


def test_secrets_never_reach_any_written_file(tmp_path: Path) -> None:
    write_fixture(tmp_path / "ws")
    extra = decision(RUN_B, 5, "b5", 5, minute=15)
    extra["summary"]["turn_count"] = f"password={SECRET}"  # wrong-typed and secret: quarantined, still redacted
    with open(tmp_path / "ws" / "fullauto-decisions.jsonl", "a") as handle:
        handle.write("\n" + dumps(extra) + "\n")
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out")
    assert report.redactions == 2 and report.redactions_by_kind == {"password": 2}
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    record = next(r for r in load_records(tmp_path / "out", "all") if r.turn_id == "b2")
    assert record.summary.last_agent_message == "export OPENAI_API_KEY=[REDACTED:password]"


def test_a_single_decisions_file_joins_its_folder_and_reimport_is_stable(tmp_path: Path) -> None:
    write_fixture(tmp_path / "ws")
    first = import_logs(tmp_path / "ws" / "fullauto-decisions.jsonl", "fullauto", tmp_path / "out", seed=4)
    again = import_logs(tmp_path / "ws" / "fullauto-decisions.jsonl", "fullauto", tmp_path / "out", seed=4,
                        force=True)
    folder = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out2", seed=4)
    assert first.dataset_id == again.dataset_id == folder.dataset_id
    assert (first.runs, first.runs_missing_config) == (2, 1)
    assert dataset_info(tmp_path / "out")["dataset_id"] == first.dataset_id
    assert dataset_info(tmp_path / "out")["sources"][0]["file"] == "fullauto-decisions.jsonl"


def test_raw_lines_join_by_run_and_sequence_and_side_files_are_quarantined_apart(tmp_path: Path) -> None:
    write_fixture(tmp_path / "ws")
    raw = [{"timestamp": "2025-06-02T10:01:00Z", "sequence_id": seq, "run_id": run, "workspace_id": "ws-1",
            "thread_id": "thread-1", "turn_id": turn, "raw_prediction": f"[[ ## action ## ]]\ncontinue {turn}",
            "parse_diagnostics": None} for run, seq, turn in ((RUN_A, 1, "a1"), (RUN_A, 2, "a2"), (RUN_A, 99, "x"))]
    lines = [dumps(item) for item in raw] + ['{"sequence_id": "one"}']
    (tmp_path / "ws" / "fullauto-decisions-raw.jsonl").write_text("\n".join(lines) + "\n")
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out")
    assert (report.raw_lines, report.raw_joined, report.raw_unmatched, report.raw_quarantined) == (4, 2, 1, 1)
    assert report.quarantined == 9  # side-file lines never count in the decision counts
    side = [json.loads(line) for line in (tmp_path / "out" / "quarantine-side.jsonl").read_text().splitlines()]
    assert [(Path(entry["source"]).name, entry["line"]) for entry in side] == [("fullauto-decisions-raw.jsonl", 4)]
    by_turn = {r.turn_id: r for r in load_records(tmp_path / "out", "all")}
    assert by_turn["a2"].raw_prediction == "[[ ## action ## ]]\ncontinue a2"
    assert by_turn["b1"].raw_prediction is None


def test_own_labels_take_precedence_over_rules(tmp_path: Path) -> None:
    write_fixture(tmp_path / "ws")
    side = [{"run_id": RUN_A, "sequence_id": 2, "label": {"action": "review", "source": "simulator"}},
            {"run_id": RUN_B, "turn_id": "b1", "label": {"action": "stop", "source": "human"}},
            {"run_id": RUN_B, "sequence_id": 4, "label": {"action": "pause", "source": "simulator"}}]
    (tmp_path / "ws" / "labels.jsonl").write_text("\n".join(dumps(item) for item in side) + "\n")
    path = tmp_path / "ws" / "fullauto-decisions.jsonl"
    data = path.read_bytes()
    own = decision(RUN_B, 4, "b4", 4, minute=14, turn_plan="done")
    own["label"] = {"action": "continue", "source": "human", "reason": "kept going"}
    path.write_bytes(data[:data.rindex(b"\n") + 1] + dumps(own).encode())  # line 16 now carries its own label
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out")
    labels = {r.turn_id: r.label for r in load_records(tmp_path / "out", "all")}
    assert (labels["a2"].action, labels["a2"].source) == ("review", "simulator")
    assert (labels["b1"].action, labels["b1"].source) == ("stop", "human")
    assert (labels["b4"].action, labels["b4"].source) == ("continue", "human")  # line label beats the side file
    assert labels["a1"].source == "rule:continued_productively"  # a2 followed with progress
    assert report.labels_applied == 2
    ignored = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out2", ignore_side_labels=True)
    assert ignored.distributions["label_sources"].get("simulator") is None


def test_unusable_run_file_falls_back_to_defaults_and_is_counted(tmp_path: Path) -> None:
    write_fixture(tmp_path / "ws")
    (tmp_path / "ws" / "runs" / f"{RUN_A}.json").write_text('{"run_id": "fullauto-aaaa", "min_confidence": 0.7')
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out")
    assert (report.runs, report.runs_missing_config, report.run_files_invalid) == (2, 2, 1)
    # a run file that breaks the contract elsewhere still gives its guardrail fields
    partial = {"run_id": RUN_A, "min_confidence": 0.7, "max_turns": 50, "no_progress_limit": 2}
    (tmp_path / "ws" / "runs" / f"{RUN_A}.json").write_text(json.dumps(partial))
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out2")
    assert (report.runs_missing_config, report.run_files_invalid) == (1, 1)
    record = next(r for r in load_records(tmp_path / "out2", "all") if r.run_id == RUN_A)
    assert record.config.min_confidence == 0.7 and record.config_source == "run_file_partial"


def test_over_long_lines_crlf_and_unpaired_surrogates_are_survived(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    long_line = dumps(decision(RUN_A, 1, "a1", 1, last_agent_message="x" * 5000))
    surrogate = dumps(decision(RUN_A, 2, "a2", 2)).replace("Worked on the parser.", "half \\ud83d emoji")
    good = dumps(decision(RUN_A, 3, "a3", 3, minute=3))
    (ws / "fullauto-decisions.jsonl").write_bytes("\r\n".join([long_line, surrogate, good, ""]).encode())
    report = import_logs(ws, "fullauto", tmp_path / "out", max_line_bytes=4096)
    assert (report.read, report.imported, report.quarantined) == (3, 1, 2)
    entries = quarantine_of(tmp_path / "out")
    assert [entry["line"] for entry in entries] == [1, 2]
    assert entries[0]["error"].startswith("line too long: ")
    assert entries[0]["raw"].endswith("bytes in all]") and len(entries[0]["raw"]) < 4200
    assert "UTF-8" in entries[1]["error"]
    assert load_records(tmp_path / "out", "all")[0].source.line == 3


def test_an_integer_beyond_int64_quarantines_its_line_and_its_run_file(tmp_path: Path, monkeypatch, capsys) -> None:
    """turn_count = 10**30 on one line, max_turns = 10**30 in one run file: that line is quarantined (file, line,
    field) and that run file's defaults used; the rest is imported (it used to abort naming the staging folder)."""
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    (ws / "runs").mkdir(parents=True)
    limit = 2 ** 63 - 1  # the largest that fits is imported as it is
    lines = [decision(RUN_A, 1, "a1", 1), decision(RUN_A, 2, "a2", 10 ** 30, minute=2),
             decision(RUN_B, 1, "b1", limit, minute=3, last_agent_message="build 12345678901234567890123 passed")]
    (ws / "fullauto-decisions.jsonl").write_text("".join(dumps(line) + "\n" for line in lines))
    run_file = {"run_id": RUN_B, "workspace_id": "ws-1", "thread_id": "thread-1", "started_at": "2025-06-02T10:00:00Z",
                "decision_model": "gpt-test", "min_confidence": 0.7, "max_turns": 10 ** 30, "no_progress_limit": 2,
                "max_tokens": None}
    (ws / "runs" / f"{RUN_B}.json").write_text(json.dumps(run_file, indent=2))
    assert main(["data", "import", str(ws), "--out", str(tmp_path / "out"), "--kind", "fullauto"]) == 0
    assert capsys.readouterr().err == ""
    (entry,) = quarantine_of(tmp_path / "out")
    assert (entry["source"], entry["line"]) == (str(ws / "fullauto-decisions.jsonl"), 2)
    assert entry["error"] == ("summary.turn_count: integer 10000000000000000000... (31 digits) does not fit 64 bits "
                              "(the dataset stores int64)")
    (side,) = [json.loads(line) for line in (tmp_path / "out" / "quarantine-side.jsonl").read_text().splitlines()]
    assert side["source"] == str(ws / "runs" / f"{RUN_B}.json") and side["error"].startswith(
        "run file unusable, defaults used: max_turns: integer 10000000000000000000... (31 digits) does not fit")
    records = {r.turn_id: r for r in load_records(tmp_path / "out", "all")}
    assert sorted(records) == ["a1", "b1"] and records["b1"].summary.turn_count == limit
    assert records["b1"].config_source == "default"


def test_nothing_imported_raises_after_writing_the_report(tmp_path: Path) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_text("not json\n{\"a\": 1}\n\n")
    with pytest.raises(NothingImportedError, match=f"{path}: nothing could be imported"):
        import_logs(path, "fullauto", tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "import_report.json").read_text())
    assert (saved["read"], saved["quarantined"], saved["blank_lines"], saved["imported"]) == (2, 2, 1, 0)


def test_cli_prints_counts_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_fixture(tmp_path / "ws")
    assert main(["data", "import", str(tmp_path / "ws"), "--kind", "fullauto", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "imported 5, quarantined 9, duplicates 1" in out and "runs 2, runs_missing_config 1" in out
    for name in ("import_report.json", "quarantine.jsonl", "README.md", "dataset.json"):
        assert (tmp_path / "out" / name).is_file(), name
    card = (tmp_path / "out" / "README.md").read_text()
    assert report_id(tmp_path / "out") in card and "Guardrail rules seen" in card
    (tmp_path / "bad.jsonl").write_text("nope\n")
    assert main(["data", "import", str(tmp_path / "bad.jsonl"), "--kind", "fullauto", "--out",
                 str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path / "bad.jsonl") in err
    assert main(["data", "import", str(tmp_path / "missing"), "--kind", "fullauto", "--out", str(tmp_path / "o3")]) == 2
    assert "missing: no such file or directory" in capsys.readouterr().err


def report_id(out: Path) -> str:
    return json.loads((out / "import_report.json").read_text())["dataset_id"]


def test_committed_sample_imports_cleanly_with_simulator_labels(tmp_path: Path) -> None:
    report = import_logs(REPO / "datasets" / "sample" / "fullauto", "fullauto", tmp_path / "out")
    assert report.read == report.imported >= 200 and report.quarantined == report.duplicates == 0
    assert report.runs_missing_config == 0 and report.raw_joined == report.imported
    assert report.distributions["label_sources"] == {"simulator": report.imported}
    assert all(report.splits[name] > 0 for name in ("train", "dev", "test"))
    # a pause or stop ends a run and the thread resumes in a new one: the splits hold whole threads
    records = {name: load_records(tmp_path / "out", name) for name in ("train", "dev", "test")}
    threads = {name: {r.thread_id for r in items} for name, items in records.items()}
    assert sum(len(found) for found in threads.values()) == len(set().union(*threads.values()))
    runs_per_thread = Counter(thread for thread, _ in {(r.thread_id, r.run_id) for items in records.values()
                                                       for r in items})
    assert max(runs_per_thread.values()) > 1  # the sample has threads of several runs, so this is a real check


# -- labeling rules ----------------------------------------------------------------------------------------------

def _record(seq: int, action: str, minute: int, model_action: str | None = None, rule: str | None = None,
            **summary_fields: object) -> DecisionRecord:
    fields = summary(f"t{seq}", seq, **summary_fields)
    model_action = model_action or action
    audit = GuardrailAudit(triggered=rule is not None, rule=rule, original_action=model_action,
                           original_confidence=0.8, enforced_action=action, enforced_confidence=0.8)
    logged = LoggedDecision(action=action, confidence=0.8, model_action=model_action, model_confidence=0.8,
                            next_input_preview="Continue with step 2" if action == "continue" else "")
    return DecisionRecord.build(FullAutoTurnSummary(**fields), GuardrailConfig(), run_id="r", sequence_id=seq,
                                timestamp=f"2025-06-02T10:{minute:02d}:00Z", logged=logged, guardrail=audit)


def _event(minute: int, event_type: str) -> RunEvent:
    return RunEvent(timestamp=f"2025-06-02T10:{minute:02d}:30Z", sequence_id=minute, event_type=event_type, data=None)


def test_labeling_rules_look_at_what_happened_next() -> None:
    records = [
        _record(1, "continue", 1),                                                  # next turn productive
        _record(2, "pause", 2, model_action="continue", rule="low_confidence"),     # resumed at once, unchanged
        _record(3, "pause", 4, pending_approvals="1"),                              # approval pending
        _record(4, "pause", 30, model_action="review", rule="review_requested",
                last_guidance_directive="Approved, go on"),                         # a human acted next
        _record(5, "stop", 50, rule="turn_failed", last_turn_status="failed", last_guidance_directive="Use v2"),
    ]
    events = [_event(2, "run_paused"), _event(3, "run_resumed"), _event(4, "run_paused"),
              _event(29, "approval_granted"), _event(30, "run_paused"), _event(31, "user_input"),
              _event(50, "run_stopped")]
    labels = label_run(records, events)
    assert [(label.action, label.source) for label in labels] == [
        ("continue", "rule:continued_productively"),
        ("continue", "rule:resumed_unchanged"),
        ("pause", "rule:pending_human_input"),
        ("review", "rule:human_intervened"),
        ("stop", "rule:turn_status"),
    ]
    assert labels[0].next_input == "Continue with step 2"
    assert all(0 < label.confidence <= 1 for label in labels)


def test_labeling_rules_are_configurable_and_never_guess() -> None:
    slow = [_record(1, "pause", 1, model_action="continue", rule="low_confidence"), _record(2, "continue", 40)]
    assert label_run(slow, [_event(1, "run_paused"), _event(39, "run_resumed")])[0] is None  # not "at once"
    wide = LabelRuleConfig(resume_window_s=3600)
    assert label_run(slow, [_event(39, "run_resumed")], wide)[0].source == "rule:resumed_unchanged"
    only_status = LabelRuleConfig(rules=["turn_status"])
    assert label_run(slow, [], only_status) == [None, None]
    stopped = [_record(1, "stop", 1, turn_plan='{"plan": [{"step": "a", "status": "completed"}]}')]
    assert label_run(stopped, [])[0].source == "rule:stopped_at_end"
    kept = _record(1, "continue", 1).model_copy(update={"label": OutcomeLabel(action="stop", source="human")})
    assert label_run([kept], [])[0].source == "human"
    with pytest.raises(ValueError, match="unknown labeling rule"):
        LabelRuleConfig(rules=["vibes"])


def test_rule_labels_agree_with_simulator_truth(tmp_path: Path) -> None:
    simulate_workspace(tmp_path / "ws", runs=60, seed=21)
    truth = import_logs(tmp_path / "ws", "fullauto", tmp_path / "truth")
    rules = import_logs(tmp_path / "ws", "fullauto", tmp_path / "rules", ignore_side_labels=True)
    assert truth.imported == rules.imported
    true_labels = {r.record_id: r.label.action for r in load_records(tmp_path / "truth", "all")}
    labeled = [r for r in load_records(tmp_path / "rules", "all") if r.label is not None]
    agree = Counter(r.label.action == true_labels[r.record_id] for r in labeled)
    coverage = len(labeled) / rules.imported
    accuracy = agree[True] / len(labeled)
    assert coverage >= 0.7, coverage
    assert accuracy >= 0.9, accuracy


def test_unreadable_files_are_named_not_crashed_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guidebench.data import registry

    write_fixture(tmp_path / "ws")
    events = tmp_path / "ws" / "runs" / f"{RUN_A}_events.jsonl"
    events.write_text("")
    real_read_lines = registry.read_lines
    locked = {events}

    def read_lines(path, *args, **kwargs):
        if Path(path) in locked:  # what open() raises on a file without read permission
            raise PermissionError(13, "Permission denied", str(path))
        return real_read_lines(path, *args, **kwargs)

    monkeypatch.setattr(registry, "read_lines", read_lines)
    report = import_logs(tmp_path / "ws", "fullauto", tmp_path / "out")
    assert report.imported == 5 and report.side_files_unreadable == 1
    assert any(f"{events}: cannot read: Permission denied" in note for note in report.notes)
    locked.add(tmp_path / "ws" / "fullauto-decisions.jsonl")
    assert main(["data", "import", str(tmp_path / "ws"), "--kind", "fullauto", "--out", str(tmp_path / "o2")]) == 2


@pytest.mark.parametrize("spool", ["decisions", "raw", "labels"])
def test_a_full_disk_is_said_to_be_the_disk_not_the_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], spool: str) -> None:
    # Spooling a line the logs gave (the decisions, or a side file's) fails on the disk: the import stops and says
    # so; neither "cannot read" nor a side file noted unreadable while its remaining lines are lost.
    import errno

    from guidebench.data.spool import GroupedSpool

    simulate_workspace(tmp_path / "ws", runs=3, seed=4)
    append = GroupedSpool.append

    def full(self, group, text):
        if self.path.name.startswith(f"{spool}-"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return append(self, group, text)

    monkeypatch.setattr(GroupedSpool, "append", full)
    out = tmp_path / "out"
    assert main(["data", "import", str(tmp_path / "ws"), "--kind", "fullauto", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (f"guidebench: error: cannot write {out}: the disk is full (No space left on device), not a fault of "
                   "the input; free some space (or give --out, GUIDEBENCH_HOME another disk) and run the command "
                   "again\n")
    assert not out.exists()
