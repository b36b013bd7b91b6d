"""`guidebench runner install` / `uninstall`: put a frozen planner in front of a loop runner's repository.

Install writes (see `guidebench.runner._base` for the layout):
- `REPO/.guidebench/bin/codex`, the command the runner finds first once that folder leads PATH: a small Python
  script (the project's interpreter, the standard library and `runtime.runner_codex`);
- `REPO/.guidebench/runner/runner.json`, what plans (the export, checked by the runtime loader now), the candidate,
  the real codex;
- `REPO/.guidebench/.gitignore` (`*`), and lines in the repository's `.git/info/exclude` for the sidecar
  (`experiments/planner-decisions.jsonl`) and the login placeholder, so that neither a commit (`git add -A`) nor the
  runner's scope check (`record`, which counts untracked files git does not ignore) ever sees them;
- when the runner's login check would fail (no `CODEX_API_KEY`, no `CODEX_HOME/auth.json`), a placeholder
  `auth.json` in the runner's default CODEX_HOME (`REPO/.codex_home`) that holds no credential.
A candidate is recorded candidate -> shadow in the promotion ledger, as `guidebench shadow planner-start` does.
Uninstall stops the service and removes exactly what install wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import runtime
from runtime.checksums import module_checksum
from runtime.runner_codex import MARKER

from guidebench.errors import GuidebenchError
from guidebench.runner._base import FOLDER, Layout, RunnerConfig

# -S -E: no site-packages, no PYTHON* variables: the codex needs the standard library and runtime/ only, and every
# planning call pays for its start (about a third of the time of a start with the venv's site-packages here)
SHIM = '''#!{python} -SE
# {marker}: the codex of this repository's loop runner (written by `guidebench runner install`).
# Planning calls go to a frozen planner; every other call goes to the real codex. Remove: guidebench runner uninstall
import sys
from pathlib import Path
sys.path.insert(0, {project!r})
from runtime.runner_codex import main
sys.exit(main(sys.argv[1:], Path({home!r}), Path(__file__)))
'''
AUTH_NOTE = "guidebench runner: no credential; planning calls are answered by a frozen planner"
SIDECAR_REL = "experiments/planner-decisions.jsonl"


@dataclass
class InstallReport:
    """What install wrote, for the printout."""

    layout: Layout
    config: RunnerConfig
    wrote: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def path_line(self) -> str:
        return f'export PATH="{self.layout.bin}:$PATH"'


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise GuidebenchError(f"{repo}: `git {' '.join(args)}` failed: {' '.join(proc.stderr.split())[:200]}")
    return proc.stdout.strip()


def _exclude_path(repo: Path) -> Path:
    """The repository's info/exclude (a linked worktree's is its main repository's)."""
    path = Path(_git(repo, "rev-parse", "--git-path", "info/exclude"))
    return path if path.is_absolute() else repo / path


def _exclude(repo: Path, lines: list[str]) -> list[str]:
    """Add the lines missing from the repository's info/exclude (shared by its worktrees); returns those added."""
    path = _exclude_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    have = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    added = [line for line in lines if line not in have]
    if added:
        text = "\n".join(have + ["# guidebench runner (remove with `guidebench runner uninstall`)", *added]) + "\n"
        path.write_text(text, encoding="utf-8")
    return added


def _ignored(repo: Path, relative: str) -> bool:
    proc = subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", "--no-index", relative], check=False)
    return proc.returncode == 0


def check_module(path: Path, label: str) -> str:
    """`name@version` of an exported planner the runtime loader accepts (GuidebenchError naming the option)."""
    from guidebench.release.shadow import verified_module

    try:
        manifest = verified_module(path.absolute(), kind="planner")
    except GuidebenchError as exc:
        raise GuidebenchError(f"{label} {exc}") from None
    return f"{manifest.name}@{manifest.version}"


def root_commit(repo: Path) -> str:
    """The repository's root commit: the id its sidecar lines name (empty without a commit)."""
    try:
        return _git(repo, "rev-list", "--max-parents=0", "HEAD").splitlines()[0]
    except (GuidebenchError, IndexError):
        return ""


def _check_codex(codex: Optional[Path]) -> Optional[str]:
    if codex is None:
        return None
    if not (codex.is_file() and os.access(codex, os.X_OK)):
        raise GuidebenchError(f"--codex {codex}: not an executable file (give the real codex, e.g. `which codex`)")
    if MARKER.encode() in codex.read_bytes()[:4096]:
        raise GuidebenchError(f"--codex {codex}: is a guidebench planner codex itself; give the real codex")
    return str(codex.absolute())


