"""The loop runner's planner archive through the import: joined, checked against the rebuild, or quarantined.

Repositories are written in the runner's layout (`<repo>/experiments/log.jsonl` and `<repo>/.advisor/`), the
archives by `guidebench.simulators.advisor_archive` in the exact shapes of `tools/loop_runner.py`; every bad-input
case of issue 39 has its test here, and none gives a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from archive_support import make_repo, plans, run
from programs.planner_logged import PlannerLogged
from programs.inputs import planner_inputs


@pytest.mark.parametrize("mode", ["manual", "codex", "codex_api"])
def test_every_mode_joins_and_the_record_keeps_the_real_packet_and_directive(tmp_path: Path, mode: str) -> None:
    root, episode = make_repo(tmp_path / "repo", mode=mode)
    n = len(plans(root))
    report, records, side = run(root, tmp_path / "ds")
    assert n >= 5 and report["archive_joined"] == report["packets_archived"] == n
    assert report["distributions"]["archive_modes"] == {mode: n}
    archived = [r for r in records if r.plan is not None]
    assert len(archived) == n and all(r.packet_source == "archive" and r.plan.mode == mode for r in archived)
    record = archived[0]
    packet = json.loads((root / record.plan.packet_file).read_text())
    assert record.packet.performance_profile.model_dump()["dominant_engine"] == packet["performance_profile"][
        "dominant_engine"]
    assert record.packet.model_extra["branch"] == record.outcome.branch
    assert record.plan.directive == episode.directives[record.iteration_id - 1]
    # the rebuild equals the runner's packet on every field the log can give
    assert all(row["agree"] == row["compared"] == n for row in report["archive_agreement"].values())
    assert not side


def test_paths_are_relative_to_the_imported_folder_and_files_exist(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo", mode="codex")
    _, records, _ = run(root, tmp_path / "ds")
    record = next(r for r in records if r.plan is not None)
    assert record.plan.packet_file.startswith(".advisor/codex/iter_") and (root / record.plan.packet_file).is_file()
    assert record.plan.directive_file.endswith("_last_message.txt") and (root / record.plan.directive_file).is_file()


def test_planner_logged_replays_the_archived_directive_with_its_forecast(tmp_path: Path) -> None:
    root, episode = make_repo(tmp_path / "repo")
    _, records, _ = run(root, tmp_path / "ds")
    record = next(r for r in records if r.plan is not None)
    pred = PlannerLogged()(**planner_inputs(record))
    wanted = episode.directives[record.iteration_id - 1]
    assert pred.directive.model_dump(mode="json") == wanted and pred.logged_forecast is True
    rebuilt = next(r for r in records if r.plan is None) if any(r.plan is None for r in records) else None
    if rebuilt is not None:
        assert not getattr(PlannerLogged()(**planner_inputs(rebuilt)), "logged_forecast", False)


def test_effect_calibration_is_scored_for_the_archived_directive_only(tmp_path: Path) -> None:
    from evals import metrics_planner
    from evals.cycles import SimulatorCycles

    root, _ = make_repo(tmp_path / "repo")
    _, records, _ = run(root, tmp_path / "ds")
    for record in records[:6]:
        pred = PlannerLogged()(**planner_inputs(record))
        outcome = metrics_planner.outcome_of(record, pred, cycles=SimulatorCycles(), replays_log=True, rollouts=4)
        scores = metrics_planner.score_outcome(outcome)
        assert (scores["effect_calibration"] == scores["effect_calibration"]) == (record.plan is not None)


def test_log_line_without_archive_is_kept_and_marked_rebuilt(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    gone = sorted(plans(root))[2]
    shutil.rmtree(plans(root)[gone].parent)
    report, records, _ = run(root, tmp_path / "ds")
    record = next(r for r in records if r.iteration_id == gone)
    assert record.plan is None and record.packet_source == "rebuilt" and report["packets_rebuilt"] >= 1
    assert "plan" not in json.loads(record.model_dump_json())  # a rebuilt record dumps as before archives


def test_archive_without_log_line_is_quarantined(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    log = root / "experiments" / "log.jsonl"
    lines = log.read_text().splitlines()
    last = json.loads(lines[-1])["iteration_id"]
    log.write_text("\n".join(lines[:-1]) + "\n")
    report, _, side = run(root, tmp_path / "ds")
    if last in plans(root):
        assert report["archive_without_log_line"] == 1
        assert any(f"iteration {last} was planned" in s["error"] for s in side)


def test_directive_not_json_keeps_its_packet_and_one_failing_the_runner_schema_is_quarantined(tmp_path: Path
                                                                                               ) -> None:
    root, _ = make_repo(tmp_path / "repo")
    first, second = sorted(plans(root))[:2]
    (plans(root)[first].parent / "directive.json").write_text("{not json\n")
    bad = json.loads((plans(root)[second].parent / "directive.json").read_text())
    bad["risk"] = "Extreme"
    (plans(root)[second].parent / "directive.json").write_text(json.dumps(bad))
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_directive_unreadable"] == 1 and report["archive_directive_invalid"] == 1
    assert any("directive not JSON" in s["error"] and s["source"].endswith("directive.json") for s in side)
    assert any("Directive.risk" in s["error"] for s in side)
    by_iteration = {r.iteration_id: r for r in records}
    # the planner saw that packet: it is kept, without the directive it answered; the refused plan is not
    assert by_iteration[first].plan is not None and by_iteration[first].plan.directive is None
    assert by_iteration[second].plan is None


def test_codex_answer_in_a_json_fence_is_read_as_the_runner_reads_it(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo", mode="codex")
    packet = plans(root)[sorted(plans(root))[0]]
    answer = Path(str(packet).replace("_packet.json", "_last_message.txt"))
    answer.write_text("```json\n" + answer.read_text() + "\n```\n")
    report, _, _ = run(root, tmp_path / "ds")
    assert report["archive_directive_unreadable"] == 0 and report["archive_joined"] == len(plans(root))


def test_codex_plan_without_an_answer_keeps_its_packet_and_counts_the_answer(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo", mode="codex_api")
    iteration = sorted(plans(root))[0]
    Path(str(plans(root)[iteration]).replace("_packet.json", "_last_message.txt")).unlink()
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_directive_unreadable"] == 1 and any("never answered" in s["error"] for s in side)
    assert report["archive_joined"] == len(plans(root))
    record = next(r for r in records if r.iteration_id == iteration)
    assert record.plan.directive is None and "directive" not in json.loads(record.model_dump_json())["plan"]


def test_packet_not_json_is_quarantined(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    plans(root)[sorted(plans(root))[0]].write_text("[1, 2")
    report, _, side = run(root, tmp_path / "ds")
    assert report["archive_packet_unreadable"] == 1 and any("packet not JSON" in s["error"] for s in side)


@pytest.mark.parametrize("key, value, words", [
    ("branch", "iter/9999-other", "packet branch"),
    ("base_sha", "f" * 40, "packet base_sha"),
    ("iteration_id", 4242, "packet iteration_id 4242"),
    ("best_cycles", 1, "packet best_cycles 1"),
])
def test_packet_contradicting_its_log_line_is_quarantined(tmp_path: Path, key: str, value: Any, words: str) -> None:
    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[1]
    file = plans(root)[iteration]
    packet = json.loads(file.read_text())
    packet[key] = value
    file.write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_contradicts_log"] == 1 and any(words in s["error"] for s in side)
    assert next(r for r in records if r.iteration_id == iteration).plan is None


def test_two_archives_for_one_iteration_are_both_quarantined(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[0]
    manual = plans(root)[iteration].parent
    codex = root / ".advisor" / "codex"
    codex.mkdir()
    shutil.copyfile(manual / "packet.json", codex / f"iter_{iteration:04d}_packet.json")
    shutil.copyfile(manual / "directive.json", codex / f"iter_{iteration:04d}_last_message.txt")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_duplicate_iteration"] == 2
    assert sum("2 archives for iteration" in s["error"] for s in side) == 2
    assert next(r for r in records if r.iteration_id == iteration).plan is None


@pytest.mark.parametrize("change, words, kept", [
    (lambda p: p.pop("tight_lb_cycles"), "tight_lb_cycles: missing", True),
    (lambda p: p.update(cp_lb_cycles="fast"), "cp_lb_cycles: not a number", False),
    (lambda p: p.update(tight_lb_cycles=0), "a zero bound divides", True),
    (lambda p: p.clear() or p.update(error="Failed to import perf_takehome/problem"), "could not compute", True),
])
def test_unusable_profile_is_counted_with_its_reason(tmp_path: Path, change: Any, words: str, kept: bool) -> None:
    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[0]
    file = plans(root)[iteration]
    packet = json.loads(file.read_text())
    change(packet["performance_profile"])
    file.write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_profiles_unusable"] == 1 and any(words in s["error"] for s in side)
    record = next(r for r in records if r.iteration_id == iteration)
    assert record.plan is not None  # the rest of the archived packet is kept
    assert (record.packet.performance_profile is not None) == kept


def test_advisor_that_is_a_file_rebuilds_every_packet(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    shutil.rmtree(root / ".advisor")
    (root / ".advisor").write_text("not a folder\n")
    report, records, _ = run(root, tmp_path / "ds")
    assert report["archive_folder_unusable"] == 1 and report["packets_rebuilt"] == len(records)
    assert any("a file, not a folder" in note for note in report["notes"])


def test_advisor_symlink_loop_rebuilds_every_packet(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    shutil.rmtree(root / ".advisor")
    os.symlink(root / ".advisor", root / ".advisor")
    report, _, _ = run(root, tmp_path / "ds")
    assert report["archive_folder_unusable"] == 1 and any("symlink loop" in n for n in report["notes"])


def test_archives_of_two_repositories_mixed_in_one_folder(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo", index=0)
    other, _ = make_repo(tmp_path / "other", index=1)
    theirs = plans(other)[sorted(plans(other))[0]].parent
    mine = plans(root)
    free = max(mine) + 50
    shutil.copytree(theirs, root / ".advisor" / "manual_archive" / f"iter_{free:04d}")
    packet_file = root / ".advisor" / "manual_archive" / f"iter_{free:04d}" / "packet.json"
    packet = json.loads(packet_file.read_text())
    packet["iteration_id"] = free
    packet_file.write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n")
    report, _, side = run(root, tmp_path / "ds")
    assert report["archive_other_repository"] == 1
    assert any("mixed in one folder" in s["error"] for s in side)
    assert report["archive_joined"] == len(mine)


def test_a_folder_of_repositories(tmp_path: Path) -> None:
    make_repo(tmp_path / "repos" / "a", index=0, mode="manual")
    make_repo(tmp_path / "repos" / "b", index=1, mode="codex")
    n = len(plans(tmp_path / "repos" / "a")) + len(plans(tmp_path / "repos" / "b"))
    report, records, _ = run(tmp_path / "repos", tmp_path / "ds")
    assert report["archive_folders"] == 2 and report["archive_joined"] == n
    assert {r.episode_id for r in records} == {"a/experiments/log.jsonl", "b/experiments/log.jsonl"}


def test_a_repeated_log_line_takes_the_archive_once(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    log = root / "experiments" / "log.jsonl"
    lines = log.read_text().splitlines()
    first = sorted(plans(root))[0]
    at = next(i for i, text in enumerate(lines) if json.loads(text)["iteration_id"] == first)
    lines.insert(at + 1, lines[at])
    log.write_text("\n".join(lines) + "\n")
    _, records, _ = run(root, tmp_path / "ds")
    same = [r for r in records if r.iteration_id == first]
    assert [r.plan is not None for r in same] == [True, False]


def test_logs_without_advisor_give_the_same_dataset_as_before(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    plain = tmp_path / "plain"
    (plain / "experiments").mkdir(parents=True)
    shutil.copyfile(root / "experiments" / "log.jsonl", plain / "experiments" / "log.jsonl")
    report, records, _ = run(plain, tmp_path / "ds")
    assert report["archive_folders"] == 0 and report["packets_rebuilt"] == len(records)
    assert all(r.plan is None and "plan" not in json.loads(r.model_dump_json()) for r in records)


def test_agreement_names_the_field_where_the_rebuild_differs(tmp_path: Path, capsys: Any) -> None:
    from guidebench.cli import main

    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[-1]
    file = plans(root)[iteration]
    packet = json.loads(file.read_text())
    packet["experiment_log_tail"] = packet["experiment_log_tail"][-3:]  # planned with --experiment-log-tail-lines 3
    file.write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n")
    assert main(["data", "import", str(root), "--kind", "experiments", "--out", str(tmp_path / "ds")]) == 0
    report = json.loads((tmp_path / "ds" / "import_report.json").read_text())
    n = report["archive_joined"]
    assert report["archive_agreement"]["experiment_log_tail"] == {"compared": n, "agree": n - 1}
    assert report["archive_agreement"]["best_cycles"] == {"compared": n, "agree": n}
    printed = capsys.readouterr().out
    assert f"agree on every field but experiment_log_tail {n - 1}/{n}" in printed
