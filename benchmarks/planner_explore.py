"""Planners that explore, measured on the kernel simulator: the planner gate's error rates and power, the coverage of
its doubly robust confidence sequence, the price of exploration, per-family estimates from logged propensities, and
what writing the sidecar adds to a decision.

Each repetition r plays `--episodes` episodes of the simulator (`guidebench.release.planner_loop`, seed r) with the
deployed planner: the `planner.rules` export exploring at the default setting (epsilon 0.2, floor 0.05). On every
iteration it records the deployed planner's stated probabilities, the family it tried and what the attempt brought
(the improvement of the best in percent of the best), and the truth: each open family's expected improvement from
the state before the iteration (`evals.sim_kernel.expected_improvement` of `planner.rules`' directive for that
family, `--rollouts` seeded attempts). The candidates' choices on the same packets:

- `greedy`: `planner.rules` without exploring (the deployed planner's greedy family);
- `aa-stated`: the deployed planner itself, stating its own probabilities (the production path of an A/A test:
  its doubly robust differences are exactly 0);
- `aa-draw`: the deployed planner itself with another exploration seed, judged by the family it draws (identical
  in distribution: each difference has mean 0 over the draws);
- `informed`: the family the simulator's profile heuristic rates highest among the open ones (the simulated
  planner's insight), better than the deployed planner by the margin reported.

The gate (`evals.offpolicy.sequential`, alpha 0.05, min_effect 0) looks after every iteration. The price of
exploration of a setting is the true improvement per iteration of the greedy family minus that of the setting's
distribution on the same packets (one step: what each iteration gives up); the softmax settings are
`planner.learned`'s (its outcome model fit once on 40 episodes of the simulated planner's logs, seed 1000, not the
benchmark's), priced against its own greedy family. The per-family estimate of
`planner.rules`' choices: for each family f, over the iterations where the greedy choice is f, the inverse
propensity estimate of its improvement (the deployed attempts of f weighted by 1 / logged probability, normalized
by the number of such iterations) over the true mean, pooled over repetitions, with a bootstrap interval over
repetitions. The latency: `FrozenPlannerModule.decide` against `PlannerShadow.decide` (the same decision plus the
line handed to the writer thread) on the same packets, alternating.

    python -m benchmarks.planner_explore --reps 200 --episodes 12 --rollouts 6 --workers 2
    python -m benchmarks.planner_explore --render
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ALPHA = 0.05
DEFAULT = dict(policy="epsilon", epsilon=0.2, floor=0.05, seed=0)
SETTINGS = {"epsilon 0.05": dict(policy="epsilon", epsilon=0.05, floor=0.0),
            "epsilon 0.1": dict(policy="epsilon", epsilon=0.1, floor=0.0),
            "epsilon 0.2 + floor 0.05 (default)": dict(policy="epsilon", epsilon=0.2, floor=0.05),
            "epsilon 0.3": dict(policy="epsilon", epsilon=0.3, floor=0.0),
            "epsilon 0.5": dict(policy="epsilon", epsilon=0.5, floor=0.0),
            "floor 0.1 only": dict(policy="epsilon", epsilon=0.0, floor=0.1)}
# planner.learned: a softmax of its estimates (percent of the best) at a temperature, with the default floor
SOFTMAX = {f"softmax {t:g} + floor 0.05 (planner.learned)": dict(policy="softmax", temperature=t, floor=0.05)
           for t in (0.1, 0.25, 0.5, 1.0)}
CANDIDATES = ("greedy", "aa-stated", "aa-draw", "informed")


def _export(root: Path) -> Path:
    from frozen_support import export_program
    from runtime.exploration import ExplorationSettings

    return export_program("planner.rules", root / "deployed", name="deployed",
                          exploration=ExplorationSettings(**DEFAULT)).path


def _outcome_state(root: Path) -> dict[str, Any]:
    """`planner.learned`'s outcome model, fit on 40 episodes of the simulated planner's logs (not the benchmark's)."""
    from evals.data import load_records
    from guidebench.data import import_logs
    from guidebench.simulators.experiments import write_episodes
    from optimizers.outcome_fitting import fit_outcome_models_once

    write_episodes(root / "fit-logs", 40, 1000, old_shape_fraction=0.0)
    import_logs(root / "fit-logs", "experiments", root / "fit-data", progress=False)
    fit = fit_outcome_models_once(load_records(root / "fit-data", "train"), load_records(root / "fit-data", "dev"))
    return fit.outcome.to_state()


def _load(folder: Path) -> Any:
    import programs
    from runtime import load_frozen

    return load_frozen(folder, program=programs.get("planner.rules"))


def _repetition(args: tuple[str, int, int, int, dict[str, Any]]) -> dict[str, Any]:
    """One repetition's iterations: logged probabilities, choice, outcome, truth per family, candidates' families."""
    from evals.sim_kernel import expected_improvement
    from guidebench.release.planner_loop import run_planner_episode
    from guidebench.simulators.experiments import _family_scores
    from programs.rules_planner import RuleChoice, protocol_view, rule_directive
    from runtime.advisor import FAMILIES
    from runtime.exploration import draw, draw_fraction

    from runtime.outcome import OutcomeModel

    folder, rep, episodes, rollouts, outcome_state = args
    deployed = _load(Path(folder))
    model = OutcomeModel.from_state(outcome_state)
    rows: list[dict[str, Any]] = []

    class Deciding:
        def decide(self, packet: Any, iteration: int) -> Any:
            return deployed.decide(packet)

    def observe(iteration: int, packet: Any, state: Any, decision: Any, outcome: Any) -> None:
        view = protocol_view(packet)
        probs = [decision.probabilities[f] for f in FAMILIES]
        truth = []
        for k, family in enumerate(FAMILIES):
            if probs[k] <= 0:
                truth.append(0.0)
                continue
            choice = RuleChoice(family=family, reasons=(), lowering=view.lowering, recovery=view.recovery)
            directive, _ = rule_directive(packet, choice)
            gain = expected_improvement(state, directive, seed=hash((rep, iteration, k)) & 0xFFFFFFFF,
                                        rollouts=rollouts)
            truth.append(100.0 * gain / state.cycles)
        scores = _family_scores(state)
        informed = max((f for f in FAMILIES if probs[FAMILIES.index(f)] > 0), key=lambda f: scores[f])
        aa = draw(decision.probabilities, draw_fraction(10_000 + rep, decision.packet_hash))
        estimates = model.estimates(packet, view.compliant)
        shares = [None if estimates.get(f) is None else 100.0 * estimates[f].gain_share for f in FAMILIES]
        known = [f for f in view.compliant if estimates.get(f) is not None]
        learned = max(known, key=lambda f: (estimates[f].gain_share, -FAMILIES.index(f))) if known \
            else FAMILIES[FAMILIES.index(decision.greedy_family)]
        rows.append({"p": probs, "a": FAMILIES.index(decision.family),
                     "y": 100.0 * max(0, state.cycles - outcome.state_after.cycles) / state.cycles, "mu": truth,
                     "greedy": FAMILIES.index(decision.greedy_family), "aa": FAMILIES.index(aa),
                     "informed": FAMILIES.index(informed), "learned": FAMILIES.index(learned), "shares": shares})

    with tempfile.TemporaryDirectory() as tmp:
        for index in range(episodes):
            run_planner_episode(Deciding(), rep, index, Path(tmp) / f"e{index}", observe=observe)
    return {"rep": rep, "rows": rows}


def _one_hot(index: int) -> list[float]:
    out = [0.0, 0.0, 0.0]
    out[index] = 1.0
    return out


def _steps(rows: list[dict[str, Any]], candidate: str) -> list[Any]:
    from evals.offpolicy.sequential import PlannerStep

    def pi(row: dict[str, Any]) -> list[float]:
        if candidate == "aa-stated":
            return row["p"]
        return _one_hot(row[{"greedy": "greedy", "aa-draw": "aa", "informed": "informed"}[candidate]])

    return [PlannerStep(logged=r["p"], chosen=r["a"], outcome=r["y"], candidate=pi(r)) for r in rows]


def _truth(rows: list[dict[str, Any]], candidate: str, policy: str) -> np.ndarray:
    """The running mean of the true per-iteration value (candidate, deployed or their difference)."""
    out = []
    for r in rows:
        mu, p = np.asarray(r["mu"]), np.asarray(r["p"])
        deployed = float(p @ mu)
        pi = np.asarray(p if candidate == "aa-stated" else _one_hot(
            r[{"greedy": "greedy", "aa-draw": "aa", "informed": "informed"}[candidate]]))
        value = float(pi @ mu)
        out.append({"candidate": value, "deployed": deployed, "difference": value - deployed}[policy])
    return np.cumsum(out) / np.arange(1, len(out) + 1)


def _share(k: int, n: int) -> str:
    from scipy.stats import beta

    low = beta.ppf(0.025, k, n - k + 1) if k else 0.0
    high = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k}/{n} = {k / n:.1%} (exact 95% CI {low:.1%}-{high:.1%})"


