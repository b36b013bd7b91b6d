"""The round trip with the real loop runner: its `tools/loop_runner.py` (read from the mirror of its public
repository at test time; skipped when the mirror is absent) plans through the installed codex in codex-plan mode
and through `guidebench runner plan` in manual mode, records each iteration, and `guidebench data import` joins
every log line to its archive and its sidecar line, with nothing quarantined.

The repository is a small one in the runner's layout, as the runner's own hermetic tests build it (a local bare
origin, a kernel the performance profile can read, a submission test that prints its cycles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner_support import git, runner_env
from runtime.exploration import ExplorationSettings

from guidebench.data import import_logs
from guidebench.runner import install, uninstall

MIRROR = Path("/work/.mirror/meppum+original_performance_takehome/repo")
pytestmark = pytest.mark.slow

PROBLEM = 'SLOT_LIMITS = {"load": 2, "store": 1, "flow": 1, "valu": 4, "alu": 4}\n'
KERNEL = textwrap.dedent('''
    from dataclasses import dataclass


    class KernelBuilder:
        @dataclass
        class _Task:
            engine: str
            succs: list
            cp: int

        def __init__(self):
            self.instrs = []

        def _mk_task(self, tasks, last_writer, last_reader, *, engine, slot, reads=(), writes=()):
            task = KernelBuilder._Task(engine=str(engine), succs=[], cp=len(tasks) + 1)
            tasks.append(task)
            if len(tasks) >= 2:
                tasks[-2].succs.append(len(tasks) - 1)
            return task

        def build_kernel(self, forest_height, n_nodes, batch_size, rounds):
            tasks, writers, readers = [], {}, {}
            for engine in ("load", "alu", "valu", "load"):
                self._mk_task(tasks, writers, readers, engine=engine, slot=("op",))
            self.instrs = [{"alu": [("op",)]}] * 12
''').lstrip()
SUBMISSION = 'print("CYCLES:  1500")\nprint("Ran 9 tests in 0.01s")\nprint("OK")\n'


def _runner_source() -> str:
    if not (MIRROR / "HEAD").is_file():
        pytest.skip(f"the loop runner's mirror is not on this machine ({MIRROR})")
    return subprocess.run(["git", "-C", str(MIRROR), "show", "HEAD:tools/loop_runner.py"], check=True,
                          capture_output=True, text=True).stdout


def _repo(tmp: Path) -> Path:
    work, origin = tmp / "kernel", tmp / "origin.git"
    for folder in ("tools", "tests", "experiments"):
        (work / folder).mkdir(parents=True)
    (work / "tools" / "__init__.py").write_text("")
    (work / "tools" / "loop_runner.py").write_text(_runner_source())
    (work / "problem.py").write_text(PROBLEM)
    (work / "perf_takehome.py").write_text(KERNEL)
    (work / "tests" / "submission_tests.py").write_text(SUBMISSION)
    (work / ".gitignore").write_text("experiments/log.jsonl\n.advisor/\n.codex_home/*\n!.codex_home/AGENTS.md\n")
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "user.email", "t@example.invalid")
    git(work, "config", "user.name", "T")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "init")
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "-u", "origin", "main")
    return work


def _runner(work: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "tools/loop_runner.py", *args], cwd=str(work), env=env,
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, f"loop_runner {args[0]}: {proc.stderr[-2000:]}"
    return proc


def test_codex_and_manual_iterations_come_back_whole(tmp_path, monkeypatch):
    from frozen_support import export_program

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    work = _repo(tmp_path)
    explore = ExplorationSettings(policy="epsilon", epsilon=0.3, floor=0.05, seed=11)
    deployed = export_program("planner.rules", tmp_path / "deployed", name="deployed", exploration=explore).path
    candidate = export_program("planner.rules", tmp_path / "candidate", name="candidate").path
    layout = install(work, deployed, candidate=candidate).layout
    env = runner_env(work, layout.bin, PYTHONDONTWRITEBYTECODE="1")
    try:
        for _ in range(3):
            _runner(work, env, "codex-plan", "--goal", "best", "--slug", "e2e", "--no-pull", "--code-context", "none")
            _runner(work, env, "record")
        _runner(work, env, "manual-pack", "--goal", "best", "--slug", "hand", "--no-pull", "--code-context", "none")
        from guidebench.runner import plan_packet

        plan_packet(work / "planner_packets" / "packet.json", deployed, work / "planner_packets" / "directive.json")
        git(work, "add", "planner_packets/directive.json")
        git(work, "commit", "-q", "-m", "directive")
        _runner(work, env, "manual-apply", "--no-pull")
        _runner(work, env, "record")
    finally:
        uninstall(work)  # stops the service: every queued sidecar line is written
    report = import_logs(work, "experiments", tmp_path / "data", progress=False).model_dump()
    lines = (work / "experiments" / "planner-decisions.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["candidate"]["status"] == "ok" for line in lines)
    assert report["imported"] == 4 and report["archive_joined"] == 4 and report["planner_joined"] == 4
    assert report["quarantined"] == 0 and report["side_quarantined"] == 0
    assert os.path.isfile(work / ".advisor" / "manual_archive" / "iter_0004" / "packet.json")
    entries = [json.loads(line) for line in (work / "experiments" / "log.jsonl").read_text().splitlines()]
    assert all(e["scope_ok"] and e["files_changed"] == [] for e in entries)  # git saw nothing of the planner
