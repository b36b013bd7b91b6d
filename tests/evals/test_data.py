"""evals.data.group_of: the split group of a record (a Full Auto decision's thread, a planner record's episode)."""

from __future__ import annotations

from evals.data import group_of, split_by_group
from runtime.advisor import AdvisorPacket, ExperimentLogEntry
from runtime.fullauto import FullAutoTurnSummary, GuardrailConfig
from runtime.records import DecisionRecord, PlannerRecord


def decision(thread: str, run: str, turn: int) -> DecisionRecord:
    summary = FullAutoTurnSummary(thread_id=thread, turn_id=f"{thread}-t{turn}", turn_count=turn)
    return DecisionRecord.build(summary, GuardrailConfig(), run_id=run, sequence_id=0 if run == "unknown" else turn)


def test_a_decision_goes_with_its_thread_across_runs_and_orphans():
    # a pause ended run-1; the user resumed the thread as run-2; a decision after the run state was
    # dropped has run "unknown": all three belong to thread-a's group
    thread_a = [decision("thread-a", "run-1", 1), decision("thread-a", "run-2", 2), decision("thread-a", "unknown", 3)]
    assert {group_of(record) for record in thread_a} == {"thread-a"}
    assert group_of(decision("thread-b", "unknown", 1)) == "thread-b"  # orphans of another thread stay apart
    assert group_of(decision("", "run-9", 1)) == "run-9"  # no thread: its run


def test_split_by_group_keeps_every_run_of_a_thread_in_one_split():
    records = [decision(f"thread-{t}", f"run-{t}-{r}", r) for t in range(10) for r in range(1, 4)]
    for seed in range(20):
        splits = split_by_group(records, seed=seed)
        seen: dict[str, str] = {}
        for name, items in splits.items():
            for record in items:
                assert seen.setdefault(record.thread_id, name) == name, (seed, record.run_id)
        assert all(splits[name] for name in ("train", "dev", "test"))


def test_planner_records_are_grouped_by_episode():
    outcome = ExperimentLogEntry(
        iteration_id=1, timestamp_utc="2025-03-03T08:00:00Z", branch="exp/1", base_branch="main", base_sha="a" * 40,
        head_sha="b" * 40, files_changed=["kernel.py"], tests_diff_empty=True, valid=True, cycles=1499,
        delta_vs_best=-1, strategy_tags=["family:schedule"], hypothesis="h", change_summary=["c"], result_summary="r")
    record = PlannerRecord(record_id="ep-1", episode_id="ep", iteration_id=1, packet=AdvisorPacket(), outcome=outcome)
    assert group_of(record) == "ep"
