"""guidebench.compile under an LM outage longer than the compile's retries: the run is marked failed, and
`--resume` finishes it without repeating any LM call answered before; the compiled program's provenance, and its
dev scores flagged as scores on records it learned from."""

from __future__ import annotations

import dspy
import mlflow
import pytest

import optimizers.base as optimizers_base
from lm_fault_support import FaultEngine, fault_lm
from optimizer_support import make_dataset
from reliability_ledger import record as ledger


def test_an_outage_longer_than_the_retries_fails_the_run_and_resume_finishes_without_repeating(tmp_path, monkeypatch,
                                                                                                restore_lm):
    from guidebench.lm import factory as lm_module
    from guidebench.compile import CompileRequest, run_compile
    from guidebench.lm.factory import configure_disk_cache

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    configure_disk_cache()
    monkeypatch.setattr(optimizers_base, "RETRY_BACKOFF_S", 0.01)
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=4)
    down = {"on": True}
    engine = FaultEngine(lambda index, inputs: "server" if down["on"] and index >= 1 else None)
    injected = fault_lm(engine, cache=True)
    monkeypatch.setattr(lm_module, "configure_lm", lambda spec, **kw: dspy.configure(lm=injected) or injected)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    request = CompileRequest(program="full_auto.predict", optimizer="bootstrap_fewshot", data=str(data), lm="fake",
                             tracking_uri=uri, recipe_settings={"max_bootstrapped_demos": 2, "max_errors": 3})
    with pytest.raises(Exception, match="upstream overloaded"):
        run_compile(request, progress=False)
    client = mlflow.MlflowClient(tracking_uri=uri)
    failed = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(failed) == 1 and failed[0].info.status == "FAILED"
    run_id = failed[0].info.run_id
    before = list(engine.answered)
    # The compile retried (with backoff) before giving up: each attempt met max_errors server errors.
    assert len(before) == 1 and engine.faults["server"] == 3 * (1 + optimizers_base.COMPILE_RETRIES)
    # The provider is back: --resume finishes the run, and no call answered before is made again.
    down["on"] = False
    outcome = run_compile(request, resume_run_id=run_id, progress=False)
    resumed = engine.answered[len(before):]
    assert not set(before) & set(resumed)
    run = client.get_run(run_id)
    assert outcome.run_id == run_id and run.info.status == "FINISHED"
    assert outcome.summary["compile"]["usage"]["cache_hits"] >= 1
    ledger("faults", scenario="compile, outage beyond retries, then --resume", injected=dict(engine.faults),
           run_marked_failed=1, resumed_to_finished=1, repeated_lm_calls=len(set(before) & set(resumed)))


def test_a_compile_writes_its_program_json_once_with_its_provenance(tmp_path, monkeypatch, restore_lm):
    # It used to be written by DSPy's save, then read back and written again with the provenance added.
    import json

    from dspy.primitives.base_module import BaseModule

    import optimizers.checkpoint as checkpoint
    from guidebench.compile import CompileRequest, run_compile
    from runtime.provenance import read_provenance

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    writes: list[str] = []
    write_text = checkpoint.atomic_write_text
    monkeypatch.setattr(checkpoint, "atomic_write_text", lambda path, text: writes.append(str(path)) or
                        write_text(path, text))
    save = BaseModule.save
    monkeypatch.setattr(BaseModule, "save", lambda self, path, **kw: writes.append(str(path)) or save(self, path, **kw))
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=4)
    request = CompileRequest(program="full_auto.predict", optimizer="labeled_fewshot", data=str(data), lm="fake",
                             tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", out=str(tmp_path / "out"))
    outcome = run_compile(request, progress=False)
    program_json = outcome.files["program"]
    staged = [path for path in writes if path.endswith("program.json") and "checkpoints" not in path]
    assert len(staged) == 1, staged
    state = json.loads(program_json.read_text())
    assert read_provenance(state) is not None and state["metadata"]["dependency_versions"]["dspy"]
    assert state["decide"]["demos"]


def test_dev_limit_samples_dev_only_and_wins_over_eval_limit_there():
    from guidebench.compile import CompileRequest

    records = list(range(50))
    request = CompileRequest(program="full_auto.predict", optimizer="labeled_fewshot", data=".", dev_limit=7)
    dev = request.eval_records(records, "dev")
    assert len(dev) == 7 and dev == sorted(dev) and request.eval_records(records, "test") == records
    request.eval_limit = 20
    assert request.eval_records(records, "dev") == dev  # the same seeded subset
    assert len(request.eval_records(records, "test")) == 20


def test_a_compile_records_what_its_program_learned_from_and_flags_its_dev_scores(fitted):
    import json

    from evals.data import load_records
    from runtime.frozen.loader import verify_frozen
    from runtime.provenance import read_provenance

    provenance = read_provenance(json.loads((fitted["fit"] / "program.json").read_text()))
    splits = {name: load_records(fitted["ds"], name) for name in ("train", "dev", "test")}
    labeled = {name: [r for r in records if r.label is not None] for name, records in splits.items()}
    # the fit learned from every labeled train and dev record (cross-validated over both, refit on both)
    assert provenance.splits == {"train": len(labeled["train"]), "dev": len(labeled["dev"])}
    assert provenance.overlap(splits["dev"]) == len(labeled["dev"]) and provenance.overlap(splits["test"]) == 0
    summary = json.loads((fitted["fit"] / "compile.json").read_text())
    assert read_provenance(summary) == provenance
    assert {split: check["n_overlap"] for split, check in summary["learned_from"].items()} == \
        {"dev": len(labeled["dev"]), "test": 0}
    assert json.loads((fitted["fit"] / "dev" / "metrics.json").read_text())["learned_from_overlap"]["value"] == \
        len(labeled["dev"])
    assert "learned_from_overlap" not in json.loads((fitted["fit"] / "test" / "metrics.json").read_text())
    run = mlflow.MlflowClient(tracking_uri=fitted["uri"]).get_run(summary["mlflow_run_id"])
    assert run.data.metrics["dev.learned_from_overlap"] == len(labeled["dev"])
    assert run.data.metrics["test.learned_from_overlap"] == 0
    assert verify_frozen(fitted["ex"]).provenance == provenance  # the export carries it
