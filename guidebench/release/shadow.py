"""The shadow gate: a candidate enters `shadow`, decides beside the deployed program, and leaves through a
sequential test that stays valid however often it is looked at.

`start_shadow(DIR)` records candidate -> shadow in the promotion ledger (`guidebench shadow start`, and
`guidebench run-loop --shadow DIR`). `shadow_report(DIR, data=...)` pairs the candidate's shadow decisions with
the deployed ones on the labeled turns of an imported dataset (`evals.shadow`), runs the gate of
`evals.sequential` with the gates file's `[sequential]` settings, and on a verdict records shadow -> promoted
(the module becomes the registry's champion, as `guidebench promote` makes it) or shadow -> rolled_back,
with the evidence: n, the difference, its confidence sequence and the checks that passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from evals.sequential import ConfidenceSequence, SequentialVerdict
from evals.shadow import ShadowPairs
from runtime.frozen.loader import verify_frozen
from runtime.frozen.manifest import FrozenManifest, FrozenModuleError
from runtime.provenance import known
from runtime.shadow import module_identity
from runtime.shadow_log import ShadowModule

from guidebench.errors import GuidebenchError
from guidebench.release.gates import GateCheck, SequentialGates, load_gates
from guidebench.release.promotion import (PromotionLedger, PromotionRecord, SequentialEvidence, champion_reason,
                                          folder_digest, log_promotion_run, module_ref, new_record, register_once,
                                          registered_ref)

REPORT_FILE = "shadow_report.json"
PLOT_FILE = "shadow_report.png"
TABLE_ROWS = 8


# What shadowing is for each kind of module: (the refusal of another kind, what the ledger says it does, the verb)
_SHADOWING = {
    "full_auto": ("shadow decisions are Full Auto's", "decides beside the deployed program and writes "
                  "shadow-decisions.jsonl; never enforced", "it decides"),
    "planner": ("the planner gate judges planners (Full Auto modules: guidebench shadow report)", "chooses beside the "
                "deployed planner and its choices go to planner-decisions.jsonl; never applied", "it plans"),
}


def verified_module(module_dir: Path, kind: str = "full_auto") -> FrozenManifest:
    """The manifest of an exported module of this kind the runtime loader accepts (else one GuidebenchError line)."""
    try:
        manifest = verify_frozen(module_dir)
    except FrozenModuleError as exc:
        raise GuidebenchError(f"{module_dir}: refused by the runtime loader: {exc.reason}") from None
    if manifest.kind != kind:
        raise GuidebenchError(f"{module_dir}: is a {manifest.kind} module; {_SHADOWING[kind][0]}")
    return manifest


def start_shadow(module_dir: Path, *, ledger: Optional[PromotionLedger] = None,
                 kind: str = "full_auto") -> Optional[PromotionRecord]:
    """Record candidate -> shadow for a module folder of this kind; None when it is shadowing already."""
    module_dir = Path(module_dir).absolute()
    manifest = verified_module(module_dir, kind)
    ledger = ledger or PromotionLedger()
    digest = folder_digest(module_dir)
    state = ledger.state_of(digest)
    if state == "shadow":
        return None
    _, does, verb = _SHADOWING[kind]
    if state == "promoted":
        raise GuidebenchError(f"{manifest.package} ({module_dir}) is promoted: {verb}, it cannot shadow")
    record = new_record(action="shadow", module=module_ref(manifest, module_dir, digest), from_state=state,
                        to_state="shadow", outcome="shadow",
                        reasons=[f"shadowing started: {manifest.package} {does}"])
    ledger.append(record)
    return record


@dataclass
class ShadowReport:
    """What `shadow report` found: the paired turns, the gate's verdict, and what it recorded."""

    module: ShadowModule
    dataset_id: str
    gates: SequentialGates
    pairs: ShadowPairs
    verdict: SequentialVerdict
    sequence: ConfidenceSequence
    record: Optional[PromotionRecord] = None
    notes: list[str] = field(default_factory=list)

    def evidence(self) -> SequentialEvidence:
        """The ledger's evidence of this verdict."""
        turns = self.pairs.turns
        mean = (lambda values: sum(values) / len(values) if values else None)  # noqa: E731
        counts = {key: int(value) for key, value in self.pairs.counts.items()}
        counts.update({f"status_{key}": int(value) for key, value in self.pairs.statuses.items()})
        v = self.verdict
        return SequentialEvidence(dataset_id=self.dataset_id, verdict=v.verdict, n=v.n, decided_at=v.decided_at,
                                  difference=v.difference, cs_low=v.low, cs_high=v.high, alpha=v.alpha,
                                  min_effect=v.min_effect, max_decisions=v.max_decisions,
                                  candidate_objective=mean([t.shadow_score for t in turns]),
                                  deployed_objective=mean([t.deployed_score for t in turns]), counts=counts)

    def checks(self) -> list[GateCheck]:
        """The checks behind the verdict, each with the numbers that decided it."""
        v, cs = self.verdict, self.sequence
        at = (v.decided_at or v.n) - 1
        low, high = (float(cs.low[at]), float(cs.high[at])) if cs.n else (None, None)
        level = f"{1 - v.alpha:.0%}"
        return [
            GateCheck(gate="module", passed=True, reason=f"every paired shadow decision names {self.module.package} "
                      f"(checksum {self.module.checksum[:12]})"),
            GateCheck(gate="sequential:better", passed=low is not None and low > 0, candidate=v.difference,
                      threshold=0.0, reason=f"lower bound of the {level} confidence sequence "
                      f"{_fmt(low)} {'>' if low is not None and low > 0 else '<='} 0 after {at + 1} decisions"),
            GateCheck(gate="sequential:min_effect", passed=high is not None and high >= v.min_effect,
                      candidate=v.difference, threshold=v.min_effect,
                      reason=f"upper bound {_fmt(high)} {'>=' if high is not None and high >= v.min_effect else '<'} "
                             f"the minimum effect {v.min_effect:+g}"),
            GateCheck(gate="sequential:max_decisions", passed=v.n < v.max_decisions, candidate=float(v.n),
                      threshold=float(v.max_decisions), reason=f"{v.n} of at most {v.max_decisions} labeled decisions"),
        ]

    def table(self) -> list[tuple[int, float, float, float]]:
        """A few looks of the running difference and its sequence: (n, difference, low, high)."""
        cs = self.sequence
        looks = sorted({min(cs.n, 50 * 2 ** k) for k in range(TABLE_ROWS)} | {cs.n}
                       | ({self.verdict.decided_at} if self.verdict.decided_at else set()))
        return [(n, float(cs.mean[n - 1]), float(cs.low[n - 1]), float(cs.high[n - 1])) for n in looks if n >= 1]

    def lines(self) -> list[str]:
        """The report as printed."""
        p, v = self.pairs, self.verdict
        statuses = ", ".join(f"{key} {value}" for key, value in sorted(p.statuses.items())) or "none"
        out = [f"shadow gate: {self.module.package} (checksum {self.module.checksum[:12]}) beside the deployed "
               f"decisions of dataset {self.dataset_id[:12]}",
               f"turns: {p.counts['records']} decisions, {p.counts['shadowed']} shadowed ({statuses}), "
               f"{p.counts['paired']} labeled and paired, {p.counts['awaiting_label']} awaiting a label"
               + (f", {p.counts['orphan']} of run \"unknown\" left out" if p.counts['orphan'] else "")
               + (f", {p.counts['learned_from']} it learned from left out" if p.counts['learned_from'] else "")
               + (f", {p.counts['other_module']} shadowed by another module" if p.counts['other_module'] else ""),
               f"candidate - deployed objective, with its {1 - v.alpha:.0%} confidence sequence (valid at every look):",
               f"  {'n':>6}  {'difference':>10}  confidence sequence"]
        out += [f"  {n:>6}  {mean:>+10.4f}  [{low:+.4f}, {high:+.4f}]" for n, mean, low, high in self.table()]
        where = f" (difference {_fmt(v.difference)}, CS [{_fmt(v.low)}, {_fmt(v.high)}])" if v.difference is not None \
            else ""
        out.append(f"verdict: {v.verdict} — {v.reason}{where if v.verdict != 'keep shadowing' else ''}")
        out += self.notes
        return out

    def to_json(self) -> dict[str, Any]:
        """The report as `shadow_report.json` holds it."""
        cs = self.sequence
        return {"module": self.module.model_dump(), "dataset_id": self.dataset_id, "gates": self.gates.model_dump(),
                "evidence": self.evidence().model_dump(), "checks": [c.model_dump() for c in self.checks()],
                "more_needed": self.verdict.more_needed, "reason": self.verdict.reason,
                "sequence": {"n": list(range(1, cs.n + 1)), "difference": cs.mean.tolist(), "low": cs.low.tolist(),
                             "high": cs.high.tolist()},
                "turns": [t.__dict__ | {"difference": t.difference} for t in self.pairs.turns],
                "ledger": self.record.model_dump() if self.record else None}


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def judge(module: ShadowModule, records: list[Any], dataset_id: str, gates: SequentialGates,
          learned: Optional[Any] = None) -> ShadowReport:
    """Pair the records' shadow decisions of `module` with the deployed ones (leaving out the turns it learned from,
    `learned`: its provenance) and apply the sequential gate."""
    from evals.sequential import sequential_verdict
    from evals.shadow import paired_turns

    pairs = paired_turns(records, module=module, learned=learned)
    if not pairs.counts["shadowed"]:
        others = {r.shadow.module.package for r in records if r.shadow is not None}
        raise GuidebenchError(f"the dataset {dataset_id[:12]} holds no shadow decision of {module.package} (checksum "
                              f"{module.checksum[:12]})" + (f"; it holds {', '.join(sorted(others))}'s" if others else
                                                            ": import the logs with their shadow-decisions.jsonl"))
    verdict, sequence = sequential_verdict(pairs.differences, alpha=gates.alpha, min_effect=gates.min_effect,
                                           max_decisions=gates.max_decisions)
    report = ShadowReport(module, dataset_id, gates, pairs, verdict, sequence)
    if learned is None:
        report.notes.append("provenance unknown: no turn could be checked against the records the module learned "
                            "from (its turns are live decisions, made after it was exported)")
    return report


