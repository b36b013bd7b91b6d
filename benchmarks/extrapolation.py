"""Where the off-policy estimate extrapolates: the rule planner's estimated improvement against the truth, per family,
with and without the loop runner's archived performance profile, split by the records flagged `extrapolated`.

The scenario (`benchmarks.planner_scenarios`, `floor` by default): break_deps's payoff shrinks as the kernel nears
its floor, and the deployed planner rarely tried it there. The same logs are imported twice, without and with the
`.advisor/` archive (the logs and the truth are the same bytes); on each, the outcome and propensity models are fit
on train + dev as `guidebench` fits them (`optimizers.outcome_fitting`), and on the test split:
- per family planner.rules chose: n, the mean estimate of the outcome model (the per-record value the planner
  metrics use, `score.cycles_improvement`) over the mean truth, on all its records, on the extrapolated ones and on
  the supported ones, each with its n;
- the DM, IPW and DR estimates of planner.rules' choices (with their extrapolated counts) against the truth;
- the deployed planner's propensity of each family on the records where the rules chose it;
- the outcome model's per-family calibration on held-out episodes (the fit's `family_calibration`).

    python -m benchmarks.extrapolation --scenario floor --episodes 60 --seed 3 --json reports/extrapolation.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from benchmarks import planner_scenarios
from evals.data import load_records
from evals.offpolicy._base import SUPPORT_THRESHOLD, evaluable, extrapolated
from evals.offpolicy.bandit import LoggedBandit
from evals.offpolicy.summary import extrapolation, policy_estimates
from guidebench.data import import_logs
from optimizers.outcome_fitting import fit_outcome_models
from programs.rules_planner import rule_choice
from runtime.advisor import FAMILIES


def _ratio(estimated: np.ndarray, true: np.ndarray) -> dict[str, Any]:
    n = int(len(estimated))
    mean_true = float(true.mean()) if n else None
    return {"n": n, "estimated": float(estimated.mean()) if n else None, "true": mean_true,
            "ratio": float(estimated.mean() / mean_true) if n and mean_true and mean_true > 0 else None}


def score(records: list, truth: dict, models: Any, seed: int, near: Optional[dict] = None,
          binds: Optional[dict] = None) -> dict[str, Any]:
    """planner.rules' choices on `records` under fitted models, against the truth (see the module)."""
    bandit = LoggedBandit.build(records, models.outcome, models.propensity)
    choices = [rule_choice(r.packet).family for r in records]
    target = bandit.target(choices)
    mask = evaluable(bandit, target)
    flagged = extrapolated(bandit, target) & mask
    true = np.asarray([truth[(r.episode_id, r.iteration_id)][c] for r, c in zip(records, choices)])
    estimate = bandit.q_of(target)
    where = np.asarray([(near or {}).get((r.episode_id, r.iteration_id), False) for r in records])
    cp = np.asarray([(binds or {}).get((r.episode_id, r.iteration_id), False) for r in records])
    per_family = {}
    for k, family in enumerate(FAMILIES):
        mine = mask & (target == k)
        if not mine.any():
            continue
        p = bandit.propensity[np.nonzero(mine)[0], k]
        per_family[family] = {"all": _ratio(estimate[mine], true[mine]),
                              "extrapolated": _ratio(estimate[mine & flagged], true[mine & flagged]),
                              "supported": _ratio(estimate[mine & ~flagged], true[mine & ~flagged]),
                              "near_floor": _ratio(estimate[mine & where], true[mine & where]),
                              "away": _ratio(estimate[mine & ~where], true[mine & ~where]),
                              "near_floor_extrapolated": int((mine & where & flagged).sum()),
                              "cp_binds": _ratio(estimate[mine & cp], true[mine & cp]),
                              "load_binds": _ratio(estimate[mine & ~cp], true[mine & ~cp]),
                              "load_binds_extrapolated": int((mine & ~cp & flagged).sum()),
                              "propensity_median": float(np.median(p)), "propensity_min": float(p.min())}
    estimates = policy_estimates(bandit, choices, seed=seed)
    return {"n_test": bandit.n, "episodes_test": int(len(np.unique(bandit.groups))),
            "per_family": per_family, "true_mean": float(true[mask].mean()),
            "estimates": {name: e.model_dump() | {"text": e.text()} for name, e in estimates.items()},
            "extrapolation": extrapolation(bandit, choices).model_dump(exclude={"records"}),
            "family_calibration": models.chosen.get("family_calibration"),
            "gain_model": models.chosen.get("gain_model")}


