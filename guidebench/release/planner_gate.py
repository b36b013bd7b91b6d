"""The planner gate: a candidate planner shadows the deployed one and leaves through a doubly robust confidence
sequence that stays valid however often it is looked at (`evals.offpolicy.sequential`).

`start_planner_shadow(DIR)` records candidate -> shadow in the promotion ledger. `planner_report(DIR, data=...)`
reads an experiments dataset imported with its `planner-decisions.jsonl` (docs/planner-shadow.md), takes the
iterations whose sidecar line holds the deployed planner's probabilities and this candidate's choice, in log order,
and judges the difference of their values (improvement of the best per iteration, in percent of the best); on a
verdict it records shadow -> promoted (the registry's champion) or shadow -> rolled_back, as for Full Auto.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from evals.offpolicy.bandit import attempt_of
from evals.offpolicy.sequential import PlannerStep, dr_terms, planner_verdict, pseudo_outcomes
from evals.sequential import ConfidenceSequence, SequentialVerdict
from runtime.advisor import FAMILIES
from runtime.checksums import module_checksum
from runtime.shadow_log import ShadowModule

from guidebench.errors import GuidebenchError
from guidebench.release.gates import GateCheck, SequentialGates, load_gates
from guidebench.release.promotion import PromotionLedger, PromotionRecord, SequentialEvidence
from guidebench.release.shadow import record_transition, start_shadow, verified_module

REPORT_FILE = "planner_report.json"
METHOD = ("doubly robust asymptotic confidence sequence (Waudby-Smith, Wu, Ramdas, Karampatziakis & Mineiro 2022), "
          "logged propensities")
LOOKS = (20, 50, 100, 200, 400, 800, 1600, 3200)


def start_planner_shadow(module_dir: Path, *, ledger: Optional[PromotionLedger] = None) -> Optional[PromotionRecord]:
    """Record candidate -> shadow for a planner module folder; None when it is shadowing already."""
    return start_shadow(module_dir, ledger=ledger, kind="planner")


def planner_steps(records: list[Any], module: ShadowModule) -> tuple[list[PlannerStep], Counter]:
    """The gate's iterations, in log order, and what was left out (counted by reason)."""
    ordered = sorted(records, key=lambda r: (r.source.file, r.source.line) if r.source else ("", 0))
    steps: list[PlannerStep] = []
    counts: Counter = Counter(records=len(records))
    for record in ordered:
        logged = record.planner_log
        if logged is None:
            counts["no_logged_propensities"] += 1
            continue
        candidate = logged.candidate
        if candidate is None:
            counts["no_candidate"] += 1
            continue
        if not candidate.module.same_module(module):
            counts["other_module"] += 1
            continue
        attempt = attempt_of(record)
        if attempt.observed is None or not attempt.best or attempt.family not in FAMILIES:
            counts["no_outcome"] += 1
            continue
        counts[f"candidate_{candidate.status}"] += 1
        probs = [candidate.probabilities[f] for f in FAMILIES] if candidate.status == "ok" else None
        steps.append(PlannerStep(logged=[logged.probabilities[f] for f in FAMILIES],
                                 chosen=FAMILIES.index(attempt.family),
                                 outcome=100.0 * attempt.observed / attempt.best, candidate=probs))
    counts["judged"] = len(steps)
    return steps, counts


