"""Promotion gates, the ledger, and the candidate -> staged -> promoted -> rolled back flow on MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import programs
from frozen_support import decision_records, export_program, make_dataset
from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.release.gates import GatesConfig, PairedDiff, evaluate_gates, load_gates
from guidebench.release.model_registry import ModuleRegistry
from guidebench.release.promotion import PromotionLedger, PromotionRecord, ModuleRef, folder_digest, promote_module, \
    rollback_module
from runtime.frozen.manifest import MetricInterval

# ----- gates --------------------------------------------------------------------------------------


def test_default_gates_are_the_issue_gates():
    gates = GatesConfig()
    assert (gates.objective, gates.min_objective_delta, gates.max_p_value) == ("objective", 0.0, 0.05)
    assert gates.max_increase == {"guardrail_override_rate": 0.0, "parse_failure_rate": 0.0}
    assert (gates.cost_metric, gates.max_cost_ratio) == ("tokens_per_decision", 1.15)


@pytest.mark.parametrize("name, text", [
    ("gates.toml", 'max_p_value = 0.1\nmax_cost_ratio = 1.3\n[max_increase]\nparse_failure_rate = 0.02\n'),
    ("gates.yaml", "gates:\n  max_p_value: 0.1\n  max_cost_ratio: 1.3\n  max_increase:\n    parse_failure_rate: 0.02\n"),
    ("gates.json", '{"max_p_value": 0.1, "max_cost_ratio": 1.3, "max_increase": {"parse_failure_rate": 0.02}}'),
])
def test_gates_files_in_three_formats(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    gates = load_gates(path)
    assert (gates.max_p_value, gates.max_cost_ratio, gates.max_increase) == (0.1, 1.3, {"parse_failure_rate": 0.02})
    assert gates.objective == "objective"


@pytest.mark.parametrize("name, text, message", [
    ("g.toml", "max_p_value = 2\n", "g.toml: field max_p_value: Input should be less than or equal to 1"),
    ("g.toml", "max_pvalue = 0.1\n", "g.toml: field max_pvalue: Extra inputs are not permitted"),
    ("g.toml", "max_p_value = \n", "g.toml: not valid TOML"),
    ("g.yaml", "- a\n- b\n", "g.yaml: gates must be a table / mapping"),
    ("g.ini", "x=1\n", "g.ini: gates file must be .toml, .yaml, .yml or .json"),
])
def test_bad_gates_files_name_the_file_and_field(tmp_path: Path, name: str, text: str, message: str):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(GuidebenchError) as info:
        load_gates(path)
    assert message in str(info.value)


def _metrics(**values: float) -> dict[str, MetricInterval]:
    return {name: MetricInterval(value=value, n=50) for name, value in values.items()}


BASE = dict(objective=0.60, guardrail_override_rate=0.20, parse_failure_rate=0.05, tokens_per_decision=400.0)


def _verdicts(candidate: dict, champion: dict = BASE, diff=0.1, p=0.01, n=50, **kwargs) -> dict[str, bool]:
    paired = {"objective": PairedDiff(diff=diff, ci_low=diff - 0.05, ci_high=diff + 0.05, p_value=p, n=n)}
    checks = evaluate_gates(GatesConfig(**kwargs.pop("gates", {})), _metrics(**candidate), _metrics(**champion),
                            paired, n, **kwargs)
    assert all(check.reason for check in checks)
    return {check.gate: check.passed for check in checks}


def test_a_better_cheaper_candidate_passes_every_gate():
    verdicts = _verdicts(dict(BASE, objective=0.70, tokens_per_decision=450.0))
    assert all(verdicts.values()) and set(verdicts) == {
        "records", "objective", "not_worse:guardrail_override_rate", "not_worse:parse_failure_rate", "cost"}


@pytest.mark.parametrize("change, kwargs, failing", [
    ({}, {"p": 0.2}, "objective"),                                   # not significant
    ({"objective": 0.55}, {"diff": -0.05, "p": 0.01}, "objective"),  # significantly worse
    ({"guardrail_override_rate": 0.25}, {}, "not_worse:guardrail_override_rate"),
    ({"parse_failure_rate": 0.051}, {}, "not_worse:parse_failure_rate"),
    ({"tokens_per_decision": 461.0}, {}, "cost"),                    # 15.25% above the champion
    ({}, {"n": 10}, "records"),
])
def test_each_gate_fails_on_its_own(change, kwargs, failing):
    verdicts = _verdicts({**BASE, "objective": 0.70, **change}, **kwargs)
    assert [gate for gate, ok in verdicts.items() if not ok] == [failing]


def test_cost_gate_allows_fifteen_percent_and_can_be_moot():
    assert _verdicts(dict(BASE, objective=0.7, tokens_per_decision=460.0))["cost"]
    checks = evaluate_gates(GatesConfig(), _metrics(**dict(BASE, tokens_per_decision=900.0)),
                            _metrics(**dict(BASE, tokens_per_decision=0.0)),
                            {"objective": PairedDiff(diff=0.1, p_value=0.01, n=50)}, 50,
                            cost_uncomparable="the baseline replays the log")
    cost = next(c for c in checks if c.gate == "cost")
    assert cost.passed and "not compared: the baseline replays the log" in cost.reason


def test_absolute_floors_and_missing_metrics_fail_with_reasons():
    verdicts = _verdicts(dict(BASE, objective=0.7), gates={"min_values": {"objective": 0.8}})
    assert verdicts["min:objective"] is False
    checks = evaluate_gates(GatesConfig(), _metrics(objective=0.7), _metrics(objective=0.6), {}, 50)
    reasons = {c.gate: c.reason for c in checks if not c.passed}
    assert reasons["objective"].startswith("objective: no paired comparison")
    assert reasons["cost"].startswith("tokens_per_decision: missing")


# ----- ledger ---------------------------------------------------------------------------------------

def _ledger_record(digest: str, to_state: str) -> PromotionRecord:
    return PromotionRecord(attempt_id="a", at="2026-01-01T00:00:00Z", action="promote",
                           module=ModuleRef(name="m", digest=digest), from_state="candidate", to_state=to_state,
                           outcome="staged" if to_state == "staged" else "rejected", reasons=["r"])


def test_ledger_appends_atomically_and_reports_states(tmp_path: Path):
    ledger = PromotionLedger(tmp_path / "promotions.jsonl")
    assert ledger.records() == [] and ledger.state_of("d1") == "candidate"
    ledger.append(_ledger_record("d1", "candidate"))
    ledger.append(_ledger_record("d1", "staged"))
    ledger.append(_ledger_record("d2", "candidate"))
    assert [r.to_state for r in ledger.records()] == ["candidate", "staged", "candidate"]
    assert ledger.state_of("d1") == "staged" and ledger.state_of("d2") == "candidate"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["promotions.jsonl", "promotions.jsonl.lock"]
    with open(ledger.path, "a") as handle:
        handle.write('{"attempt_id": 3}\n')
    with pytest.raises(GuidebenchError, match=r"promotions.jsonl:4: field"):
        ledger.records()


# ----- the whole flow on a real MLflow registry ---------------------------------------------------

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A dataset whose labels are what `full_auto.rules` decides, and three exports of package `pkg`."""
    root = tmp_path_factory.mktemp("promotion")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(root / "home"))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        rules = programs.get("full_auto.rules")
        records = decision_records(40, 1, label_of=lambda s: rules(**programs.decision_inputs(s)).action)
        make_dataset(root / "data", records)
        exports = {
            "rules": export_program("full_auto.rules", root / "rules", name="pkg", version="1.0.0").path,
            "continue": export_program("full_auto.always_continue", root / "continue", name="pkg",
                                       version="2.0.0").path,
        }
        (root / "lenient.toml").write_text('max_p_value = 1.0\nmin_objective_delta = -1.0\nmin_records = 2\n'
                                           '[max_increase]\nguardrail_override_rate = 1.0\nparse_failure_rate = 1.0\n')
        yield root, exports, patch


