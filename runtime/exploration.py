"""A planner that explores on purpose: every family's probability, known when the choice is made.

An exported planner (`planner.rules`, `planner.learned`) normally takes its best family every time. Set to
explore (the manifest's `exploration`, format version 7), it draws the family from a distribution it states:

- `epsilon`: the planner's own family with probability 1 - epsilon, plus epsilon spread evenly over the
  families the pivot protocol leaves open (epsilon-greedy);
- `softmax`: a softmax of the planner's estimates (`planner.learned`: the expected improvement of the best, in
  percent of the best) at `temperature` (percent points: a family expected to take 0.1 points less off the best
  gets e^-1 the probability at temperature 0.1, the default), then the same epsilon mix;
- `floor`: after that, every open family gets at least this probability (the distribution is mixed with the
  uniform one just enough), so no importance weight exceeds 1 / floor.

The trade-off: each explored iteration is one the planner expected less of (the price of exploration, measured
per iteration in reports/planner_explore.md), and in exchange the logs try every open family often enough
that inverse-propensity and doubly robust estimates of any other planner are unbiased with bounded weights.
A larger epsilon or floor pays more per iteration and buys smaller weights (narrower estimates, sooner gates);
softmax spends its exploration where the estimates are close, and pays less when one family is clearly best.

Families the protocol blocks always get probability 0 (formats.md §2.4: if all would be blocked, all are
open). The draw is seeded: u = the first 8 bytes of SHA-256("<seed>\\n<packet hash>") as a fraction, so the
same module on the same packet chooses the same family in any process. Greedy (`policy` "greedy", the default)
states probability 1 for the family it chose.
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.advisor import FAMILIES, AdvisorPacket

Policy = Literal["greedy", "epsilon", "softmax"]
POLICIES: tuple[str, ...] = ("greedy", "epsilon", "softmax")
MAX_FLOOR = 1.0 / len(FAMILIES)  # a floor above 1/3 could not hold for three open families
MAX_TEMPERATURE = 100.0
DEFAULT_EPSILON = 0.2
DEFAULT_FLOOR = 0.05
DEFAULT_TEMPERATURE = 0.1  # percent points: near-uniform above ~0.5 on the simulator (reports/planner_explore.md)
SUM_TOLERANCE = 1e-6


class ExplorationSettings(BaseModel):
    """How an exported planner explores (the manifest's `exploration`); out-of-range values are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    policy: Policy = "greedy"
    epsilon: float = Field(0.0, ge=0.0, le=1.0)
    temperature: float = Field(DEFAULT_TEMPERATURE, gt=0.0, le=MAX_TEMPERATURE)
    floor: float = Field(0.0, ge=0.0, le=MAX_FLOOR)
    seed: int = Field(0, ge=0, lt=2 ** 63)

    @model_validator(mode="after")
    def _greedy_is_greedy(self) -> "ExplorationSettings":
        if self.policy == "greedy" and (self.epsilon > 0 or self.floor > 0):
            raise ValueError("a greedy planner has epsilon 0 and floor 0 (choose policy epsilon or softmax)")
        return self

    @property
    def explores(self) -> bool:
        """True unless greedy."""
        return self.policy != "greedy"

    def text(self) -> str:
        """One line: "epsilon 0.2, floor 0.05, seed 0"."""
        if not self.explores:
            return "greedy (no exploration)"
        parts = [self.policy if self.policy != "epsilon" else "epsilon-greedy", f"epsilon {self.epsilon:g}"]
        if self.policy == "softmax":
            parts.append(f"temperature {self.temperature:g}")
        return ", ".join([*parts, f"floor {self.floor:g}", f"seed {self.seed}"])


GREEDY = ExplorationSettings()


def default_settings(policy: str) -> ExplorationSettings:
    """The documented default of a policy (greedy, epsilon 0.2 + floor 0.05, or softmax 0.1 + floor 0.05)."""
    if policy == "greedy":
        return GREEDY
    return ExplorationSettings(policy=policy, epsilon=DEFAULT_EPSILON if policy == "epsilon" else 0.0,
                               floor=DEFAULT_FLOOR, temperature=DEFAULT_TEMPERATURE)


def open_families(packet: AdvisorPacket, compliant: Optional[Sequence[str]] = None) -> list[str]:
    """The families the protocol leaves open: allowed and not blocked (all when all would be blocked), narrowed to
    the program's compliant ones when it names them."""
    constraints = packet.strategy_family_constraints
    blocked = set(constraints.blocked_families)
    allowed = [f for f in constraints.families_for_next() if f in FAMILIES and f not in blocked] \
        or [f for f in FAMILIES if f not in blocked] or list(FAMILIES)
    narrowed = [f for f in allowed if compliant is not None and f in compliant]
    return narrowed or allowed


def probabilities(settings: ExplorationSettings, families: Sequence[str], greedy: str,
                  values: Optional[Mapping[str, Optional[float]]] = None) -> dict[str, float]:
    """Every family's probability (FAMILIES order): 0 outside `families`; see the module for the policies."""
    open_ = [f for f in FAMILIES if f in families] or [greedy]
    base = {f: 0.0 for f in FAMILIES}
    if greedy not in open_:
        open_ = [*open_, greedy]
    if settings.policy == "softmax" and values is not None:
        known = {f: float(values[f]) for f in open_ if values.get(f) is not None and math.isfinite(values[f])}
        top = max(known.values()) if known else 0.0
        weights = {f: math.exp((known[f] - top) / settings.temperature) for f in known}
        total = sum(weights.values())
        if total > 0:
            base.update({f: w / total for f, w in weights.items()})
        else:
            base[greedy] = 1.0
    else:
        base[greedy] = 1.0
    k = len(open_)
    mixed = {f: (1 - settings.epsilon) * base[f] + (settings.epsilon / k if f in open_ else 0.0) for f in FAMILIES}
    low = min(mixed[f] for f in open_)
    floor = min(settings.floor, 1.0 / k)
    if low < floor:
        share = (floor - low) / (1.0 / k - low)  # mix with the uniform distribution just enough
        mixed = {f: (1 - share) * mixed[f] + (share / k if f in open_ else 0.0) for f in FAMILIES}
    total = sum(mixed.values())
    return {f: mixed[f] / total for f in FAMILIES}


def draw_fraction(seed: int, packet_digest: str) -> float:
    """The seeded uniform draw in [0, 1) of one decision (see the module)."""
    digest = hashlib.sha256(f"{seed}\n{packet_digest}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def draw(probs: Mapping[str, float], u: float) -> str:
    """The family at fraction `u` of the cumulative probabilities (FAMILIES order; never one of probability 0)."""
    total = 0.0
    last = None
    for family in FAMILIES:
        p = probs.get(family, 0.0)
        if p <= 0:
            continue
        total += p
        last = family
        if u < total:
            return family
    assert last is not None, "no family has a positive probability"
    return last


def check_probabilities(probs: Mapping[str, float]) -> Optional[str]:
    """Why a stated distribution is unusable (None when it is one): every family of FAMILIES, finite, >= 0, sum 1."""
    if set(probs) != set(FAMILIES):
        return f"probabilities must name exactly the families {list(FAMILIES)}, got {sorted(probs)}"
    for family, p in probs.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
            return f"probability of {family} is {p!r}, not a finite number"
        if p < 0:
            return f"probability of {family} is negative ({p})"
    total = sum(probs.values())
    if abs(total - 1.0) > SUM_TOLERANCE:
        return f"probabilities sum to {total:.9g}, not 1"
    return None


__all__ = ["DEFAULT_EPSILON", "DEFAULT_FLOOR", "DEFAULT_TEMPERATURE", "ExplorationSettings", "GREEDY", "POLICIES",
           "check_probabilities", "default_settings", "draw", "draw_fraction", "open_families", "probabilities"]
