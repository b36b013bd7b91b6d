"""Watching the champion: the deployed module's live decisions read incrementally and tested, metric by metric,
against its evidence at promotion, with alarms whose false-alarm rate is stated (docs/monitor.md).

One module per concern: `_base` (record shapes, the error budget), `state` (the state file), `readers` (incremental
reads), `fullauto` and `planner` (what each loop's logs give), `support` (the out-of-support test), `evidence` (the
champion's baselines), `checks` (the sequential tests), `run` (one pass), `sinks` (webhook, MLflow), `report` (the
HTML page and the terminal table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.monitor._base import Alarm, Baseline, MetricSpec, MonitorState
    from guidebench.monitor.evidence import Champion, load_champion
    from guidebench.monitor.run import PassResult, run_pass

_WHERE: dict[str, str] = {
    "Alarm": "_base", "Baseline": "_base", "MetricSpec": "_base", "MonitorState": "_base",
    "Champion": "evidence", "load_champion": "evidence", "PassResult": "run", "run_pass": "run",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