def gate_study(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Promotion rates, coverage at every look, power, true margins."""
    from evals.offpolicy.sequential import asymptotic_cs, dr_terms, planner_verdict

    result: dict[str, Any] = {}
    for candidate in CANDIDATES:
        promoted, rejected, at, covered, covered_value, margins = 0, 0, [], 0, 0, []
        for rep in reps:
            rows = rep["rows"]
            steps = _steps(rows, candidate)
            d, expected = dr_terms(steps)
            verdict, cs = planner_verdict(d, alpha=ALPHA, max_iterations=len(d) + 1, expected=expected)
            promoted += verdict.verdict == "promote"
            rejected += verdict.verdict == "reject"
            if verdict.verdict == "promote":
                at.append(verdict.decided_at)
            truth = _truth(rows, candidate, "difference")
            covered += bool(np.all((cs.low <= truth + 1e-12) & (truth - 1e-12 <= cs.high)))
            value, value_expected = dr_terms(steps, "candidate")
            value_cs = asymptotic_cs(value, alpha=ALPHA, expected=value_expected)
            value_truth = _truth(rows, candidate, "candidate")
            covered_value += bool(np.all((value_cs.low <= value_truth) & (value_truth <= value_cs.high)))
            margins.append(float(truth[-1]))
        n = len(reps)
        result[candidate] = {
            "promoted": promoted, "rejected": rejected, "n": n, "promote_share": _share(promoted, n),
            "coverage_difference": _share(covered, n), "coverage_value": _share(covered_value, n),
            "covered_difference": covered, "covered_value": covered_value,
            "median_iterations_to_promote": statistics.median(at) if at else None,
            "iterations_to_promote_iqr": [float(np.percentile(at, 25)), float(np.percentile(at, 75))] if at else None,
            "true_margin_mean": float(np.mean(margins)), "true_margin_sd": float(np.std(margins, ddof=1)),
        }
    return result


def exploration_price(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """True improvement per iteration given up by each setting against its planner's greedy family, on the same
    packets (`planner.rules` for epsilon and the floor, `planner.learned` for softmax)."""
    from runtime.advisor import FAMILIES
    from runtime.exploration import ExplorationSettings, probabilities

    out: dict[str, Any] = {}
    for name, values in {**SETTINGS, **SOFTMAX}.items():
        settings = ExplorationSettings(**values)
        greedy_key = "learned" if settings.policy == "softmax" else "greedy"
        per_rep, greedy_values = [], []
        for rep in reps:
            prices = []
            for r in rep["rows"]:
                open_ = [f for f, p in zip(FAMILIES, r["p"]) if p > 0]
                shares = dict(zip(FAMILIES, r["shares"]))
                probs = probabilities(settings, open_, FAMILIES[r[greedy_key]], shares)
                mu = np.asarray(r["mu"])
                prices.append(mu[r[greedy_key]] - float(np.asarray([probs[f] for f in FAMILIES]) @ mu))
            per_rep.append(float(np.mean(prices)))
            greedy_values.append(float(np.mean([r["mu"][r[greedy_key]] for r in rep["rows"]])))
        greedy_value = float(np.mean(greedy_values))
        mean, se = float(np.mean(per_rep)), float(np.std(per_rep, ddof=1) / math.sqrt(len(per_rep)))
        floor = settings.floor if settings.policy == "softmax" else max(settings.floor, settings.epsilon / 3)
        out[name] = {"price": mean, "se": se, "greedy_value": greedy_value, "share_of_greedy": mean / greedy_value,
                     "max_weight": 1.0 / floor if floor > 0 else math.inf}
    return out


def per_family(reps: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """planner.rules' per-family estimate (IPW with the logged propensities) over the truth, pooled."""
    from runtime.advisor import FAMILIES

    sums = np.zeros((len(reps), 3, 3))  # rep, family, (estimate sum, truth sum, count)
    for i, rep in enumerate(reps):
        for r in rep["rows"]:
            g = r["greedy"]
            sums[i, g, 0] += (r["y"] / r["p"][g]) if r["a"] == g else 0.0
            sums[i, g, 1] += r["mu"][g]
            sums[i, g, 2] += 1
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(reps), size=(1000, len(reps)))
    out = {}
    for k, family in enumerate(FAMILIES):
        total = sums[:, k, :].sum(axis=0)
        if total[2] == 0:
            out[family] = {"n": 0}
            continue
        ratio = total[0] / total[1]
        boot = sums[draws][:, :, k, :].sum(axis=1)
        ratios = boot[:, 0] / boot[:, 1]
        out[family] = {"n": int(total[2]), "estimate": total[0] / total[2], "truth": total[1] / total[2],
                       "ratio": float(ratio), "ci": [float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))]}
    return out