def one(scenario: str, episodes: int, seed: int, archive: bool, work: Path) -> dict[str, Any]:
    """Write, import, fit on train + dev, score on test."""
    made = planner_scenarios.write(scenario, episodes, seed, work, archive=archive)
    import_logs(work / "logs", "experiments", work / "ds", seed=seed, progress=False)
    truth, near, binds = {}, {}, {}
    for line in (work / "truth.jsonl").read_text().splitlines():
        item = json.loads(line)
        truth[(item["log"], item["iteration_id"])] = item["expected_improvement"]
        near[(item["log"], item["iteration_id"])] = bool(item.get("near_floor"))
        binds[(item["log"], item["iteration_id"])] = bool(item.get("cp_binds"))
    train = load_records(work / "ds", "train") + load_records(work / "ds", "dev")
    # A fresh fit, not `fit_outcome_models_once`: that one serves a repeat by the record ids, which the two imports
    # share (the archive changes the packets, not the ids), and would hand the archive's run the first run's models.
    models = fit_outcome_models(load_records(work / "ds", "train"), load_records(work / "ds", "dev"), seed=0)
    return {"archive": archive, "archived_plans": made["archived_plans"],
            "train_support": train_support(train, near, models),
            "train_support_cp_binds": train_support(train, binds, models, ("cp_binds", "load_binds")),
            **score(load_records(work / "ds", "test"), truth, models, seed, near, binds)}


def train_support(records: list, near: dict, models: Any,
                  names: tuple[str, str] = ("near_floor", "away")) -> dict[str, Any]:
    """Near the floor and away from it, on train + dev: how often the deployed planner really chose each family
    (n next to it) and the propensity model's mean probability of it there (what the support flag reads)."""
    from runtime.outcome_features import packet_features, policy_row

    logged = [r for r in records if r.outcome is not None and r.outcome.family in FAMILIES]
    rows = np.vstack([policy_row(packet_features(r.packet)) for r in logged])
    p = models.propensity.probabilities(rows)
    where = np.asarray([near.get((r.episode_id, r.iteration_id), False) for r in logged])
    chosen = np.asarray([FAMILIES.index(r.outcome.family) for r in logged])
    out: dict[str, Any] = {}
    for name, part in ((names[0], where), (names[1], ~where)):
        out[name] = {"n": int(part.sum())}
        for k, family in enumerate(FAMILIES):
            seen = part.any()
            out[name][family] = {"chosen": float(np.mean(chosen[part] == k)) if seen else None,
                                 "propensity_mean": float(p[part, k].mean()) if seen else None,
                                 "under_threshold": float(np.mean(p[part, k] < SUPPORT_THRESHOLD)) if seen else None}
    return out


def run(scenario: str, episodes: int, seed: int) -> dict[str, Any]:
    """Both imports of one scenario's logs (without, then with the archive)."""
    started, load = time.perf_counter(), os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {name: one(scenario, episodes, seed, archive, Path(tmp) / name)
                for name, archive in (("without_profile", False), ("with_profile", True))}
    return {"scenario": scenario, "episodes": episodes, "seed": seed, "truth_draws": planner_scenarios.TRUTH_DRAWS,
            **runs, "wall_s": round(time.perf_counter() - started, 1),
            "load_average_at_start": [round(x, 2) for x in load],
            "command": f"python -m benchmarks.extrapolation --scenario {scenario} --episodes {episodes} --seed {seed}"}


def report_lines(result: dict[str, Any]) -> list[str]:
    """The numbers in plain lines."""
    lines = [f"{result['scenario']} (seed {result['seed']}, {result['episodes']} episodes), wall {result['wall_s']} s "
             f"(load {result['load_average_at_start'][0]})"]
    for name in ("without_profile", "with_profile"):
        run_ = result[name]
        lines.append(f"{name.replace('_', ' ')}: test {run_['n_test']} records in {run_['episodes_test']} episodes; "
                     f"gain model {run_['gain_model']}")
        for family, row in run_["per_family"].items():
            cells = []
            for part in ("all", "extrapolated", "supported", "near_floor", "away", "cp_binds", "load_binds"):
                r = row[part]
                ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}"
                cells.append(f"{part} {ratio} (n {r['n']})")
            lines.append(f"  rules {family}: estimate / truth " + ", ".join(cells)
                         + f"; propensity median {row['propensity_median']:.3f}")
        for region, row in (*run_["train_support"].items(), *run_["train_support_cp_binds"].items()):
            lines.append(f"  train+dev {region} (n {row['n']}): " + ", ".join(
                f"{f.split(':')[-1]} chosen {row[f]['chosen']:.3f} / propensity {row[f]['propensity_mean']:.3f}"
                for f in FAMILIES if row[f]["chosen"] is not None))
        for estimate in run_["estimates"].values():
            lines.append(f"  {estimate['text']}; truth {run_['true_mean']:.1f}")
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    """Run both imports and print (and optionally save) the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(planner_scenarios.ARCHIVED), default="floor")
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--truth-draws", type=int, default=planner_scenarios.TRUTH_DRAWS,
                        help="Monte Carlo draws of each family's truth per record")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    planner_scenarios.TRUTH_DRAWS = args.truth_draws
    result = run(args.scenario, args.episodes, args.seed)
    print("\n".join(report_lines(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
