"""An off-policy gate for planners that stays valid while you watch it: a doubly robust confidence sequence.

On each logged iteration t the deployed planner chose family a_t with the probability p_t(a_t) it stated (the
sidecar of docs/planner-shadow.md); a shadowing candidate stated its own distribution pi_t on the same packet; the
attempt brought y_t, the improvement of the best in percent of the best. With q_t(a) a prediction of y for family a
made from the iterations before t only (here the running mean of the outcomes of a's earlier attempts: predictable,
as the method requires), the doubly robust pseudo-outcome of a policy pi is

    phi_t(pi) = sum_a pi_t(a) q_t(a) + pi_t(a_t) / p_t(a_t) * (y_t - q_t(a_t)),

whose conditional mean given the past is pi's expected improvement on iteration t's packet, whatever the
planner saw (the probabilities are the ones it drew from). The deployed planner's own value uses pi = p_t. The
difference D_t = phi_t(candidate) - phi_t(deployed) is judged with the asymptotic confidence sequence of
Waudby-Smith, Wu, Ramdas, Karampatziakis & Mineiro, "Anytime-valid off-policy inference for contextual bandits"
(2022; the two-sided normal-mixture boundary of Waudby-Smith et al., "Time-uniform central limit theory and
asymptotic confidence sequences", 2021):

    mean_t -/+ sigma_t * sqrt( 2 (t rho^2 + 1) / (t^2 rho^2) * log( sqrt(t rho^2 + 1) / alpha ) ),
    rho^2 = (-2 log alpha + log(-2 log alpha + 1)) / t_star,

with sigma_t^2 the larger of the sample variance of D_1..D_t and the mean of their expected noise variances given
the past (`dr_terms`: the stated probabilities say how much weight a residual gets before the family is drawn, so a
rare family whose large weight has not shown up yet still widens the band), and the band unbounded before
`MIN_LOOKS` iterations (in units of sigma, so the boundary is tightest near t_star
iterations). It holds the running mean of the conditional means at every t at once with probability about
1 - alpha (asymptotically: the simulator measures its coverage at every look, reports/planner_explore.md). It
needs no bound on the pseudo-outcomes, whose range grows with 1 / the smallest probability; the exploration floor
keeps their variance finite. A candidate that raised, hung or gave only its default is worth a no-change directive
(0) on that iteration.

The gate: promote at the first look (from `min_looks` on) whose lower bound is above 0; reject at the first whose
upper bound is below `min_effect`; reject at `max_iterations`; else keep shadowing, with the iterations the current
difference and its spread would need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from evals.sequential import ConfidenceSequence, SequentialVerdict, VerdictName

T_STAR = 300  # iterations at which the boundary is tightest, chosen before any data
MIN_LOOKS = 20  # no verdict before this many iterations: the normal approximation needs a few
MIN_VARIANCE = 1e-8


@dataclass(frozen=True)
class PlannerStep:
    """One logged iteration as the gate reads it (families in FAMILIES order)."""

    logged: Sequence[float]  # the deployed planner's stated probabilities
    chosen: int  # index of the family it tried
    outcome: float  # improvement of the best, percent of the best
    candidate: Optional[Sequence[float]] = None  # the candidate's probabilities; None: no valid answer (worth 0)


def dr_terms(steps: Sequence[PlannerStep], policy: str = "difference") -> tuple[np.ndarray, np.ndarray]:
    """(phi_t, v_t): the pseudo-outcomes of the candidate, the deployed planner or their difference (`policy`), with
    the predictable running-mean outcome model, and each one's expected noise variance given the past:
    v_t = sum_a c_t(a)^2 p_t(a) * m_t, with c_t(a) the weight on the residual when a is tried (pi(a) / p(a), minus 1
    for the difference) and m_t the mean squared residual of the earlier iterations. The stated probabilities make
    this known before the draw: a rare family that has not been tried yet still counts (see the module)."""
    if policy not in ("difference", "candidate", "deployed"):
        raise ValueError(f"policy must be difference, candidate or deployed, got {policy!r}")
    k = len(steps[0].logged) if steps else 0
    sums, counts = np.zeros(k), np.zeros(k)
    squared, seen = 0.0, 0
    phi, expected = np.zeros(len(steps)), np.zeros(len(steps))
    for t, step in enumerate(steps):
        q = np.divide(sums, counts, out=np.zeros(k), where=counts > 0)
        p = np.asarray(step.logged, dtype=float)
        pi = np.asarray(step.candidate, dtype=float) if step.candidate is not None else np.zeros(k)
        coef = {"difference": pi - p, "candidate": pi, "deployed": p}[policy]
        value = {"difference": float(pi @ q) - float(p @ q), "candidate": float(pi @ q), "deployed": float(p @ q)}
        a = step.chosen
        residual = step.outcome - q[a]
        phi[t] = value[policy] + coef[a] / p[a] * residual
        open_ = p > 0
        expected[t] = float(np.sum(coef[open_] ** 2 / p[open_])) * (squared / seen if seen else 0.0)
        squared += residual ** 2
        seen += 1
        sums[a] += step.outcome
        counts[a] += 1
    return phi, expected


def pseudo_outcomes(steps: Sequence[PlannerStep], policy: str = "difference") -> np.ndarray:
    """phi_t of the candidate, the deployed planner, or their difference (`policy`), with the predictable running-mean
    outcome model (see the module)."""
    return dr_terms(steps, policy)[0]


def radius(t: np.ndarray | int, sigma: np.ndarray | float, alpha: float, t_star: int = T_STAR) -> np.ndarray:
    """Half-width of the asymptotic confidence sequence after t observations of standard deviation sigma."""
    t = np.asarray(t, dtype=float)
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / t_star
    inner = t * rho2 + 1
    return np.asarray(sigma) * np.sqrt(2 * inner / (t ** 2 * rho2) * np.log(np.sqrt(inner) / alpha))


def asymptotic_cs(values: Sequence[float], *, alpha: float = 0.05, t_star: int = T_STAR,
                  min_looks: int = MIN_LOOKS, expected: Optional[Sequence[float]] = None) -> ConfidenceSequence:
    """The running mean of `values` and its asymptotic (1 - alpha) confidence sequence after each one; unbounded
    before `min_looks` values (a spread estimated from a handful says nothing yet). `expected`: each value's expected
    noise variance given the past (`dr_terms`); the spread used is the larger of the sample's and their mean."""
    x = np.asarray(values, dtype=float)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if x.size and not np.all(np.isfinite(x)):
        raise ValueError("pseudo-outcomes must be finite")
    t = np.arange(1, x.size + 1, dtype=float)
    mean = np.cumsum(x) / t if x.size else x
    variance = np.maximum(np.cumsum(x ** 2) / t - mean ** 2, MIN_VARIANCE) if x.size else x
    if expected is not None and x.size:
        variance = np.maximum(variance, np.cumsum(np.asarray(expected, dtype=float)) / t)
    half = radius(t, np.sqrt(variance), alpha, t_star) if x.size else x
    half = np.where(t < min_looks, np.inf, half) if x.size else x
    return ConfidenceSequence(mean=mean, low=mean - half, high=mean + half, variance=variance * t, alpha=alpha,
                              bound=math.inf)


