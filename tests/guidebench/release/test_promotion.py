"""guidebench.release.promotion: the ledger, and the candidate -> staged -> promoted -> rolled back flow on a real
MLflow registry (the gates themselves are tested in test_gates.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import programs
from frozen_support import decision_records, export_program, make_dataset
from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.release.model_registry import ModuleRegistry
from guidebench.release.promotion import PromotionLedger, PromotionRecord, ModuleRef, folder_digest, promote_module, \
    rollback_module


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
    assert first.evidence.lm is None  # neither the rule policy nor the logged decisions call an LM
    assert first.evidence.learned_from.status == "clean"  # a rule policy learned from no record
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
    # the champion (a rule policy) learned from none of the evidence's records, and the ledger says so
    assert rejected.evidence.champion_learned_from.status == "clean" and not rejected.evidence.champion_set_aside
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


def test_a_split_swapped_for_another_gives_no_evidence(world, tmp_path: Path, capsys):
    from dataset_support import swapped_split

    root, exports, _ = world
    swapped = swapped_split(root / "data", tmp_path / "swap", into="test", source="train")  # 4 records, not 40
    before = len(PromotionLedger().records())
    code = main(["promote", str(exports["continue"]), "--data", str(swapped)])
    printed = capsys.readouterr()
    assert code == 2 and len(printed.err.strip().splitlines()) == 1 and "evidence" not in printed.out
    assert f"{swapped}: split 'test' holds 4 records but dataset.json declares 40" in printed.err
    assert len(PromotionLedger().records()) == before


def test_the_evidence_and_the_ledger_name_the_lm(world, tmp_path: Path, capsys, restore_lm):
    from guidebench.lm.fake import FAKE_MODEL_ID
    from guidebench.lm.identity import LMIdentity

    root, _, _ = world
    module = export_program("full_auto.predict", tmp_path / "predict", name="lm-pkg", version="1.0.0").path
    ledger = tmp_path / "ledger.jsonl"
    main(["promote", str(module), "--data", str(root / "data"), "--lm", "fake", "--stage-only",
          "--ledger", str(ledger)])
    assert f"against baseline program logged; LM fake ({FAKE_MODEL_ID})" in capsys.readouterr().out
    (record,) = PromotionLedger(ledger).records()
    assert record.evidence.lm == LMIdentity(spec="fake", model=FAKE_MODEL_ID, model_sha256=None)


# ----- no evidence from records the module learned from --------------------------------------------

def _learned_on(fitted, data: str, split: str) -> int:
    """How many records of a split are, by their content, records of the fit's train and dev."""
    from evals.data import load_records

    learned = {r.content_hash for name in ("train", "dev") for r in load_records(fitted["ds"], name)}
    return sum(r.content_hash in learned for r in load_records(fitted[data], split))


def test_a_module_is_refused_on_records_it_learned_from_however_they_are_split(fitted, tmp_path: Path, capsys):
    from evals.data import dataset_info
    from optimizer_support import tracking_uri

    common = ["--tracking-uri", tracking_uri(tmp_path), "--ledger", str(tmp_path / "ledger.jsonl"), "--stage-only"]
    ds, ds1 = (dataset_info(fitted[name])["dataset_id"][:12] for name in ("ds", "ds1"))
    # 1. its own dev split, which its fit selected on and was refit on
    n_dev = dataset_info(fitted["ds"])["splits"]["dev"]["n"]
    assert main(["promote", str(fitted["ex"]), "--data", str(fitted["ds"]), "--split", "dev", *common]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "learned@0.1.0: refused (candidate -> candidate)",
        f"  {n_dev} of the {n_dev} records of split dev of dataset {ds} are records the program learned from (train "
        f"{dataset_info(fitted['ds'])['splits']['train']['n']} + dev {n_dev} of dataset {ds}): its scores there are "
        "not evidence; judge it on split test"]
    # 2. the same logs imported again with another seed: its "test" split is mostly what the module learned from
    overlap, n_test = _learned_on(fitted, "ds1", "test"), dataset_info(fitted["ds1"])["splits"]["test"]["n"]
    assert 0 < overlap <= n_test
    assert main(["promote", str(fitted["ex"]), "--data", str(fitted["ds1"]), *common]) == 1
    refusal = capsys.readouterr().out.splitlines()[1]
    assert refusal.startswith(f"  {overlap} of the {n_test} records of split test of dataset {ds1} are records the "
                              "program learned from") and refusal.endswith(
        f"judge it on the test split of dataset {ds}, where it was compiled, or on logs it never saw")
    # 3. its own test split: no record of it was learned from, so the gates decide
    assert main(["promote", str(fitted["ex"]), "--data", str(fitted["ds"]), *common]) in (0, 1)
    assert "refused" not in capsys.readouterr().out
    records = PromotionLedger(tmp_path / "ledger.jsonl").records()
    assert [r.outcome for r in records][:2] == ["refused", "refused"] and records[2].outcome in ("staged", "rejected")
    assert records[2].evidence.learned_from.n_overlap == 0 and records[2].evidence.learned_from.n_records == \
        dataset_info(fitted["ds"])["splits"]["test"]["n"]