def test_candidate_staged_promoted_rejected_and_rolled_back(world, capsys):
    root, exports, _ = world
    ledger = PromotionLedger()
    registry = ModuleRegistry()

    # 1. First champion: measured against the deployed policy's logged decisions.
    first = promote_module(exports["rules"], data=root / "data", split="test", ledger=ledger)
    assert first.outcome == "promoted" and first.to_state == "promoted"
    assert first.evidence.baseline == "baseline program logged" and first.evidence.n_records == 40
    objective = first.evidence.paired["objective"]
    assert objective.diff > 0 and objective.p_value < 0.05
    assert next(c for c in first.checks if c.gate == "cost").reason.startswith("tokens_per_decision not compared")
    champion = registry.alias("pkg", "champion")
    assert champion.package == "pkg@1.0.0" and champion.digest == folder_digest(exports["rules"])
    assert registry.alias("pkg", "previous") is None
    assert [(r.from_state, r.to_state) for r in ledger.records()] == [("candidate", "staged"), ("staged", "promoted")]
    run = registry.client.get_run(first.mlflow_run_id)
    assert run.data.params["outcome"] == "staged" and run.data.metrics["candidate.objective"] == 1.0
    artifacts = {a.path for a in registry.client.list_artifacts(first.mlflow_run_id, "frozen_module")}
    assert "frozen_module/program.json" in artifacts

    # 2. A worse candidate is rejected by the default gates, with reasons; the champion stays.
    code = main(["promote", str(exports["continue"]), "--data", str(root / "data")])
    out = capsys.readouterr().out
    assert code == 1 and "pkg@2.0.0: rejected (candidate -> candidate)" in out
    assert "[FAIL] objective failed" in out and "against champion pkg@1.0.0" in out
    rejected = ledger.records()[-1]
    assert rejected.outcome == "rejected" and rejected.champion.package == "pkg@1.0.0"
    assert any(reason.startswith("guardrail_override_rate failed") for reason in rejected.reasons)
    assert registry.alias("pkg", "champion").package == "pkg@1.0.0"

    # 3. Stage only, then promote under lenient gates: the old champion becomes `previous`.
    staged = promote_module(exports["continue"], data=root / "data", gates_file=root / "lenient.toml",
                            stage_only=True, ledger=ledger)
    assert staged.outcome == "staged" and registry.alias("pkg", "champion").package == "pkg@1.0.0"
    code = main(["promote", str(exports["continue"]), "--data", str(root / "data"), "--gates",
                 str(root / "lenient.toml")])
    out = capsys.readouterr().out
    assert code == 0 and "pkg@2.0.0: promoted (staged -> promoted)" in out
    assert registry.alias("pkg", "champion").package == "pkg@2.0.0"
    assert registry.alias("pkg", "previous").package == "pkg@1.0.0"
    with pytest.raises(GuidebenchError, match="is already the champion"):
        promote_module(exports["continue"], data=root / "data", ledger=ledger)

    # 4. Roll back: 1.0.0 is champion again, 2.0.0 is rolled back; no earlier version to go back to.
    code = main(["rollback", "pkg", "--reason", "regression in production"])
    out = capsys.readouterr().out
    assert code == 0 and "rolled back pkg@2.0.0" in out and "champion is now pkg@1.0.0" in out
    assert registry.alias("pkg", "champion").package == "pkg@1.0.0" and registry.alias("pkg", "previous") is None
    assert registry.version("pkg", registry.find("pkg", folder_digest(exports["continue"])).version).state \
        == "rolled_back"
    assert ledger.state_of(folder_digest(exports["continue"])) == "rolled_back"
    assert ledger.state_of(folder_digest(exports["rules"])) == "promoted"
    rollback = [r for r in ledger.records() if r.action == "rollback"][0]
    assert rollback.reasons[0] == "regression in production"
    with pytest.raises(GuidebenchError, match="has no previous version to roll back to"):
        rollback_module("pkg", ledger=ledger)
    outcomes = [r.outcome for r in ledger.records()]
    assert outcomes == ["staged", "promoted", "rejected", "staged", "staged", "promoted", "rolled_back", "promoted"]


