"""The codex `guidebench runner install` writes, called exactly as the loop runner calls codex (argv, stdin, cwd,
env: tests/runner_support.py restates them from the runner's source), with a planner export in front of it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from runner_support import (git, implementer_call, kernel_repo, login_status, planning_call, recorder, runner_env,
                            wait_for_lines, write_plan_artifacts)
from runtime.advisor import AdvisorPacket
from runtime.exploration import ExplorationSettings
from runtime.pivot import validate_directive_original
from runtime.records import packet_hash
from runtime.runner_codex import MARKER, ask, call_kind, option, real_codex, socket_path
from runtime.runner_packet import packet_in_prompt, schema_errors, stable_packet_hash

from guidebench.runner import Layout, install, runner_status, uninstall


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    from frozen_support import export_program

    root = tmp_path_factory.mktemp("runner-export")
    settings = ExplorationSettings(policy="epsilon", epsilon=0.3, floor=0.05, seed=3)
    return export_program("planner.rules", root / "planner", name="planner", exploration=settings).path


def _service_pid(layout: Layout) -> int | None:
    try:
        return ask(socket_path(layout.home), {"op": "status"}, timeout=10.0).get("pid")
    except OSError:
        return None


@pytest.fixture
def installed(tmp_path, export, monkeypatch):
    """A kernel repository with the planner installed (the real codex: a recorder); uninstalled afterwards, and its
    service gone (killed if it would not stop)."""
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    repo = kernel_repo(tmp_path / "kernel")
    real, calls = recorder(tmp_path / "real")
    report = install(repo, export, codex=real, idle_s=300)  # a service a crash left behind stops by itself
    layout = report.layout
    yield repo, layout, calls
    pid = _service_pid(layout)
    if layout.config.is_file():
        uninstall(repo)
    if pid is not None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the planner service {pid} did not stop when uninstalled")


def test_a_planning_call_as_the_runner_makes_it(installed):
    repo, layout, _ = installed
    env = runner_env(repo, layout.bin)
    packet_file, schema, out, prompt = write_plan_artifacts(repo, 1)
    proc = planning_call(repo, env, schema, out, prompt)
    assert proc.returncode == 0, proc.stderr
    directive = json.loads(out.read_text(encoding="utf-8"))
    allowed = json.loads(schema.read_text())["properties"]["strategy_family"]["enum"]
    assert directive["strategy_family"] in allowed
    assert validate_directive_original(directive) == []
    assert schema_errors(directive, json.loads(schema.read_text())) == []
    packet = AdvisorPacket.model_validate(json.loads(packet_file.read_text()))
    [line] = wait_for_lines(repo / "experiments" / "planner-decisions.jsonl", 1)
    assert line["iteration_id"] == 1 and line["family"] == directive["strategy_family"]
    assert line["packet_hash"] == packet_hash(packet) and line["packet_stable_hash"] == stable_packet_hash(packet)
    assert abs(sum(line["probabilities"].values()) - 1) < 1e-9 and line["probabilities"][line["family"]] > 0
    assert line["repository"] == git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    # the api mode's call carries -m; its artifacts folder is codex_api
    _, schema2, out2, prompt2 = write_plan_artifacts(repo, 2, mode="codex_api")
    proc = planning_call(repo, env, schema2, out2, prompt2, model="gpt-5.2-pro")
    assert proc.returncode == 0, proc.stderr
    assert len(wait_for_lines(repo / "experiments" / "planner-decisions.jsonl", 2)) == 2


def test_login_check_passes_without_any_credential(installed):
    repo, layout, _ = installed
    env = runner_env(repo, layout.bin)
    status = login_status(repo, env)
    assert status.returncode == 0 and "Logged in using an API key" in status.stdout
    auth = json.loads((Path(env["CODEX_HOME"]) / "auth.json").read_text())
    assert auth["OPENAI_API_KEY"] is None and auth["tokens"] is None


def test_every_other_call_reaches_the_real_codex_unchanged(installed):
    repo, layout, calls = installed
    env = runner_env(repo, layout.bin, RUNNER_TEST_MARKER="kept")
    proc = implementer_call(repo, env, "apply the directive\n")
    assert proc.returncode == 7 and proc.stdout == "real codex called\n"
    assert calls.read_text().splitlines() == ["exec", "-C", str(repo), "-s", "workspace-write", "-c",
                                              'approval_policy="never"', "--color", "never", "-", f"--cwd={repo}",
                                              "--marker=kept", "--stdin:", "apply the directive"]
    version = subprocess.run(["codex", "--version"], cwd=str(repo), env=env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, check=False)
    assert version.returncode == 7 and calls.read_text().splitlines()[0] == "--version"


def test_what_it_cannot_plan_it_refuses_in_one_line_and_writes_nothing(installed, export, tmp_path):
    repo, layout, _ = installed
    env = runner_env(repo, layout.bin)
    packet, schema, out, prompt = write_plan_artifacts(repo, 3)
    packet.write_text("{not json", encoding="utf-8")
    proc = planning_call(repo, env, schema, out, prompt)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "packet" in proc.stderr
    assert not out.exists()
    # no family open: the runner's schema allows only a family the packet's constraints block
    raw = json.loads((write_plan_artifacts(repo, 4)[0]).read_text())
    raw["strategy_family_constraints"]["blocked_families"] = ["family:break_deps"]
    schema_obj = json.loads(schema.read_text())
    schema_obj["properties"]["strategy_family"]["enum"] = ["family:break_deps"]
    _, schema4, out4, prompt4 = write_plan_artifacts(repo, 4, packet=raw, schema=schema_obj)
    proc = planning_call(repo, env, schema4, out4, prompt4)
    assert proc.returncode == 2 and "no directive written" in proc.stderr and not out4.exists()
    # a module changed after install
    module = Path(layout.read().module)
    manifest = module / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"planner"', '"planner-x"', 1))
    try:
        _, schema5, out5, prompt5 = write_plan_artifacts(repo, 5)
        proc = planning_call(repo, env, schema5, out5, prompt5)
        assert proc.returncode == 2 and "refused" in proc.stderr and not out5.exists()
        assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        manifest.write_text(manifest.read_text().replace('"planner-x"', '"planner"', 1))
    assert not (repo / "experiments" / "planner-decisions.jsonl").exists()  # no line for a refused call


def test_a_service_that_cannot_start_is_reported_at_once(installed):
    repo, layout, _ = installed
    config = json.loads(layout.config.read_text())
    layout.config.write_text(json.dumps({**config, "python": shutil.which("false")}))
    _, schema, out, prompt = write_plan_artifacts(repo, 1)
    proc = planning_call(repo, runner_env(repo, layout.bin), schema, out, prompt)
    # said when it died, not after the whole start wait
    assert proc.returncode == 2 and "exited (code 1) while starting" in proc.stderr and not out.exists()


def test_git_sees_nothing_and_uninstall_removes_what_install_wrote(installed, tmp_path):
    repo, layout, _ = installed
    env = runner_env(repo, layout.bin)
    _, schema, out, prompt = write_plan_artifacts(repo, 1)
    assert planning_call(repo, env, schema, out, prompt).returncode == 0
    sidecar = repo / "experiments" / "planner-decisions.jsonl"
    wait_for_lines(sidecar, 1)
    # what `record` counts as changed: untracked files git does not ignore, and the diff
    assert (repo / ".guidebench" / "bin" / "codex").is_file() and sidecar.is_file()
    assert git(repo, "status", "--porcelain") == "" and git(repo, "ls-files", "--others", "--exclude-standard") == ""
    status = runner_status(repo)
    assert status.sidecar_lines == 1 and status.module == "planner@0.1.0" and status.service is not None
    # another module installed over it: the service is stopped, and install says the sidecar is the old module's
    from frozen_support import export_program

    other = export_program("planner.rules", tmp_path / "other", name="other").path
    report = install(repo, other, idle_s=300)
    assert any("holds the lines of planner@0.1.0" in note for note in report.notes)
    assert runner_status(repo).service is None
    uninstall(repo)
    assert not layout.bin.exists() and not layout.home.exists()
    assert not (repo / ".codex_home" / "auth.json").exists()
    assert sidecar.is_file() and git(repo, "status", "--porcelain") == ""  # the data stays, still out of git


def test_call_kinds_and_options():
    assert call_kind(["login", "status"]) == "login-status"
    assert call_kind(["login", "--device-auth"]) == "other"
    assert call_kind(["exec", "-C", "/r", "--output-schema", "s.json", "-"]) == "plan"
    assert call_kind(["exec", "-C", "/r", "-s", "workspace-write", "-"]) == "other"
    assert call_kind(["--version"]) == "other"
    assert option(["exec", "--output-last-message", "a", "--output-last-message=b"], "--output-last-message") == "b"
    assert option(["exec", "-C", "/r"], "-C", "--cd") == "/r" and option(["exec"], "-C") is None


def test_the_packet_in_the_prompt_is_the_last_fenced_object_that_is_not_a_schema():
    prompt = ('Output contract:\n```json\n{"type": "object", "properties": {}}\n```\n\nHere is the current '
              'IterationPacket (JSON):\n```json\n{"iteration_id": 7, "goal": "best"}\n```')
    assert packet_in_prompt(prompt) == {"iteration_id": 7, "goal": "best"}
    assert packet_in_prompt("no packet here") is None


def test_the_schema_check_names_each_violation():
    schema = {"type": "object", "additionalProperties": False, "required": ["a", "b"],
              "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"},
                                                             "minItems": 1, "maxItems": 2}}}
    assert schema_errors({"a": 1, "b": ["x"]}, schema) == []
    assert schema_errors({"a": True, "b": [], "c": 0}, schema) == [
        "directive.c: not allowed", "directive.a: not integer but bool",
        "directive.b: 0 items, the schema allows 1..2"]


def test_install_refuses_what_is_not_a_planner_export(tmp_path):
    from guidebench.errors import GuidebenchError

    repo = kernel_repo(tmp_path / "kernel")
    with pytest.raises(GuidebenchError, match="refused by the runtime loader"):
        install(repo, tmp_path / "nowhere")
    assert not (repo / ".guidebench").exists() or not (repo / ".guidebench" / "bin").exists()
    shutil.rmtree(tmp_path / "kernel")


def test_the_real_codex_is_the_next_one_on_path_never_a_planner_codex(tmp_path):
    me, other, real = (recorder(tmp_path / name)[0] for name in ("mine", "other-repo", "real"))
    other.write_text(other.read_text().replace("#!/bin/sh", f"#!/bin/sh\n# {MARKER}"))
    path = os.pathsep.join(str(p.parent) for p in (me, other, real))
    assert real_codex({}, me, path) == str(real)
    assert real_codex({"codex": "/opt/codex"}, me, path) == "/opt/codex"
    assert real_codex({}, me, str(me.parent)) is None


def test_the_commands_install_show_and_remove_it(tmp_path, export, capsys, monkeypatch):
    from guidebench.cli import main

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    repo = kernel_repo(tmp_path / "kernel")
    assert main(["runner", "install", str(repo), "--module", str(export), "--idle", "60"]) == 0
    printed = capsys.readouterr().out
    assert f'export PATH="{repo}/.guidebench/bin:$PATH"' in printed and "auth.json (no credential" in printed
    assert main(["runner", "status", str(repo), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["module"] == "planner@0.1.0" and status["sidecar_lines"] == 0 and status["service"] is None
    assert main(["runner", "stop", str(repo)]) == 0 and "no planner service" in capsys.readouterr().out
    assert main(["runner", "uninstall", str(repo)]) == 0
    assert not (repo / ".guidebench").exists() and git(repo, "status", "--porcelain") == ""
    assert main(["runner", "status", str(repo)]) != 0
    assert "no planner installed" in capsys.readouterr().err