def shadow_report(module_dir: Path, *, data: Path, gates_file: Optional[Path] = None,
                  ledger: Optional[PromotionLedger] = None, record: bool = True,
                  tracking_uri: Optional[str] = None) -> ShadowReport:
    """Judge a shadowing module on an imported dataset; on promote or reject, record the transition."""
    from evals.data import DatasetFormatError, dataset_info, load_records

    module_dir = Path(module_dir).absolute()
    manifest = verified_module(module_dir)
    gates = load_gates(gates_file)
    try:
        info = dataset_info(data)
        if info["kind"] != "fullauto":
            raise GuidebenchError(f"--data {data}: holds {info['kind']} records; shadow decisions are Full Auto's")
        records = load_records(data, "all")
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from None
    report = judge(module_identity(manifest, module_dir), records, info["dataset_id"], gates.sequential,
                   learned=known(manifest.provenance))
    if record and report.verdict.verdict != "keep shadowing":
        report.record = record_transition(report, manifest, module_dir, ledger or PromotionLedger(), tracking_uri,
                                          gates)
    return report


def record_transition(report: ShadowReport, manifest: FrozenManifest, module_dir: Path, ledger: PromotionLedger,
                      tracking_uri: Optional[str], gates: Any) -> Optional[PromotionRecord]:
    """shadow -> promoted (the registry's champion) or shadow -> rolled_back, when the ledger has it in shadow."""
    from guidebench.release.model_registry import ModuleRegistry

    digest = folder_digest(module_dir)
    state = ledger.state_of(digest)
    if state != "shadow":
        report.notes.append(f"ledger: not recorded, the ledger has {manifest.package} in state {state} (record the "
                            f"start of its shadowing with: guidebench shadow start {module_dir})")
        return None
    promote = report.verdict.verdict == "promote"
    fields = dict(action="shadow", module=module_ref(manifest, module_dir, digest), from_state="shadow", gates=gates,
                  checks=report.checks(), sequential=report.evidence(), reasons=[report.verdict.reason])
    if not promote:
        entry = new_record(to_state="rolled_back", outcome="rolled_back", **fields)
        ledger.append(entry)
        report.notes.append(f"ledger: shadow -> rolled_back (attempt {entry.attempt_id})")
        return entry
    registry = ModuleRegistry(tracking_uri)
    entry = new_record(to_state="promoted", outcome="promoted", **fields)
    entry.mlflow_run_id = log_promotion_run(registry, entry, module_dir=module_dir)
    registered = register_once(registry, manifest, module_dir, digest, entry.mlflow_run_id)
    replaced = registry.make_champion(manifest.name, registered.version)
    entry.module.registry_version = registered.version
    entry.champion = registered_ref(replaced) if replaced else None
    entry.reasons.append(champion_reason(registered, replaced))
    ledger.append(entry)
    report.notes.append(f"ledger: shadow -> promoted (attempt {entry.attempt_id}); {entry.reasons[-1]}")
    return entry


