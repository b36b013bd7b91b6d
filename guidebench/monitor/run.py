"""One monitor pass: load the state, read what the logs appended, update every metric's test, save the state,
then hand new alarms to the sinks. The state is saved before anything leaves the machine: a run killed at any
point loses nothing and never counts a record twice (see `state`)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from guidebench.errors import GuidebenchError
from guidebench.monitor import fullauto, planner
from guidebench.monitor._base import DEFAULT_ALPHA, DEFAULT_REFERENCE, Alarm, LoopKind, MetricSpec, MetricState, \
    MonitorState
from guidebench.monitor.checks import metric_alpha, update_metric
from guidebench.monitor.evidence import Champion, evidence_baseline
from guidebench.monitor.state import load_state, locked, save_state, state_path

ADVICE = {
    "override_rate": "the guardrails overrule the champion more (or less) often: check the guardrail config of "
                     "recent runs; if it did not change, the champion's inputs did: shadow a challenger retrained on "
                     "recent logs",
    "parse_failure_rate": "answers fail to parse: check the LM endpoint and model id the runtime uses; roll back if "
                          "it started with a deploy",
    "safe_fail_pause_rate": "answers without an action pause the loop: roll back to the previous champion "
                            "(`guidebench rollback NAME`), then look at the raw answers",
    "objective": "the champion decides worse (or better) on labeled turns than at promotion: retrain on recent "
                 "labeled logs and shadow the challenger; roll back if it fell",
    "accuracy": "agreement with labels moved: check that labels still come from the same source, then retrain and "
                "shadow a challenger",
    "label_share": "the labels say continue more (or less) often: the work changed, or the labeling did; check the "
                   "label source, then retrain on recent labeled logs and shadow the challenger",
    "out_of_support": "turns unlike anything the champion learned from: retrain on recent logs (import them, "
                      "compile, shadow the challenger)",
    "validity_rate": "attempts fail validation more (or less) often: look at the invalid lines' reasons (scope, "
                     "tests, correctness); roll back the planner if it started with a deploy",
    "new_best_rate": "new bests come at another rate: near the kernel's floor this is expected; else retrain",
    "improvement": "the best improves by another fraction per attempt than at the start: compare with the "
                   "champion's off-policy estimate; shadow a challenger",
    "pivot_compliance": "the planner follows the pivot protocol more (or less) often: a changed prompt or persona; "
                        "roll back, or shadow a challenger",
    "sidecar_calibration": "the families tried do not follow the probabilities the sidecar states: the sidecar "
                           "lies (or the runner overrides the planner); off-policy estimates from these logs are "
                           "invalid until fixed",
}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off during a pass: the state and the records it decodes hold no reference cycles
    (they are freed as ever when dropped), yet their allocations trigger a collection every few hundred, each walking
    the young objects again and now and then the whole heap of the process (a tenth of a pass in a large one)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class PassResult:
    """What one pass did."""

    state: MonitorState
    path: Path
    new_alarms: list[Alarm] = field(default_factory=list)
    records: int = 0

    @property
    def alarms(self) -> list[Alarm]:
        """Every alarm in force (new or earlier)."""
        return [m.alarm for m in self.state.metrics.values() if m.alarm is not None]

    @property
    def exit_code(self) -> int:
        """0 quiet, 1 an alarm is in force."""
        return 1 if self.alarms else 0


def specs_of(loop: LoopKind) -> Sequence[MetricSpec]:
    """The loop's watched metrics."""
    return fullauto.METRICS if loop == "full_auto" else planner.METRICS


def detect_loop(logs: Path) -> LoopKind:
    """full_auto when LOGS holds a decisions file, planner when it holds an experiment log."""
    if fullauto.workspaces(logs):
        return "full_auto"
    if planner.logs_of(logs):
        return "planner"
    raise GuidebenchError(f"{logs}: neither a Full Auto workspace ({fullauto.DECISIONS_FILE}) nor a planner "
                          f"log ({planner.LOG_FILE}) found under it; give the folder the runtime appends to")


def new_state(logs: Path, loop: LoopKind, champion: Optional[Champion], alpha: float, reference: int) -> MonitorState:
    """A fresh state with each metric's baseline from the champion's evidence where it has one."""
    specs = specs_of(loop)
    state = MonitorState(loop=loop, logs=str(Path(logs).resolve()), module=str(champion.path) if champion else "",
                         module_digest=champion.digest if champion else "", alpha=alpha, reference=reference)
    alpha_k = alpha / len(specs)
    for spec in specs:
        state.metrics[spec.name] = MetricState(name=spec.name, baseline=evidence_baseline(spec, champion, alpha_k))
    return state


def run_pass(logs: Path, champion: Optional[Champion], *, loop: Optional[LoopKind] = None,
             alpha: float = DEFAULT_ALPHA, reference: Optional[int] = None, home: Optional[Path] = None,
             reset: bool = False, state_file: Optional[Path] = None) -> PassResult:
    """Read what the logs appended since the last pass and test every metric (see the module)."""
    logs = Path(logs)
    if not logs.exists():
        raise GuidebenchError(f"{logs}: no such folder; give the folder the deployed runtime appends its logs to")
    loop = loop or detect_loop(logs)
    if champion is not None and champion.kind != loop:
        raise GuidebenchError(f"--module {champion.path} is a {champion.kind} module; {logs} holds {loop} logs")
    path = state_file or state_path(logs, champion.digest if champion else "", loop, home)
    with locked(path), _collector_paused():
        state = None if reset else load_state(path)
        if state is None:
            state = new_state(logs, loop, champion, alpha, reference or DEFAULT_REFERENCE[loop])
        specs = specs_of(loop)
        alpha_k = metric_alpha(state, specs)
        watch_type = fullauto.FullAutoWatch if loop == "full_auto" else planner.PlannerWatch
        watch = watch_type(state, champion, alpha_k, state.reference)
        before = len(state.seen)
        watch.read(logs)
        result = PassResult(state=state, path=path, records=len(state.seen) - before)
        for spec in specs:
            alarm = update_metric(spec, state.metrics[spec.name], watch.obs[spec.name], loop=loop, alpha_k=alpha_k,
                                  reference=state.reference, advice=ADVICE.get(spec.name.split(".")[0], ADVICE.get(
                                      spec.name, "the action mix moved: look at what changed in the loop's inputs")))
            if alarm is not None:
                result.new_alarms.append(alarm)
        state.runs += 1
        state.records = len(state.seen)
        state.updated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        save_state(path, state)
    return result


def summary_rows(state: MonitorState) -> list[dict[str, Any]]:
    """Each metric now: baseline, live interval, n, status."""
    rows = []
    for name, metric in state.metrics.items():
        point = metric.series[-1] if metric.series else None
        base = metric.baseline
        status = "ALARM" if metric.alarm else ("reference window" if base is None else "quiet")
        rows.append({"metric": name, "status": status, "n": metric.n,
                     "reference": metric.reference_n if base is None or "reference" in base.source else None,
                     "baseline": base, "mean": point.mean if point else None,
                     "low": point.low if point else None, "high": point.high if point else None})
    return rows
