"""The shadow runner: a candidate decides beside the deployed program, in a process of its own, and never changes
it; its process is stopped on close, replaced when it hangs or dies, and gone at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import programs
from runtime import GuardrailConfig, GuidanceDecision, apply_guardrails, load_frozen
from runtime.fullauto import FullAutoTurnSummary, GuardrailContext
from runtime.records import inputs_hash
from runtime.shadow import ShadowRunner
from runtime.checksums import module_checksum
from runtime.shadow_log import SHADOW_FILE, ShadowDecisionLine
from shadow_support import Faulty, alive

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory) -> Path:
    from frozen_support import export_program

    return export_program("full_auto.rules", tmp_path_factory.mktemp("rules") / "X", name="rules-candidate").path


def _module(rules_dir: Path):
    return load_frozen(rules_dir, program=programs.spec("full_auto.rules").factory, inputs=programs.decision_inputs)


@pytest.fixture(scope="module")
def session():
    """A simulated session's decision lines (the real writer's shapes) and its run's guardrail config."""
    from guidebench.simulators.fullauto import FullAutoSimulator

    run = FullAutoSimulator(3).play(1)
    return run.decisions, run.run_file.guardrail_config()


def _lines(folder: Path) -> list[ShadowDecisionLine]:
    text = (folder / SHADOW_FILE).read_text(encoding="utf-8")
    return [ShadowDecisionLine.model_validate_json(line) for line in text.splitlines()]


def _deployed(line, config: GuardrailConfig) -> tuple[GuidanceDecision, str]:
    """What the deployed loop dispatches for a logged line (the model decision through the guardrails)."""
    model = GuidanceDecision(action=line.model_action(), confidence=line.model_confidence() or 0.0)
    enforced, audit = apply_guardrails(model, GuardrailContext.from_summary(line.summary), config)
    return enforced, audit.model_dump_json()


def test_each_decision_gets_a_line_that_joins_it_and_names_the_module(rules_dir, session, tmp_path):
    lines, config = session
    module = _module(rules_dir)
    with ShadowRunner(rules_dir, tmp_path, deadline_s=30, program=programs.spec("full_auto.rules").factory,
                      inputs=programs.decision_inputs) as shadow:
        pid = shadow.pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 19)
        for line in lines:
            shadow.submit(line, config)
    assert pid != os.getpid() and not alive(pid), "decided in a process of its own, stopped on close"
    written = _lines(tmp_path)
    assert len(written) == len(lines) and shadow.counts["ok"] == len(lines)
    for logged, item in zip(lines, written):
        summary = FullAutoTurnSummary.model_validate(logged.summary.model_dump())
        used = GuardrailConfig() if logged.run_id == "unknown" else config  # an orphan's run config was dropped
        assert (item.run_id, item.sequence_id, item.thread_id, item.turn_id, item.workspace_id) == (
            logged.run_id, logged.sequence_id, logged.thread_id, logged.turn_id, logged.workspace_id)
        assert item.inputs_hash == inputs_hash(summary, used) and item.config == used
        assert item.deployed_action == logged.action and item.decision_timestamp == logged.timestamp
        assert (item.module.name, item.module.version, item.module.entry) == ("rules-candidate", "0.1.0",
                                                                              "full_auto.rules")
        assert item.module.checksum == module_checksum(rules_dir) and item.schema_version == 1
        own, _raw, _usage = module.decide(summary, used)  # the candidate's decision, through the same guardrails
        enforced, audit = apply_guardrails(own, GuardrailContext.from_summary(summary), used)
        assert (item.decision.action, item.enforced.action, item.guardrail) == (own.action, enforced.action, audit)


@pytest.mark.parametrize("fault,status", [("raises", "error"), ("hangs", "timeout"), ("garbage", "invalid"),
                                          ("unparseable", "invalid"), ("exits", "error")])
