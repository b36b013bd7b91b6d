"""Manual mode: `guidebench runner plan` plans the packet `manual-pack` wrote on `plan/NNNN-slug`; `manual-apply`
archives it rewritten on `iter/NNNN-slug` with a later timestamp; the import still joins the sidecar line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner_support import SAMPLE_ADVISOR, kernel_repo
from runtime.exploration import ExplorationSettings

from guidebench.cli import main
from guidebench.data import import_logs


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    from frozen_support import export_program

    root = tmp_path_factory.mktemp("manual-export")
    settings = ExplorationSettings(policy="epsilon", epsilon=0.3, floor=0.05, seed=3)
    return export_program("planner.rules", root / "planner", name="planner", exploration=settings).path


def _dump(value: dict) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _manual_iteration(repo: Path, export: Path, *, change_archive=None) -> dict:
    """manual-pack's files, `guidebench runner plan`, then manual-apply's archive and record's log line, as the
    runner writes them; returns the import report."""
    packet = json.loads((SAMPLE_ADVISOR / "iter_0001_packet.json").read_text())
    packet.update(iteration_id=1, branch="plan/0001-next", timestamp_utc="2026-12-01T10:00:00Z")
    packets = repo / "planner_packets"
    packets.mkdir()
    (packets / "packet.json").write_text(_dump(packet), encoding="utf-8")
    (packets / "directive_schema.json").write_text((SAMPLE_ADVISOR / "iter_0001_schema.json").read_text())
    assert main(["runner", "plan", str(packets / "packet.json"), "--module", str(export),
                 "--out", str(packets / "directive.json")]) == 0
    directive = json.loads((packets / "directive.json").read_text())
    # manual-apply: the iter/* branch, the apply time (iteration, base branch and sha unchanged here)
    applied = {**packet, "branch": "iter/0001-next", "timestamp_utc": "2026-12-01T10:20:00Z"}
    if change_archive is not None:
        change_archive(applied)
    archive = repo / ".advisor" / "manual_archive" / "iter_0001"
    archive.mkdir(parents=True)
    (archive / "packet.json").write_text(_dump(applied), encoding="utf-8")
    (archive / "directive.json").write_text(_dump(directive), encoding="utf-8")
    (archive / "prompt.md").write_text("prompt\n", encoding="utf-8")
    best = packet["best_cycles"]
    entry = {"iteration_id": 1, "timestamp_utc": "2026-12-01T10:40:00Z", "branch": "iter/0001-next",
             "base_branch": packet["base_branch"], "base_sha": packet["base_sha"], "head_sha": "f" * 40,
             "files_changed": ["perf_takehome.py"], "scope_ok": True, "scope_disallowed_files": [],
             "scope_forbidden_files": [], "tests_diff_empty": True, "correctness_pass": True, "valid": True,
             "cycles": best - 5, "best_before": best, "delta_vs_best": -5, "new_best": True, "threshold_met": False,
             "strategy_tags": [directive["strategy_family"], *directive["strategy_modifiers"]][:4],
             "hypothesis": directive["primary_hypothesis"], "change_summary": directive["change_summary"],
             "result_summary": f"PASS correctness; cycles={best - 5}", "merged_to_main": False,
             "notes": directive["objective"]}
    (repo / "experiments" / "log.jsonl").write_text(json.dumps(entry, sort_keys=True) + "\n", encoding="utf-8")
    return import_logs(repo, "experiments", repo.parent / "data", progress=False).model_dump()


def test_a_manual_iteration_joins_its_sidecar_line_after_apply(tmp_path, export, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    repo = kernel_repo(tmp_path / "kernel")
    report = _manual_iteration(repo, export)
    line = json.loads((repo / "experiments" / "planner-decisions.jsonl").read_text())
    assert line["iteration_id"] == 1 and "packet_stable_hash" in line
    assert report["planner_joined"] == 1 and report["archive_joined"] == 1
    assert report["quarantined"] == 0 and report["side_quarantined"] == 0


def test_a_packet_that_changed_beyond_the_apply_does_not_join(tmp_path, export, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    repo = kernel_repo(tmp_path / "kernel")
    report = _manual_iteration(repo, export, change_archive=lambda p: p.update(plateau_valid_iters_since_best=9))
    assert report["archive_joined"] == 1 and report["planner_joined"] == 0
    assert report["side_quarantined"] == 1  # the line is kept in quarantine with its reason, never dropped


def test_plan_refuses_a_packet_it_cannot_read(tmp_path, export, capsys):
    repo = kernel_repo(tmp_path / "kernel")
    (repo / "planner_packets").mkdir()
    (repo / "planner_packets" / "packet.json").write_text("{}", encoding="utf-8")
    out = repo / "planner_packets" / "directive.json"
    assert main(["runner", "plan", str(repo / "planner_packets" / "packet.json"), "--module", str(export),
                 "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "iteration_id" in err[0] and not out.exists()
