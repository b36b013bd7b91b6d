"""The frozen-module loader refuses every tampered folder with a clear one-line reason, and runs good ones."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM

import programs
from frozen_support import edit_json, export_program, hub_relative, summary
from runtime import DecisionRecord, GuardrailConfig, OptimizationDirective, load_frozen
from runtime.frozen.loader import verify_frozen
from runtime.frozen.manifest import FrozenModuleError
from runtime.frozen.modules import FrozenGuidanceModule, FrozenPlannerModule
from runtime.signature_spec import build_signature, parse_type, spec_of, type_text
from signatures import FullAutoDecisionSignature, OptimizationDirectiveSignature


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """An export of the uncompiled `full_auto.predict` (never modified: tests work on copies)."""
    out = tmp_path_factory.mktemp("pristine") / "X"
    export_program("full_auto.predict", out)
    return out


@pytest.fixture
def module_dir(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "X"
    shutil.copytree(pristine, copy)
    return copy


def refusal(folder: Path, **kwargs) -> str:
    """The one-line reason load_frozen gives for refusing the folder."""
    with pytest.raises(FrozenModuleError) as info:
        load_frozen(folder, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"frozen module {folder} refused: ")
    assert info.value.reason and info.value.reason in message
    return info.value.reason


# ----- the export itself -------------------------------------------------------------------------

def test_export_holds_state_manifest_dsrs_and_checksums_of_every_file(pristine: Path):
    files = sorted(p.relative_to(pristine).as_posix() for p in pristine.rglob("*") if p.is_file())
    assert files == ["checksums.sha256", "dsrs/manifest.json", hub_relative(pristine), "manifest.json", "program.json"]
    listed = {line.split("  ", 1)[1]: line.split("  ", 1)[0]
              for line in (pristine / "checksums.sha256").read_text().splitlines()}
    assert set(listed) == set(files) - {"checksums.sha256"}
    for name, digest in listed.items():
        assert hashlib.sha256((pristine / name).read_bytes()).hexdigest() == digest
    manifest = json.loads((pristine / "manifest.json").read_text())
    assert manifest["entry"] == "full_auto.predict" and manifest["compatible_with"] == "GuidanceInputs@v1"
    assert manifest["signature_name"] == "FullAutoDecisionSignature"
    assert manifest["signature_hash"] == spec_of(FullAutoDecisionSignature).hash()
    assert manifest["dspy_version"] == dspy.__version__ and manifest["python_version"].startswith("3.11")
    assert manifest["promotion_state"] == "candidate" and manifest["demo_count"] == 3
    assert manifest["created_at"].endswith("Z")
    # The state is dspy's own JSON format: the installed program loads it directly.
    program = programs.get("full_auto.predict")
    program.load(str(pristine / "program.json"))
    assert len(program.decide.demos) == 3


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


def test_the_same_program_exports_the_same_bytes(pristine: Path, tmp_path: Path):
    again = export_program("full_auto.predict", tmp_path / "again").path
    for name in ("program.json", hub_relative(pristine)):
        a = json.loads((pristine / name).read_text())
        b = json.loads((again / name).read_text())
        if name.startswith("dsrs/optimized/"):
            for manifest in (a["manifest"], b["manifest"]):
                manifest.pop("created_at")
                for record in manifest.get("eval_history", []):
                    record.pop("timestamp")
        assert a == b
    assert json.loads((again / "dsrs/manifest.json").read_text())["compiled_id"] == \
        json.loads((pristine / "dsrs/manifest.json").read_text())["compiled_id"]


# ----- tampering ----------------------------------------------------------------------------------

@pytest.mark.parametrize("relative", ["program.json", "manifest.json", "dsrs/manifest.json", "HUB",
                                      "checksums.sha256"])
@pytest.mark.parametrize("where", [0, 0.5, -1])
def test_a_changed_byte_in_any_file_is_refused(module_dir: Path, relative: str, where: float):
    relative = hub_relative(module_dir) if relative == "HUB" else relative
    path = module_dir / relative
    data = bytearray(path.read_bytes())
    index = int(len(data) * where) if where >= 0 else len(data) - 1
    data[index] = ord("x") if data[index] != ord("x") else ord("y")
    path.write_bytes(bytes(data))
    reason = refusal(module_dir)
    if relative == "checksums.sha256":
        assert "checksums.sha256" in reason or "missing file" in reason or "checksum mismatch" in reason
    else:
        assert reason.startswith(f"checksum mismatch: {relative} ")


def test_one_byte_of_program_json_names_the_file(module_dir: Path):
    path = module_dir / "program.json"
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    assert "checksum mismatch: program.json" in refusal(module_dir)


def test_a_missing_file_is_refused(module_dir: Path):
    hub = hub_relative(module_dir)
    (module_dir / hub).unlink()
    assert refusal(module_dir) == f"missing file: {hub} (listed in checksums.sha256)"


def test_a_missing_checksums_file_is_refused(module_dir: Path):
    (module_dir / "checksums.sha256").unlink()
    assert refusal(module_dir) == "missing checksums.sha256"


def test_an_added_pickle_is_refused_even_when_listed(module_dir: Path):
    (module_dir / "extra.pkl").write_bytes(pickle.dumps({"a": 1}))
    assert refusal(module_dir).startswith("pickle found: extra.pkl")
    # Sealed into the checksums, under an innocent name, it is still a pickle.
    (module_dir / "extra.pkl").rename(module_dir / "notes.json")
    with pytest.raises(FrozenModuleError, match="pickle found: notes.json"):
        from runtime.checksums import write_checksums
        write_checksums(module_dir)
    lines = (module_dir / "checksums.sha256").read_text().splitlines()
    digest = hashlib.sha256((module_dir / "notes.json").read_bytes()).hexdigest()
    (module_dir / "checksums.sha256").write_text("\n".join(sorted(lines + [f"{digest}  notes.json"],
                                                              key=lambda l: l.split("  ")[1])) + "\n")
    assert refusal(module_dir).startswith("pickle found: notes.json")


def test_an_unlisted_file_is_refused(module_dir: Path):
    (module_dir / "dsrs" / "README.md").write_text("hello\n")
    assert refusal(module_dir) == "unlisted file: dsrs/README.md (not in checksums.sha256)"


def test_a_mismatched_signature_is_refused(module_dir: Path):
    def change_type(manifest):
        manifest["predictors"][0]["signature"]["outputs"][3]["type"] = "str"  # confidence: float -> str

    edit_json(module_dir, "manifest.json", change_type)
    assert refusal(module_dir).startswith("signature hash mismatch: predictor 'decide'")


def test_an_installed_signature_that_changed_is_refused(module_dir: Path):
    class Changed(dspy.Signature):
        """Decide what to do after a Codex turn completes, differently."""

        thread_id: str = dspy.InputField()
        action: str = dspy.OutputField()

    reason = refusal(module_dir, signature=Changed)
    assert reason.startswith("signature mismatch: installed FullAutoDecisionSignature hashes to")

    class Module(dspy.Module):
        def __init__(self):
            super().__init__()
            self.decide = dspy.Predict(Changed)

    assert refusal(module_dir, program=Module).startswith("signature mismatch: installed predictor 'decide'")


def test_an_installed_program_with_other_predictors_is_refused(module_dir: Path):
    reason = refusal(module_dir, program=programs.spec("full_auto.cot").factory)
    assert "installed program full_auto.predict has predictors ['decide.predict']" in reason


def test_an_incompatible_dspy_version_is_refused(module_dir: Path):
    edit_json(module_dir, "manifest.json", lambda m: m.update(dspy_version="2.6.27"))
    assert refusal(module_dir) == (f"dspy version mismatch: exported with dspy 2.6.27, installed {dspy.__version__} "
                                   "(needs the same major.minor)")


def test_lm_state_in_program_json_is_refused(module_dir: Path):
    edit_json(module_dir, "program.json", lambda s: s["decide"].update(lm={"model": "openai/x",
                                                                             "api_base": "http://h"}))
    assert "carries LM state" in refusal(module_dir)


def test_demo_count_and_predictors_must_match_the_manifest(module_dir: Path):
    edit_json(module_dir, "program.json", lambda s: s["decide"]["demos"].pop())
    assert refusal(module_dir) == "program.json holds 2 demos, the manifest counts 3"
    edit_json(module_dir, "program.json", lambda s: s.update(other=s.pop("decide")))
    assert refusal(module_dir) == "program.json holds predictors ['other'], the manifest lists ['decide']"


def test_an_invalid_manifest_names_the_field(module_dir: Path):
    edit_json(module_dir, "manifest.json", lambda m: m.update(version="one"))
    assert refusal(module_dir) == "manifest.json is invalid: version: Value error, version must be X.Y.Z, got 'one'"
    assert refusal(module_dir.parent / "nowhere") == "not a directory"


# ----- running a loaded module ------------------------------------------------------------------

def _answer(**fields) -> DummyLM:
    return DummyLM([fields] * 4)


def test_standalone_module_decides_enforces_and_records(pristine: Path):
    module = load_frozen(pristine)
    assert isinstance(module, FrozenGuidanceModule) and module.manifest.package == "X@0.1.0"
    lm = _answer(action="continue", next_input="Run the tests next.", reason="plan has open steps",
                 confidence="0.8")
    with dspy.context(lm=lm):
        decision, audit, record = module(summary(), GuardrailConfig(), run_id="fullauto-1", sequence_id=4)
    assert (decision.action, decision.confidence, decision.next_input) == ("continue", 0.8, "Run the tests next.")
    assert audit.triggered is False and audit.original_action == "continue"
    assert isinstance(record, DecisionRecord) and record.package_version == "X@0.1.0"
    assert record.run_id == "fullauto-1" and record.sequence_id == 4 and record.model == "dummy"
    assert record.logged.action == "continue" and record.logged.state == "running"
    assert record.guardrail == audit and record.summary.turn_id == "turn-1"
    # The demos are in the prompt the model saw.
    prompt = json.dumps(lm.history[-1]["messages"])
    assert prompt.count("[[ ## action ## ]]") >= 4


def test_guardrails_override_the_model(pristine: Path):
    module = load_frozen(pristine)
    with dspy.context(lm=_answer(action="continue", next_input="go", reason="r", confidence="0.9")):
        decision, audit, _ = module(summary(last_turn_status="failed", turn_error="boom"))
        assert (decision.action, audit.rule, audit.original_action) == ("stop", "turn_failed", "continue")
    with dspy.context(lm=_answer(action="review", next_input="", reason="r", confidence="0.9")):
        decision, audit, record = module(summary())
        assert (decision.action, audit.rule) == ("pause", "review_requested")
        assert record.logged.model_action == "review" and record.logged.state == "paused"


@pytest.mark.parametrize("lm", [
    DummyLM([{"verdict": "nonsense"}] * 4),  # output in the wrong format
    None,  # no LM configured at all
])
def test_any_lm_or_parse_error_falls_back_to_pause(pristine: Path, lm):
    module = load_frozen(pristine)
    with dspy.context(lm=lm):
        decision, audit, record = module(summary())
    assert decision.action == "pause" and decision.confidence == 0.0 and decision.parse_errors
    assert audit.original_action == "pause" and audit.rule == "low_confidence"
    assert record.parse_diagnostics["parse_errors"] == decision.parse_errors


def test_an_lm_that_raises_falls_back_to_pause(pristine: Path):
    class Broken(DummyLM):
        def forward(self, *args, **kwargs):
            raise ConnectionError("endpoint unreachable")

    module = load_frozen(pristine, lm=Broken([]))
    decision, audit, _ = module(summary())
    assert decision.action == "pause" and any("endpoint unreachable" in e for e in decision.parse_errors)


def test_installed_program_load_uses_its_own_forward(pristine: Path):
    module = load_frozen(pristine, program=programs.spec("full_auto.predict").factory,
                         signature=FullAutoDecisionSignature, inputs=programs.decision_inputs)
    assert type(module.program).__name__ == "FullAutoPredict" and len(module.program.decide.demos) == 3
    with dspy.context(lm=_answer(action="stop", next_input="", reason="done", confidence="0.95")):
        decision, audit, record = module(summary(last_agent_message="All done."))
    assert decision.action == "stop" and not audit.triggered and record.logged.model_confidence == 0.95


def test_rule_program_loads_only_with_its_installed_program(tmp_path: Path):
    folder = export_program("full_auto.rules", tmp_path / "rules").path
    manifest = verify_frozen(folder)
    assert manifest.uses_lm is False and manifest.predictors == [] and manifest.demo_count == 0
    assert manifest.signature_name == "FullAutoDecisionSignature"
    assert "logic is code: load it with program=" in refusal(folder)
    module = load_frozen(folder, program=programs.spec("full_auto.rules").factory, inputs=programs.decision_inputs)
    decision, audit, record = module(summary(last_turn_status="failed", turn_error="boom"))
    assert decision.action == "stop" and record.model == "program:full_auto.rules"


def test_planner_module_returns_a_validated_directive(tmp_path: Path):
    from runtime.advisor import AdvisorPacket, FamilyConstraints

    folder = export_program("planner.predict", tmp_path / "planner", name="plan").path
    module = load_frozen(folder)
    assert isinstance(module, FrozenPlannerModule)
    packet = AdvisorPacket(best_cycles=1500, strategy_family_constraints=FamilyConstraints(
        allowed_families=["family:reduce_loads", "family:break_deps"], blocked_families=["family:schedule"],
        current_family="family:schedule", current_family_streak_len=2))
    good = {"objective": "Beat 1500", "primary_hypothesis": "fewer loads", "strategy_family": "family:reduce_loads",
            "strategy_modifiers": '["vector"]', "risk": "Low", "expected_effect_cycles": "-20",
            "change_summary": '["merge loads"]', "step_plan": '["a", "b", "c"]',
            "validation": '{"commands": ["python tests/submission_tests.py"], "pass_criteria": ["passes"]}',
            "next_packet_requests": "[]", "did_web_search": "false"}
    with dspy.context(lm=DummyLM([good] * 3)):
        result = module(packet)
    assert not result.used_default and isinstance(result.directive, OptimizationDirective)
    assert result.directive.strategy_family == "family:reduce_loads" and result.directive.expected_effect_cycles == -20
    blocked = dict(good, strategy_family="family:schedule")
    with dspy.context(lm=DummyLM([blocked] * 3)):
        result = module(packet)
    assert result.used_default and any("blocked" in e for e in result.errors)
    assert result.directive.strategy_family != "family:schedule"
    with dspy.context(lm=None):
        result = module(packet)
    assert result.used_default and result.directive.risk == "Low"


# ----- signature definitions as data --------------------------------------------------------------

@pytest.mark.parametrize("signature", [FullAutoDecisionSignature, OptimizationDirectiveSignature])
def test_signatures_rebuild_from_their_definition(signature):
    from runtime.frozen.loader import RUNTIME_TYPES

    spec = spec_of(signature)
    rebuilt = build_signature(spec, RUNTIME_TYPES)
    assert spec_of(rebuilt).model_dump() == spec.model_dump()
    assert rebuilt.instructions == signature.instructions


@pytest.mark.parametrize("text", ["str", "list[str]", "dict[str, list[int]]", "Optional[float]",
                                  'Literal["continue", "pause"]', "Union[int, str]", "tuple[int, ...]"])
def test_type_text_round_trips(text: str):
    assert type_text(parse_type(text)) == text


@pytest.mark.parametrize("text", ["__import__('os')", "os.system", "list[", "Literal[x]"])
def test_type_text_never_evaluates_code(text: str):
    from runtime.signature_spec import SignatureSpecError

    with pytest.raises(SignatureSpecError):
        parse_type(text)


@pytest.mark.parametrize("entry", programs.names())
def test_every_registered_program_exports_and_loads(entry: str, tmp_path: Path):
    spec = programs.spec(entry)
    folder = export_program(entry, tmp_path / "m").path
    manifest = verify_frozen(folder)
    assert manifest.entry == entry and manifest.kind == spec.kind and manifest.uses_lm == spec.uses_lm
    installed = load_frozen(folder, program=spec.factory)
    assert type(installed.program) is type(spec.build())
    if spec.uses_lm and len(manifest.predictors) == 1:
        standalone = load_frozen(folder)
        assert [n for n, _ in standalone.program.named_predictors()] == [manifest.predictors[0].name]
    else:
        assert "load it with program=" in refusal(folder)
