"""guidebench.evaluation under LM faults: an injected LM that times out, raises provider errors and rate
limits, loses its connection, and returns empty or garbage text.

`guidebench eval` (the `evaluate` path) completes; every failed record is counted, classified and diagnosed
(class, stage, message, LM id), and scored as the production safe default (`pause`); with the LM's own
per-call retries, a transient fault costs a retry, not a record.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Optional

import dspy
import mlflow
import pytest

from lm_fault_support import FAULTS, RAISING, FaultEngine, by_turn, fault_lm
from optimizer_support import decision_records
from reliability_ledger import record as ledger


@pytest.fixture
def eval_data(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A dataset whose test split has one record per fault and a few healthy ones; the plan by turn id."""
    records = decision_records(len(FAULTS) + 3, offset=300)
    data = tmp_path / "data"
    from evals.data import save_dataset

    save_dataset(data, "fullauto", {"train": records[:2], "dev": records[:2], "test": records})
    plan = {record.turn_id: fault for record, fault in zip(records, FAULTS)}
    return data, plan


def test_eval_completes_with_every_fault_counted_and_diagnosed(eval_data, tmp_path, monkeypatch, restore_lm):
    from guidebench.lm import factory as lm_module
    from guidebench.evaluation.run import evaluate

    data, plan = eval_data
    engine = FaultEngine(by_turn(plan))
    injected = fault_lm(engine)
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(lm_module, "configure_lm", lambda spec, **kw: dspy.configure(lm=injected) or injected)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    output = evaluate("full_auto.predict", data, split="test", lm="injected", threads=4, out_dir=tmp_path / "out",
                      tracking_uri=uri, progress=False, n_resamples=50)
    result = output.result
    assert result.n == len(FAULTS) + 3 and set(engine.faults) == set(FAULTS)
    rows = {row["turn_id"]: row for row in result.rows}
    for turn_id, fault in plan.items():
        row = rows[turn_id]
        # Whatever went wrong, the model's decision is the safe default and nothing continues.
        assert (row["model_action"], row["model_confidence"]) == ("pause", 0.0), (fault, row)
        assert row["enforced_action"] != "continue"
        if fault in RAISING:
            error = row["error"]
            assert error["class"] == RAISING[fault] and error["stage"] == "program", (fault, error)
            assert error["lm"] == "injected/faulty" and error["message"] and "Traceback" in error["stack"]
        else:  # empty or garbage text: no exception, a parse failure with its reason
            assert row["error"] is None and json.loads(row["parse_errors"]), (fault, row)
    healthy = [row for turn_id, row in rows.items() if turn_id not in plan]
    assert healthy and all(row["error"] is None and json.loads(row["parse_errors"]) == [] for row in healthy)
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["n_errors"] == len(RAISING) and s["errors_by_stage"] == {"program": len(RAISING)}
    assert s["errors_by_class"] == dict(Counter(RAISING.values()))
    assert s["n_parse_failures"] >= 2  # the empty and the garbage answers at least
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(output.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["n_errors"] == len(RAISING)
    frame = result.to_frame()
    assert int(frame["error.class"].notna().sum()) == len(RAISING)
    ledger("faults", scenario="eval", injected=dict(engine.faults), records=result.n,
           failed_records=len(plan), diagnosed=len(plan), undiagnosed=0, lost_records=len(FAULTS) + 3 - result.n,
           continued_on_fault=sum(rows[t]["enforced_action"] == "continue" for t in plan))


def test_eval_rides_out_transient_faults_with_the_lms_own_retries(eval_data, monkeypatch):
    """With per-call retries (as a remote LM has), a rate limit or timeout that clears costs a retry, not a record."""
    from evals.replay import replay
    from evals.data import load_records

    data, _ = eval_data
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def once(index: int, inputs: dict[str, str]) -> Optional[str]:
        with lock:
            seen[inputs.get("turn_id", "")] += 1
            first = seen[inputs.get("turn_id", "")] == 1
            fault = "rate_limit" if len(seen) % 2 else "timeout"
        return fault if first else None

    engine = FaultEngine(once)
    sleeps: list[float] = []
    monkeypatch.setattr("dspy.clients.execution.time.sleep", lambda s: sleeps.append(s))
    records = load_records(data, "test")
    with dspy.context(lm=fault_lm(engine, retries=2)):
        result = replay("full_auto.predict", records, progress=False, n_resamples=20)
    assert result.summary["n_errors"] == 0 and result.summary["n_parse_failures"] == 0
    assert sum(engine.faults.values()) == len(records) and engine.calls == 2 * len(records)
    # DSPy waits between attempts: the provider's retry_after for a rate limit, exponential backoff otherwise.
    assert sorted(set(sleeps)) == [0.02, 1] and len(sleeps) == len(records)
    ledger("faults", scenario="eval, per-call retries", injected=dict(engine.faults), records=result.n,
           failed_records=result.summary["n_errors"], lost_records=0)


# ----- a planner's records without an improvement estimate ------------------------------------------------------

def test_records_choosing_a_family_the_logs_never_tried_are_left_out_and_counted(tmp_path, monkeypatch):
    """The measured case: every family:break_deps relabelled family:schedule, so the learned model knows no
    break_deps; planner.rules still picks it, and those records were scored on compliance alone (`unscored 0`)."""
    import pandas as pd

    from guidebench.evaluation.run import evaluate
    from planner_logs_support import imported, logs_without_side_files

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    logs = logs_without_side_files(tmp_path / "logs")
    for log in logs.rglob("log.jsonl"):
        log.write_text(log.read_text().replace("family:break_deps", "family:schedule"))
    dataset = imported(logs, tmp_path / "dataset")
    output = evaluate("planner.rules", dataset, split="all", out_dir=tmp_path / "out", track=False, progress=False,
                      cycles_model="learned", n_resamples=100)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    frame = pd.read_parquet(tmp_path / "out" / "results.parquet")
    untried = frame["strategy_family"] == "family:break_deps"
    assert untried.sum() > 0  # the rules planner picks the family the logs never tried
    left_out = summary["cycles_model"]["left_out"]
    assert left_out.get("no_estimate_for_family") == int(untried.sum())
    assert summary["cycles_model"]["unscored"] == sum(left_out.values()) >= int(untried.sum())
    assert frame.loc[untried, "score.objective"].isna().all()
    assert (frame.loc[untried, "left_out"] == "no_estimate_for_family").all()
    note = next(n for n in summary["notes"] if "no estimate for the chosen family" in n)
    assert note.startswith(f"{int(untried.sum())} of {len(frame)} records left out of objective") and \
        "family:break_deps" in note
    objective = output.result.metrics["objective"]
    assert objective.n == len(frame) - summary["cycles_model"]["unscored"]  # the mean is over the others only
    assert summary["n_labeled"] == objective.n