def test_a_faulty_shadow_leaves_the_deployed_decision_unchanged_and_its_line_says_why(rules_dir, session, tmp_path,
                                                                                     fault, status):
    lines, config = session
    line = lines[0]
    expected = _deployed(line, config)
    candidate = Faulty(rules_dir, fault)
    # only the hung candidate meets the deadline: a nice-19 child on a loaded machine can take longer than 0.05 s
    # to answer at all, which would turn every other fault into a timeout
    shadow = ShadowRunner(candidate, tmp_path, deadline_s=0.05 if fault == "hangs" else 30)
    first = shadow.pid
    try:
        assert first is not None and first != os.getpid(), "the candidate runs in a process of its own"
        shadow.submit(line, config)  # returns at once: the candidate runs in the shadow's process
        assert candidate.started.wait(60), "the candidate was called"
        if fault == "hangs":
            # submit returned and the deployed decision is made while the candidate is still held
            assert not candidate.release.is_set()
        assert _deployed(line, config) == expected
        assert shadow.flush(120)
        replaced = fault in ("hangs", "exits")
        assert shadow.counts["restarts"] == int(replaced) and (shadow.pid != first) == replaced
        assert not alive(first) if replaced else alive(first), "a hung or dead child is gone, and replaced"
    finally:
        shadow.close(60)
    assert not alive(first) and shadow.pid is None
    (item,) = _lines(tmp_path)
    assert item.status == status and (item.error or item.parse_errors)
    assert (item.decision is None) == (status != "invalid" or fault == "garbage")
    if fault == "hangs":
        assert item.error == "no answer within 0.05 s" and item.latency_s == 0.05
    if fault == "exits":
        assert item.error == "the shadow's process exited (code 3) while deciding"


def test_a_hung_child_is_killed_and_a_fresh_one_answers_the_next_turns(rules_dir, session, tmp_path):
    lines, config = session
    candidate = Faulty(rules_dir, "hangs_once")  # only the first call, whichever process makes it
    with ShadowRunner(candidate, tmp_path, deadline_s=0.05) as shadow:
        first = shadow.pid
        for line in lines[:3]:
            shadow.submit(line, config)
        assert shadow.flush(120)
        assert candidate.calls.value == 3 and shadow.counts["restarts"] == 1 and not alive(first)
        second = shadow.pid
    assert not alive(second)
    statuses = [(item.status, item.error) for item in _lines(tmp_path)]
    assert statuses == [("timeout", "no answer within 0.05 s"), ("ok", ""), ("ok", "")]


def test_a_candidate_passed_as_a_loaded_module_is_sent_to_the_shadow_process(rules_dir, session, tmp_path):
    lines, config = session
    with ShadowRunner(_module(rules_dir), tmp_path, deadline_s=30) as shadow:
        shadow.submit(lines[0], config)
    (item,) = _lines(tmp_path)
    assert item.status == "ok" and item.module.checksum == module_checksum(rules_dir)


def test_a_runner_left_open_writes_its_lines_and_stops_its_process_at_exit(rules_dir, session, tmp_path):
    lines, _config = session
    script = f"""
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
from shadow_support import load_rules
from runtime.shadow import ShadowRunner
shadow = ShadowRunner({str(rules_dir)!r}, {str(tmp_path)!r}, deadline_s=30, program=__import__("programs").spec(
    "full_auto.rules").factory)
print(shadow.pid, flush=True)
shadow.submit({lines[0].model_dump_json()!r})
"""  # no close: the interpreter's exit closes it
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    pid = int(done.stdout.split()[0])
    assert not alive(pid), "the shadow's process ends with the interpreter"
    (item,) = _lines(tmp_path)
    assert item.status == "ok" and item.turn_id == lines[0].turn_id


def test_turns_submitted_while_the_shadow_is_behind_are_written_as_not_run(rules_dir, session, tmp_path):
    lines, config = session
    candidate = Faulty(rules_dir, "hangs")
    shadow = ShadowRunner(candidate, tmp_path, deadline_s=30, max_pending=1)
    try:
        shadow.submit(lines[0], config)
        assert candidate.started.wait(60)  # the shadow's process is held by the first call
        for line in lines[1:4]:
            shadow.submit(line, config)
        candidate.release.set()
        assert shadow.flush(120)
    finally:
        candidate.release.set()
        shadow.close(60)
    written = _lines(tmp_path)
    assert [item.turn_id for item in written] == [line.turn_id for line in lines[:4]]
    assert written[0].status == "ok" and written[1].status == "ok"  # one may wait
    assert all(item.status == "timeout" and item.error == "not run: 1 decisions were already waiting"
               for item in written[2:])


