"""What the monitor watches in a planner loop: each `experiments/log.jsonl` (formats.md §2.1), its `.advisor/`
archive (§2.3.2) and its `planner-decisions.jsonl` sidecar (the logged propensities).

Per log line (one attempt): valid; a new best; the improvement of the best it brought, relative to the best before
it (in [0, 1]: the kernel's cycles fall by orders of magnitude over a loop, so an absolute drop has no fixed
scale); pivot compliance: its family is one the protocol allowed at that point, judged from the archived packet the
planner read when the archive has it, else from the log before the line (`runtime.pivot`), as the replay metric
`pivot_compliance` judges it. Per sidecar line joined to its log line by `iteration_id`: calibration of the stated
probabilities, 1[the family tried is the greedy one] - p(greedy) (mean 0 for an honest sidecar whatever the
exploration, since the family is drawn with those probabilities; stored as (x + 1) / 2, baseline exactly 0.5), and
whether the log tried the family the sidecar says was chosen (an honest writer never differs: any mismatch is
counted and reported, outside the budget).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

from runtime import pivot
from runtime.advisor import FAMILIES

from guidebench.monitor._base import MetricSpec, MonitorState
from guidebench.monitor.checks import Observations
from guidebench.monitor.readers import Line, quarantine, read_new, record_key

LOG_FILE = "log.jsonl"
SIDECAR_FILE = "planner-decisions.jsonl"
HISTORY = 120  # log lines kept per loop for the pivot rules (streaks, plateau, invalid runs)
BOUND_LOWERING = ("family:reduce_loads", "family:break_deps")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(name="validity_rate", meaning="share of attempts that were valid", unit="iterations"),
    MetricSpec(name="new_best_rate", meaning="share of attempts that set a new best", unit="iterations"),
    MetricSpec(name="improvement", meaning="relative improvement of the best per attempt", binary=False,
               unit="iterations"),
    MetricSpec(name="pivot_compliance", meaning="share of attempts whose family the pivot protocol allowed",
               evidence=("pivot_compliance",), unit="iterations"),
    MetricSpec(name="sidecar_calibration", meaning="(1[family tried is the greedy one] - its stated probability + 1)"
               " / 2 over sidecar lines", binary=False, exact=0.5, unit="sidecar lines"),
)


def logs_of(logs: Path) -> list[Path]:
    """Every experiment log under LOGS (LOGS itself when it is one)."""
    if logs.is_file():
        return [logs]
    return sorted(p for p in logs.rglob(LOG_FILE) if ".advisor" not in p.parts)


def archived_packet(log: Path, iteration_id: int) -> Optional[dict[str, Any]]:
    """The packet the planner read for this iteration, from the runner's `.advisor/` archive (None: not kept)."""
    roots = [log.parent / ".advisor"] + ([log.parent.parent / ".advisor"] if log.parent.name == "experiments" else [])
    for root in roots:
        for file in (root / "manual_archive" / f"iter_{iteration_id:04d}" / "packet.json",
                     root / "codex" / f"iter_{iteration_id:04d}_packet.json",
                     root / "codex_api" / f"iter_{iteration_id:04d}_packet.json"):
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                return data
    return None


def complies(family: Optional[str], history: list[Mapping[str, Any]], packet: Optional[Mapping[str, Any]]) -> bool:
    """Whether the attempt's family follows the pivot protocol at that point (the rule of
    `evals.metrics_planner`: allowed, bound-lowering near the bound, a new family when another rule demands it)."""
    if family not in FAMILIES:
        return False
    profile = (packet or {}).get("performance_profile")
    target = (packet or {}).get("threshold_target")
    _, reasons = pivot.pivot_required(history, profile, target if isinstance(target, int) else None)
    constraints = (packet or {}).get("strategy_family_constraints")
    if isinstance(constraints, Mapping):
        blocked = [f for f in constraints.get("blocked_families") or [] if f in FAMILIES]
        current = constraints.get("current_family")
        if blocked and "family_blocked" not in reasons:
            reasons.append("family_blocked")
    else:
        rebuilt = pivot.family_constraints(history)
        blocked, current = rebuilt.blocked_families, rebuilt.current_family
    if family in blocked:
        return False
    if "near_bound" in reasons and family not in BOUND_LOWERING:
        return False
    must_leave = any(reason != "near_bound" for reason in reasons)
    return not must_leave or current is None or family != current