def latency(folder: Path, packets: int = 1000) -> dict[str, Any]:
    """decide() with and without the sidecar written (the shadow hands the line to its writer thread)."""
    from runtime.planner_shadow import PlannerShadow

    deployed = _load(folder)
    collected: list[Any] = []

    class Collect:
        def decide(self, packet: Any, iteration: int) -> Any:
            collected.append(packet)
            return deployed.decide(packet)

    from guidebench.release.planner_loop import run_planner_episode

    with tempfile.TemporaryDirectory() as tmp:
        index = 0
        while len(collected) < packets:
            run_planner_episode(Collect(), 99, index, Path(tmp) / f"e{index}")
            index += 1
        plain, shadowed = [], []
        with PlannerShadow(deployed, Path(tmp) / "side") as shadow:
            for i, packet in enumerate(collected[:packets]):
                start = time.perf_counter()
                deployed.decide(packet)
                plain.append(time.perf_counter() - start)
                start = time.perf_counter()
                shadow.decide(packet, i)
                shadowed.append(time.perf_counter() - start)
            written = shadow
        lines = sum(1 for _ in (Path(tmp) / "side" / "planner-decisions.jsonl").open())
    overhead = np.asarray(shadowed) - np.asarray(plain)
    return {"n": packets, "lines_written": lines, "write_errors": len(written.write_errors),
            "plain_median_ms": 1e3 * float(np.median(plain)), "shadow_median_ms": 1e3 * float(np.median(shadowed)),
            "overhead_median_ms": 1e3 * float(np.median(overhead)),
            "overhead_p95_ms": 1e3 * float(np.percentile(overhead, 95)),
            "overhead_mean_ms": 1e3 * float(overhead.mean())}


