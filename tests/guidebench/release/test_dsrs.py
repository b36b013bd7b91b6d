"""An export made from a compile run deserializes into a strict mirror of the original dsrs structs.

The checker restates, field by field, the serde structs of the dsrs crate (4adad400fe:
`manifest.rs` CompiledModuleManifest / Scorecard / Compatibility / PrivacyMode,
`evaluate/promotion.rs` PromotionState / EvalRecord, `evaluate/scoring.rs` ScorecardResult /
TaskScore, `data/example.rs` Example, autopilot-core `dspy_hub.rs` StoredModule and its path):
required fields (no `#[serde(default)]`), types (u64/usize are non-negative integers, f32/f64
finite numbers), enum spellings (snake_case), `Option` as null or absent, and the keys serde
skips when empty. None of these structs denies unknown fields, but the export writes none.
The compiled id recomputes from the manifest's identity fields, as the original computes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import mlflow
import pytest

from frozen_support import hub_relative
from guidebench.cli import main
from optimizer_support import make_dataset, tracking_uri
from signatures import FullAutoDecisionSignature

PROMOTION_STATES = {"candidate", "staged", "shadow", "promoted", "rolled_back"}
PRIVACY_MODES = {"public_ok", "no_pii", "private_repo_redacted", "private_repo_allowed"}


def _u64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 64


def _float(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(obj: Any, spec: dict[str, tuple[str, bool]], where: str) -> None:
    """spec: field -> (type, required). Unknown keys are an error (the export writes none)."""
    assert isinstance(obj, dict), f"{where}: not an object"
    unknown = set(obj) - set(spec)
    assert not unknown, f"{where}: unknown fields {sorted(unknown)}"
    for name, (kind, required) in spec.items():
        if name not in obj:
            assert not required, f"{where}.{name}: required field missing"
            continue
        value = obj[name]
        path = f"{where}.{name}"
        if kind == "string":
            assert isinstance(value, str), path
        elif kind == "option<string>":
            assert value is None or isinstance(value, str), path
        elif kind == "u64":
            assert _u64(value), path
        elif kind == "float":
            assert _float(value), path
        elif kind == "option<f32>":
            assert value is None or _float(value), path
        elif kind == "bool":
            assert isinstance(value, bool), path
        elif kind == "option<bool>":
            assert value is None or isinstance(value, bool), path
        elif kind == "map<float>":
            assert isinstance(value, dict) and all(_float(v) for v in value.values()), path
        elif kind == "vec<string>":
            assert isinstance(value, list) and all(isinstance(v, str) for v in value), path
        elif kind == "promotion_state":
            assert value in PROMOTION_STATES, f"{path}: {value!r}"
        elif kind == "vec<privacy_mode>":
            assert isinstance(value, list) and set(value) <= PRIVACY_MODES, path
        elif kind == "scorecard":
            _check(value, SCORECARD, path)
        elif kind == "compatibility":
            _check(value, COMPATIBILITY, path)
            for key in ("required_tools", "required_lanes", "privacy_modes_allowed"):
                assert value.get(key, ["x"]) != [], f"{path}.{key}: serde skips an empty list"
        elif kind == "vec<eval_record>":
            assert isinstance(value, list) and value, f"{path}: serde skips an empty eval_history"
            for index, record in enumerate(value):
                _check(record, EVAL_RECORD, f"{path}[{index}]")
        elif kind == "scorecard_result":
            _check(value, SCORECARD_RESULT, path)
        elif kind == "map<task_score>":
            assert isinstance(value, dict), path
            for key, task in value.items():
                _check(task, TASK_SCORE, f"{path}.{key}")
        else:  # pragma: no cover - a typo in the spec
            raise AssertionError(f"unknown kind {kind}")


SCORECARD = {"proxy_metrics": ("map<float>", False), "truth_metrics": ("map<float>", False),
             "rollouts": ("u64", False), "median_score": ("float", False), "p_fail": ("float", False)}
COMPATIBILITY = {"required_tools": ("vec<string>", False), "required_lanes": ("vec<string>", False),
                 "privacy_modes_allowed": ("vec<privacy_mode>", False),
                 "min_provider_reputation": ("option<f32>", False)}
TASK_SCORE = {"task_id": ("string", True), "score": ("float", True), "metrics": ("map<float>", True),
              "rollouts_completed": ("u64", True), "proxy_passed": ("bool", True),
              "truth_evaluated": ("bool", True), "cost_msats": ("u64", True)}
SCORECARD_RESULT = {"overall_score": ("float", True), "per_metric": ("map<float>", True),
                    "per_task": ("map<task_score>", True), "total_cost_msats": ("u64", True),
                    "total_duration_ms": ("u64", True), "tasks_evaluated": ("u64", True),
                    "tasks_skipped": ("u64", True)}
EVAL_RECORD = {"timestamp": ("u64", True), "state": ("promotion_state", True),
               "scorecard": ("scorecard_result", True), "promotion_attempted": ("bool", True),
               "promotion_success": ("option<bool>", False), "promotion_reason": ("option<string>", False)}
MANIFEST = {"signature_name": ("string", True), "compiled_id": ("option<string>", False),
            "optimizer": ("string", True), "trainset_id": ("option<string>", False),
            "scorecard": ("scorecard", False), "compatibility": ("compatibility", False),
            "created_at": ("u64", True), "instruction": ("option<string>", False),
            "demo_count": ("u64", False), "promotion_state": ("promotion_state", False),
            "eval_history": ("vec<eval_record>", False)}


def check_manifest(manifest: dict) -> None:
    """Deserialize as the original would (strictly), and recompute its compiled_id."""
    _check(manifest, MANIFEST, "manifest")
    for key in ("compiled_id", "trainset_id", "instruction"):
        assert manifest.get(key, "x") is not None, f"{key}: serde skips None, never writes null"
    assert manifest.get("compatibility", {}).get("min_provider_reputation", 1.0) != 0.0
    identity = {"demo_count": manifest["demo_count"], "instruction": manifest.get("instruction"),
                "optimizer": manifest["optimizer"], "signature_name": manifest["signature_name"]}
    expected = hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert manifest["compiled_id"] == expected


@pytest.fixture(scope="module")
def export_of_a_compile(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsrs")
    old = os.environ.get("GUIDEBENCH_HOME")
    os.environ["GUIDEBENCH_HOME"] = str(root / "home")
    try:
        data, uri = make_dataset(root / "data", train=8, dev=3, test=3), tracking_uri(root)
        assert main(["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data",
                     str(data), "--lm", "fake", "--tracking-uri", uri, "--no-progress"]) == 0
        mlflow.set_tracking_uri(uri)
        [run] = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                   filter_string="tags.`guidebench.run_type` = 'compile'")
        out = root / "export"
        assert main(["export", run.info.run_id, "--tracking-uri", uri, "--name", "fa", "--version", "1.0.0",
                     "--out", str(out)]) == 0
        yield out, run
    finally:
        if old is None:
            os.environ.pop("GUIDEBENCH_HOME", None)
        else:
            os.environ["GUIDEBENCH_HOME"] = old


def test_the_manifest_deserializes_as_the_original(export_of_a_compile):
    out, _ = export_of_a_compile
    manifest = json.loads((out / "dsrs" / "manifest.json").read_text())
    check_manifest(manifest)
    assert manifest["signature_name"] == "FullAutoDecisionSignature"
    assert manifest["eval_history"][0]["promotion_attempted"] is False


def test_the_hub_file_is_where_the_original_hub_stores_it(export_of_a_compile):
    out, run = export_of_a_compile
    manifest = json.loads((out / "dsrs" / "manifest.json").read_text())
    hub = out / "dsrs" / "optimized" / manifest["signature_name"] / f"{manifest['compiled_id']}.json"
    stored = json.loads(hub.read_text())
    assert set(stored) == {"manifest", "demos"}  # StoredModule
    check_manifest(stored["manifest"])
    assert stored["manifest"] == manifest and len(stored["demos"]) == manifest["demo_count"]
    for demo in stored["demos"]:  # dsrs Example: {data, input_keys, output_keys}
        assert set(demo) == {"data", "input_keys", "output_keys"}
        assert isinstance(demo["data"], dict) and set(demo["input_keys"]) | set(demo["output_keys"]) == set(demo["data"])
    # our own evaluation metadata is in our manifest, not in the original's EvalRecord
    ours = json.loads((out / "manifest.json").read_text())
    assert ours["mlflow_run_id"] == run.info.run_id and ours["dataset_id"]


def test_compiled_id_recomputes_from_the_dsrs_manifest(pristine: Path):
    dsrs = json.loads((pristine / "dsrs" / "manifest.json").read_text())
    identity = {"demo_count": dsrs["demo_count"], "instruction": dsrs.get("instruction"),
                "optimizer": dsrs["optimizer"], "signature_name": dsrs["signature_name"]}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert hashlib.sha256(canonical.encode("utf-8")).hexdigest() == dsrs["compiled_id"]
    assert dsrs["signature_name"] == "FullAutoDecisionSignature" and dsrs["demo_count"] == 3
    assert dsrs["instruction"] == FullAutoDecisionSignature.instructions
    assert "trainset_id" not in dsrs  # absent optional keys are omitted, not null
    assert isinstance(dsrs["created_at"], int) and dsrs["promotion_state"] == "candidate"
    assert set(dsrs["scorecard"]) == {"proxy_metrics", "truth_metrics", "rollouts", "median_score", "p_fail"}
    # serde skips empty lists and an unset reputation (never written as 0.0)
    assert dsrs["compatibility"] == {}
    hub_path = hub_relative(pristine)
    assert hub_path == f"dsrs/optimized/{dsrs['signature_name']}/{dsrs['compiled_id']}.json"
    hub = json.loads((pristine / hub_path).read_text())
    assert hub["manifest"] == dsrs and len(hub["demos"]) == 3
    for demo in hub["demos"]:
        assert demo["input_keys"] == list(FullAutoDecisionSignature.input_fields)
        assert demo["output_keys"] == ["action", "next_input", "reason", "confidence"]
        assert set(demo["data"]) == set(demo["input_keys"]) | set(demo["output_keys"])
