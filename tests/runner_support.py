"""The loop runner's calls of `codex`, restated from its public source (meppum/original_performance_takehome
`tools/loop_runner.py` and `tools/codex_planner_exec.sh` at a2cdbe0), for the tests of the codex that
`guidebench runner install` writes. Nothing here is the runner's code: each function says what the runner does.

- planning (`codex-plan`, `codex-api-plan`): the runner writes `.advisor/codex[_api]/iter_NNNN_packet.json` and
  `_schema.json` (`json.dumps(..., indent=2, sort_keys=True)` plus a newline) and `_prompt.md` (the prompt plus a
  newline), then runs `[codex, "exec", "-C", ROOT, "-s", "read-only", "-c", 'approval_policy="never"', "--color",
  "never", "--output-schema", SCHEMA, "--output-last-message", OUT, ("-m", MODEL), "-"]` with every path absolute,
  the prompt as text on stdin, cwd ROOT, stdout and stderr captured, and the environment of the runner with
  CODEX_HOME defaulting to ROOT/.codex_home (`codex_planner_exec.sh` runs codex-plan under `env -u CODEX_API_KEY
  -u OPENAI_API_KEY`). It then reads OUT, parses it (code fences tolerated) and checks it against the schema.
- login: codex-plan checks that CODEX_API_KEY is set or CODEX_HOME/auth.json exists; codex-api-plan without a key
  runs `[codex, "login", "status"]` (cwd ROOT, the keys removed from env) and looks for "Logged in using an API key";
  `codex_planner_exec.sh` runs `codex login status` with the keys unset and stops unless it exits 0.
- implementing: `codex exec -C ROOT -s workspace-write -c 'approval_policy="never"' --color never [-m M] -` with
  `docs/codex-apply-directive-prompt.md` on stdin, keys unset.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
SAMPLE_ADVISOR = REPO / "datasets" / "sample" / "experiments" / "episode-0004" / ".advisor" / "codex_api"
NO_KEYS = ("CODEX_API_KEY", "OPENAI_API_KEY")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def kernel_repo(root: Path) -> Path:
    """A git repository laid out as the runner's (experiments/, .gitignore ignoring log.jsonl and .advisor/)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "experiments").mkdir()
    (root / "perf_takehome.py").write_text("# the kernel\n", encoding="utf-8")
    (root / ".gitignore").write_text("experiments/log.jsonl\n.advisor/\n.codex_home/*\n!.codex_home/AGENTS.md\n",
                                     encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "T")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def write_plan_artifacts(root: Path, iteration: int, *, mode: str = "codex", packet: Optional[dict] = None,
                         schema: Optional[dict] = None) -> tuple[Path, Path, Path, str]:
    """The files the runner writes before calling codex (a sample packet, schema and prompt by default);
    returns (packet, schema, out, prompt)."""
    stem = f"iter_{iteration:04d}"
    folder = root / ".advisor" / mode
    folder.mkdir(parents=True, exist_ok=True)
    packet = packet if packet is not None else json.loads((SAMPLE_ADVISOR / "iter_0001_packet.json").read_text())
    schema = schema if schema is not None else json.loads((SAMPLE_ADVISOR / "iter_0001_schema.json").read_text())
    packet = {**packet, "iteration_id": iteration}
    prompt = (SAMPLE_ADVISOR / "iter_0001_prompt.md").read_text(encoding="utf-8").rstrip("\n")
    paths = folder / f"{stem}_packet.json", folder / f"{stem}_schema.json", folder / f"{stem}_last_message.txt"
    paths[0].write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths[1].write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (folder / f"{stem}_prompt.md").write_text(prompt + "\n", encoding="utf-8")
    return paths[0], paths[1], paths[2], prompt


def runner_env(root: Path, bin_dir: Path, *, strip_keys: bool = True, **extra: str) -> dict[str, str]:
    """The runner's environment for codex: ours, the installed bin first on PATH, CODEX_HOME defaulted."""
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("CODEX_HOME", str(root / ".codex_home"))
    if strip_keys:
        for key in NO_KEYS:
            env.pop(key, None)
    env.update(extra)
    return env


def which_codex(env: dict[str, str]) -> str:
    """`shutil.which("codex")` on the runner's PATH, as the runner resolves it."""
    import shutil

    found = shutil.which("codex", path=env["PATH"])
    assert found is not None, "no codex on the runner's PATH"
    return found


def planning_call(root: Path, env: dict[str, str], schema: Path, out: Path, prompt: str,
                  model: Optional[str] = None) -> subprocess.CompletedProcess:
    """`codex exec` exactly as the runner's planning modes run it."""
    argv = [which_codex(env), "exec", "-C", str(root), "-s", "read-only", "-c", 'approval_policy="never"',
            "--color", "never", "--output-schema", str(schema), "--output-last-message", str(out)]
    if model:
        argv += ["-m", model]
    argv.append("-")
    return subprocess.run(argv, input=prompt, cwd=str(root), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=False, timeout=300)


def login_status(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`codex login status` as codex-api-plan runs it (the keys removed)."""
    env = {k: v for k, v in env.items() if k not in NO_KEYS}
    return subprocess.run([which_codex(env), "login", "status"], cwd=str(root), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=False, timeout=60)


def implementer_call(root: Path, env: dict[str, str], stdin: str) -> subprocess.CompletedProcess:
    """The implementer's `codex exec` of codex_planner_exec.sh."""
    argv = ["codex", "exec", "-C", str(root), "-s", "workspace-write", "-c", 'approval_policy="never"', "--color",
            "never", "-"]
    return subprocess.run(argv, input=stdin, cwd=str(root), env=env, capture_output=True, text=True, check=False,
                          timeout=60)


RECORDER = """#!/bin/sh
# stands in for the real codex: records how it was called, answers like a CLI would
{{ printf '%s\\n' "$@"; echo "--cwd=$PWD"; echo "--marker=$RUNNER_TEST_MARKER"; echo "--stdin:"; cat; }} > {log}
echo "real codex called"
exit 7
"""


def recorder(folder: Path) -> tuple[Path, Path]:
    """An executable that records its argv, cwd, one env var and stdin (the real codex is not on this machine)."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.txt"
    path = folder / "codex"
    path.write_text(RECORDER.format(log=log), encoding="utf-8")
    path.chmod(0o755)
    return path, log


def wait_for_lines(path: Path, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """The sidecar's lines once it has `count` (the service writes them after answering)."""
    deadline = time.monotonic() + timeout
    lines: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if path.is_file():
            lines = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
            if len(lines) >= count:
                return lines
        time.sleep(0.05)
    return lines