@dataclass
class PlannerReport:
    """What the planner gate found: the iterations, the verdict, and what it recorded."""

    module: ShadowModule
    dataset_id: str
    gates: SequentialGates
    counts: Counter
    candidate_value: np.ndarray
    deployed_value: np.ndarray
    verdict: SequentialVerdict
    sequence: ConfidenceSequence
    record: Optional[PromotionRecord] = None
    notes: list[str] = field(default_factory=list)

    def evidence(self) -> SequentialEvidence:
        """The ledger's evidence of this verdict."""
        v = self.verdict
        mean = (lambda a: float(a.mean()) if a.size else None)  # noqa: E731
        return SequentialEvidence(dataset_id=self.dataset_id, verdict=v.verdict, n=v.n, decided_at=v.decided_at,
                                  difference=v.difference, cs_low=v.low, cs_high=v.high, alpha=v.alpha,
                                  min_effect=v.min_effect, max_decisions=v.max_decisions, method=METHOD,
                                  candidate_objective=mean(self.candidate_value),
                                  deployed_objective=mean(self.deployed_value),
                                  counts={k: int(c) for k, c in self.counts.items()})

    def checks(self) -> list[GateCheck]:
        """The checks behind the verdict, each with the numbers that decided it."""
        v = self.verdict
        low, high = v.low, v.high
        return [
            GateCheck(gate="module", passed=True, reason=f"every judged iteration names {self.module.package} "
                      f"(checksum {self.module.checksum[:12]}) as the candidate"),
            GateCheck(gate="sequential:better", passed=low is not None and low > 0, candidate=v.difference,
                      threshold=0.0, reason=f"lower bound of the {1 - v.alpha:.0%} doubly robust confidence sequence "
                      f"{_fmt(low)} after {v.decided_at or v.n} iterations"),
            GateCheck(gate="sequential:min_effect", passed=high is not None and high >= v.min_effect,
                      candidate=v.difference, threshold=v.min_effect,
                      reason=f"upper bound {_fmt(high)} against the minimum effect {v.min_effect:+g}"),
            GateCheck(gate="sequential:max_decisions", passed=v.n < v.max_decisions, candidate=float(v.n),
                      threshold=float(v.max_decisions), reason=f"{v.n} of at most {v.max_decisions} iterations"),
        ]

    def table(self) -> list[tuple[int, float, float, float]]:
        """A few looks: (n, difference, low, high)."""
        cs = self.sequence
        looks = sorted({n for n in LOOKS if n <= cs.n} | {cs.n} | ({self.verdict.decided_at} - {None}))
        return [(n, float(cs.mean[n - 1]), float(cs.low[n - 1]), float(cs.high[n - 1])) for n in looks if n >= 1]

    def lines(self) -> list[str]:
        """The report as printed."""
        c, v = self.counts, self.verdict
        left = ", ".join(f"{c[k]} {k.replace('_', ' ')}" for k in ("no_logged_propensities", "no_candidate",
                                                                    "other_module", "no_outcome") if c[k])
        statuses = ", ".join(f"{k[len('candidate_'):]} {n}" for k, n in sorted(c.items()) if k.startswith("candidate_"))
        out = [f"planner gate: {self.module.package} (checksum {self.module.checksum[:12]}) beside the deployed "
               f"planner of dataset {self.dataset_id[:12]}",
               f"iterations: {c['records']} logged, {c['judged']} judged (candidate {statuses or 'none'})"
               + (f"; left out: {left}" if left else ""),
               "candidate - deployed improvement of the best per iteration (percent of the best), doubly robust, "
               f"with its {1 - v.alpha:.0%} confidence sequence (valid at every look):",
               f"  {'n':>6}  {'difference':>10}  confidence sequence"]
        out += [f"  {n:>6}  {m:>+10.4f}  [{lo:+.4f}, {hi:+.4f}]" for n, m, lo, hi in self.table()]
        where = f" (difference {_fmt(v.difference)}, CS [{_fmt(v.low)}, {_fmt(v.high)}])" \
            if v.verdict != "keep shadowing" and v.difference is not None else ""
        out.append(f"verdict: {v.verdict} — {v.reason}{where}")
        return out + self.notes

    def to_json(self) -> dict[str, Any]:
        """The report as `planner_report.json` holds it (an unbounded early look as null)."""
        cs = self.sequence
        finite = (lambda a: [x if np.isfinite(x) else None for x in a.tolist()])  # noqa: E731
        return {"module": self.module.model_dump(), "dataset_id": self.dataset_id, "gates": self.gates.model_dump(),
                "evidence": self.evidence().model_dump(), "checks": [c.model_dump() for c in self.checks()],
                "more_needed": self.verdict.more_needed, "reason": self.verdict.reason,
                "sequence": {"n": list(range(1, cs.n + 1)), "difference": cs.mean.tolist(), "low": finite(cs.low),
                             "high": finite(cs.high)},
                "ledger": self.record.model_dump() if self.record else None}


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def judge_planner(module: ShadowModule, records: list[Any], dataset_id: str, gates: SequentialGates) -> PlannerReport:
    """The gate on a dataset's records for a candidate module (see the module)."""
    steps, counts = planner_steps(records, module)
    if not steps:
        named = {r.planner_log.candidate.module.package for r in records
                 if r.planner_log is not None and r.planner_log.candidate is not None}
        raise GuidebenchError(f"the dataset {dataset_id[:12]} holds no iteration with logged propensities and a choice "
                              f"of {module.package} (checksum {module.checksum[:12]})" +
                              (f"; it holds {', '.join(sorted(named))}'s" if named else
                               ": import the logs with their planner-decisions.jsonl"))
    differences, expected = dr_terms(steps)
    verdict, sequence = planner_verdict(differences, alpha=gates.alpha, min_effect=gates.min_effect,
                                        max_iterations=gates.max_decisions, expected=expected)
    return PlannerReport(module, dataset_id, gates, counts, pseudo_outcomes(steps, "candidate"),
                         pseudo_outcomes(steps, "deployed"), verdict, sequence)


def planner_report(module_dir: Path, *, data: Path, gates_file: Optional[Path] = None,
                   ledger: Optional[PromotionLedger] = None, record: bool = True,
                   tracking_uri: Optional[str] = None) -> PlannerReport:
    """Judge a shadowing planner on an imported experiments dataset; on promote or reject, record the transition."""
    from evals.data import DatasetFormatError, dataset_info, load_records

    module_dir = Path(module_dir).absolute()
    manifest = verified_module(module_dir, "planner")
    gates = load_gates(gates_file)
    try:
        info = dataset_info(data)
        if info["kind"] != "experiments":
            raise GuidebenchError(f"--data {data}: holds {info['kind']} records; the planner gate reads experiments")
        records = load_records(data, "all")
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from None
    identity = ShadowModule(name=manifest.name, version=manifest.version, entry=manifest.entry,
                            checksum=module_checksum(module_dir))
    report = judge_planner(identity, records, info["dataset_id"], gates.sequential)
    if record and report.verdict.verdict != "keep shadowing":
        report.record = record_transition(report, manifest, module_dir, ledger or PromotionLedger(), tracking_uri,
                                          gates)
    return report


def write_planner_report(report: PlannerReport, output: Any) -> Path:
    """Write `planner_report.json` into a claimed output folder (`guidebench.outputs`)."""
    with output.writing() as staged:
        (staged / REPORT_FILE).write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    return output.path


__all__ = ["PlannerReport", "judge_planner", "planner_report", "planner_steps", "start_planner_shadow",
           "write_planner_report"]
