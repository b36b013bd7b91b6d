"""benchmarks/bench_volume.py: its report from the figures of finished sizes (no step is run here)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_volume import STEPS, exponent, write_reports


def _row(k: int) -> dict:
    steps = {step.name: {"seconds": 2.0 * k, "cpu_seconds": 1.5 * k, "peak_mb": 100.0 + k,
                         "load_before": [1.0, 1.0, 1.0], "load_after": [2.0, 1.0, 1.0]} for step in STEPS}
    return {"k": k, "fullauto_decisions": 1000 * k, "experiment_lines": 800 * k, "steps": steps}


def test_growth_exponents_are_fitted_on_log_log() -> None:
    assert exponent([(1000, 2.0), (10000, 20.0)]) == 1.0
    assert exponent([(1000, 2.0), (10000, 200.0)]) == 2.0
    assert exponent([(1000, 2.0)]) is None


def test_the_report_replaces_its_own_section_and_keeps_the_rest_of_the_page(tmp_path: Path) -> None:
    page = tmp_path / "scale.md"
    page.write_text("<!-- bench:volume -->\nold tables\n<!-- /bench:volume -->\n\n## Written by hand\n\nkept\n",
                    encoding="utf-8")
    rows = [_row(1), _row(10)]
    write_reports(rows, "python -m benchmarks.bench_volume --sizes 1,10", tmp_path)
    text = page.read_text(encoding="utf-8")
    assert "old tables" not in text and text.endswith("## Written by hand\n\nkept\n")
    line = next(row for row in text.splitlines() if row.startswith("| fullauto import |"))
    # 10x: 20 s wall, 15 s CPU, 110 MB on 10,000 decisions: linear time; 9 MB more for 9,000 more decisions
    assert line == "| fullauto import | 2.0 / 1.5 (101.0) | 20.0 / 15.0 (110.0) | 2.00 | 1.50 | 1.00 | 1.0 | 1.0 | 0.04 |"
    assert "| 10x | 10,000 | 8,000 | 1.0-2.0 |" in text
    assert json.loads((tmp_path / "scale.json").read_text())["sizes"] == rows
    assert (tmp_path / "scale.png").stat().st_size > 0
    fresh = tmp_path / "fresh"
    write_reports(rows, "python -m benchmarks.bench_volume --sizes 1,10", fresh)  # a new page is only the section
    assert (fresh / "scale.md").read_text(encoding="utf-8").startswith("<!-- bench:volume -->\n# Scale:")


def test_a_step_over_the_memory_budget_and_the_steps_after_it_are_said_so(tmp_path: Path) -> None:
    rows = [_row(1), _row(10)]
    rows[1]["steps"]["full_auto.learned compile"] = {"over_budget": True, "seconds": 95.0, "peak_mb": 3100.0,
                                                     "budget_mb": 3072, "load_before": [1.0], "load_after": [1.0]}
    rows[1]["steps"]["export"] = {"skipped": "needs full_auto.learned compile"}
    write_reports(rows, "python -m benchmarks.bench_volume --sizes 1,10", tmp_path)
    text = (tmp_path / "scale.md").read_text(encoding="utf-8")
    compile_line = next(row for row in text.splitlines() if row.startswith("| full_auto.learned compile |"))
    assert "stopped at 3100 MB after 95 s (budget 3072)" in compile_line and compile_line.endswith("| n/a | n/a | n/a |")
    assert "skipped (needs full_auto.learned compile)" in text


def test_a_process_tree_is_measured_from_proc() -> None:
    import os

    from benchmarks.bench_volume import _tree_rss_mb

    assert 1 < _tree_rss_mb(os.getpid()) < 100_000


def test_a_step_over_its_budget_is_stopped_with_its_processes(tmp_path: Path) -> None:
    import os
    import sys

    from benchmarks.bench_volume import _alive, _timed

    marker = tmp_path / "child.pid"
    holds = (f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); "
             "block = bytearray(200 * 2**20); time.sleep(60)")
    figures = _timed([sys.executable, "-c", holds], dict(os.environ), budget_mb=120)
    assert figures["over_budget"] and figures["peak_mb"] > 120 and figures["seconds"] < 50
    child = int(marker.read_text())
    assert not _alive(child)
    done = _timed([sys.executable, "-c", "print('fine')"], dict(os.environ), budget_mb=500)
    assert done["stdout"] == "fine\n" and done["cpu_seconds"] >= 0 and done["peak_mb"] > 1


def test_a_second_run_on_the_same_work_folder_keeps_the_finished_steps(tmp_path: Path, monkeypatch) -> None:
    import benchmarks.bench_volume as bench

    root = tmp_path / "size-1"
    root.mkdir()
    for logs in ("fa-logs", "ex-logs"):
        (root / f"{logs}.done").write_text("complete\n")
    finished = _row(1)
    finished["steps"].pop("leaderboard")  # interrupted there: only that step runs again
    (root / "state.json").write_text(json.dumps(finished))
    ran = []
    monkeypatch.setattr(bench, "_timed", lambda argv, env, budget=None: ran.append(argv[3]) or {
        "seconds": 1.0, "cpu_seconds": 1.0, "peak_mb": 1.0, "load_before": [0.0], "load_after": [0.0], "stdout": ""})
    state = bench.run_size(1, tmp_path, [])
    assert ran == ["leaderboard"] and set(state["steps"]) == {step.name for step in STEPS}
    assert json.loads((root / "state.json").read_text())["steps"]["leaderboard"]["seconds"] == 1.0


def test_the_goal_size_simulates_the_issues_volumes_and_is_reported_last(tmp_path: Path) -> None:
    from benchmarks.bench_volume import GOAL, Size, _sizes

    assert _sizes("goal,100,1,10") == [1, 10, 100, GOAL]
    sessions, episodes, _ = Size(GOAL, tmp_path, {}).simulated
    # about 8.47 decisions a session and 35.9 lines an episode: a little over 250,000 and 100,000
    assert 250_000 < sessions * 8.47 < 255_000 and 100_000 < episodes * 35.9 < 102_000
    assert Size(10, tmp_path, {}).simulated == (1550, 240, 51)
    goal = {**_row(200), "k": GOAL}
    write_reports([_row(1), goal], "python -m benchmarks.bench_volume --sizes 1,goal", tmp_path)
    text = (tmp_path / "scale.md").read_text(encoding="utf-8")
    assert "| goal | 200,000 | 160,000 |" in text and "goal wall s / CPU s (peak MB)" in text
