"""`guidebench export`: the CLI path, user errors, compiled state, MLflow runs, secrets and atomicity."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import dspy
import pytest

import programs
from guidebench.cli import main
from runtime import load_frozen
from runtime.frozen.manifest import FrozenModuleError


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def test_export_recompute_load_then_refuse_one_changed_byte(tmp_path: Path, capsys):
    out = tmp_path / "X"
    code, stdout, err = run_cli(capsys, "export", "--program", "full_auto.predict", "--name", "X",
                                "--version", "0.1.0", "--out", str(out))
    assert code == 0, err
    dsrs = json.loads((out / "dsrs" / "manifest.json").read_text())
    identity = {k: dsrs.get(k) for k in ("demo_count", "instruction", "optimizer", "signature_name")}
    compiled_id = hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert compiled_id == dsrs["compiled_id"] and compiled_id in stdout
    assert "exported X@0.1.0 (entry full_auto.predict, 3 demos)" in stdout
    module = load_frozen(out)
    assert module.manifest.entry == "full_auto.predict"
    program = out / "program.json"
    data = bytearray(program.read_bytes())
    data[42] = (data[42] + 1) % 256
    program.write_bytes(bytes(data))
    with pytest.raises(FrozenModuleError, match=r"refused: checksum mismatch: program.json"):
        load_frozen(out)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".X.")]  # no staging folder left behind


@pytest.mark.parametrize("argv, message", [
    (["--program", "full_auto.predict", "--name", "X", "--version", "1.0"], "must be X.Y.Z"),
    (["--program", "full_auto.predict", "--name", "bad name", "--version", "1.0.0"], "--name 'bad name'"),
    (["--program", "no.such.program", "--name", "X", "--version", "1.0.0"], "unknown program 'no.such.program'"),
    (["abc123", "--program", "full_auto.predict", "--name", "X", "--version", "1.0.0"], "either RUN_ID or --program"),
    (["--name", "X", "--version", "1.0.0"], "either RUN_ID or --program"),
    (["--program", "full_auto.predict", "--state", "missing.json", "--name", "X", "--version", "1.0.0"],
     "--state missing.json: no such file"),
])
def test_user_errors_are_one_line(tmp_path: Path, capsys, argv, message):
    code, _, err = run_cli(capsys, "export", *argv, "--out", str(tmp_path / "out"))
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_existing_folder_needs_force_and_other_folders_are_never_replaced(tmp_path: Path, capsys):
    out = tmp_path / "X"
    args = ["export", "--program", "full_auto.rules", "--name", "X", "--version", "0.1.0", "--out", str(out)]
    assert run_cli(capsys, *args)[0] == 0
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "already exists; pass --force" in err
    args[6] = "0.2.0"
    assert run_cli(capsys, *args, "--force")[0] == 0
    assert load_frozen(out, program=programs.get("full_auto.rules")).manifest.version == "0.2.0"
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    code, _, err = run_cli(capsys, "export", "--program", "full_auto.rules", "--name", "X", "--version", "0.1.0",
                           "--out", str(other), "--force")
    assert code == 2 and "is not an exported module; refusing to replace it" in err
    assert (other / "keep.txt").read_text() == "mine"


def _compiled_state(path: Path, demos: int) -> Path:
    program = programs.get("full_auto.predict")
    program.decide.demos = program.decide.demos[:demos]
    program.decide.signature = program.decide.signature.with_instructions("Pick the next action carefully.")
    program.save(str(path))
    return path


def test_export_with_compiled_state(tmp_path: Path, capsys):
    state = _compiled_state(tmp_path / "compiled.json", 1)
    out = tmp_path / "C"
    code, stdout, err = run_cli(capsys, "export", "--program", "full_auto.predict", "--state", str(state),
                                "--optimizer", "LabeledFewShot", "--name", "C", "--version", "1.2.3", "--out", str(out))
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    dsrs = json.loads((out / "dsrs" / "manifest.json").read_text())
    assert manifest["demo_count"] == dsrs["demo_count"] == 1 and dsrs["optimizer"] == "LabeledFewShot"
    # The compiled instruction goes to dsrs; the signature hash stays the installed signature's.
    assert dsrs["instruction"] == "Pick the next action carefully."
    assert manifest["signature"]["instructions"] != dsrs["instruction"]
    module = load_frozen(out)
    assert module.program.predictor.signature.instructions == "Pick the next action carefully."


@pytest.mark.parametrize("written_by, program, whose", [
    # DSPy's load_state skips what the program has no place for: the rule policy would export without the model
    ("full_auto.learned", "full_auto.rules", "the state of full_auto.learned, not of full_auto.rules"),
    ("full_auto.predict", "full_auto.rules",
     "the state of full_auto.predict or full_auto.predict_clear or full_auto.zeroshot, not of full_auto.rules"),
    # ... and fills a signature of other fields with the prefixes it has
    ("full_auto.predict", "full_auto.compact", "not of full_auto.compact: StateMismatchError: the state's predictor "
                                               "decide has 15 signature fields, the program's has 12"),
    ("full_auto.predict", "full_auto.compact_state", "not of full_auto.compact_state: StateMismatchError: the state's "
                                                     "predictor decide reads other inputs than the program's"),
])
def test_the_state_of_another_program_is_refused_naming_both(tmp_path: Path, capsys, written_by, program, whose):
    state = tmp_path / "program.json"
    programs.get(written_by).save(str(state))
    out = tmp_path / "X"
    code, _, err = run_cli(capsys, "export", "--program", program, "--state", str(state), "--name", "X",
                           "--version", "0.1.0", "--out", str(out))
    assert code == 2 and err.startswith(f"guidebench: error: {state}: ") and whose in err, err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_a_pickled_state_is_never_loaded(tmp_path: Path, capsys):
    state = tmp_path / "state.pkl"
    state.write_bytes(b"\x80\x04N.")
    code, _, err = run_cli(capsys, "export", "--program", "full_auto.predict", "--state", str(state),
                           "--name", "X", "--version", "0.1.0", "--out", str(tmp_path / "X"))
    assert code == 2 and "must be a .json file (pickles are never loaded)" in err


def test_export_from_an_mlflow_run(tmp_path: Path, capsys):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment("compiles", artifact_location=(tmp_path / "art").as_uri())
    state = _compiled_state(tmp_path / "program.json", 2)
    with mlflow.start_run(experiment_id=experiment) as run:
        mlflow.log_params({"program": "full_auto.predict", "dataset_id": "d" * 64, "split": "dev",
                           "split_hash": "h" * 64, "optimizer": "BootstrapFewShot", "lm": "local", "n_records": "40"})
        mlflow.log_metrics({"objective": 0.71, "objective_ci_low": 0.62, "objective_ci_high": 0.8,
                            "parse_failure_rate": 0.05, "guardrail_override_rate": 0.2})
        mlflow.log_artifact(str(state))
    out = tmp_path / "R"
    code, stdout, err = run_cli(capsys, "export", run.info.run_id, "--tracking-uri", uri, "--name", "R",
                                "--version", "2.0.0", "--out", str(out))
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mlflow_run_id"] == run.info.run_id and manifest["optimizer"] == "BootstrapFewShot"
    assert manifest["dataset_id"] == "d" * 64 and manifest["split"] == "dev" and manifest["split_hash"] == "h" * 64
    assert manifest["scorecard"]["objective"] == {"value": 0.71, "ci_low": 0.62, "ci_high": 0.8, "n": 40}
    assert manifest["demo_count"] == 2 and manifest["lm_model"] == "local"
    dsrs = json.loads((out / "dsrs" / "manifest.json").read_text())
    assert dsrs["scorecard"]["truth_metrics"] == {"objective": 0.71}
    assert dsrs["scorecard"]["proxy_metrics"] == {"parse_failure_rate": 0.05, "guardrail_override_rate": 0.2}
    assert dsrs["scorecard"]["p_fail"] == 0.05 and dsrs["scorecard"]["rollouts"] == 40
    assert dsrs["scorecard"]["median_score"] == 0.71
    # the original's EvalRecord; our own metadata (MLflow run, dataset, split) is in manifest.json
    [record] = dsrs["eval_history"]
    assert record["state"] == "candidate" and record["promotion_attempted"] is False
    assert record["scorecard"]["overall_score"] == 0.71 and record["scorecard"]["tasks_evaluated"] == 40
    assert record["scorecard"]["per_metric"] == {"objective": 0.71, "parse_failure_rate": 0.05,
                                                 "guardrail_override_rate": 0.2}
    ours = json.loads((out / "manifest.json").read_text())
    assert (ours["mlflow_run_id"], ours["dataset_id"], ours["split"]) == (run.info.run_id, "d" * 64, "dev")
    load_frozen(out)

    # A compile run: metrics per split (`test.objective`), the optimizer's class, the train split hash.
    with mlflow.start_run(experiment_id=experiment) as compile_run:
        mlflow.log_params({"program": "full_auto.predict", "dataset_id": "d" * 64, "split": "train+dev",
                           "split_hash": "t" * 64, "split_hash.train": "t" * 64, "split_hash.test": "s" * 64,
                           "optimizer": "bootstrap_fewshot", "optimizer_class": "BootstrapFewShot", "n_test": "30",
                           "lm": "local"})
        mlflow.log_metrics({"dev.objective": 0.9, "test.objective": 0.66, "test.objective_ci_low": 0.5,
                            "test.objective_ci_high": 0.8, "test.parse_failure_rate": 0.1, "score": 0.93,
                            "test.objective_diff": 0.1})
        mlflow.log_artifact(str(state))
    out = tmp_path / "C"
    assert run_cli(capsys, "export", compile_run.info.run_id, "--tracking-uri", uri, "--name", "C",
                   "--version", "1.0.0", "--out", str(out))[0] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["scorecard"] == {"objective": {"value": 0.66, "ci_low": 0.5, "ci_high": 0.8, "n": 30},
                                     "parse_failure_rate": {"value": 0.1, "ci_low": None, "ci_high": None, "n": 30}}
    assert (manifest["split"], manifest["split_hash"], manifest["optimizer"]) == ("test", "s" * 64, "BootstrapFewShot")
    dsrs = json.loads((out / "dsrs" / "manifest.json").read_text())
    assert dsrs["trainset_id"] == "t" * 64 and dsrs["optimizer"] == "BootstrapFewShot"


def test_no_endpoint_key_or_secret_is_exported(tmp_path: Path, monkeypatch):
    from guidebench.release.export import ExportSource, export_frozen

    env_secret = "zq-internal-credential-7781"
    monkeypatch.setenv("ACME_SERVICE_TOKEN", env_secret)
    lm = dspy.LM("openai/gpt-4o-mini", api_base="http://10.1.2.3:8000/v1", api_key="sk-proj-abcdefghijklmnop1234")
    program = programs.get("full_auto.predict")
    program.decide.lm = lm  # an LM set on the predictor lands in dspy's state with its endpoint
    demo = program.decide.demos[0]
    demo["next_input"] = f"Call http://10.1.2.3:8000/v1 with sk-proj-abcdefghijklmnop1234 and {env_secret}"
    demo["reason"] = "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345"
    source = ExportSource(entry="full_auto.predict", kind="full_auto", uses_lm=True, program=program,
                          installed=programs.get("full_auto.predict"), lm_model="openai/gpt-4o-mini")
    with dspy.context(lm=lm):
        result = export_frozen(source, name="S", version="0.1.0", out=tmp_path / "S")
    text = "".join(p.read_text() for p in (tmp_path / "S").rglob("*") if p.is_file())
    for secret in ("10.1.2.3", "sk-proj-abcdefghijklmnop1234", env_secret, "abcdefghijklmnopqrstuvwxyz012345",
                   "api_key", "api_base"):
        assert secret not in text
    assert "[REDACTED]" in text and result.redactions >= 2
    state = json.loads((tmp_path / "S" / "program.json").read_text())
    assert state["decide"]["lm"] is None
    load_frozen(tmp_path / "S")


def test_a_crash_while_writing_leaves_the_old_export_whole(tmp_path: Path, monkeypatch, capsys):
    import guidebench.release.export as export

    out = tmp_path / "X"
    args = ["export", "--program", "full_auto.predict", "--name", "X", "--version", "0.1.0", "--out", str(out)]
    assert run_cli(capsys, *args)[0] == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def crash(folder):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_checksums", crash)
    args[6] = "0.2.0"
    code, _, err = run_cli(capsys, *args, "--force")
    assert code == 2 and err.startswith("guidebench: error: cannot write: the disk is full (No space left on device)")
    assert len(err.splitlines()) == 1
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == ["X"]
    load_frozen(out)
    monkeypatch.undo()
    fresh = tmp_path / "Y"
    monkeypatch.setattr(export, "write_checksums", crash)
    assert run_cli(capsys, *args[:-2], "--out", str(fresh))[0] == 2
    assert not fresh.exists() and not any(p.name.startswith(".Y.") for p in tmp_path.iterdir())
    assert os.listdir(out)


@pytest.mark.parametrize("flag, value, expected", [
    ("--threads", "0", "argument --threads: 0: expected a whole number at least 1"),
    ("--resamples", "-5", "argument --resamples: -5: expected a whole number at least 1"),
])
def test_promote_refuses_out_of_range_numbers_in_one_line(tmp_path, capsys, flag, value, expected):
    code, out, err = run_cli(capsys, "promote", str(tmp_path / "module"), "--data", str(tmp_path / "data"), flag, value)
    assert code == 2 and out == "" and err.count("\n") == 1 and expected in err, err
