"""The shadow gate's data: deployed and shadow decisions of the same turns, scored in pairs once labels arrived.

Both programs are judged by what production dispatches, with the project's objective
(`evals.metrics_fullauto`): 1 - COST[label][action] / 5 per labeled turn. The deployed program's action is the
enforced action its log recorded; the shadow's is its enforced decision (`ShadowDecision.enforced`), and when it
has none (it raised, answered something that is not a valid decision, or missed its deadline) the runtime's
safe default, a pause at confidence 0 through the same guardrails (a failed turn still stops), which is what
the runtime dispatches for a failed module. The two are scored alike, so a candidate identical to the deployed
program scores the same on every turn.

The turns come in log order (the decision's file and line, `DecisionRecord.source`), never in timestamp order:
a clock that went backwards reorders nothing. Only turns with a shadow decision of the judged module and an
outcome label pair up; the rest are counted (`ShadowPairs.counts`). Decisions of run "unknown" (made after the
writer had dropped their run) are counted and left out too: the deployed program decided them under its run's
guardrail config and dispatched them unenforced, while the config is lost to the log and the shadow is judged
under the defaults, so the two are not comparable there. So are turns whose inputs the candidate learned from
(its `runtime.provenance.Provenance`, when known): no program is judged on records it learned from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from runtime.fullauto import ORPHAN_RUN, GuardrailContext, GuidanceDecision
from runtime.guardrails import apply_guardrails
from runtime.records import DecisionRecord
from runtime.provenance import Provenance, record_key
from runtime.shadow_log import ShadowModule

from .metrics_fullauto import MAX_COST, decision_cost



def dispatched_objective(label_action: str, action: str) -> float:
    """The objective of one dispatched action against its label: 1 - COST[label][action] / 5."""
    return 1.0 - decision_cost(label_action, action) / MAX_COST


def shadow_action(record: DecisionRecord) -> str:
    """The action production would have dispatched had the shadow been deployed (see the module docstring)."""
    shadow = record.shadow
    if shadow is None:
        raise ValueError(f"record {record.record_id} has no shadow decision")
    if shadow.enforced is not None and shadow.status == "ok":
        return shadow.enforced.action
    safe = GuidanceDecision(action="pause", confidence=0.0, reason="shadow failed; safe default")
    enforced, _audit = apply_guardrails(safe, GuardrailContext.from_summary(record.summary), record.config)
    return enforced.action


@dataclass(frozen=True)
class PairedTurn:
    """One labeled turn decided by both programs."""

    record_id: str
    source: str  # file:line of the decision
    label: str
    deployed: str
    shadow: str
    status: str
    deployed_score: float
    shadow_score: float

    @property
    def difference(self) -> float:
        """Shadow minus deployed objective."""
        return self.shadow_score - self.deployed_score


@dataclass
class ShadowPairs:
    """The paired turns in log order, the module they judge, and what was left out and why."""

    module: Optional[ShadowModule]
    turns: list[PairedTurn] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)

    @property
    def differences(self) -> np.ndarray:
        """Shadow minus deployed objective per paired turn, in log order."""
        return np.asarray([turn.difference for turn in self.turns], dtype=float)


def _position(index: int, record: DecisionRecord) -> tuple[str, int, int]:
    return (record.source.file, record.source.line, index) if record.source else ("", 0, index)


def paired_turns(records: Iterable[DecisionRecord], module: Optional[ShadowModule] = None,
                 learned: Optional[Provenance] = None) -> ShadowPairs:
    """Pair the shadow and deployed decisions of the labeled turns (in log order) for `module` (default: the one
    the records' shadows name; records naming two modules are refused with a ValueError), leaving out the turns
    whose inputs are among those `learned` holds (the candidate's provenance)."""
    ordered = [record for _, record in sorted(((_position(i, r), r) for i, r in enumerate(records)),
                                              key=lambda item: item[0])]
    modules = {(r.shadow.module.name, r.shadow.module.version, r.shadow.module.checksum): r.shadow.module
               for r in ordered if r.shadow is not None}
    if module is None:
        if len(modules) > 1:
            named = ", ".join(f"{m.package} ({m.checksum[:12]})" for m in modules.values())
            raise ValueError(f"the records hold shadow decisions of {len(modules)} modules ({named}): name the one "
                             "to judge")
        module = next(iter(modules.values()), None)
    pairs = ShadowPairs(module=module)
    seen = learned.keys() if learned is not None else frozenset()
    for record in ordered:
        pairs.counts["records"] += 1
        if record.shadow is None:
            pairs.counts["no_shadow"] += 1
            continue
        if module is None or not record.shadow.module.same_module(module):
            pairs.counts["other_module"] += 1
            continue
        pairs.counts["shadowed"] += 1
        pairs.statuses[record.shadow.status] += 1
        if record.run_id == ORPHAN_RUN:
            pairs.counts["orphan"] += 1
            continue
        if seen and record_key(record, learned.hash_chars) in seen:  # type: ignore[union-attr]
            pairs.counts["learned_from"] += 1
            continue
        if record.label is None:
            pairs.counts["awaiting_label"] += 1
            continue
        if record.logged is None:
            pairs.counts["no_logged_decision"] += 1
            continue
        deployed, shadow = record.logged.action, shadow_action(record)
        where = f"{record.source.file}:{record.source.line}" if record.source else record.record_id
        pairs.turns.append(PairedTurn(record.record_id, where, record.label.action, deployed, shadow,
                                      record.shadow.status, dispatched_objective(record.label.action, deployed),
                                      dispatched_objective(record.label.action, shadow)))
    pairs.counts["paired"] = len(pairs.turns)
    return pairs
