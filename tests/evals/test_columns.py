"""Typed dataset columns declared from the pydantic models: the mapping, and exact round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals import columns
from evals.data import SPLITS, dataset_info, iter_rows, load_records, save_dataset, split_by_group, split_hash
from runtime.advisor import AdvisorPacket, ExperimentLogEntry, FamilyConstraints, PerformanceProfile
from runtime.fullauto import FullAutoTurnSummary, GuardrailAudit, GuardrailConfig, f32, f32_shortest
from runtime.records import DecisionRecord, LMUsage, LoggedDecision, OutcomeLabel, PlannerRecord, SourceRef

REPO = Path(__file__).resolve().parents[2]


def _decision(run: str, turn: int, **fields: object) -> DecisionRecord:
    summary = FullAutoTurnSummary(thread_id=f"t-{run}", turn_id=f"{run}-{turn}", turn_count=turn,
                                  last_turn_status="failed" if turn % 2 else "completed",
                                  token_usage='{"totalTokens": 1200}', last_agent_message="naïve ✓")
    return DecisionRecord.build(summary, GuardrailConfig(min_confidence=0.6, max_tokens=None if turn % 2 else 900),
                                run_id=run, sequence_id=turn, **fields)


def tricky_decisions() -> list[DecisionRecord]:
    """Records that exercise every column kind: nulls, f32 values, extras, free JSON."""
    audit = GuardrailAudit(triggered=True, rule="low_confidence", original_action="continue",
                           original_confidence=f32_shortest(0.3), enforced_action="pause", enforced_confidence=None)
    return [
        _decision("run-a", 1),  # every optional part absent
        _decision("run-a", 2, logged=LoggedDecision(action="pause", confidence=None, model_action="banana",
                                                    model_confidence=f32(0.8), reason="low", state="paused"),
                  guardrail=audit, usage=LMUsage(prompt_tokens=10, completion_tokens=3, total_tokens=13,
                                                 cached_tokens=4, detail={"a": [1, 2.5]}),
                  raw_prediction={"data": {"action": "continue", "confidence": 0.30000000000000004}, "n": 2**60},
                  parse_diagnostics=["missing: reason"],
                  label=OutcomeLabel(action="pause", source="rule:stuck_loop", confidence=0.75),
                  source=SourceRef(file="fullauto-decisions.jsonl", line=7)),
        _decision("run-b", 3, raw_prediction="plain text answer", parse_diagnostics=None, usage=LMUsage(),
                  label=OutcomeLabel(action="continue", source="human", next_input="go on")),
        _decision("run-c", 4, raw_prediction=[None, True, {"nested": {"x": -1e-7}}], model="gemma",
                  guardrail=GuardrailAudit(triggered=False, original_action="stop", original_confidence=1.0,
                                           enforced_action="stop", enforced_confidence=1.0)),
    ]


def tricky_planner_records() -> list[PlannerRecord]:
    """Planner records with extra keys at every level that keeps them, and both log shapes."""
    entry = dict(iteration_id=3, timestamp_utc="2025-03-03T08:00:00Z", branch="exp/3", base_branch="main",
                 base_sha="a" * 40, head_sha="b" * 40, files_changed=["kernel.py"], tests_diff_empty=True,
                 valid=True, cycles=1500, delta_vs_best=None, strategy_tags=["family:schedule"], hypothesis="h",
                 change_summary=["c"], result_summary="r")
    full = ExperimentLogEntry(**entry, scope_ok=True, scope_disallowed_files=[], correctness_pass=False,
                              best_before=1501, new_best=False, merged_to_best=True)
    packet = AdvisorPacket(
        goal="threshold", threshold_target=1487, best_cycles=1501, plateau_valid_iters_since_best=None,
        strategy_family_constraints=FamilyConstraints(blocked_families=["family:schedule"],
                                                      current_family="family:schedule", reason="streak",
                                                      recent_strategy_combos=[["family:schedule", "unroll"]]),
        experiment_log_tail=['{"iteration_id": 1}', {"iteration_id": 2, "cycles": 1502}],
        performance_profile=PerformanceProfile(min_cycles_by_engine={"alu": 12}, schedule_slack_pct=2.5,
                                               note="estimate"),
        runner_version="0.3")
    return [
        PlannerRecord(record_id="e1-1", episode_id="e1", iteration_id=1, packet=AdvisorPacket()),
        PlannerRecord(record_id="e1-3", episode_id="e1", iteration_id=3, packet=packet, outcome=full,
                      source=SourceRef(file="log.jsonl", line=3)),
        PlannerRecord(record_id="e2-1", episode_id="e2", iteration_id=1, packet=AdvisorPacket(best_cycles=1600),
                      outcome=ExperimentLogEntry(**entry)),
    ]


@pytest.mark.parametrize("model,make", [(DecisionRecord, tricky_decisions), (PlannerRecord, tricky_planner_records)])
def test_encode_decode_gives_back_the_same_record_text(model, make) -> None:
    import json

    for record in make():
        text = record.model_dump_json()
        row = columns.encode(model, json.loads(text), "g")
        again = model.model_validate(columns.decode(model, row))
        assert again == record and again.model_dump_json() == text


def test_tricky_records_round_trip_through_arrow(tmp_path: Path) -> None:
    decisions = tricky_decisions()
    save_dataset(tmp_path / "fa", "fullauto", split_by_group(decisions, "run_id", seed=0))
    planner = tricky_planner_records()
    save_dataset(tmp_path / "ex", "experiments", split_by_group(planner, "episode_id", seed=0))
    for folder, original in ((tmp_path / "fa", decisions), (tmp_path / "ex", planner)):
        loaded = {r.record_id: r for r in load_records(folder, "all")}
        assert {r.record_id for r in original} == set(loaded)
        for record in original:
            assert loaded[record.record_id] == record
            assert loaded[record.record_id].model_dump_json() == record.model_dump_json()
        for name in SPLITS:
            assert split_hash(iter_rows(folder, name)) == dataset_info(folder)["splits"][name]["hash"]


def test_features_are_declared_from_the_models() -> None:
    from datasets import List, Value

    features = columns.features(DecisionRecord)
    assert list(features) == ["record_id", "group_id", *[n for n in DecisionRecord.model_fields if n != "record_id"]]
    assert features["summary"]["last_turn_status"] == Value("string")
    assert features["summary"]["turn_count"] == Value("int64")
    assert features["config"]["max_tokens"] == Value("int64")
    assert features["logged"]["confidence"] == Value("float64")  # f32 values kept as their shortest decimal
    assert features["guardrail"]["triggered"] == Value("bool")
    assert set(features["label"]) == set(OutcomeLabel.model_fields)
    assert features["usage"][columns.EXTRA] == Value("string")  # LMUsage keeps extra keys
    assert features["raw_prediction"] == Value("string")  # Any: JSON text
    planner = columns.features(PlannerRecord)
    assert planner["packet"]["best_cycles"] == Value("int64")
    assert planner["packet"]["strategy_family_constraints"]["blocked_families"] == List(Value("string"))
    assert planner["packet"]["experiment_log_tail"] == Value("string")  # a list of free JSON is one JSON text
    assert planner["outcome"]["files_changed"] == List(Value("string"))


def test_values_that_do_not_fit_are_named_by_field() -> None:
    import json

    data = json.loads(tricky_decisions()[1].model_dump_json())
    data["logged"]["confidence"] = "high"
    with pytest.raises(columns.ColumnTypeError, match=r"^logged.confidence: expected float64"):
        columns.encode(DecisionRecord, data, "g")
    data = json.loads(tricky_decisions()[1].model_dump_json())
    data["label"]["severity"] = 3  # OutcomeLabel keeps no extra keys
    with pytest.raises(columns.ColumnTypeError, match=r"^label.severity: not a declared field"):
        columns.encode(DecisionRecord, data, "g")


def test_an_imported_sample_opens_in_pandas_with_typed_columns(tmp_path: Path) -> None:
    import datasets

    from guidebench.data import import_logs

    import_logs(REPO / "datasets" / "sample" / "fullauto", "fullauto", tmp_path / "fa", progress=False)
    test = datasets.load_from_disk(str(tmp_path / "fa"))["test"]
    frame = test.to_pandas()
    assert list(frame.columns) == ["record_id", "group_id",
                                   *[n for n in DecisionRecord.model_fields if n != "record_id"]]
    first = frame.iloc[0]
    assert isinstance(first["summary"]["turn_count"], int) and isinstance(first["summary"]["last_turn_status"], str)
    assert first["label"]["source"] == "simulator"
    flat = test.flatten().to_pandas()
    assert str(flat["summary.turn_count"].dtype) == "int64"
    assert str(flat["logged.confidence"].dtype) == "float64"
    assert set(flat["label.action"]) <= {"continue", "pause", "stop", "review"}
    failed = test.filter(lambda row: row["summary"]["last_turn_status"] == "failed")
    assert set(failed["record_id"]) == {r.record_id for r in load_records(tmp_path / "fa", "test")
                                        if r.summary.last_turn_status == "failed"}
    for name in SPLITS:  # every record of the sample comes back as the same canonical JSON
        assert split_hash(iter_rows(tmp_path / "fa", name)) == dataset_info(tmp_path / "fa")["splits"][name]["hash"]


def test_an_imported_planner_sample_round_trips(tmp_path: Path) -> None:
    from guidebench.data import import_logs

    import_logs(REPO / "datasets" / "sample" / "experiments", "experiments", tmp_path / "ex", progress=False)
    for name in SPLITS:
        assert split_hash(iter_rows(tmp_path / "ex", name)) == dataset_info(tmp_path / "ex")["splits"][name]["hash"]
