"""`guidebench run-loop`: a frozen module drives the simulator; its logs read back through `data import`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frozen_support import export_program
from guidebench.cli import main
from runtime.fullauto import DecisionLogLine, RawDecisionLogLine, RunFile


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return export_program("full_auto.predict", tmp_path_factory.mktemp("module") / "X").path


def read_lines(path: Path, model) -> list:
    return [model.model_validate_json(line) for line in path.read_text().splitlines()]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_logs(logs: Path, package: str) -> list[DecisionLogLine]:
    """The folder is the original layout, every line valid, raw lines joined to decisions."""
    decisions = read_lines(logs / "fullauto-decisions.jsonl", DecisionLogLine)
    raw = read_lines(logs / "fullauto-decisions-raw.jsonl", RawDecisionLogLine)
    assert decisions and [(d.run_id, d.sequence_id) for d in decisions] == [(r.run_id, r.sequence_id) for r in raw]
    run_files = sorted((logs / "runs").glob("*.json"))
    assert {RunFile.model_validate_json(p.read_text()).run_id for p in run_files} == {d.run_id for d in decisions}
    for path in run_files:
        assert json.loads(path.read_text())["decision_model"].startswith(f"{package}:")
        assert (path.parent / f"{path.stem}_events.jsonl").is_file()
    assert all(d.model.startswith(f"{package}:") for d in decisions)
    assert len((logs / "labels.jsonl").read_text().splitlines()) == len(decisions)
    return decisions


def test_run_loop_writes_the_original_layout_that_data_import_reads_back(exported: Path, tmp_path: Path, capsys):
    logs = tmp_path / "logs"
    code, out, err = run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "3", "--seed", "7",
                             "--out", str(logs), "--lm", "fake")
    assert code == 0, err
    decisions = check_logs(logs, "X@0.1.0")
    assert f"X@0.1.0: 3 runs, {len(decisions)} decisions" in out
    assert all(d.model == "X@0.1.0:fake/rules" for d in decisions)
    for decision in decisions:  # the enforced action is logged, the model's own one is in the audit
        assert decision.guardrail is not None and decision.action == decision.guardrail.enforced_action
    raw = read_lines(logs / "fullauto-decisions-raw.jsonl", RawDecisionLogLine)
    assert all(r.raw_prediction["action"] == d.guardrail.original_action for r, d in zip(raw, decisions))

    dataset = tmp_path / "dataset"
    code, out, err = run_cli(capsys, "data", "import", str(logs), "--kind", "fullauto", "--out", str(dataset))
    assert code == 0, err
    report = json.loads((dataset / "import_report.json").read_text())
    assert report["imported"] == len(decisions) and report["quarantined"] == 0
    from evals.data import load_records

    records = load_records(dataset, "all")
    assert len(records) == len(decisions) and all(r.label is not None for r in records)
    by_key = {(d.run_id, d.sequence_id): d for d in decisions}
    for record in records:
        logged = by_key[(record.run_id, record.sequence_id)]
        assert record.logged.action == logged.action and record.logged.model_action == logged.guardrail.original_action


def test_same_seed_same_logs(exported: Path, tmp_path: Path, capsys):
    for name in ("a", "b"):
        assert run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "2", "--seed", "11",
                       "--out", str(tmp_path / name), "--lm", "fake")[0] == 0
    for relative in ("fullauto-decisions.jsonl", "fullauto-decisions-raw.jsonl", "labels.jsonl"):
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes()


def test_guardrail_flags_apply_to_every_run(exported: Path, tmp_path: Path, capsys):
    logs = tmp_path / "logs"
    assert run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "2", "--seed", "1", "--out", str(logs),
                   "--lm", "fake", "--max-turns", "2")[0] == 0
    decisions = check_logs(logs, "X@0.1.0")
    for run_file in (logs / "runs").glob("*.json"):
        assert json.loads(run_file.read_text())["max_turns"] == 2
    assert max(d.summary.turn_count for d in decisions) <= 2
    assert any(d.guardrail.rule == "max_turns" and d.action == "stop" for d in decisions)


def test_a_rule_module_runs_without_an_lm(tmp_path: Path, capsys):
    module = export_program("full_auto.rules", tmp_path / "rules", name="rules").path
    logs = tmp_path / "logs"
    assert run_cli(capsys, "run-loop", "--module", str(module), "--runs", "1", "--out", str(logs))[0] == 0
    decisions = check_logs(logs, "rules@0.1.0")
    assert decisions[0].model == "rules@0.1.0:program:full_auto.rules"


def test_user_errors(exported: Path, tmp_path: Path, capsys):
    planner = export_program("planner.rules", tmp_path / "planner", name="plan").path
    code, _, err = run_cli(capsys, "run-loop", "--module", str(planner), "--out", str(tmp_path / "o1"))
    assert code == 2 and "is a planner module; run-loop drives Full Auto modules" in err
    code, _, err = run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "0", "--out", str(tmp_path / "o2"))
    assert code == 2 and "argument --runs: 0: expected a whole number at least 1" in err and err.count("\n") == 1
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    code, _, err = run_cli(capsys, "run-loop", "--module", str(exported), "--out", str(other), "--lm", "fake")
    assert code == 2 and "holds other files" in err and (other / "keep.txt").exists()
    logs = tmp_path / "logs"
    assert run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "1", "--out", str(logs), "--lm", "fake")[0] == 0
    code, _, err = run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "1", "--out", str(logs), "--lm", "fake")
    assert code == 2 and "pass --force" in err
    assert run_cli(capsys, "run-loop", "--module", str(exported), "--runs", "1", "--seed", "2", "--out", str(logs),
                   "--lm", "fake", "--force")[0] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".logs.")]
    (planner / "program.json").write_text("{}\n")
    code, _, err = run_cli(capsys, "run-loop", "--module", str(planner), "--out", str(tmp_path / "o3"))
    assert code == 2 and "refused: checksum mismatch: program.json" in err and err.count("\n") == 1


@pytest.mark.parametrize("flag, value, expected", [
    ("--min-confidence", "5", "5: expected a number from 0 to 1"),
    ("--min-confidence", "-0.1", "-0.1: expected a number from 0 to 1"),
    ("--min-confidence", "nan", "nan: expected a number from 0 to 1"),
    ("--max-turns", "-1", "-1: expected a whole number at least 0"),
    ("--max-turns", "2.5", "'2.5' is not a whole number"),
    ("--runs", "-3", "-3: expected a whole number at least 1"),
    ("--shadow-deadline", "0", "0: expected a number above 0"),
    ("--shadow-deadline", "inf", "inf: expected a number above 0"),
])
def test_out_of_range_numbers_are_refused_in_one_line_before_the_loop_starts(flag, value, expected, tmp_path, capsys):
    out = tmp_path / "logs"
    code, stdout, err = run_cli(capsys, "run-loop", "--out", str(out), "--lm", "fake", flag, value)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert err.startswith(f"guidebench run-loop: error: argument {flag}: {expected}") and "--help" in err, err
    assert not out.exists()


def test_the_limits_themselves_are_accepted(tmp_path, capsys):
    # max_turns 0 is the guardrail's "no limit"; min_confidence 0 and 1 are the ends of its range.
    for turns, confidence in (("0", "0"), ("1", "1")):
        out = tmp_path / f"logs-{turns}"
        code, _, err = run_cli(capsys, "run-loop", "--runs", "1", "--out", str(out), "--max-turns", turns,
                               "--min-confidence", confidence)
        assert code == 0, err


@pytest.mark.slow
def test_real_embedded_model_end_to_end(tmp_path: Path, capsys):
    """Export the original program, drive a simulated run with the local Gemma model, import the logs."""
    module = export_program("full_auto.predict", tmp_path / "gemma", name="gemma").path
    logs = tmp_path / "logs"
    # One turn per run keeps this to a single model call (each prompt is ~2.3k tokens with the seed demos);
    # a stop ends the run, and in seed 3's session the user does not resume it (others resume up to 5 times).
    code, out, err = run_cli(capsys, "run-loop", "--module", str(module), "--runs", "1", "--seed", "3",
                             "--out", str(logs), "--lm", "local", "--max-turns", "1")
    assert code == 0, err
    decisions = check_logs(logs, "gemma@0.1.0")
    assert decisions[0].model.startswith("gemma@0.1.0:local/") and len(decisions) == 1
    assert decisions[0].guardrail.rule == "max_turns" and decisions[0].action == "stop"
    raw = read_lines(logs / "fullauto-decisions-raw.jsonl", RawDecisionLogLine)
    # The model answered in the signature's format, or its failure was logged and paused safely.
    for line, decision in zip(raw, decisions):
        if line.parse_diagnostics:
            assert decision.guardrail.original_action == "pause" and decision.guardrail.original_confidence == 0.0
        else:
            assert line.raw_prediction["action"] in ("continue", "pause", "stop", "review")
    dataset = tmp_path / "dataset"
    assert run_cli(capsys, "data", "import", str(logs), "--kind", "fullauto", "--out", str(dataset))[0] == 0
    assert json.loads((dataset / "import_report.json").read_text())["imported"] == len(decisions)


def test_a_shadow_that_calls_an_lm_sets_up_the_same_lm_in_its_own_process(exported: Path, tmp_path: Path, capsys):
    from runtime.shadow_log import SHADOW_FILE, ShadowDecisionLine

    logs = tmp_path / "logs"
    code, out, err = run_cli(capsys, "run-loop", "--shadow", str(exported), "--runs", "2", "--seed", "3",
                             "--out", str(logs), "--lm", "fake")
    assert code == 0, err
    lines = read_lines(logs / SHADOW_FILE, ShadowDecisionLine)
    decisions = read_lines(logs / "fullauto-decisions.jsonl", DecisionLogLine)
    assert len(lines) == len(decisions) and {line.status for line in lines} == {"ok"}  # the fake LM answered there
    assert f"ok {len(lines)}" in out