def test_a_module_whose_provenance_is_unknown_is_refused(fitted, tmp_path: Path):
    from optimizer_support import tracking_uri

    state = json.loads((fitted["fit"] / "program.json").read_text())
    state.pop("provenance")
    (tmp_path / "state.json").write_text(json.dumps(state))
    module = export_program("full_auto.learned", tmp_path / "old", name="learned", version="0.0.1",
                            state=tmp_path / "state.json").path
    record = promote_module(module, data=fitted["ds"], ledger=PromotionLedger(tmp_path / "ledger.jsonl"),
                            tracking_uri=tracking_uri(tmp_path))
    assert record.outcome == "refused" and record.evidence is None
    assert record.reasons == ["provenance unknown: the program does not record which records it learned from, so "
                              f"split test of dataset {record.reasons[0].split('dataset ')[1][:12]} may hold some; "
                              "export or evaluate it again from its compile (its program.json records what it "
                              "learned from)"]


def _renamed_logs(source: Path, target: Path) -> int:
    """A copy of a log folder with every UUID (in file names and lines) mapped one-to-one to a new one; how many.
    The new ids are seeded: the import splits by thread id, so random ones would draw another test split each run."""
    import random
    import re
    import uuid

    from runtime.records import ID_PATTERN

    rng = random.Random(0)
    fresh: dict[str, str] = {}
    new_id = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))  # noqa: E731
    rename = lambda text: ID_PATTERN.sub(lambda m: fresh.setdefault(m.group(0), new_id()), text)  # noqa: E731
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        out = target / rename(path.relative_to(source).as_posix())
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(rename(path.read_text(encoding="utf-8")), encoding="utf-8")
    assert all(re.fullmatch(r"[0-9a-f-]{36}", key) for key in fresh)
    return len(fresh)


def test_logs_with_every_id_renamed_are_still_what_the_module_learned_from(fitted, tmp_path: Path):
    from evals.data import dataset_info, load_records
    from guidebench.cli import main as cli
    from optimizer_support import tracking_uri

    assert _renamed_logs(Path(fitted["logs"]), tmp_path / "logs") > 100
    assert cli(["data", "import", str(tmp_path / "logs"), "--kind", "fullauto", "--seed", "2", "--out",
                str(tmp_path / "ds")]) == 0
    learned = {r.inputs_hash for name in ("train", "dev") for r in load_records(fitted["ds"], name)}
    test = load_records(tmp_path / "ds", "test")
    assert not any(r.inputs_hash in learned for r in test)  # by the ids they carry, every record is new...
    overlap = _learned_on({**fitted, "renamed": tmp_path / "ds"}, "renamed", "test")
    assert overlap > len(test) // 2  # ...and by their content, most are what it learned from
    record = promote_module(fitted["ex"], data=tmp_path / "ds", ledger=PromotionLedger(tmp_path / "ledger.jsonl"),
                            tracking_uri=tracking_uri(tmp_path), stage_only=True)
    ds = dataset_info(tmp_path / "ds")["dataset_id"][:12]
    assert record.outcome == "refused" and record.evidence is None
    assert record.reasons[0].startswith(f"{overlap} of the {len(test)} records of split test of dataset {ds} are "
                                        "records the program learned from")


@pytest.mark.parametrize("tamper, why", [
    (lambda p: p.update(hashes={}), "its counts name splits ['dev', 'train'] and its hashes splits []"),
    (lambda p: p.clear(), "it names no record identity"),
    (lambda p: p["hashes"].update(dev=[]), "it claims"),
])
def test_an_emptied_provenance_is_unknown_and_refused(fitted, tmp_path: Path, tamper, why):
    from optimizer_support import tracking_uri

    state = json.loads((fitted["fit"] / "program.json").read_text())
    tamper(state["provenance"])
    (tmp_path / "state.json").write_text(json.dumps(state))
    module = export_program("full_auto.learned", tmp_path / "emptied", name="learned", version="0.0.2",
                            state=tmp_path / "state.json").path
    record = promote_module(module, data=fitted["ds"], split="dev", ledger=PromotionLedger(tmp_path / "l.jsonl"),
                            tracking_uri=tracking_uri(tmp_path), stage_only=True)
    assert record.outcome == "refused" and record.evidence is None
    assert record.reasons[0].startswith(f"provenance unknown: its provenance does not hold together: {why}")
    assert record.reasons[0].endswith("recompile it and export or evaluate it again (its program.json then records "
                                      "content hashes)")


LENIENT = ('max_p_value = 1.0\nmin_objective_delta = -1.0\nmin_records = 2\n'
           '[max_increase]\nguardrail_override_rate = 1.0\nparse_failure_rate = 1.0\n')


