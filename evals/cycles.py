"""Where the planner metrics' expected improvement of the best comes from: the simulator or the learned model.

- `SimulatorCycles` ("sim"): the hand-set VLIW kernel simulator (`evals.sim_kernel`), seeded rollouts of the
  directive (its family, modifiers and risk) from the kernel state the packet's performance profile rebuilds
  exactly. It applies only to packets that carry a full profile (the sample's side file, or the runner's
  packets where a user kept them): its constants are the sample kernel's, and no state is ever made up for a
  packet without one (such a record gets no estimate, and the eval says how many).
- `LearnedCycles` ("learned"): the outcome model fit on the dataset's train and dev splits (`runtime.outcome`), the
  direct method per record: the expected improvement of the directive's family from the packet alone (its log
  summary, and its performance profile when it carries a usable one: `runtime.outcome_features`). A family
  the model never saw in train gets no estimate.

`replay(..., cycles_model=...)` hands one of them to every record's score; `guidebench` chooses which
(`--cycles-model sim|learned|auto`: auto is the simulator when every record carries a profile from a simulator's
side file, else learned; the notes end with the context the estimates rest on).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import lru_cache
from threading import Lock
from typing import Any, Mapping, Optional, Sequence

from runtime.advisor import FAMILIES, AdvisorPacket
from runtime.outcome import FamilyEstimate, OutcomeModel
from runtime.outcome_features import packet_features, profile_usable

from . import sim_kernel

ROLLOUTS = 32


class CyclesModel(ABC):
    """Expected improvement of the best (cycles) of a directive, and of the best plain one, from a packet."""

    name: str
    estimator: str  # how outputs name it
    # What the estimates rest on beyond the name (the learned model's fit: its cache key): two results whose
    # models differ in it were estimated differently and are never ranked on one board. None: nothing more.
    fit_key: Optional[str] = None

    @abstractmethod
    def improvement(self, record_id: str, packet: AdvisorPacket, directive: Mapping[str, Any],
                    rollouts: int = ROLLOUTS) -> Optional[float]:
        """Expected cycles the directive takes off the best (None: no estimate for this packet or family)."""

    @abstractmethod
    def best_allowed(self, record_id: str, packet: AdvisorPacket, families: Sequence[str],
                     rollouts: int = ROLLOUTS) -> Optional[tuple[float, str]]:
        """(expected improvement, family) of the best plain directive among `families`; None without an estimate."""

    @abstractmethod
    def context(self, record_id: str, packet: AdvisorPacket) -> str:
        """What the estimate rests on, for feedback sentences."""

    @abstractmethod
    def applies(self, packet: AdvisorPacket) -> bool:
        """Whether this model can estimate anything for the packet."""


class SimulatorCycles(CyclesModel):
    """The kernel simulator, from the state the packet's performance profile rebuilds (no profile: no estimate)."""

    name = "sim"
    estimator = "sim (kernel simulator, from each packet's performance profile)"

    def state(self, packet: AdvisorPacket) -> Optional[sim_kernel.KernelState]:
        """The exact kernel state behind the packet's profile, None without a usable one."""
        if packet.performance_profile is None:
            return None
        try:
            return sim_kernel.state_from_profile(packet.performance_profile)
        except ValueError:
            return None

    def applies(self, packet: AdvisorPacket) -> bool:
        return self.state(packet) is not None

    def improvement(self, record_id: str, packet: AdvisorPacket, directive: Mapping[str, Any],
                    rollouts: int = ROLLOUTS) -> Optional[float]:
        state = self.state(packet)
        if state is None or directive.get("strategy_family") not in FAMILIES:
            return None
        modifiers = tuple(m for m in directive.get("strategy_modifiers") or () if isinstance(m, str))
        risk = directive.get("risk") if directive.get("risk") in ("Low", "Medium", "High") else "Medium"
        return _simulated(state.model_dump_json(), directive["strategy_family"], modifiers, risk,
                          _seed(record_id), rollouts)

    def best_allowed(self, record_id: str, packet: AdvisorPacket, families: Sequence[str],
                     rollouts: int = ROLLOUTS) -> Optional[tuple[float, str]]:
        if self.state(packet) is None or not families:
            return None
        options = [(self.improvement(record_id, packet, {"strategy_family": f, "risk": "Medium"}, rollouts), f)
                   for f in families]
        return max(options, key=lambda item: (item[0], -FAMILIES.index(item[1])))

    def context(self, record_id: str, packet: AdvisorPacket) -> str:
        state = self.state(packet)
        if state is None:
            return "no performance profile"
        return (f"slack {state.slack_fraction:.1%} of the tight bound {state.tight_lb_cycles}, binding "
                f"{state.binding_bound}")


def _seed(record_id: str) -> int:
    return sim_kernel.derive_seed("cycles_improvement", record_id)


@lru_cache(maxsize=65536)
def _simulated(state_json: str, family: str, modifiers: tuple[str, ...], risk: str, seed: int,
               rollouts: int) -> float:
    state = sim_kernel.KernelState.model_validate_json(state_json)
    directive = {"strategy_family": family, "strategy_modifiers": list(modifiers), "risk": risk}
    return sim_kernel.expected_improvement(state, directive, seed=seed, rollouts=rollouts)