def render(result: dict[str, Any]) -> str:
    """reports/planner_explore.md from the benchmark's JSON."""
    g, price, fam, lat = result["gate"], result["price"], result["per_family"], result["latency"]
    per_rep = result["iterations"] / result["reps"]
    lines = [
        "# Planners that explore, measured on the kernel simulator",
        "",
        f"Reproduce: `{result['command']}` (`benchmarks/planner_explore.py`; then `--render` writes this page). "
        f"{result['reps']} seeded repetitions of {result['episodes']} simulated episodes each ({result['iterations']} "
        f"iterations, {per_rep:.0f} per repetition), in {result['minutes']:.0f} min on 2 shared cores (load average "
        f"{result['load_average_start']:.1f} at the start: other jobs shared the machine). The deployed planner is the "
        "`planner.rules` export exploring at the default setting (epsilon 0.2, floor 0.05, `--explore epsilon`); "
        "the truth of every open family on every iteration is `evals.sim_kernel.expected_improvement` of the rule "
        "planner's directive for it (Monte Carlo over the simulator's attempts). Values are the improvement of the "
        "best per iteration in percent of the best. The gate: `evals.offpolicy.sequential`, the doubly robust "
        "asymptotic confidence sequence of Waudby-Smith, Wu, Ramdas, Karampatziakis & Mineiro (2022), alpha 0.05, "
        "min_effect 0, a look after every iteration, no verdict and an unbounded band before 20. Shares carry their "
        "exact (Clopper-Pearson) 95% interval.",
        "",
        "## The gate: promotions, coverage, power",
        "",
        "| candidate | true margin over the deployed planner (mean over repetitions, sd) | promoted | rejected | "
        "the difference's CS covers the running truth at every look | the candidate value's CS covers it at every "
        "look | iterations to promotion (median, IQR) |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"aa-stated": "A/A: the deployed planner stating its own probabilities",
             "aa-draw": "A/A: the deployed planner, judged by its own draws (another seed)",
             "greedy": "`planner.rules` greedy (no exploration)",
             "informed": "the simulator's profile heuristic among the open families"}
    for key in ("aa-stated", "aa-draw", "greedy", "informed"):
        c = g[key]
        iqr = c["iterations_to_promote_iqr"]
        when = f"{c['median_iterations_to_promote']:.0f} ({iqr[0]:.0f}-{iqr[1]:.0f})" if iqr else "none promoted"
        lines.append(f"| {names[key]} | {c['true_margin_mean']:+.4f} (sd {c['true_margin_sd']:.4f}) | "
                     f"{c['promote_share']} | {c['rejected']}/{c['n']} | {c['coverage_difference']} | "
                     f"{c['coverage_value']} | {when} |")
    lines += [
        "",
        "Read it so: the A/A rows are the deployed planner judged against itself. Stating its own probabilities, "
        "its doubly robust differences are exactly 0 on every iteration (the production path: the gate never "
        "promotes it); judged by the family another seed draws, the differences are noisy with mean 0, which is the "
        "harder null. Coverage is of the running mean of the true per-iteration values (the quantity the sequence "
        "is for), at every one of the iterations of a repetition at once. Power is bounded by the horizon: a "
        f"repetition has about {per_rep:.0f} iterations, and a candidate not promoted by then is counted as not "
        "promoted.",
        "",
        "## The price of exploration",
        "",
        "What each iteration gives up: the true improvement of the greedy family minus that of the setting's "
        "distribution, on the same packets (the deployed planner's trajectory), mean over repetitions with its "
        "standard error; the largest importance weight the setting allows (three open families).",
        "",
        "| setting | price per iteration (percent points of the best) | share of the greedy planner's improvement | "
        "largest weight |",
        "|---|---|---|---|",
    ]
    for name, row in price.items():
        lines.append(f"| {name} | {row['price']:.4f} (SE {row['se']:.4f}) | {row['share_of_greedy']:.1%} | "
                     f"{row['max_weight']:.0f} |")
    rules_value = next(v for k, v in price.items() if "softmax" not in k)["greedy_value"]
    learned_rows = [v for k, v in price.items() if "softmax" in k]
    learned_value = learned_rows[0]["greedy_value"] if learned_rows else float("nan")
    lines += [
        "",
        f"On these packets `planner.rules`' greedy family takes {rules_value:.3f} percent of the best off per "
        f"iteration, `planner.learned`'s {learned_value:.3f} (its outcome model fit on 40 episodes of the simulated "
        "planner's logs, seed 1000: not the benchmark's episodes); a softmax row is priced against `planner.learned`'s "
        "own greedy family, and the largest weight of a softmax row is 1 / its floor. The weights bound the "
        "variance of every estimate made from these logs; the price is paid on every iteration.",
        "",
        "## `planner.rules`' per-family estimate from logged propensities",
        "",
        "For each family, over the iterations where `planner.rules` (greedy) would choose it: the inverse propensity "
        "estimate of its improvement from the deployed attempts of that family, each weighted by 1 / the logged "
        "probability (no propensity model), against the true mean; pooled over the repetitions, with a bootstrap "
        "95% interval over repetitions.",
        "",
        "| family | iterations | estimate | truth | estimate / truth (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for family, row in fam.items():
        if not row.get("n"):
            lines.append(f"| {family} | 0 | | | never the greedy choice |")
            continue
        lines.append(f"| {family} | {row['n']} | {row['estimate']:.4f} | {row['truth']:.4f} | {row['ratio']:.3f} "
                     f"({row['ci'][0]:.3f}-{row['ci'][1]:.3f}) |")
    lines += [
        "",
        "## What writing the sidecar costs a decision",
        "",
        f"`FrozenPlannerModule.decide` against `PlannerShadow.decide` on the same {lat['n']} packets, alternating "
        f"(load average {result['load_average_latency']:.1f}): median {lat['plain_median_ms']:.3f} ms without and "
        f"{lat['shadow_median_ms']:.3f} ms with the sidecar; the difference per decision: median "
        f"{lat['overhead_median_ms']:+.3f} ms, mean {lat['overhead_mean_ms']:+.3f} ms, 95th percentile "
        f"{lat['overhead_p95_ms']:+.3f} ms ({lat['lines_written']} lines written, {lat['write_errors']} errors). "
        "The deployed call only queues the line; the writer thread serializes and appends it. On a machine this "
        "loaded the difference is mostly the noise of two timings of the same work.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("reports/planner_explore.json"))
    parser.add_argument("--render", action="store_true", help="only write reports/planner_explore.md from --out")
    args = parser.parse_args()
    if args.render:
        page = args.out.with_suffix(".md")
        page.write_text(render(json.loads(args.out.read_text(encoding="utf-8"))), encoding="utf-8")
        print(f"wrote {page}")
        return
    load = os.getloadavg()[0]
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        folder = _export(Path(tmp))
        state = _outcome_state(Path(tmp))
        jobs = [(str(folder), rep, args.episodes, args.rollouts, state) for rep in range(args.reps)]
        with ProcessPoolExecutor(args.workers) as pool:
            reps = list(pool.map(_repetition, jobs, chunksize=4))
        minutes = (time.time() - started) / 60
        lat_load = os.getloadavg()[0]
        lat = latency(folder)
    iterations = sum(len(r["rows"]) for r in reps)
    result = {"command": f"python -m benchmarks.planner_explore --reps {args.reps} --episodes {args.episodes} "
                         f"--rollouts {args.rollouts} --workers {args.workers}",
              "reps": args.reps, "episodes": args.episodes, "iterations": iterations, "minutes": minutes,
              "load_average_start": load, "load_average_latency": lat_load, "default": DEFAULT,
              "gate": gate_study(reps), "price": exploration_price(reps), "per_family": per_family(reps),
              "latency": lat}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "per_family"}, indent=1)[:4000])
    print(json.dumps(result["per_family"], indent=1))


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # frozen_support: the export helper
    main()
