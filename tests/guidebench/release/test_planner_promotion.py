"""`guidebench promote` of planner exports: a planner meets the planner's gates (it has no guardrails, so no guardrail
gate), a better planner is promoted over the logged decisions, a worse one is rejected by that champion, and the
objective's line gives both programs' means over the records the difference is over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frozen_support import export_program
from guidebench.cli import main


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """40 simulated episodes (their planner: the simulator's personas, which break the pivot protocol now and then),
    split by episode 45 / 15 / 40 so that test holds more than 10 episodes; `planner.learned` fit on train + dev
    (`compile --optimizer fit`) and exported as `pl@1.0.0`, `planner.rules` exported as `pl@2.0.0`."""
    from guidebench.data import import_logs

    root = tmp_path_factory.mktemp("planner-promotion")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(root / "home"))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        assert main(["data", "simulate", "experiments", "--episodes", "40", "--seed", "4",
                     "--out", str(root / "sim")]) == 0
        import_logs(root / "sim", "experiments", root / "data", fractions={"train": 0.45, "dev": 0.15, "test": 0.4},
                    progress=False)
        steps = [["compile", "--program", "planner.learned", "--optimizer", "fit", "--data", str(root / "data"),
                  "--out", str(root / "fit"), "--no-progress", "--tracking-uri", f"sqlite:///{root / 'runs.db'}"],
                 ["export", "--program", "planner.learned", "--state", str(root / "fit" / "program.json"),
                  "--name", "pl", "--version", "1.0.0", "--out", str(root / "learned")],
                 ["export", "--program", "planner.rules", "--name", "pl", "--version", "2.0.0",
                  "--out", str(root / "rules")]]
        for argv in steps:
            assert main(argv) == 0, argv
        yield root


def _last(ledger: Path) -> dict:
    return json.loads(ledger.read_text(encoding="utf-8").splitlines()[-1])


@pytest.mark.slow
def test_a_better_planner_is_promoted_and_a_worse_one_rejected_with_the_planner_gates(world, capsys):
    ledger = world / "ledger.jsonl"
    code = main(["promote", str(world / "learned"), "--data", str(world / "data"), "--baseline", "planner.logged",
                 "--lm", "fake", "--ledger", str(ledger)])
    out = capsys.readouterr().out
    record = _last(ledger)
    assert code == 0 and record["outcome"] == "promoted", out
    checks = {c["gate"]: c for c in record["checks"]}
    assert set(checks) == {"records", "objective", "not_worse:parse_failure_rate", "cost"}  # no guardrail gate
    assert record["gates"]["max_increase"] == {"parse_failure_rate": 0.0}  # the planner's defaults, spelt out
    paired = record["evidence"]["paired"]["objective"]
    objective = checks["objective"]
    # the means printed are both programs' over the paired records, and their difference is the one tested
    assert (objective["candidate"], objective["champion"]) == (paired["value_a"], paired["value_b"])
    assert abs(paired["value_a"] - paired["value_b"] - paired["diff"]) < 1e-12
    assert f"on the same {paired['n']} paired records, difference {paired['diff']:+.4g}" in objective["reason"]
    assert paired["n"] < record["evidence"]["n_records"]  # the logged decisions score fewer records than the split
    assert checks["records"]["candidate"] == paired["n"] and paired["p_value"] < 0.05 and paired["n_groups"] >= 10
    assert objective["reason"] in out

    # planner.rules under the same name: judged by the champion it would replace (the learned planner), and rejected
    code = main(["promote", str(world / "rules"), "--data", str(world / "data"), "--lm", "fake",
                 "--ledger", str(ledger)])
    record = _last(ledger)
    assert code == 1 and record["outcome"] == "rejected", capsys.readouterr().out
    assert record["evidence"]["baseline"] == "champion pl@1.0.0"
    objective = next(c for c in record["checks"] if c["gate"] == "objective")
    assert not objective["passed"] and objective["candidate"] < objective["champion"]
    assert record["evidence"]["paired"]["objective"]["diff"] < 0


def test_a_gates_file_with_a_guardrail_gate_is_refused_for_a_planner_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    planner = export_program("planner.rules", tmp_path / "pl").path
    gates = tmp_path / "fullauto-gates.toml"
    gates.write_text("[max_increase]\nguardrail_override_rate = 0.0\n", encoding="utf-8")
    code = main(["promote", str(planner), "--data", str(tmp_path / "data"), "--gates", str(gates),
                 "--ledger", str(tmp_path / "ledger.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert ("fullauto-gates.toml: field max_increase.guardrail_override_rate: planner replay does not measure "
            "'guardrail_override_rate'; move the gate into a [full_auto] table") in err
    assert not (tmp_path / "ledger.jsonl").exists()  # refused before any attempt
