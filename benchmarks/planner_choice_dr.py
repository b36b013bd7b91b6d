"""Which choice set would held-out episodes of train + dev pick for `planner.learned`? A doubly robust check.

`planner.learned` chooses among the families the loop runner allows (`choose_among = "allowed"`) or only those the
pivot protocol allows (`"compliant"`). This benchmark asks the train and dev splits alone which set pays more, as a
fit could: grouped k-fold over episodes, the outcome model's chosen gain model refit on the other folds, and on
each held-out attempt each set's choice valued by the doubly robust estimator (Dudík, Langford & Li 2011): the
model's estimate of the choice, plus the logged attempt's residual weighted by 1 / P(logged family) when the
logged family is the choice (propensity from the fit, weights clipped at 10). Where the scenario keeps a truth
(`truth.jsonl` of `benchmarks.planner_scenarios`) it is printed next to it. Test is never read.

    python -m benchmarks.planner_choice_dr --data DATASET [--truth WORK/truth.jsonl] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

from evals.data import load_records
from evals.offpolicy.bandit import attempt_of
from optimizers.outcome_fitting import OutcomeFitSettings, _Candidate, _folds, fit_outcome_models
from programs.planner_learned import CHOICE_SETS, choice_set
from programs.rules_planner import protocol_view
from runtime.advisor import FAMILIES
from runtime.outcome_features import packet_features, policy_row

MAX_WEIGHT = 10.0


def _attempts(dataset: Path) -> list[Any]:
    records = [*load_records(dataset, "train"), *load_records(dataset, "dev")]
    usable = []
    for record in records:
        attempt = attempt_of(record)
        if attempt.family is not None and attempt.best and attempt.observed is not None:
            usable.append((record, attempt))
    return usable


def held_out_values(dataset: Path, truth: Optional[dict[tuple[str, int], dict[str, float]]] = None,
                    seed: int = 0) -> dict[str, Any]:
    """Each choice set's held-out DR value (mean share of the best), and its true value where a truth is given."""
    settings = OutcomeFitSettings()
    usable = _attempts(dataset)
    fit = fit_outcome_models([a for _, a in usable], [], settings, seed=seed)
    features = [packet_features(a.packet) for _, a in usable]
    rows = np.stack([np.stack([f.row(family) for family in FAMILIES]) for f in features])
    logged = np.asarray([FAMILIES.index(a.family) for _, a in usable])
    y = np.asarray([a.observed / a.best for _, a in usable])
    p = fit.propensity.probabilities(np.stack([policy_row(f) for f in features]))[np.arange(len(usable)), logged]
    weight = np.minimum(1.0 / np.maximum(p, 1e-6), MAX_WEIGHT)
    views = [protocol_view(a.packet) for _, a in usable]
    sets = {name: [[FAMILIES.index(f) for f in choice_set(v, name)] for v in views] for name in CHOICE_SETS}
    groups = [a.episode_id for _, a in usable]
    values = {name: np.full(len(usable), np.nan) for name in CHOICE_SETS}
    truths = {name: [] for name in CHOICE_SETS}
    for part_fit, held in _folds(groups, settings.folds):
        model = _Candidate(fit.chosen["gain_model"], "gain", settings, seed)
        model.fit(rows[part_fit, logged[part_fit]], y[part_fit])
        predicted = model.predict(rows[held].reshape(-1, rows.shape[2])).reshape(len(held), len(FAMILIES))
        for name in CHOICE_SETS:
            for k, i in enumerate(held):
                choice = max(sets[name][i], key=lambda f: (predicted[k, f], -f))
                residual = (y[i] - predicted[k, logged[i]]) * weight[i] if logged[i] == choice else 0.0
                values[name][i] = predicted[k, choice] + residual
                if truth is not None:
                    record, attempt = usable[i]
                    truths[name].append(truth[(record.episode_id, record.iteration_id)][FAMILIES[choice]]
                                        / attempt.best)
    out: dict[str, Any] = {"attempts": len(usable), "episodes": len(set(groups)), "folds": settings.folds,
                           "gain_model": fit.chosen["gain_model"]}
    for name in CHOICE_SETS:
        out[name] = {"dr_share": float(np.nanmean(values[name])),
                     "true_share": float(np.mean(truths[name])) if truths[name] else None}
    out["picks"] = max(CHOICE_SETS, key=lambda name: out[name]["dr_share"])
    return out


def _truth(path: Optional[Path]) -> Optional[dict[tuple[str, int], dict[str, float]]]:
    if path is None:
        return None
    found = {}
    for line in path.read_text().splitlines():
        item = json.loads(line)
        found[(item["log"], item["iteration_id"])] = item["expected_improvement"]
    return found


def main(argv: Optional[list[str]] = None) -> int:
    """Print (and optionally save) each choice set's held-out value on train + dev."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--truth", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = held_out_values(args.data, _truth(args.truth))
    for name in CHOICE_SETS:
        true = result[name]["true_share"]
        print(f"{name}: held-out DR {100 * result[name]['dr_share']:.3f}% of the best per attempt"
              + ("" if true is None else f" (true {100 * true:.3f}%)"))
    print(f"picks {result['picks']} ({result['attempts']} attempts, {result['episodes']} episodes, "
          f"{result['folds']} folds, gain model {result['gain_model']})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
