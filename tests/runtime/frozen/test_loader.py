"""runtime.frozen.loader: the frozen-module loader refuses every tampered folder with a clear one-line reason,
and loads good ones, standalone or into the installed program."""

from __future__ import annotations

import hashlib
import pickle
import shutil
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM

import programs
from frozen_support import edit_json, export_program, hub_relative, summary
from runtime import load_frozen
from runtime.frozen.loader import verify_frozen
from runtime.frozen.manifest import FrozenModuleError
from signatures import FullAutoDecisionSignature


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


# ----- loading into the installed program --------------------------------------------------------

def _answer(**fields) -> DummyLM:
    return DummyLM([fields] * 4)


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


@pytest.mark.parametrize("entry", programs.names())
def test_every_registered_program_exports_and_loads(entry: str, tmp_path: Path):
    spec = programs.spec(entry)
    folder = export_program(entry, tmp_path / "m").path
    manifest = verify_frozen(folder)
    assert manifest.entry == entry and manifest.kind == spec.kind and manifest.uses_lm == spec.uses_lm
    installed = load_frozen(folder, program=spec.factory)
    assert type(installed.program) is type(spec.build())
    computed = [note for note in manifest.dsrs_notes if note.startswith("inputs the program's code computes")]
    if spec.uses_lm and len(manifest.predictors) == 1 and not computed:
        standalone = load_frozen(folder)
        assert [n for n, _ in standalone.program.named_predictors()] == [manifest.predictors[0].name]
    else:
        assert "load it with program=" in refusal(folder)


# ----- a rule gate (full_auto.hybrid) -----------------------------------------------------------------

GATED = ["turn_failed", "stalled"]


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory) -> Path:
    """An export of full_auto.hybrid whose gate is not the default (as a compile or the search leaves it)."""
    import json

    root = tmp_path_factory.mktemp("hybrid")
    hybrid = programs.get("full_auto.hybrid")
    hybrid.set_rules(GATED)
    (root / "state.json").write_text(json.dumps(hybrid.dump_state()), encoding="utf-8")
    return export_program("full_auto.hybrid", root / "X", state=root / "state.json").path


def test_a_rule_gated_module_applies_its_rules_standalone_and_installed(hybrid_dir: Path):
    manifest = verify_frozen(hybrid_dir)
    assert manifest.format_version == 3 and manifest.rule_gate.rules == GATED
    assert [p.name for p in manifest.predictors] == ["lm_program.decide"]
    standalone = load_frozen(hybrid_dir)
    installed = load_frozen(hybrid_dir, program=programs.spec("full_auto.hybrid").factory,
                            inputs=programs.decision_inputs)
    assert standalone.program.rules == tuple(GATED) and installed.program.rules == GATED
    for module in (standalone, installed):
        lm = _answer(action="continue", next_input="go on", reason="steps remain", confidence="0.8")
        with dspy.context(lm=lm):
            # a gated rule: the rule policy's decision, no LM call
            stalled, _, record = module(summary(no_progress_count=2))
            assert (stalled.action, record.raw_prediction["decided_by"], lm.history) == ("pause", "stalled", [])
            # not gated (the default gate would take it): the LM decides
            pending, _, record = module(summary(pending_approvals="1"))
            assert record.logged.model_action == "continue" and record.raw_prediction["decided_by"] == "lm"
            assert len(lm.history) == 1


def _lm_program_only() -> dspy.Module:
    """A program with the hybrid's predictor but no rule gate."""
    from programs.full_auto import FullAutoCompactState

    program = dspy.Module()
    program.lm_program = FullAutoCompactState()
    return program


@pytest.mark.parametrize("case, change, reason", [
    ("rules differ", lambda f: edit_json(f, "program.json", lambda d: d["rule_gate"].update(rules=["turn_failed"])),
     "program.json rule_gate holds rules ['turn_failed'], manifest.json declares ['turn_failed', 'stalled']"),
    ("gate missing", lambda f: edit_json(f, "program.json", lambda d: d.pop("rule_gate")),
     "program.json has no rule_gate, manifest.json declares rules ['turn_failed', 'stalled']"),
    ("not declared", lambda f: edit_json(f, "manifest.json", lambda d: d.update(rule_gate=None)),
     "program.json holds a rule_gate but manifest.json declares none"),
    ("unknown rule", lambda f: edit_json(f, "manifest.json", lambda d: d["rule_gate"].update(rules=["finished"])),
     "manifest.json is invalid: rule_gate.rules: Value error, unknown rule 'finished'"),
    ("format 2", lambda f: edit_json(f, "manifest.json", lambda d: d.update(format_version=2)),
     "manifest.json has format version 2, which has no rule_gate (version 3 added it)"),
    ("planner", lambda f: edit_json(f, "manifest.json", lambda d: d.update(kind="planner")),
     "manifest.json declares a rule_gate for a planner module; only full_auto modules have one"),
])
def test_a_rule_gate_the_files_disagree_on_is_refused(hybrid_dir: Path, tmp_path: Path, case, change, reason):
    folder = tmp_path / "X"
    shutil.copytree(hybrid_dir, folder)
    change(folder)
    assert refusal(folder).startswith(reason)


def test_an_installed_program_without_a_rule_gate_is_refused(hybrid_dir: Path):
    assert refusal(hybrid_dir, program=_lm_program_only) == (
        "installed program full_auto.hybrid has no rule_gate; the module was exported with rules "
        "turn_failed+stalled deciding before its LM")


# ----- planner.hybrid: its rules are code, it loads installed -------------------------------------------------


def test_the_planner_hybrid_loads_installed_and_is_refused_standalone(tmp_path: Path):
    from guidebench.lm.factory import make_lm
    from programs.rules_planner import rule_directive
    from programs.seeds import _planner_seed_packets

    folder = export_program("planner.hybrid", tmp_path / "m").path
    manifest = verify_frozen(folder)
    assert [p.name for p in manifest.predictors] == ["write"] and manifest.demo_count == 3
    assert manifest.signature_name == "PlannerGivenFamilySignature" and manifest.rule_gate is None
    assert any("its LM reads family, why" in note for note in manifest.dsrs_notes)
    assert refusal(folder) == ("signature PlannerGivenFamilySignature needs inputs ['family', 'why'] that the "
                               "runtime cannot fill on its own: load it with program=")
    assert "has predictors ['plan'], the module was exported with ['write']" in \
        refusal(folder, program=programs.spec("planner.compact").factory)
    module = load_frozen(folder, program=programs.spec("planner.hybrid").factory)
    packet, _ = _planner_seed_packets()[0]
    rule, _ = rule_directive(packet)
    with dspy.context(lm=make_lm("fake", cache=False)):
        directive, errors, used_default = module(packet)
    assert (directive.strategy_family, errors, used_default) == (rule.strategy_family, [], False)
    with dspy.context(lm=DummyLM([{"primary_hypothesis": ""}])):  # nothing usable: the rule planner's directive
        assert module(packet) == (rule, [], False)