def test_a_tampered_module_is_refused_and_recorded(world, tmp_path: Path):
    import shutil

    root, exports, _ = world
    copy = tmp_path / "tampered"
    shutil.copytree(exports["rules"], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["version"] = "9.9.9"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    ledger = PromotionLedger(tmp_path / "ledger.jsonl")
    record = promote_module(copy, data=root / "data", ledger=ledger)
    assert record.outcome == "refused" and "checksum mismatch: manifest.json" in record.reasons[0]
    assert ledger.records()[-1].outcome == "refused" and ledger.records()[-1].module.path == str(copy)


def test_promotion_evidence_must_come_from_a_held_out_split(world):
    root, exports, _ = world
    with pytest.raises(GuidebenchError, match="held-out split"):
        promote_module(exports["rules"], data=root / "data", split="train",
                       ledger=PromotionLedger(root / "other-ledger.jsonl"))


def test_a_gates_file_asking_for_fewer_records_than_the_test_can_resolve_is_refused(tmp_path: Path):
    from guidebench.release.gates import load_gates

    gates = tmp_path / "gates.toml"
    gates.write_text("min_records = 3\nmax_p_value = 0.05\n")
    with pytest.raises(GuidebenchError, match=r"min_records = 3 is below .* at least 6 records"):
        load_gates(gates)
    gates.write_text("min_records = 6\nmax_p_value = 0.05\n")
    assert load_gates(gates).min_records == 6
