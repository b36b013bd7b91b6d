"""The runner: a frozen planner exported by guidebench plans for the real loop runner (`tools/loop_runner.py`).

`install(REPO, MODULE)` puts a `codex` in front of the runner (`runtime.runner_codex`: it answers planning calls
with the module through the repository's planner service, `guidebench.runner.service`, and hands every other call
to the real codex); `plan_packet` is the manual mode's planner; `runner_status` says what plans and how far the
loop got; `uninstall` removes what install wrote. Names are re-exported lazily (`runtime._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.runner._base import Layout, RunnerConfig
    from guidebench.runner.installation import InstallReport, install, stop, uninstall
    from guidebench.runner.manual import plan_packet
    from guidebench.runner.planner import PlanAnswer, PlanRefused, RunnerPlanner
    from guidebench.runner.status import RunnerStatus, runner_status

_WHERE: dict[str, str] = {
    "Layout": "_base", "RunnerConfig": "_base",
    "InstallReport": "installation", "install": "installation", "stop": "installation",
    "uninstall": "installation",
    "plan_packet": "manual",
    "PlanAnswer": "planner", "PlanRefused": "planner", "RunnerPlanner": "planner",
    "RunnerStatus": "status", "runner_status": "status",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
