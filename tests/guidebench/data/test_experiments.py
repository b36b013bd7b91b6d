"""Importing experiment logs: both shapes, bad lines with exact line numbers, packets vs runtime.pivot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from evals.data import dataset_info, load_records
from guidebench.simulators.experiments import simulate_episode, write_episodes
from evals.sim_kernel import state_from_profile
from guidebench.data import IMPORTERS, NothingImportedError, import_logs
from guidebench.data.planner_packets import PacketBuilder
from guidebench.errors import GuidebenchError
from runtime import pivot
from runtime.advisor import FAMILIES

S, L, D = FAMILIES


def full(i: int, tags: list[str], ok: bool, cycles: Optional[int], best_before: int, **extra: Any) -> dict:
    """A newer-shape loop-runner line (`ok`: correctness passed; extra keys override, `valid` is then derived)."""
    valid = ok
    delta = None if cycles is None else cycles - best_before
    entry = {
        "base_branch": "main", "base_sha": "a" * 40, "best_before": best_before, "branch": f"opt/{i}",
        "change_summary": ["change"], "correctness_pass": valid, "cycles": cycles, "delta_vs_best": delta,
        "files_changed": ["perf_takehome.py"], "head_sha": f"{i:040x}", "hypothesis": "h", "iteration_id": i,
        "merged_to_main": bool(valid and cycles is not None and cycles < best_before),
        "new_best": bool(valid and cycles is not None and cycles < best_before), "result_summary": "r",
        "scope_disallowed_files": [], "scope_forbidden_files": [], "scope_ok": True, "strategy_tags": tags,
        "tests_diff_empty": True, "threshold_met": False, "timestamp_utc": f"2025-01-01T00:{i % 60:02d}:00Z",
        "valid": valid,
    }
    entry.update(extra)
    entry["valid"] = entry["correctness_pass"] is True and entry["tests_diff_empty"] and entry["scope_ok"]
    entry["new_best"] = entry["merged_to_main"] = bool(entry["valid"] and cycles is not None and cycles < best_before)
    return entry


def old(i: int, tags: list[str], valid: bool, cycles: Optional[int], delta: Optional[int] = None) -> dict:
    """An older short-shape line: no scope/correctness/best_before/new_best/threshold_met."""
    return {"base_branch": "main", "base_sha": "b" * 40, "branch": f"exp-{i}", "change_summary": ["c"],
            "cycles": cycles, "delta_vs_best": delta, "files_changed": ["perf_takehome.py"], "head_sha": "c" * 40,
            "hypothesis": "h", "iteration_id": i, "merged_to_main": False, "result_summary": "r",
            "strategy_tags": tags, "tests_diff_empty": True, "timestamp_utc": "2024-11-02T10:00:00Z",
            "valid": valid}


def line(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


def write_lines(path: Path, lines: list[str], final_newline: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def quarantined(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "quarantine.jsonl").read_text().splitlines()]


def report_of(out: Path) -> dict:
    return json.loads((out / "import_report.json").read_text())


def test_bad_lines_are_quarantined_with_exact_line_numbers_and_fields(tmp_path):
    good1 = line(full(1, [S], True, 1500, 1600))
    good2 = line(full(2, [L, "vload"], False, None, 1500, correctness_pass=False))
    wrong_type = full(5, [S], True, 1490, 1500)
    wrong_type["cycles"] = "1490"
    missing = full(6, [S], True, 1490, 1500)
    del missing["valid"]
    bad_time = full(7, [D], True, 1480, 1500, timestamp_utc="2025-01-01 00:07:00")
    secret = full(8, [D], True, 1470, 1500, hypothesis="use key sk-abcdefghijklmnopqrstuvwx to fetch")
    truncated = line(full(9, [S], True, 1460, 1470))[:-25]
    log = write_lines(tmp_path / "log.jsonl", [
        good1,                     # 1 imported
        good2,                     # 2 imported (invalid attempt, still a record)
        good2,                     # 3 the same bytes as line 2: an entry too, as the runner reads it
        "",                        # 4 blank: not read
        line(wrong_type),          # 5 cycles is a string
        line(missing),             # 6 no `valid`
        line(bad_time),            # 7 timestamp layout
        line(secret),              # 8 imported, secret redacted
        "[1, 2, 3]",               # 9 not an object
        line(full(10, [S], True, 1450, 1470)),  # 10 imported
        good1.replace('"iteration_id": 1', '"iteration_id": 1 '),  # 11 same JSON as line 1: an entry too
        truncated,                 # 12 cut off at the end of the file
    ], final_newline=False)
    out = tmp_path / "ds"
    report = import_logs(log, "experiments", out, seed=1)
    q = quarantined(out)
    assert [item["line"] for item in q] == [5, 6, 7, 9, 12]
    assert all(item["source"] == str(log) for item in q)
    errors = {item["line"]: item["error"] for item in q}
    assert errors[5].startswith("cycles:")
    assert errors[6].startswith("valid:") and "required" in errors[6]
    assert errors[7].startswith("timestamp_utc:")
    assert "object" in errors[9]
    assert "JSON" in errors[12]
    counts = report_of(out)
    expected = {"read": 11, "imported": 6, "quarantined": 5, "duplicates": 0, "blank_lines": 1, "files": 1,
                "episodes": 1, "entries": 6, "new_shape": 6, "old_shape": 0, "redactions": 1}
    assert {k: counts[k] for k in expected} == expected
    assert report.read == report.imported + report.quarantined + report.duplicates
    records = load_records(out, "all")
    assert sorted(r.source.line for r in records) == [1, 2, 3, 8, 10, 11]
    # repeated lines are distinct records (by line number), each with its own packet
    by_line = {r.source.line: r for r in records}
    assert len({r.record_id for r in records}) == 6 and by_line[2].outcome == by_line[3].outcome
    assert len(by_line[3].packet.experiment_summary.recent_attempts) == 2
    hypotheses = [r.outcome.hypothesis for r in records if r.iteration_id == 8]
    assert hypotheses == ["use key [REDACTED:api_key] to fetch"]
    assert "sk-abcdefghijkl" not in (out / "quarantine.jsonl").read_text()


def test_cycles_beyond_int64_quarantine_their_line_and_the_rest_imports(tmp_path):
    huge = full(2, [S], True, 10 ** 30, 1500)
    log = write_lines(tmp_path / "log.jsonl", [line(full(1, [S], True, 1500, 1600)), line(huge),
                                               line(full(3, [L], True, 1480, 1500))])
    report = import_logs(log, "experiments", tmp_path / "ds")
    (item,) = quarantined(tmp_path / "ds")
    assert (item["source"], item["line"]) == (str(log), 2)
    # delta_vs_best (10**30 - 1500) overflows too: the first field of the line is named
    assert item["error"] == "cycles: integer 10000000000000000000... (31 digits) does not fit 64 bits (the dataset " \
        "stores int64)"
    assert (report.imported, report.quarantined) == (2, 1)
    assert sorted(r.iteration_id for r in load_records(tmp_path / "ds", "all")) == [1, 3]


@pytest.mark.parametrize("where", ["best_before", "cycles"])
def test_a_best_whose_aspiration_leaves_int64_quarantines_the_lines_that_need_it(tmp_path, where):
    # -2**63 fits int64, so the line itself is stored; the packet's aspiration (best - 1) would not. The lines
    # whose packet needs it are quarantined with the reason; the import neither crashes nor wraps the value.
    low = -2 ** 63
    first = full(1, [S], True, low if where == "cycles" else 1500, 1600, delta_vs_best=0)
    second = full(2, [S], True, 1400, low if where == "best_before" else 1500, delta_vs_best=0)
    third = full(3, [L], True, 1450, 1500, delta_vs_best=0)
    log = write_lines(tmp_path / "log.jsonl", [line(first), line(second), line(third)])
    report = import_logs(log, "experiments", tmp_path / "ds")
    items = quarantined(tmp_path / "ds")
    # a best_before is the best for its own line; line 1's cycles stay the log's best for every line after it
    assert [item["line"] for item in items] == ([2] if where == "best_before" else [2, 3])
    assert items[0]["error"] == ("cannot build the planner record: aspiration_cycles: the best so far, "
                                 "-9223372036854775808 (this line's best_before or an earlier line's cycles), less 1 "
                                 "does not fit 64 bits (the dataset stores int64)")
    records = sorted(load_records(tmp_path / "ds", "all"), key=lambda r: r.iteration_id)
    assert (report.imported, report.quarantined) == (len(records), len(items)) == (3 - len(items), len(items))
    assert records[0].iteration_id == 1 and records[0].packet.aspiration_cycles == 1599


def test_packets_follow_the_imported_entries_only(tmp_path):
    entries = [full(1, [S], True, 1500, 1600), full(2, [S], True, 1495, 1500)]
    log = write_lines(tmp_path / "log.jsonl", [line(entries[0]), "{not json", line(entries[1]),
                                               line(entries[1]), line(full(3, [L], True, 1480, 1495))])
    import_logs(log, "experiments", tmp_path / "ds")
    records = sorted(load_records(tmp_path / "ds", "all"), key=lambda r: r.source.line)
    assert [r.iteration_id for r in records] == [1, 2, 2, 3]
    last = records[-1].packet
    # the runner's tail is the raw file lines: the broken line and the repeat too
    assert last.experiment_log_tail == [line(entries[0]), "{not json", line(entries[1]), line(entries[1])]
    # the runner reads the repeated line as an entry too
    assert last.strategy_family_constraints == pivot.family_constraints([*entries, entries[1]])
    assert last.strategy_family_constraints.blocked_families == [S]
    assert last.best_cycles == 1495 and last.aspiration_cycles == 1494
    # valid cycles, no "(above target N)" and no threshold_met anywhere: the runner ran for the best
    assert last.goal == "best" and last.threshold_target is None and last.performance_profile is None


def test_old_shape_logs_import_without_families(tmp_path):
    lines = [old(1, ["sched", "unroll"], True, 1700), old(2, ["vload", "loads"], False, None),
             old(3, ["deps"], True, 1690, -10), old(4, [], True, 1695, 5)]
    log = write_lines(tmp_path / "exp" / "log.jsonl", [line(x) for x in lines])
    import_logs(tmp_path / "exp", "experiments", tmp_path / "ds")
    counts = report_of(tmp_path / "ds")
    assert (counts["old_shape"], counts["new_shape"], counts["entries"], counts["episodes"]) == (4, 0, 4, 1)
    records = sorted(load_records(tmp_path / "ds", "all"), key=lambda r: r.iteration_id)
    assert all(r.episode_id == "log.jsonl" and r.outcome.family is None for r in records)
    assert records[1].packet.best_cycles == 1700 and records[1].packet.plateau_valid_iters_since_best == 0
    assert records[3].packet.best_cycles == 1690
    summary = records[3].packet.experiment_summary
    assert summary.invalid_counts == {"total": 1, "correctness": 0, "scope": 0, "tests": 0}
    assert summary.best_cycles_by_family == {"unknown": 1690}  # the runner's bucket for attempts without family
    assert records[3].packet.strategy_family_constraints.current_family is None
    assert log.exists()


def hand_made_log() -> list[dict]:
    """Edge cases of streaks, the bonus, plateaus, invalid cycles below the best and missing families."""
    return [
        full(1, [S], True, 1600, 1650),
        full(2, [S, "unroll"], True, 1588, 1600),      # streak S: meaningful win (12 >= 10): cap 3
        full(3, [S], True, 1590, 1588),                # S streak 3, no win on its last attempt: blocked
        full(4, [L], False, 1400, 1588, correctness_pass=False),  # invalid cycles below the best: ignored
        full(5, [L], False, None, 1588, correctness_pass=False),
        full(6, [D], True, 1588, 1588),                # ties the best: plateau resets
        full(7, [D], True, 1589, 1588),
        full(8, ["legacy"], True, 1595, 1588),         # no family: ends the streak
        full(9, [D], True, 1591, 1588, tests_diff_empty=False),
        full(10, [D], True, 1500, 1588, scope_ok=False, scope_forbidden_files=["tests/x.py"]),
        full(11, [D], False, None, 1588, correctness_pass=None),  # 3 invalid in a row
        full(12, [S], True, 1589, 1588),
        full(13, [S], True, 1592, 1588),
        full(14, [L], True, 1593, 1588),
        full(15, [L], True, 1594, 1588),
        full(16, [D], True, 1580, 1588),
        full(17, [D], True, 1570, 1580),               # win of 10 within the streak: cap 3
    ]


def test_packet_rebuild_matches_runtime_pivot_on_every_prefix():
    entries = hand_made_log()
    builder = PacketBuilder()
    for k, entry in enumerate(entries):
        prefix = entries[:k]
        packet = builder.packet({key: v for key, v in entry.items() if key != "best_before"})
        assert packet.strategy_family_constraints == pivot.family_constraints(prefix), k
        assert packet.best_cycles == pivot.best_cycles(prefix), k
        assert packet.plateau_valid_iters_since_best == pivot.plateau_valid_iters_since_best(prefix), k
        assert packet.experiment_log_tail == [line(e) for e in prefix[-20:]]
        assert [a["iteration_id"] for a in packet.experiment_summary.recent_attempts] == \
            [e["iteration_id"] for e in prefix[-8:]]
        if k == 2:  # the streak's last attempt won by >= 10 cycles: a third attempt is allowed
            assert packet.strategy_family_constraints.max_consecutive == 3
            assert packet.strategy_family_constraints.blocked_families == []
        if k == 3:  # three in a row without a new win: blocked
            assert packet.strategy_family_constraints.blocked_families == [S]
        if k == 8:  # an entry without a family ends every streak
            assert packet.strategy_family_constraints.current_family is None
        builder.add(entry, line(entry))
    final = builder.packet({})
    assert final.strategy_family_constraints.max_consecutive == 3
    # the runner's keys; an attempt counts once per reason it has
    counts = final.experiment_summary.invalid_counts
    assert counts["total"] == 5 and set(counts) == {"total", "correctness", "scope", "tests"}
    assert counts["correctness"] == sum(e.get("correctness_pass") is False for e in entries if e.get("valid") is not True)
    assert final.experiment_summary.best_cycles_by_family == {S: 1588, D: 1570, L: 1593, "unknown": 1595}
    assert final.experiment_summary.last_valid_attempt["iteration_id"] == 17


def test_best_before_supplies_the_tags_best_the_log_does_not_show():
    # the runner's best is the log's and the best/* tags'; `best_before` records it. A best that is not
    # in the local log gives a null plateau, as in the runner (never a count).
    builder = PacketBuilder()
    first = full(1, [S], True, 1710, 1700)
    assert builder.packet(first).best_cycles == 1700
    assert builder.packet(first).plateau_valid_iters_since_best is None
    builder.add(first, line(first))
    second = full(2, [L], True, 1690, 1700)
    packet = builder.packet(second)
    assert (packet.best_cycles, packet.plateau_valid_iters_since_best) == (1700, None)
    builder.add(second, line(second))
    third = full(3, [D], True, 1695, 1690)
    assert builder.packet(third).best_cycles == 1690 == pivot.best_cycles([first, second])


def test_packet_rebuild_matches_pivot_on_simulated_episodes():
    for index in range(12):
        episode = simulate_episode(77, index, old_shape=index % 3 == 0)
        builder = PacketBuilder()
        for k, entry in enumerate(episode.entries):
            prefix = episode.entries[:k]
            packet = builder.packet({})
            assert packet.strategy_family_constraints == pivot.family_constraints(prefix)
            assert packet.best_cycles == pivot.best_cycles(prefix)
            assert packet.plateau_valid_iters_since_best == pivot.plateau_valid_iters_since_best(prefix)
            builder.add(entry, line(entry))


def test_folder_of_episodes_with_side_files(tmp_path):
    sim = tmp_path / "sim"
    summary = write_episodes(sim, 4, seed=5, old_shape_fraction=0.5)
    out = tmp_path / "ds"
    report = import_logs(sim, "experiments", out, seed=2)
    counts = report_of(out)
    assert counts["files"] == counts["episodes"] == counts["side_files"] == 4
    assert counts["entries"] == counts["imported"] == counts["read"] == summary.entries
    assert counts["old_shape"] + counts["new_shape"] == summary.entries
    assert counts["profiles"] == summary.entries
    assert counts["duplicates"] == counts["quarantined"] == 0
    assert report.sources and all(s["file"].endswith("log.jsonl") for s in report.sources)
    records = load_records(out, "all")
    assert {r.episode_id for r in records} == {f"sim-5-{i:04d}" for i in range(4)}
    by_episode = {}
    for record in records:
        by_episode.setdefault(record.episode_id, []).append(record)
    for index in range(4):
        episode = simulate_episode(5, index, old_shape=any(
            r.outcome.family is None for r in by_episode[f"sim-5-{index:04d}"]))
        side = {item["iteration_id"]: item for item in episode.side["iterations"]}
        for record in by_episode[episode.episode_id]:
            facts = side[record.iteration_id]
            assert record.packet.performance_profile.model_dump(mode="json") == facts["performance_profile"]
            assert record.packet.goal == facts["goal"] and record.packet.threshold_target == facts["threshold_target"]
            start = state_from_profile(record.packet.performance_profile)
            if record.outcome.is_full_shape:  # best_before carries the start; old lines only valid cycles
                assert start.cycles == record.packet.best_cycles
            else:
                assert record.packet.best_cycles is None or record.packet.best_cycles >= start.cycles


def test_same_line_in_two_episodes_is_not_a_duplicate(tmp_path):
    same = line(full(1, [S], True, 1500, 1600))
    write_lines(tmp_path / "logs" / "a" / "log.jsonl", [same])
    write_lines(tmp_path / "logs" / "b" / "log.jsonl", [same, same])
    write_lines(tmp_path / "logs" / ".hidden" / "log.jsonl", [same])
    import_logs(tmp_path / "logs", "experiments", tmp_path / "ds")
    counts = report_of(tmp_path / "ds")
    assert (counts["files"], counts["imported"], counts["duplicates"]) == (2, 3, 0)  # a repeat is an entry too
    assert {r.episode_id for r in load_records(tmp_path / "ds", "all")} == {"a/log.jsonl", "b/log.jsonl"}


def test_bad_side_file_lines_are_side_quarantined_and_the_import_goes_on(tmp_path):
    sim = tmp_path / "sim"
    write_episodes(sim, 1, seed=3, old_shape_fraction=0.0)
    side = sim / "episode-0000" / "log.sim.jsonl"
    lines = side.read_text().splitlines()
    lines[2] = lines[2].replace('"schedule_cycles_estimate": ', '"schedule_cycles_estimate": "x", "was": ')
    lines[4] = "{broken"
    side.write_text("\n".join(lines) + "\n")
    out = tmp_path / "ds"
    import_logs(sim, "experiments", out)
    counts = report_of(out)
    assert counts["side_lines_invalid"] == 2 and counts["side_quarantined"] == 2
    assert counts["profiles"] == counts["entries"] - 2
    side_q = [json.loads(x) for x in (out / "quarantine-side.jsonl").read_text().splitlines()]
    assert [(q["line"], q["error"].split(":")[0]) for q in side_q] == [
        (3, "performance_profile.schedule_cycles_estimate"), (5, "invalid JSON at column 2")]
    records = {r.iteration_id: r for r in load_records(out, "all")}
    assert records[2].packet.performance_profile is None
    assert records[4].packet.performance_profile is None
    assert records[3].packet.performance_profile is not None


def test_simulate_and_import_are_deterministic(tmp_path):
    ids = []
    for name in ("a", "b"):
        write_episodes(tmp_path / name, 3, seed=9)
        ids.append(import_logs(tmp_path / name, "experiments", tmp_path / f"ds-{name}", seed=4).dataset_id)
    assert ids[0] == ids[1]
    assert dataset_info(tmp_path / "ds-a")["kind"] == "experiments"


def test_nothing_importable_and_no_logs_are_clear_errors(tmp_path):
    log = write_lines(tmp_path / "log.jsonl", ["{}", "not json"])
    with pytest.raises(NothingImportedError, match="nothing could be imported"):
        import_logs(log, "experiments", tmp_path / "ds")
    assert [q["line"] for q in quarantined(tmp_path / "ds")] == [1, 2]
    (tmp_path / "empty").mkdir()
    with pytest.raises(GuidebenchError, match="no \\*.jsonl experiment logs"):
        import_logs(tmp_path / "empty", "experiments", tmp_path / "ds2")


def test_the_experiments_importer_is_registered():
    from guidebench.data.experiments import import_experiments

    assert IMPORTERS["experiments"] is import_experiments


def test_cli_simulates_and_imports_experiments(tmp_path, capsys):
    from guidebench.cli import main

    sim, out = tmp_path / "sim", tmp_path / "ds"
    assert main(["data", "simulate", "experiments", "--episodes", "3", "--seed", "4", "--out", str(sim)]) == 0
    assert "wrote 3 episodes" in capsys.readouterr().out
    assert main(["data", "import", str(sim), "--kind", "experiments", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "episodes 3" in printed and "quarantined 0" in printed
    assert report_of(out)["episodes"] == 3
    # A second run into the same folder would mix episodes of two runs: refused with one clear line.
    assert main(["data", "simulate", "experiments", "--episodes", "2", "--out", str(sim)]) == 2
    assert "earlier `guidebench data simulate experiments` already exists; pass --force" in capsys.readouterr().err
    assert main(["data", "simulate", "experiments", "--episodes", "0", "--out", str(tmp_path / "x")]) == 2
    assert "--episodes must be at least 1" in capsys.readouterr().err


def test_an_unreadable_log_is_counted_and_named_while_the_others_import(tmp_path, monkeypatch):
    from guidebench.data import registry

    write_lines(tmp_path / "logs" / "a" / "log.jsonl", [line(full(1, [S], True, 1500, 1600))])
    locked = write_lines(tmp_path / "logs" / "b" / "log.jsonl", [line(full(1, [S], True, 1500, 1600))])
    real_read_lines = registry.read_lines

    def read_lines(path, *args, **kwargs):
        if Path(path) == locked:  # what open() raises on a file without read permission
            raise PermissionError(13, "Permission denied", str(path))
        return real_read_lines(path, *args, **kwargs)

    monkeypatch.setattr(registry, "read_lines", read_lines)
    report = import_logs(tmp_path / "logs", "experiments", tmp_path / "ds")
    assert (report.imported, report.count("files_unreadable"), report.count("episodes")) == (1, 1, 1)
    assert any("b/log.jsonl: cannot read: Permission denied" in note for note in report.notes)


def test_a_full_disk_stops_the_import_instead_of_counting_a_log_unreadable(tmp_path, monkeypatch):
    # A log whose records cannot be spooled is not an unreadable log: counting it so would lose it and import on.
    import errno

    from guidebench.data.spool import GroupedSpool

    write_lines(tmp_path / "logs" / "a" / "log.jsonl", [line(full(1, [S], True, 1500, 1600))])

    def full_disk(self, group, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(GroupedSpool, "append", full_disk)
    with pytest.raises(GuidebenchError) as caught:
        import_logs(tmp_path / "logs", "experiments", tmp_path / "ds")
    assert str(caught.value).startswith(f"cannot write {tmp_path / 'ds'}: the disk is full (No space left on device)")
    assert not (tmp_path / "ds").exists()


def test_simulate_writes_archives_unless_told_not_to(tmp_path, capsys):
    from guidebench.cli import main

    assert main(["data", "simulate", "experiments", "--episodes", "3", "--seed", "0", "--out", str(tmp_path / "a"),
                 "--archive-episodes", "1"]) == 0
    assert "plans archived under .advisor/" in capsys.readouterr().out
    assert [p.parent.name for p in (tmp_path / "a").glob("*/.advisor")] == ["episode-0001"]
    assert main(["data", "simulate", "experiments", "--episodes", "3", "--seed", "0", "--out", str(tmp_path / "b"),
                 "--no-archive"]) == 0
    assert not list((tmp_path / "b").glob("*/.advisor"))
    for name in ("episode-0000", "episode-0001", "episode-0002"):
        assert (tmp_path / "a" / name / "log.jsonl").read_bytes() == (tmp_path / "b" / name / "log.jsonl").read_bytes()
    assert main(["data", "simulate", "experiments", "--episodes", "1", "--out", str(tmp_path / "c"),
                 "--archive-episodes", "-1"]) == 2