def test_a_champion_that_learned_from_the_evidence_cannot_judge(fitted, tmp_path: Path):
    from evals.data import dataset_info
    from optimizer_support import tracking_uri

    uri, gates, ledger = tracking_uri(tmp_path), tmp_path / "lenient.toml", PromotionLedger(tmp_path / "l.jsonl")
    gates.write_text(LENIENT)
    options = dict(tracking_uri=uri, gates_file=gates, ledger=ledger)
    # the fitted module becomes champion on its own test split, which it never saw
    first = promote_module(fitted["ex"], data=fitted["ds"], **options)
    assert first.outcome == "promoted" and first.evidence.champion_learned_from is None  # judged against the log
    challenger = export_program("full_auto.rules", tmp_path / "rules", name="learned", version="0.2.0").path
    # on the re-import's test split, mostly records the champion learned from: it cannot judge there
    overlap, n_test = _learned_on(fitted, "ds1", "test"), dataset_info(fitted["ds1"])["splits"]["test"]["n"]
    ds, ds1 = (dataset_info(fitted[name])["dataset_id"][:12] for name in ("ds", "ds1"))
    refused = promote_module(challenger, data=fitted["ds1"], **options)
    assert refused.outcome == "refused" and refused.evidence is None and refused.champion.package == "learned@0.1.0"
    assert refused.reasons == [
        f"the champion learned@0.1.0 (registry version 1) learned from {overlap} of the {n_test} records of split "
        f"test of dataset {ds1} (train {dataset_info(fitted['ds'])['splits']['train']['n']} + dev "
        f"{dataset_info(fitted['ds'])['splits']['dev']['n']} of dataset {ds}): it cannot judge a challenger there; "
        "promote on logs neither learned from, or name a program to judge it against instead with --baseline"]
    assert ledger.records()[-1] == refused
    # named instead: the deployed policy's logged decisions judge it, and the ledger says the champion was set aside
    instead = promote_module(challenger, data=fitted["ds1"], baseline="logged", stage_only=True, **options)
    assert instead.outcome in ("staged", "rejected") and instead.evidence.baseline == "baseline program logged"
    assert instead.evidence.champion_learned_from is None and instead.evidence.champion_set_aside.startswith(
        f"champion learned@0.1.0 (registry version 1) set aside: {overlap} of the {n_test} records of split test of "
        f"dataset {ds1} are records the champion learned from")
    # on the split it never saw, the champion judges, and the ledger says it learned from none of its records
    judged = promote_module(challenger, data=fitted["ds"], stage_only=True, **options)
    assert judged.evidence.baseline == "champion learned@0.1.0" and judged.evidence.champion_learned_from.status == \
        "clean" and judged.evidence.champion_learned_from.n_records == judged.evidence.n_records


def test_a_champion_whose_provenance_is_unknown_cannot_judge(fitted, tmp_path: Path):
    """A champion promoted before content hashes (its provenance knows records by their inputs hash) cannot judge a
    challenger; named, a baseline judges instead."""
    from evals.data import dataset_info
    from guidebench.release.promotion import log_promotion_run, module_ref, new_record, register_once
    from optimizer_support import tracking_uri
    from runtime.frozen.loader import verify_frozen

    uri, ledger = tracking_uri(tmp_path), PromotionLedger(tmp_path / "l.jsonl")
    state = json.loads((fitted["fit"] / "program.json").read_text())
    learned = state["provenance"]
    learned.update(identity="inputs_hash", hashes=sorted(h for listed in learned["hashes"].values() for h in listed))
    (tmp_path / "state.json").write_text(json.dumps(state))
    old = export_program("full_auto.learned", tmp_path / "old", name="old", version="0.0.1",
                         state=tmp_path / "state.json").path
    # registered as champion the way a promotion of that time did it
    registry, manifest, digest = ModuleRegistry(uri), verify_frozen(old), folder_digest(old)
    record = new_record(action="promote", module=module_ref(manifest, old, digest), from_state="candidate",
                        to_state="staged", outcome="staged")
    registered = register_once(registry, manifest, old, digest, log_promotion_run(registry, record, module_dir=old))
    registry.make_champion("old", registered.version)
    challenger = export_program("full_auto.rules", tmp_path / "rules", name="old", version="0.0.2").path
    refused = promote_module(challenger, data=fitted["ds"], tracking_uri=uri, ledger=ledger)
    ds = dataset_info(fitted["ds"])["dataset_id"][:12]
    assert refused.outcome == "refused" and refused.reasons == [
        f"the champion old@0.0.1 (registry version 1) cannot judge a challenger on split test of dataset {ds}: its "
        "provenance is unknown (its provenance does not hold together: it knows records by their inputs hash, which "
        "includes their ids (written before content hashes), so a renamed copy of a record escapes it); promote on "
        "logs neither learned from, or name a program to judge it against instead with --baseline"]
    instead = promote_module(challenger, data=fitted["ds"], tracking_uri=uri, ledger=ledger, baseline="logged",
                             stage_only=True)
    assert instead.evidence.baseline == "baseline program logged" and instead.evidence.champion_set_aside.startswith(
        "champion old@0.0.1 (registry version 1) set aside: provenance unknown: its provenance does not hold "
        "together: it knows records by their inputs hash")
