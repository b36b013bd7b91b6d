"""`guidebench runner status REPO`: which module plans, how far the loop got, the sidecar, the candidate's gate."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from guidebench.runner._base import Layout

ARCHIVES = (".advisor/codex", ".advisor/codex_api", ".advisor/manual_archive")


@dataclass
class RunnerStatus:
    """What `runner status` prints (and `--json` writes)."""

    repo: str
    module: str
    module_dir: str
    candidate: Optional[str]
    candidate_state: Optional[str]  # the promotion ledger's state: candidate, shadow, promoted, rolled_back
    codex: str
    log_lines: int
    planned: dict[str, int] = field(default_factory=dict)  # archived plans per mode
    sidecar: str = ""
    sidecar_lines: int = 0
    sidecar_modules: list[str] = field(default_factory=list)
    service: Optional[dict[str, Any]] = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        planned = ", ".join(f"{n} {mode}" for mode, n in self.planned.items()) or "none"
        out = [f"repository: {self.repo}",
               f"plans with: {self.module} ({self.module_dir})",
               f"other codex calls go to: {self.codex}",
               f"iterations: {self.log_lines} log line(s) in experiments/log.jsonl; archived plans: {planned}",
               f"sidecar: {self.sidecar_lines} line(s) in {self.sidecar}"
               + (f" (modules: {', '.join(self.sidecar_modules)})" if len(self.sidecar_modules) > 1 else "")]
        if self.candidate:
            out.append(f"candidate: {self.candidate}: gate state {self.candidate_state} (judge it: guidebench shadow "
                       f"planner-report --module {self.candidate} --data DATASET)")
        else:
            out.append("candidate: none")
        if self.service:
            out.append(f"service: pid {self.service.get('pid')}, up {self.service.get('up_s')} s, "
                       f"{self.service.get('calls')} call(s), {self.service.get('refused')} refused"
                       + (f", cannot plan: {self.service['broken']}" if self.service.get("broken") else ""))
        else:
            out.append("service: not running (the next planning call starts it)")
        return out


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def _modules(path: Path) -> list[str]:
    import json

    found: list[str] = []
    if not path.is_file():
        return found
    with path.open("rb") as handle:
        for raw in handle:
            try:
                module = json.loads(raw).get("module") or {}
                name = f"{module.get('name')}@{module.get('version')}"
            except (ValueError, AttributeError):
                continue
            if name not in found:
                found.append(name)
    return found


def runner_status(repo: Path) -> RunnerStatus:
    """The status of the planner installed in `repo` (GuidebenchError when none is)."""
    from runtime.runner_codex import ask, real_codex, socket_path

    layout = Layout(repo.absolute())
    config = layout.read()
    state = None
    if config.candidate:
        from guidebench.release.promotion import PromotionLedger, folder_digest

        try:
            state = PromotionLedger().state_of(folder_digest(Path(config.candidate)))
        except OSError as exc:
            state = f"unknown ({exc})"
    planned = {}
    for folder in ARCHIVES:
        where = layout.repo / folder
        if where.is_dir():
            count = len(list(where.glob("iter_*_last_message.txt"))) if "codex" in folder else \
                len([p for p in where.iterdir() if (p / "directive.json").is_file()])
            planned[folder.rsplit("/", 1)[-1]] = count
    try:
        service = ask(socket_path(layout.home), {"op": "status"}, timeout=10.0)
    except (OSError, ValueError):
        service = None
    sidecar = layout.sidecar(config)
    return RunnerStatus(
        repo=str(layout.repo), module=config.module_name, module_dir=config.module, candidate=config.candidate,
        candidate_state=state, codex=real_codex(config.model_dump(), layout.codex) or "none found",
        log_lines=_count_lines(Path(config.log_dir) / "log.jsonl"), planned=planned, sidecar=str(sidecar),
        sidecar_lines=_count_lines(sidecar), sidecar_modules=_modules(sidecar), service=service)


__all__ = ["RunnerStatus", "runner_status"]