def install(repo: Path, module: Path, *, candidate: Optional[Path] = None, codex: Optional[Path] = None,
            idle_s: Optional[float] = None) -> InstallReport:
    """Install the planner in `repo` (see the module); GuidebenchError with one line when it cannot."""
    repo = repo.absolute()
    if not (repo / "tools" / "loop_runner.py").is_file() and not (repo / ".git").exists():
        raise GuidebenchError(f"{repo}: not a git repository of the loop runner (no .git, no tools/loop_runner.py)")
    _git(repo, "rev-parse", "--git-dir")
    name = check_module(module, "--module")
    if candidate is not None:
        check_module(candidate, "--candidate")
    layout = Layout(repo)
    stop(layout)  # a running service keeps the old module: the next call starts one with the new
    try:
        previous = layout.read() if layout.config.is_file() else None
    except GuidebenchError:
        previous = None  # an unreadable configuration is replaced
    config = RunnerConfig(
        repo=str(repo), module=str(module.absolute()), module_name=name,
        candidate=str(candidate.absolute()) if candidate is not None else None, codex=_check_codex(codex),
        python=sys.executable, project=str(Path(runtime.__file__).resolve().parent.parent),
        repository=root_commit(repo), log_dir=str(repo / "experiments"),
        installed_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **({"idle_s": idle_s} if idle_s else {}))
    report = InstallReport(layout, config)
    layout.bin.mkdir(parents=True, exist_ok=True)
    layout.home.mkdir(parents=True, exist_ok=True)
    (layout.folder / ".gitignore").write_text("# everything guidebench keeps in this repository stays local\n*\n",
                                              encoding="utf-8")
    layout.codex.write_text(SHIM.format(python=sys.executable, marker=MARKER, project=config.project,
                                        home=str(layout.home)), encoding="utf-8")
    layout.codex.chmod(0o755)
    report.wrote += [str(layout.codex), str(layout.config), str(layout.folder / ".gitignore")]
    auth = repo / ".codex_home" / "auth.json"
    if previous is not None and previous.wrote_auth:
        config.wrote_auth = previous.wrote_auth
    elif not os.environ.get("CODEX_API_KEY") and not auth.exists():
        auth.parent.mkdir(parents=True, exist_ok=True)
        auth.write_text(json.dumps({"OPENAI_API_KEY": None, "tokens": None, "guidebench_runner": AUTH_NOTE},
                                   indent=2) + "\n", encoding="utf-8")
        config.wrote_auth = str(auth)
        report.wrote.append(f"{auth} (no credential: the runner's login check looks for this file)")
    excluded = [f"/{SIDECAR_REL}", f"/{FOLDER}/"] + (["/.codex_home/auth.json"] if config.wrote_auth else [])
    config.excluded = sorted(set((previous.excluded if previous else []) + _exclude(repo, excluded)))
    report.wrote.append(f"{_exclude_path(repo)} (ignores "
                        f"{', '.join(excluded)})")
    layout.config.write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    for relative in (SIDECAR_REL, f"{FOLDER}/bin/codex", *([".codex_home/auth.json"] if config.wrote_auth else [])):
        if not _ignored(repo, relative):
            report.notes.append(f"git does not ignore {relative}: add it to {repo}/.gitignore before the next commit")
    other = _sidecar_module(layout.sidecar(config))
    if other is not None and other.get("checksum") != module_checksum(Path(config.module)):
        report.notes.append(f"{layout.sidecar(config)} holds the lines of {other.get('name')}@{other.get('version')}: "
                            "a sidecar holds one deployed module's lines (the import quarantines a second module's); "
                            "import the logs, then move it aside before the next planning call")
    if candidate is not None:
        from guidebench.release.planner_gate import start_planner_shadow

        if start_planner_shadow(candidate.absolute()) is not None:
            report.notes.append(f"{candidate}: recorded candidate -> shadow in the promotion ledger")
    if config.codex is None and shutil.which("codex", path=_path_without(layout.bin)) is None:
        report.notes.append("no real codex on PATH: planning works; the implementer step (`codex exec` without "
                            "--output-schema) needs one (`--codex PATH`)")
    return report


def _sidecar_module(path: Path) -> Optional[dict]:
    """The module the sidecar's first line names (None without a readable first line)."""
    try:
        with path.open("rb") as handle:
            first = next((line for line in handle if line.strip()), b"")
        module = json.loads(first).get("module") if first else None
    except (OSError, ValueError, AttributeError):
        return None
    return module if isinstance(module, dict) else None


def _path_without(folder: Path) -> str:
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).absolute() != folder)


def stop(layout: Layout, wait_s: float = 60.0) -> bool:
    """Stop the repository's planner service if one runs; returns once it has exited (after writing its queued
    sidecar lines), so that an import right after reads every line. A service still there after `wait_s` gets
    SIGTERM (which also writes the queued lines)."""
    from runtime.runner_codex import ask, socket_path

    sock = socket_path(layout.home)
    try:
        pid = int(ask(sock, {"op": "status"}, timeout=30.0)["pid"])
        ask(sock, {"op": "stop"}, timeout=30.0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    for signum in (None, signal.SIGTERM):
        if signum is not None:
            os.kill(pid, signum)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)
    return True


def uninstall(repo: Path) -> list[str]:
    """Stop the service and remove what install wrote; returns what was removed. The sidecar stays (it is data)."""
    layout = Layout(repo.absolute())
    config = layout.read()
    removed = []
    if stop(layout):
        removed.append("the planner service (stopped)")
    if config.wrote_auth and Path(config.wrote_auth).is_file():
        auth = Path(config.wrote_auth)
        if AUTH_NOTE in auth.read_text(encoding="utf-8", errors="replace"):  # not a real login written since
            auth.unlink()
            removed.append(str(auth))
    # the sidecar stays (data the import reads): so does the line that keeps it out of commits and the scope check
    drop = [line for line in config.excluded
            if not (line == f"/{SIDECAR_REL}" and layout.sidecar(config).is_file())]
    if drop:
        path = _exclude_path(layout.repo)
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            keep = [line for line in lines if line not in drop
                    and not (line.startswith("# guidebench runner") and len(drop) == len(config.excluded))]
            path.write_text("\n".join(keep) + ("\n" if keep else ""), encoding="utf-8")
            removed.append(f"{path}: {', '.join(drop)}")
    shutil.rmtree(layout.bin, ignore_errors=True)
    shutil.rmtree(layout.home, ignore_errors=True)
    removed += [str(layout.bin), str(layout.home)]
    leftover = [p for p in layout.folder.iterdir() if p.name != ".gitignore"] if layout.folder.is_dir() else []
    if layout.folder.is_dir() and not leftover:
        shutil.rmtree(layout.folder)
        removed.append(str(layout.folder))
    return removed


__all__ = ["InstallReport", "check_module", "install", "root_commit", "stop", "uninstall"]