class PlannerWatch:
    """One pass over the new lines of every experiment log and sidecar."""

    def __init__(self, state: MonitorState, champion: Any = None, alpha_k: float = 0.0, reference: int = 0) -> None:
        self.state = state
        self.obs: dict[str, Observations] = {spec.name: Observations() for spec in METRICS}
        self.seen = set(state.seen)
        self.histories: dict[str, list] = state.pending.setdefault("histories", {})
        self.tried: dict[str, list] = state.pending.setdefault("tried", {})  # log|iteration -> [family, where]
        self.waiting: dict[str, list] = state.pending.setdefault("sidecar", {})  # log|iteration -> sidecar line

    def count(self, name: str, k: int = 1) -> None:
        self.state.counts[name] = self.state.counts.get(name, 0) + k

    def _new(self, *parts: Any) -> bool:
        key = record_key(*parts)
        if key in self.seen:
            self.count("duplicates_skipped")
            return False
        self.seen.add(key)
        self.state.seen.append(key)
        return True

    def read(self, logs: Path) -> None:
        """Read what every loop appended."""
        for log in logs_of(logs):
            name = log.relative_to(logs).as_posix() if log != logs else log.name
            for line in read_new(log, self.state, name):
                self.attempt(log, name, line)
            sidecar = log.parent / SIDECAR_FILE
            for line in read_new(sidecar, self.state, f"{name}:{SIDECAR_FILE}"):
                self.sidecar(name, line)
        for table in (self.tried, self.waiting):
            for key in list(table)[:max(len(table) - 50_000, 0)]:
                del table[key]

    def attempt(self, log: Path, name: str, line: Line) -> None:
        d = line.data
        iteration = d.get("iteration_id")
        if not isinstance(iteration, int) or isinstance(iteration, bool):
            quarantine(self.state, line.file, line.number, "iteration_id", "missing or not an integer")
            return
        if not self._new("attempt", name, iteration, d.get("timestamp_utc"), d.get("head_sha")):
            return
        at, where = str(d.get("timestamp_utc") or ""), line.where()
        history = self.histories.setdefault(name, [])
        cycles, before = d.get("cycles"), d.get("best_before")
        valid = d.get("valid")
        if not isinstance(valid, bool):  # an older log: valid when it measured cycles with correctness not failed
            valid = isinstance(cycles, int) and d.get("correctness_pass") is not False
        if not isinstance(before, int):
            before = pivot.best_cycles(history)
        new_best = d.get("new_best")
        if not isinstance(new_best, bool):
            new_best = bool(valid and isinstance(cycles, int) and (before is None or cycles < before))
        gain = (before - cycles) / before if valid and isinstance(cycles, int) and before and cycles < before else 0.0
        family = pivot.family_of(d)
        self.obs["validity_rate"].add(float(valid), at, where)
        self.obs["new_best_rate"].add(float(new_best), at, where)
        self.obs["improvement"].add(gain, at, where)
        if family is not None:
            packet = archived_packet(log, iteration)
            self.count("attempts_with_archived_packet" if packet else "attempts_without_archived_packet")
            self.obs["pivot_compliance"].add(float(complies(family, history, packet)), at, where)
        else:
            self.count("attempts_without_family")
        history.append({k: d.get(k) for k in ("iteration_id", "strategy_tags", "valid", "cycles", "best_before",
                                              "new_best", "correctness_pass")})
        del history[:-HISTORY]
        key = f"{name}|{iteration}"
        self.tried[key] = [family, where, at]
        self.count("attempts")
        if key in self.waiting:
            self.calibrate(self.waiting.pop(key), family, where, at)

    def sidecar(self, name: str, line: Line) -> None:
        d = line.data
        probabilities = d.get("probabilities")
        if not isinstance(probabilities, dict) or not isinstance(d.get("iteration_id"), int):
            quarantine(self.state, line.file, line.number, "probabilities", "missing, or no iteration_id")
            return
        try:
            p = {f: float(probabilities.get(f, 0.0)) for f in FAMILIES}
        except (TypeError, ValueError):
            quarantine(self.state, line.file, line.number, "probabilities", "not numbers")
            return
        if not self._new("sidecar", name, d.get("iteration_id"), d.get("packet_hash"), d.get("timestamp")):
            return
        greedy = d.get("greedy_family") if d.get("greedy_family") in FAMILIES else max(p, key=lambda f: (p[f], f))
        entry = {"p": p, "greedy": greedy, "family": d.get("family"), "where": line.where()}
        key = f"{name}|{d['iteration_id']}"
        if key in self.tried:
            family, where, at = self.tried.pop(key)
            self.calibrate(entry, family, where, at)
        else:
            self.waiting[key] = entry

    def calibrate(self, entry: Mapping[str, Any], family: Optional[str], where: str, at: str) -> None:
        if family is None:
            self.count("sidecar_lines_without_family_tried")
            return
        if entry["family"] != family:
            self.count("sidecar_family_mismatches")
            self.state.pending.setdefault("mismatches", []).append(f"{entry['where']} says {entry['family']}, "
                                                                    f"{where} tried {family}")
            del self.state.pending["mismatches"][:-20]
        x = float(family == entry["greedy"]) - entry["p"][entry["greedy"]]
        self.obs["sidecar_calibration"].add((x + 1.0) / 2.0, at, f"{entry['where']} + {where}")
        self.count("sidecar_lines_joined")
