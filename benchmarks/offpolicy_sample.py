"""The learned estimates against the simulator on the committed sample, whose side files make the simulator the
truth: for every test record and family, the outcome model's expected improvement (fit on train + dev, the
profile left out of its inputs as it is of any real log) against the simulator's, rolled out from the record's
performance profile (plain directive, `evals.cycles.ROLLOUTS` rollouts).

    python -m benchmarks.offpolicy_sample --data DATASET --json reports/offpolicy_sample.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from evals.cycles import SimulatorCycles
from evals.data import load_records
from optimizers.outcome_fitting import fit_outcome_models_once
from programs.rules_planner import rule_choice
from runtime.advisor import FAMILIES


def compare(dataset: Path) -> dict[str, Any]:
    """Per family and for planner.rules' choices: mean learned and simulated improvement, ratio, correlation."""
    fit = fit_outcome_models_once(load_records(dataset, "train"), load_records(dataset, "dev"))
    sim = SimulatorCycles()
    learned, simulated, rules = [], [], []
    for record in load_records(dataset, "test"):
        estimates = fit.outcome.estimates(record.packet)
        if not sim.applies(record.packet) or any(e is None or e.cycles is None for e in estimates.values()):
            continue
        learned.append([estimates[f].cycles for f in FAMILIES])
        simulated.append([sim.improvement(record.record_id, record.packet, {"strategy_family": f, "risk": "Medium"})
                          for f in FAMILIES])
        rules.append(FAMILIES.index(rule_choice(record.packet).family))
    L, S, R = np.asarray(learned), np.asarray(simulated), np.asarray(rules)
    per_family = {f: {"learned": float(L[:, k].mean()), "sim": float(S[:, k].mean()),
                      "ratio": float(L[:, k].mean() / S[:, k].mean()),
                      "correlation": float(np.corrcoef(L[:, k], S[:, k])[0, 1])} for k, f in enumerate(FAMILIES)}
    rows = np.arange(len(R))
    best_agree = float(np.mean(L.argmax(axis=1) == S.argmax(axis=1)))
    return {"n": len(R), "per_family": per_family, "top1_agreement_with_sim": best_agree,
            "rules": {"learned": float(L[rows, R].mean()), "sim": float(S[rows, R].mean())},
            "fit": {k: fit.chosen[k] for k in ("gain_model", "attempts", "episodes", "skipped")},
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def main(argv: Optional[list[str]] = None) -> int:
    """Print (and optionally save) the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the sample's experiments dataset folder")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = compare(args.data)
    for family, v in result["per_family"].items():
        print(f"{family}: learned {v['learned']:.2f} vs sim {v['sim']:.2f} (ratio {v['ratio']:.2f}, "
              f"correlation {v['correlation']:.2f})")
    print(f"planner.rules' choices: learned {result['rules']['learned']:.2f} vs sim {result['rules']['sim']:.2f}; "
          f"same best family {result['top1_agreement_with_sim']:.2f} (n {result['n']})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
