"""How often the doubly robust estimate's 95% interval holds the truth, over many small simulated datasets.

The outcome and propensity models are fit once, on a training set of the scenario (`--train-episodes` episodes of
seed `--seed`), as `guidebench` fits them (`optimizers.outcome_fitting.fit_outcome_models_once`). Then
`--datasets` independent datasets of `--episodes` episodes each (seeds `--seed` + 1, + 2, ...) are written,
imported (with or without the loop runner's `.advisor/` archives: `--archive`) and scored: the DR estimate
(Dudík, Langford & Li 2011; self-normalized, episode-bootstrap interval) of `planner.rules`' choices against the
truth the scenario kept outside the logs (each record's expected improvement of the chosen family, averaged over
the records the estimate rests on). Coverage is the share of supported datasets whose interval holds it; an
unsupported estimate (ESS under 10) gives no interval and is counted apart.

    python -m benchmarks.dr_coverage --scenario bounds --datasets 100 --episodes 6 --archive --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from benchmarks import planner_scenarios
from evals.data import load_records
from evals.offpolicy._base import evaluable
from evals.offpolicy.bandit import LoggedBandit
from evals.offpolicy.summary import policy_estimates
from guidebench.data import import_logs
from optimizers.outcome_fitting import fit_outcome_models_once
from programs.rules_planner import rule_choice
from runtime.advisor import FAMILIES


def dataset(scenario: str, episodes: int, seed: int, archive: bool, work: Path) -> tuple[list, dict]:
    """(records, truth by (episode, iteration)) of one simulated dataset."""
    planner_scenarios.write(scenario, episodes, seed, work, archive=archive)
    import_logs(work / "logs", "experiments", work / "ds", seed=seed, progress=False)
    truth = {}
    for line in (work / "truth.jsonl").read_text().splitlines():
        item = json.loads(line)
        truth[(item["log"], item["iteration_id"])] = item["expected_improvement"]
    return load_records(work / "ds", "all"), truth


def one(models: Any, records: list, truth: dict, seed: int) -> dict[str, Any]:
    """The DR estimate of planner.rules' choices on one dataset, and the truth on the records it rests on."""
    bandit = LoggedBandit.build(records, models.outcome, models.propensity)
    choices = [rule_choice(r.packet).family for r in records]
    estimate = policy_estimates(bandit, choices, seed=seed)["dr"]
    mask = evaluable(bandit, bandit.target(choices))
    true = float(np.mean([truth[(r.episode_id, r.iteration_id)][c]
                          for r, c, keep in zip(records, choices, mask) if keep]))
    inside = estimate.value is not None and estimate.ci_low <= true <= estimate.ci_high
    return {"seed": seed, "n": estimate.n, "value": estimate.value, "ci_low": estimate.ci_low,
            "ci_high": estimate.ci_high, "ess": estimate.ess, "supported": estimate.value is not None,
            "truth": true, "inside": bool(inside)}


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95% interval of a proportion k / n."""
    if not n:
        return math.nan, math.nan
    z, p = 1.96, k / n
    center, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return center - half, center + half


def run(scenario: str, datasets: int, episodes: int, train_episodes: int, seed: int, archive: bool) -> dict[str, Any]:
    """Fit once, score `datasets` fresh datasets, summarise the coverage."""
    started, load = time.perf_counter(), os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        train, _ = dataset(scenario, train_episodes, seed, archive, Path(tmp) / "train")
        models = fit_outcome_models_once(train, [], seed=0)
        rows = []
        for k in range(1, datasets + 1):
            work = Path(tmp) / f"d{k}"
            records, truth = dataset(scenario, episodes, seed + k, archive, work)
            rows.append(one(models, records, truth, seed + k))
            shutil.rmtree(work)
            print(f"{k}/{datasets}: DR {rows[-1]['value']} truth {rows[-1]['truth']:.1f} inside {rows[-1]['inside']}",
                  flush=True)
    supported = [r for r in rows if r["supported"]]
    hits = sum(r["inside"] for r in supported)
    low, high = wilson(hits, len(supported))
    errors = [r["value"] - r["truth"] for r in supported]
    return {"scenario": scenario, "archive": archive, "datasets": datasets, "episodes": episodes,
            "train_episodes": train_episodes, "seed": seed, "policy": "planner.rules",
            "truth_draws": planner_scenarios.TRUTH_DRAWS,
            "supported": len(supported), "coverage": hits / len(supported) if supported else None,
            "coverage_ci": [low, high], "mean_error": float(np.mean(errors)) if errors else None,
            "mean_width": float(np.mean([r["ci_high"] - r["ci_low"] for r in supported])) if supported else None,
            "mean_truth": float(np.mean([r["truth"] for r in rows])), "rows": rows,
            "wall_s": round(time.perf_counter() - started, 1), "load_average_at_start": [round(x, 2) for x in load],
            "command": f"python -m benchmarks.dr_coverage --scenario {scenario} --datasets {datasets} --episodes "
                       f"{episodes} --train-episodes {train_episodes} --seed {seed} --truth-draws {planner_scenarios.TRUTH_DRAWS}"
                       + (" --archive" if archive else "")}


def main(argv: Optional[list[str]] = None) -> int:
    """Run the coverage study and print (and optionally save) its summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(planner_scenarios.ARCHIVED), default="bounds")
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--train-episodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=500)
    parser.add_argument("--archive", action="store_true")
    parser.add_argument("--truth-draws", type=int, default=100,
                        help="Monte Carlo draws of each family's truth (the scenarios' default is 400; 100 keeps 100 "
                             "datasets cheap, and averaged over a dataset's records its noise is far below the intervals)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    planner_scenarios.TRUTH_DRAWS = args.truth_draws
    result = run(args.scenario, args.datasets, args.episodes, args.train_episodes, args.seed, args.archive)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
