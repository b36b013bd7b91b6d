"""Where a planner installed in a loop runner's repository keeps its files, and its configuration's one shape.

    REPO/.guidebench/.gitignore          `*`: git ignores the whole folder (and itself)
    REPO/.guidebench/bin/codex           the command the runner finds first on PATH (`runtime.runner_codex`)
    REPO/.guidebench/runner/runner.json  `RunnerConfig`: which module plans, the candidate, the real codex
    REPO/.guidebench/runner/service.log  what the planner service said (start, stop, each call's one line)
    REPO/.guidebench/runner/planner.sock the service's socket while it runs
    REPO/experiments/planner-decisions.jsonl  one sidecar line per planned iteration (docs/planner-shadow.md)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from runtime.planner_log import PLANNER_FILE
from runtime.runner_codex import CONFIG_FILE

FOLDER = ".guidebench"
CONFIG_FORMAT = 1
DEFAULT_IDLE_S = 1800.0  # the service stops after half an hour without a call (a planning loop calls every few min)


class RunnerConfig(BaseModel):
    """`runner.json`: what `guidebench runner install` set up (the shim reads it with the standard library)."""

    model_config = ConfigDict(extra="forbid")

    format: int = CONFIG_FORMAT
    repo: str
    module: str  # the exported planner folder that plans (absolute)
    module_name: str  # name@version, for messages
    candidate: Optional[str] = None  # an exported planner that shadows it (never applied)
    codex: Optional[str] = None  # the real codex named at install; None: the next one on PATH
    python: str  # the interpreter that runs the service
    project: str  # the folder that holds runtime/ and guidebench/ (put on the service's PYTHONPATH)
    repository: str = ""  # the sidecar's repository id: the repository's root commit
    log_dir: str  # the folder of experiments/log.jsonl, where the sidecar goes
    idle_s: float = Field(DEFAULT_IDLE_S, gt=0)
    start_wait_s: float = Field(120.0, gt=0)
    installed_at: str = ""
    wrote_auth: Optional[str] = None  # the placeholder CODEX_HOME/auth.json install wrote (removed on uninstall)
    excluded: list[str] = Field(default_factory=list)  # lines install added to .git/info/exclude


@dataclass(frozen=True)
class Layout:
    """The paths of one repository's installed planner."""

    repo: Path

    @property
    def folder(self) -> Path:
        return self.repo / FOLDER

    @property
    def bin(self) -> Path:
        return self.folder / "bin"

    @property
    def codex(self) -> Path:
        return self.bin / "codex"

    @property
    def home(self) -> Path:
        return self.folder / "runner"

    @property
    def config(self) -> Path:
        return self.home / CONFIG_FILE

    @property
    def log(self) -> Path:
        return self.home / "service.log"

    def sidecar(self, config: RunnerConfig) -> Path:
        return Path(config.log_dir) / PLANNER_FILE

    def read(self) -> RunnerConfig:
        """The installed configuration (GuidebenchError when there is none)."""
        from guidebench.errors import GuidebenchError

        try:
            return RunnerConfig.model_validate_json(self.config.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise GuidebenchError(f"{self.repo}: no planner installed (no {self.config}): run `guidebench runner "
                                  f"install {self.repo} --module EXPORT`") from None
        except ValueError as exc:
            raise GuidebenchError(f"{self.config}: not a runner configuration ({' '.join(str(exc).split())[:200]}): "
                                  f"run `guidebench runner install {self.repo} --module EXPORT` again") from None


__all__ = ["CONFIG_FORMAT", "DEFAULT_IDLE_S", "FOLDER", "Layout", "RunnerConfig"]
