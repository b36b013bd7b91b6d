"""guidebench.release.planner_gate and `guidebench shadow planner-start / planner-report`: a candidate planner
shadows an exploring deployed planner on the simulator; the gate judges it on the imported iterations and the ledger
records each transition with its evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frozen_support import export_program
from guidebench.cli import main
from guidebench.data import import_logs
from guidebench.errors import GuidebenchError
from guidebench.release.planner_gate import planner_report, start_planner_shadow
from guidebench.release.promotion import PromotionLedger
from planner_sidecar_support import EXPLORING


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory) -> dict:
    """An exploring planner.rules drives 3 episodes with a greedy planner.rules shadowing it; imported."""
    from runtime.exploration import ExplorationSettings

    root = tmp_path_factory.mktemp("planner-gate")
    deployed = export_program("planner.rules", root / "deployed", name="deployed", exploration=EXPLORING).path
    candidate = export_program("planner.rules", root / "candidate", name="candidate",
                               exploration=ExplorationSettings()).path
    ledger = root / "ledger.jsonl"
    assert main(["plan-loop", "--module", str(deployed), "--shadow", str(candidate), "--episodes", "3",
                 "--seed", "2", "--out", str(root / "logs"), "--ledger", str(ledger)]) == 0
    import_logs(root / "logs", "experiments", root / "data", progress=False)
    return {"root": root, "deployed": deployed, "candidate": candidate, "ledger": ledger}


def test_the_report_judges_every_iteration_with_logged_propensities(shadowed, tmp_path, capsys):
    assert main(["shadow", "planner-report", "--module", str(shadowed["candidate"]), "--data",
                 str(shadowed["root"] / "data"), "--no-record", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "r" / "planner_report.json").read_text())
    evidence = report["evidence"]
    assert evidence["counts"]["judged"] == evidence["n"] == evidence["counts"]["records"] > 60
    assert evidence["counts"]["candidate_ok"] == evidence["n"] and "Waudby-Smith" in evidence["method"]
    assert report["sequence"]["low"][0] is None and report["sequence"]["low"][-1] is not None  # unbounded at first
    assert f"{evidence['n']} judged (candidate ok {evidence['n']})" in out
    assert "verdict: " in out and report["ledger"] is None


def test_the_maximum_rejects_and_the_ledger_rolls_the_candidate_back(shadowed, tmp_path):
    gates = tmp_path / "gates.toml"
    gates.write_text("[sequential]\nalpha = 0.05\nmin_effect = 0.0\nmax_decisions = 30\n", encoding="utf-8")
    ledger = PromotionLedger(shadowed["ledger"])
    (start,) = ledger.records()
    assert (start.from_state, start.to_state) == ("candidate", "shadow")  # plan-loop --shadow recorded it
    assert start_planner_shadow(shadowed["candidate"], ledger=ledger) is None  # already shadowing
    report = planner_report(shadowed["candidate"], data=shadowed["root"] / "data", gates_file=gates, ledger=ledger)
    assert report.verdict.verdict == "reject" and "maximum of 30 iterations" in report.verdict.reason
    _, verdict = ledger.records()
    assert (verdict.from_state, verdict.to_state) == ("shadow", "rolled_back") and verdict.sequential.n == 30
    assert verdict.sequential.method.startswith("doubly robust asymptotic confidence sequence")
    assert verdict.sequential.counts["judged"] > 30 and ledger.state_of(verdict.module.digest) == "rolled_back"


def test_bad_inputs_are_one_line(shadowed, tmp_path):
    fullauto = export_program("full_auto.rules", tmp_path / "fa").path
    with pytest.raises(GuidebenchError, match="the planner gate judges planners"):
        planner_report(fullauto, data=shadowed["root"] / "data", record=False)
    other = export_program("planner.rules", tmp_path / "other", name="other").path
    with pytest.raises(GuidebenchError, match="holds no iteration with logged propensities and a choice of other"):
        planner_report(other, data=shadowed["root"] / "data", record=False)