def draw(report: ShadowReport, path: Path) -> Path:
    """The running difference and its confidence sequence against the number of labeled decisions (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs, v = report.sequence, report.verdict
    n = list(range(1, cs.n + 1))
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    ax.fill_between(n, cs.low, cs.high, color="tab:blue", alpha=0.18, label=f"{1 - v.alpha:.0%} confidence sequence")
    ax.plot(n, cs.mean, color="tab:blue", lw=1.4, label="running difference")
    ax.axhline(0.0, color="black", lw=0.8)
    if v.min_effect > 0:
        ax.axhline(v.min_effect, color="tab:gray", lw=0.8, ls="--", label=f"minimum effect {v.min_effect:+g}")
    if v.decided_at:
        ax.axvline(v.decided_at, color="tab:red" if v.verdict == "reject" else "tab:green", lw=1.0, ls=":",
                   label=f"{v.verdict} after {v.decided_at}")
    if cs.n:  # the first decisions' band spans [-1, 1]: scale to the band from a twentieth of the way on
        start = min(cs.n - 1, max(19, cs.n // 20))
        ax.set_ylim(max(-1.0, float(cs.low[start:].min()) - 0.02), min(1.0, float(cs.high[start:].max()) + 0.02))
    ax.set_xlabel("labeled paired decisions")
    ax.set_ylabel("candidate − deployed objective")
    ax.set_title(f"{report.module.package}: {v.verdict}", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(report: ShadowReport, output: Any) -> Path:
    """Write `shadow_report.json` and `shadow_report.png` into a claimed output folder (`guidebench.outputs`)."""
    with output.writing() as staged:
        (staged / REPORT_FILE).write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
        draw(report, staged / PLOT_FILE)
    return output.path