def test_what_cannot_be_read_is_counted_never_raised(rules_dir, session, tmp_path):
    lines, config = session
    shadow = ShadowRunner(_module(rules_dir), tmp_path)
    shadow.submit({"not": "a decision line"}, config)
    shadow.submit(lines[0], {"min_confidence": "high"})
    shadow.submit(lines[0].model_dump_json(), config.model_dump())  # JSON text and a dict are read
    shadow.close(30)
    shadow.submit(lines[1], config)
    assert shadow.close(30) and shadow.close(30), "closing again waits for nothing"
    assert shadow.counts["unreadable"] == 2 and shadow.counts["refused"] == 1 and shadow.counts["written"] == 1
    assert len(_lines(tmp_path)) == 1


def test_the_line_contract_refuses_inconsistent_lines(rules_dir, session, tmp_path):
    lines, config = session
    with ShadowRunner(_module(rules_dir), tmp_path) as shadow:
        shadow.submit(lines[0], config)
    data = json.loads((tmp_path / SHADOW_FILE).read_text(encoding="utf-8"))
    broken = [dict(data, status="error"), dict(data, decision=None), dict(data, schema_version=2),
              dict(data, inputs_hash="abc"), dict(data, timestamp="yesterday"),
              dict(data, enforced=dict(data["enforced"], action="review" if data["enforced"]["action"] != "review"
                                       else "stop"))]
    for item in broken:
        with pytest.raises(ValueError):
            ShadowDecisionLine.model_validate_json(json.dumps(item))
    assert ShadowDecisionLine.model_validate_json(json.dumps(dict(data, added_later=1))).status == "ok"


def test_a_refused_module_is_refused_at_construction(rules_dir, tmp_path):
    import shutil

    from frozen_support import export_program
    from runtime import FrozenModuleError

    import dspy

    predict = export_program("full_auto.predict", tmp_path / "predict").path
    with dspy.context(lm=None), pytest.raises(FrozenModuleError, match="calls an LM and none is set"):
        ShadowRunner(predict, tmp_path)  # it would pause on every turn

    copy = tmp_path / "tampered"
    shutil.copytree(rules_dir, copy)
    (copy / "program.json").write_text("{}", encoding="utf-8")
    with pytest.raises(FrozenModuleError):
        ShadowRunner(copy, tmp_path, program=programs.spec("full_auto.rules").factory)


def test_a_candidate_that_cannot_be_sent_or_rebuilt_is_refused_at_construction(rules_dir, tmp_path, capfd):
    from runtime import FrozenModuleError
    from shadow_support import Unpicklable

    with pytest.raises(FrozenModuleError, match="cannot be sent to the shadow's process"):
        ShadowRunner(Unpicklable(rules_dir, pickles=False), tmp_path)
    with pytest.raises(FrozenModuleError, match=r"the shadow's process exited \(code 1\) before it loaded"):
        ShadowRunner(Unpicklable(rules_dir, pickles=True), tmp_path)  # but cannot be rebuilt there
    assert "cannot be rebuilt" in capfd.readouterr().err  # the child's own error, on its stderr


def test_the_shadow_process_ends_when_the_deployed_process_is_killed(rules_dir, tmp_path):
    script = f"""
import sys, time
from runtime.shadow import ShadowRunner
shadow = ShadowRunner({str(rules_dir)!r}, {str(tmp_path)!r}, program=__import__("programs").spec(
    "full_auto.rules").factory)
print(shadow.pid, flush=True)
time.sleep(600)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    loop = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        pid = int(loop.stdout.readline())
        assert alive(pid)
    finally:
        loop.kill()  # no exit handler runs: the child must notice on its own
        loop.wait(60)
        loop.stdout.close()
    deadline = time.monotonic() + 60
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the shadow's process outlived the deployed process"