class LearnedCycles(CyclesModel):
    """The outcome model fit on train + dev: the directive's family's expected improvement (direct method)."""

    name = "learned"

    def __init__(self, model: OutcomeModel, *, trained_on: str = "the train and dev splits",
                 fit_key: Optional[str] = None) -> None:
        self.model = model
        self.fit_key = fit_key
        self.estimator = f"learned (outcome model fit on {trained_on}; direct method per record)"
        self._estimated: dict[str, dict[str, Optional[FamilyEstimate]]] = {}
        self._lock = Lock()

    def __getstate__(self) -> dict[str, Any]:
        """What a cluster's task carries (`evals.tasks`): the model, not its lock nor its per-record memo."""
        return {key: value for key, value in self.__dict__.items() if key not in ("_lock", "_estimated")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _estimated={}, _lock=Lock())

    def _estimates(self, record_id: str, packet: AdvisorPacket) -> dict[str, Optional[FamilyEstimate]]:
        """Every family's estimate for a record, computed once per record id."""
        with self._lock:
            found = self._estimated.get(record_id)
        if found is None:
            found = self.model.estimates_of(packet_features(packet))
            with self._lock:
                self._estimated[record_id] = found
        return found

    def applies(self, packet: AdvisorPacket) -> bool:
        return packet.best_so_far is not None

    def improvement(self, record_id: str, packet: AdvisorPacket, directive: Mapping[str, Any],
                    rollouts: int = ROLLOUTS) -> Optional[float]:
        family = directive.get("strategy_family")
        if family not in FAMILIES:
            return None
        estimate = self._estimates(record_id, packet)[family]
        return None if estimate is None else estimate.cycles

    def best_allowed(self, record_id: str, packet: AdvisorPacket, families: Sequence[str],
                     rollouts: int = ROLLOUTS) -> Optional[tuple[float, str]]:
        estimates = self._estimates(record_id, packet)
        options = [(e.cycles, f) for f in families if (e := estimates[f]) is not None and e.cycles is not None]
        return max(options, key=lambda item: (item[0], -FAMILIES.index(item[1]))) if options else None

    def context(self, record_id: str, packet: AdvisorPacket) -> str:
        estimates = self._estimates(record_id, packet)
        return "learned estimates " + ", ".join(
            f"{f.split(':')[1]} {'n/a' if e is None or e.cycles is None else f'{e.cycles:.1f}'}"
            for f, e in estimates.items())


class NoCyclesModel(CyclesModel):
    """No model applies (no profile for the simulator, no fit for the learned one): every estimate is left out."""

    name = "none"
    estimator = "none (no cycles model applies: the improvement metrics are left out)"

    def applies(self, packet: AdvisorPacket) -> bool:
        return False

    def improvement(self, record_id: str, packet: AdvisorPacket, directive: Mapping[str, Any],
                    rollouts: int = ROLLOUTS) -> Optional[float]:
        return None

    def best_allowed(self, record_id: str, packet: AdvisorPacket, families: Sequence[str],
                     rollouts: int = ROLLOUTS) -> Optional[tuple[float, str]]:
        return None

    def context(self, record_id: str, packet: AdvisorPacket) -> str:
        return "no cycles model"


def context_note(packets: Sequence[AdvisorPacket], archived: int = 0) -> str:
    """Which context the estimates rest on: the log summary for every record, the performance profile for those
    that carry a usable one (and how many of those the runner archived)."""
    profiled = sum(1 for p in packets if profile_usable(p.performance_profile))
    where = f", {archived} from the loop runner's archive" if archived else ""
    return (f"context: the packet's log summary for all {len(packets)} records, its performance profile for "
            f"{profiled}{where}")


def choose_cycles_model(packets: Sequence[AdvisorPacket], choice: str,
                        learned: Optional[CyclesModel], archived: int = 0) -> tuple[CyclesModel, list[str]]:
    """The model `--cycles-model` asks for on these packets, and notes that say what was chosen and why.

    `auto`: the simulator when every packet carries a usable profile and none comes from a loop runner's archive
    (`archived`: how many do), else the learned model (or none, when none could be fit: the notes say so,
    never naming a model that is not used). The simulator's constants are the sample kernel's: it is
    exact for the simulated episodes whose side file gave the profile, not for a real runner's kernel, whose
    archived profile the learned model reads as context instead. A model that does not apply to some packets is
    still used; the notes count the records it leaves without an estimate, and the last note says which context
    the estimates rest on.
    """
    sim = SimulatorCycles()
    profiled = sum(1 for p in packets if sim.applies(p))
    notes: list[str] = []
    if choice == "auto":
        chosen = sim if packets and profiled == len(packets) and not archived else learned
        why = f" ({archived} of them archived by the loop runner)" if archived else ""
        what = ("no model estimates the improvement (no outcome model could be fit)" if chosen is None else
                "the simulator estimates the improvement" if chosen is sim else
                "the learned outcome model estimates the improvement")
        notes.append(f"cycles model auto: {profiled} of {len(packets)} records carry a performance profile{why}, "
                     f"so {what}")
    elif choice == "sim":
        chosen = sim
    else:
        chosen = learned
    if chosen is sim and profiled < len(packets):
        notes.append(f"{len(packets) - profiled} of {len(packets)} records carry no performance profile: the "
                     "simulator does not apply to them, they get no improvement estimate and no objective")
    if chosen is None:
        notes.append("no cycles model: objective, cycles_improvement, improvement_ratio and effect_calibration are "
                     "left out")
        chosen = NoCyclesModel()
    elif chosen is sim:
        notes.append(f"context: the performance profile of the {profiled} records that carry one")
    else:
        notes.append(context_note(packets, archived))
    if chosen.name != "none":
        _name_context(chosen, notes[-1])
    return chosen, notes


def _name_context(model: CyclesModel, context: str) -> None:
    """Put the context on the model's estimator name, which every output carries (summary, metrics, MLflow)."""
    base = model.__dict__.get("_base_estimator") or model.estimator
    model._base_estimator = base  # type: ignore[attr-defined]
    model.estimator = f"{base}; {context}"


__all__ = ["CyclesModel", "LearnedCycles", "NoCyclesModel", "ROLLOUTS", "SimulatorCycles", "choose_cycles_model",
           "context_note"]