def _needed(cs: ConfidenceSequence, gap: float, limit: int, t_star: int) -> Optional[int]:
    """The least n <= limit at which the current spread gives a half-width below `gap` (None: not by `limit`)."""
    n = cs.n
    sigma = math.sqrt(float(cs.variance[-1]) / n)
    if gap <= 0 or not math.isfinite(sigma) or float(radius(limit, sigma, cs.alpha, t_star)) >= gap:
        return None
    low, high = n, limit
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if float(radius(middle, sigma, cs.alpha, t_star)) < gap else (middle, high)
    return high


def planner_verdict(differences: Sequence[float], *, alpha: float = 0.05, min_effect: float = 0.0,
                    max_iterations: int = 5000, min_looks: int = MIN_LOOKS, t_star: int = T_STAR,
                    expected: Optional[Sequence[float]] = None) -> tuple[SequentialVerdict, ConfidenceSequence]:
    """The gate's verdict on the doubly robust differences in the order the iterations arrived (see the module;
    `expected`: their expected noise variances, `dr_terms`)."""
    if min_effect < 0 or max_iterations < 1:
        raise ValueError("min_effect must be at least 0 and max_iterations at least 1")
    cut = None if expected is None else list(expected)[:max_iterations]
    cs = asymptotic_cs(list(differences)[:max_iterations], alpha=alpha, t_star=t_star, min_looks=min_looks,
                       expected=cut)
    settings = dict(alpha=alpha, min_effect=min_effect, max_decisions=max_iterations)
    looks = np.arange(1, cs.n + 1) >= min_looks
    promote = np.flatnonzero(looks & (cs.low > 0))
    reject = np.flatnonzero(looks & (cs.high < min_effect))
    crossed = [int(i[0]) for i in (promote, reject) if i.size]
    if crossed:
        at = min(crossed)
        name: VerdictName = "reject" if reject.size and at == int(reject[0]) else "promote"
        bounds = (float(cs.mean[at]), float(cs.low[at]), float(cs.high[at]))
        why = (f"the {1 - alpha:.0%} doubly robust confidence sequence is above 0 after {at + 1} iterations"
               if name == "promote" else f"the {1 - alpha:.0%} doubly robust confidence sequence is below "
               f"{min_effect:+g} after {at + 1} iterations")
        return SequentialVerdict(name, cs.n, at + 1, *bounds, reason=why, **settings), cs
    if cs.n == 0:
        return SequentialVerdict("keep shadowing", 0, None, None, None, None,
                                 reason="no iteration with logged propensities yet", **settings), cs
    last = (float(cs.mean[-1]), float(cs.low[-1]), float(cs.high[-1]))
    if cs.n >= max_iterations:
        return SequentialVerdict("reject", cs.n, cs.n, *last, reason=f"the maximum of {max_iterations} iterations "
                                 "was reached without evidence that the candidate is better", **settings), cs
    mean = last[0]
    options = [(_needed(cs, mean, max_iterations, t_star), "promote")] if mean > 0 else []
    if mean < min_effect:
        options.append((_needed(cs, min_effect - mean, max_iterations, t_star), "reject"))
    reachable = [(n, name) for n, name in options if n is not None]
    if not reachable:
        why, extra = (f"the current difference {mean:+.4f} would not reach a verdict within {max_iterations} "
                      "iterations"), None
    else:
        total, verdict = min(reachable)
        total = max(total, min_looks)
        extra = total - cs.n
        why = f"about {extra} more iterations to {verdict} if the difference stays {mean:+.4f}"
    return SequentialVerdict("keep shadowing", cs.n, None, *last, reason=why, more_needed=extra, **settings), cs


__all__ = ["MIN_LOOKS", "PlannerStep", "T_STAR", "asymptotic_cs", "dr_terms", "planner_verdict", "pseudo_outcomes",
           "radius"]
