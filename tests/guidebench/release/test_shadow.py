"""guidebench.release.shadow: a candidate shadows the deployed program in the simulated loop, the logs import, the
sequential gate reaches a verdict, and the ledger records each transition with its evidence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import programs
from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.release.promotion import PromotionLedger, folder_digest
from guidebench.release.shadow import shadow_report, start_shadow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A `full_auto.learned` fit on simulated logs and exported, the exports of two rule programs, a tracking store."""
    from evals import metrics_fullauto
    from evals.data import dataset_info, load_records
    from frozen_support import export_program
    from runtime.provenance import Provenance
    from guidebench.data import import_logs
    from guidebench.data.fullauto_writer import simulate_workspace
    from optimizer_support import tracking_uri
    from optimizers.fitting import FitSettings, fit_model

    root = tmp_path_factory.mktemp("shadow")
    simulate_workspace(root / "train-logs", 30, seed=21)
    import_logs(root / "train-logs", "fullauto", root / "train-data")
    examples = {split: [programs.decision_example(r) for r in load_records(root / "train-data", split) if r.label]
                for split in ("train", "dev")}
    fitted = fit_model(examples["train"], examples["dev"], metrics_fullauto.metric,
                       FitSettings(C=(2.0,), class_weight=("none",), folds=0))
    learned = programs.get("full_auto.learned")
    learned.trained_model.set_model(fitted.model)
    state = learned.dump_state()  # with what it learned from, as a compile writes it
    records = {split: load_records(root / "train-data", split) for split in ("train", "dev")}
    state["provenance"] = Provenance.of(dataset_info(root / "train-data")["dataset_id"], records).model_dump()
    (root / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return {"root": root, "uri": tracking_uri(root / "mlflow"),
            "learned": export_program("full_auto.learned", root / "learned", name="fa-learned", version="1.0.0",
                                      state=root / "state.json").path,
            "continue": export_program("full_auto.always_continue", root / "continue", name="fa-continue").path,
            "rules": export_program("full_auto.rules", root / "rules", name="fa-rules").path}


def _ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_run_loop_import_report_verdict_and_ledger_end_to_end(world, tmp_path, capsys):
    """The deployed program decides, the learned export shadows it; the gate promotes it and the ledger says so."""
    ledger, logs, data = tmp_path / "promotions.jsonl", tmp_path / "logs", tmp_path / "data"
    assert main(["run-loop", "--module", str(world["continue"]), "--shadow", str(world["learned"]), "--runs", "12",
                 "--seed", "5", "--out", str(logs), "--ledger", str(ledger)]) == 0
    assert "shadow fa-learned@1.0.0: written 170, ok 170" in capsys.readouterr().out
    assert main(["data", "import", str(logs), "--kind", "fullauto", "--shadow-module", str(world["learned"]),
                 "--out", str(data)]) == 0
    capsys.readouterr()
    assert main(["shadow", "report", "--module", str(world["learned"]), "--data", str(data), "--ledger", str(ledger),
                 "--tracking-uri", world["uri"], "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "turns: 170 decisions, 170 shadowed (ok 170), 170 labeled and paired, 0 awaiting a label" in out
    assert "verdict: promote — the 95% confidence sequence is above 0 after" in out
    assert "ledger: shadow -> promoted" in out and "first champion" in out
    start, verdict = _ledger(ledger)
    digest = folder_digest(world["learned"])
    assert (start["from_state"], start["to_state"], start["module"]["digest"]) == ("candidate", "shadow", digest)
    assert (verdict["from_state"], verdict["to_state"], verdict["outcome"]) == ("shadow", "promoted", "promoted")
    evidence = verdict["sequential"]
    assert evidence["verdict"] == "promote" and evidence["n"] == 170 and evidence["cs_low"] > 0
    assert evidence["cs_low"] <= evidence["difference"] <= evidence["cs_high"]
    assert evidence["candidate_objective"] > evidence["deployed_objective"]
    assert {check["gate"]: check["passed"] for check in verdict["checks"]} == {
        "module": True, "sequential:better": True, "sequential:min_effect": True, "sequential:max_decisions": True}
    from guidebench.release.model_registry import CHAMPION, ModuleRegistry

    assert ModuleRegistry(world["uri"]).alias("fa-learned", CHAMPION).digest == digest
    report = json.loads((tmp_path / "report" / "shadow_report.json").read_text(encoding="utf-8"))
    assert report["evidence"] == evidence and len(report["sequence"]["low"]) == 170
    assert (tmp_path / "report" / "shadow_report.png").read_bytes()[:4] == b"\x89PNG"
    # judged again, the verdict stands but nothing is recorded twice
    again = shadow_report(world["learned"], data=data, ledger=PromotionLedger(ledger), tracking_uri=world["uri"])
    assert again.verdict.verdict == "promote" and again.record is None and len(_ledger(ledger)) == 2
    assert again.notes == [f"ledger: not recorded, the ledger has fa-learned@1.0.0 in state promoted (record the start "
                           f"of its shadowing with: guidebench shadow start {world['learned']})"]


def test_a_candidate_identical_to_the_deciding_module_differs_on_no_turn(world, tmp_path):
    """The same export deciding and shadowing (its run's config as input to both): every paired difference is 0."""
    from guidebench.data import import_logs
    from guidebench.release.closed_loop import run_loop

    ledger = PromotionLedger(tmp_path / "ledger.jsonl")
    run_loop(world["learned"], runs=8, seed=3, out=tmp_path / "logs", shadow=world["learned"], ledger=ledger)
    import_logs(tmp_path / "logs", "fullauto", tmp_path / "data")
    report = shadow_report(world["learned"], data=tmp_path / "data", record=False)
    assert report.pairs.counts["paired"] > 20 and not report.pairs.differences.any()
    assert report.verdict.verdict == "keep shadowing" and "would not reach a verdict" in report.verdict.reason
    orphans = report.pairs.counts["orphan"]
    assert report.pairs.counts["shadowed"] == report.pairs.counts["paired"] + orphans


@pytest.fixture(scope="module")
def rules_shadowed(world, tmp_path_factory):
    """The simulator's deployed policy with the rules export shadowing it, imported (labels from the simulator)."""
    from guidebench.data import import_logs
    from guidebench.release.closed_loop import run_loop

    root = tmp_path_factory.mktemp("rules-shadowed")
    run_loop(None, runs=10, seed=8, out=root / "logs", shadow=world["rules"],
             ledger=PromotionLedger(root / "ledger.jsonl"))
    import_logs(root / "logs", "fullauto", root / "data")
    return root


def test_the_maximum_rejects_and_the_ledger_rolls_the_candidate_back(world, rules_shadowed, tmp_path, capsys):
    gates = tmp_path / "gates.toml"
    gates.write_text("[sequential]\nalpha = 0.05\nmin_effect = 0.0\nmax_decisions = 40\n", encoding="utf-8")
    ledger = PromotionLedger(tmp_path / "promotions.jsonl")
    start_shadow(world["rules"], ledger=ledger)
    report = shadow_report(world["rules"], data=rules_shadowed / "data", gates_file=gates, ledger=ledger)
    assert report.verdict.verdict == "reject" and report.verdict.n == 40
    assert "maximum of 40 decisions" in report.verdict.reason
    (start, verdict) = ledger.records()
    assert (start.to_state, verdict.from_state, verdict.to_state) == ("shadow", "shadow", "rolled_back")
    assert verdict.sequential.max_decisions == 40 and verdict.gates.sequential.max_decisions == 40
    assert [c.passed for c in verdict.checks if c.gate == "sequential:max_decisions"] == [False]


def test_turns_whose_labels_never_arrive_are_counted_and_left_out(world, rules_shadowed, tmp_path, capsys):
    from guidebench.data import import_logs

    logs = tmp_path / "logs"
    shutil.copytree(rules_shadowed / "logs", logs)
    (logs / "labels.jsonl").unlink()  # only the labeling rules label, and they never guess
    import_logs(logs, "fullauto", tmp_path / "data")
    report = shadow_report(world["rules"], data=tmp_path / "data", record=False)
    counts = report.pairs.counts
    assert counts["awaiting_label"] > 0 and counts["paired"] == counts["shadowed"] - counts["awaiting_label"]
    assert report.verdict.n == counts["paired"] and report.verdict.verdict == "keep shadowing"
    assert f"{counts['awaiting_label']} awaiting a label" in "\n".join(report.lines())
    assert "more labeled decisions" in report.verdict.reason or "would not reach" in report.verdict.reason


def test_bad_input_is_one_line(world, rules_shadowed, tmp_path, capsys):
    data = rules_shadowed / "data"
    cases = [
        (["--module", str(world["learned"]), "--data", str(data)],
         "holds no shadow decision of fa-learned@1.0.0 (checksum"),
        (["--module", str(world["rules"]), "--data", str(tmp_path / "nowhere")], "no such file or folder"),
        (["--module", str(data), "--data", str(data)], "not an exported module folder"),
    ]
    for argv, expected in cases:
        assert main(["shadow", "report", *argv, "--no-record"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0] and "Traceback" not in err[0], err
    gates = tmp_path / "gates.toml"
    gates.write_text("[sequential]\nalpha = 2\n", encoding="utf-8")
    assert main(["shadow", "report", "--module", str(world["rules"]), "--data", str(data), "--gates", str(gates)]) == 2
    assert "field sequential.alpha" in capsys.readouterr().err


def test_shadowing_starts_once_and_never_for_the_champion(world, tmp_path, capsys):
    ledger = tmp_path / "promotions.jsonl"
    assert main(["shadow", "start", str(world["rules"]), "--ledger", str(ledger)]) == 0
    assert "fa-rules@0.1.0: candidate -> shadow" in capsys.readouterr().out
    assert main(["shadow", "start", str(world["rules"]), "--ledger", str(ledger)]) == 0
    assert "already shadowing" in capsys.readouterr().out and len(_ledger(ledger)) == 1
    record = PromotionLedger(ledger).records()[0].model_copy(update={"to_state": "promoted"})
    PromotionLedger(ledger).append(record)
    with pytest.raises(GuidebenchError, match="is promoted: it decides, it cannot shadow"):
        start_shadow(world["rules"], ledger=PromotionLedger(ledger))
