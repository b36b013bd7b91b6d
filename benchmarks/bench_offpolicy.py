"""The off-policy benchmark: held-out experiment logs (no side file) through import, `planner.learned`'s fit, and
the evaluations of `planner.logged`, `planner.rules` and `planner.learned` on the test split, scored against the
truth the scenario kept outside the logs (`benchmarks.planner_scenarios`).

It runs what a user runs, as commands, in a fresh `GUIDEBENCH_HOME` (no cached model):

    guidebench data import LOGS --kind experiments --out DATASET
    guidebench compile --program planner.learned --optimizer fit --data DATASET --out COMPILE   (timed)
    guidebench eval --program planner.logged|planner.rules --data DATASET --split test --out EVAL

and prints the four acceptance numbers of the outcome-model work:
1. top-1: how often planner.learned picks the truly best allowed family, minus how often the best constant family
   is that family (>= +0.15). Allowed is what the real loop runner allows: every family but a blocked one (the
   streak cap its directive check enforces, formats.md §2.2); the pivot protocol's other rules are advice in the
   planner's prompt, not enforced. The same among the families the protocol allows (`top1_compliant`) is reported
   next to it, with pivot compliance;
2. for planner.rules' directives, per family, the mean estimated improvement over the mean true one (within
   [1/1.33, 1.33]);
3. for planner.logged, the correlation of the estimated and the observed improvement per record (>= 0.4);
4. the true mean improvement of planner.learned's choices against planner.rules' and planner.logged's.
Every number carries its n; the off-policy estimates (DM, IPW, DR) of each program are compared with the truth.

    python -m benchmarks.bench_offpolicy --scenario bounds --episodes 30 --seed 11 --work /tmp/bench-bounds \\
        --json reports/bench_offpolicy_bounds.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from benchmarks import planner_scenarios
from runtime.advisor import FAMILIES

RATIO_BOUND = 1.33


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one guidebench command: (wall seconds, CPU seconds of the process; the CPU time does not grow with
    the machine's load as the wall time does)."""
    started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "guidebench.cli", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"guidebench {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - started, (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)


def _rows(folder: Path, truth: dict[tuple[str, int], dict[str, Any]]) -> pd.DataFrame:
    frame = pd.read_parquet(folder / "results.parquet")
    keys = list(zip(frame["group_id"], frame["iteration_id"].astype(int)))
    for family in FAMILIES:
        frame[f"true:{family}"] = [truth[k]["expected_improvement"][family] for k in keys]
    frame["allowed"] = frame["allowed_families"].map(json.loads)
    frame["compliant"] = frame["compliant_families"].map(json.loads)
    for column, among in (("true_best", "allowed"), ("true_best_compliant", "compliant")):
        frame[column] = [max(families, key=lambda f: row[f"true:{f}"]) for families, (_, row)
                         in zip(frame[among], frame.iterrows())]
    return frame


def _top1(learned: pd.DataFrame, column: str) -> dict[str, Any]:
    """How often planner.learned picks the truly best family of a set, and each constant family does."""
    top1 = float(np.mean(learned["strategy_family"] == learned[column]))
    constant = {f: float(np.mean(learned[column] == f)) for f in FAMILIES}
    return {"learned": top1, "constant": constant, "margin": top1 - max(constant.values())}


def _true_of(frame: pd.DataFrame, column: str) -> np.ndarray:
    return np.asarray([row[f"true:{row[column]}"] if row[column] in FAMILIES else 0.0
                       for _, row in frame.iterrows()])


def _mean_ci(values: np.ndarray, groups: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Mean with a 95% bootstrap interval over episodes."""
    names, inverse = np.unique(groups, return_inverse=True)
    sums, counts = np.bincount(inverse, weights=values), np.bincount(inverse)
    draws = np.random.default_rng(seed).multinomial(len(names), np.full(len(names), 1 / len(names)), size=2000)
    means = (draws @ sums) / (draws @ counts)
    return {"mean": float(values.mean()), "ci_low": float(np.percentile(means, 2.5)),
            "ci_high": float(np.percentile(means, 97.5)), "n": int(len(values)), "episodes": int(len(names))}


def acceptance(learned: pd.DataFrame, rules: pd.DataFrame, logged: pd.DataFrame) -> dict[str, Any]:
    """The four numbers (and what they rest on) from the three programs' test rows."""
    n = len(learned)
    allowed, compliant = _top1(learned, "true_best"), _top1(learned, "true_best_compliant")
    per_family = {}
    for family in FAMILIES:
        mine = rules[rules["strategy_family"] == family]
        if len(mine):
            estimated, true = float(mine["score.cycles_improvement"].mean()), float(mine[f"true:{family}"].mean())
            per_family[family] = {"n": int(len(mine)), "estimated": estimated, "true": true,
                                  "ratio": estimated / true if true > 0 else None}
    both = logged.dropna(subset=["score.cycles_improvement", "observed_improvement"])
    corr = float(np.corrcoef(both["score.cycles_improvement"], both["observed_improvement"])[0, 1])
    ceiling = float(np.corrcoef(_true_of(both, "logged_family"), both["observed_improvement"])[0, 1])
    groups = learned["group_id"].to_numpy()
    true = {name: _mean_ci(_true_of(frame, "applied_family" if name != "planner.logged" else "logged_family"),
                           frame["group_id"].to_numpy())
            for name, frame in (("planner.learned", learned), ("planner.rules", rules), ("planner.logged", logged))}
    ratios = [v["ratio"] for v in per_family.values() if v["ratio"] is not None]
    return {
        "n_test": n, "episodes_test": int(len(np.unique(groups))),
        "top1_learned": allowed["learned"], "top1_constant": allowed["constant"], "top1_margin": allowed["margin"],
        "top1_compliant": compliant,
        "rules_per_family": per_family,
        "rules_ratios_within": bool(ratios) and all(1 / RATIO_BOUND <= r <= RATIO_BOUND for r in ratios),
        "logged_corr": corr, "logged_corr_ceiling": ceiling, "logged_corr_n": int(len(both)),
        "true_improvement": true,
        "learned_beats_both": true["planner.learned"]["mean"] > max(true["planner.rules"]["mean"],
                                                                    true["planner.logged"]["mean"]),
        "pivot_compliance_learned": float(learned["score.pivot_compliance"].mean()),
    }


def _offpolicy(folder: Path, true_mean: float) -> dict[str, Any]:
    summary = json.loads((folder / "summary.json").read_text())
    off = summary.get("off_policy") or {}
    found = {}
    for name, e in (off.get("estimates") or {}).items():
        bounded = None not in (e["value"], e.get("ci_low"), e.get("ci_high"))
        inside = bounded and e["ci_low"] <= true_mean <= e["ci_high"]
        found[name] = {k: e[k] for k in ("value", "ci_low", "ci_high", "ess", "supported")} | {"truth_inside": inside}
    return {"cycles_model": (summary.get("cycles_model") or {}).get("name"), "estimates": found,
            "calibration": {k: (off.get("calibration") or {}).get(k) for k in ("n", "mean_ratio", "correlation",
                                                                               "coverage")}}


def run(scenario: str, episodes: int, seed: int, work: Path, archive: bool = False,
        choose_among: Optional[str] = None) -> dict[str, Any]:
    """Generate, import, compile (timed), evaluate, score against the truth (`archive`: the logs come with the
    loop runner's `.advisor/` planner archives; `choose_among`: the fit recipe's setting, its default when None)."""
    work.mkdir(parents=True, exist_ok=True)
    made = planner_scenarios.write(scenario, episodes, seed, work, archive=archive)
    truth = {}
    for line in (work / "truth.jsonl").read_text().splitlines():
        item = json.loads(line)
        truth[(item["log"], item["iteration_id"])] = item
    env = {**os.environ, "GUIDEBENCH_HOME": str(work / "home"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'home' / 'mlflow.db'}"}
    dataset = work / "dataset"
    load = os.getloadavg()
    _run(["data", "import", str(work / "logs"), "--kind", "experiments", "--out", str(dataset), "--force"], env)
    recipe: list[str] = []
    if choose_among is not None:
        (work / "recipe.toml").write_text(f'optimizer = "fit"\n\n[settings]\nchoose_among = "{choose_among}"\n')
        recipe = ["--recipe", str(work / "recipe.toml")]
    compile_s, compile_cpu_s = _run(["compile", "--program", "planner.learned", "--optimizer", "fit", "--data",
                                     str(dataset), "--out", str(work / "compile"), "--force", "--no-progress",
                                     *recipe], env)
    used = json.loads((work / "compile" / "compile.json").read_text()).get("settings") or {}
    evals = {}
    for program in ("planner.logged", "planner.rules"):
        _run(["eval", "--program", program, "--data", str(dataset), "--split", "test", "--out",
              str(work / program), "--force", "--no-progress", "--no-track"], env)
        evals[program] = work / program
    evals["planner.learned"] = work / "compile" / "test"
    frames = {name: _rows(folder, truth) for name, folder in evals.items()}
    numbers = acceptance(frames["planner.learned"], frames["planner.rules"], frames["planner.logged"])
    report = json.loads((dataset / "import_report.json").read_text())
    return {"scenario": scenario, "episodes": episodes, "seed": seed, "entries": made["entries"],
            "archive": archive, "packets_archived": report.get("packets_archived", 0),
            "choose_among": used.get("choose_among"),
            "compile_s": round(compile_s, 1), "compile_cpu_s": round(compile_cpu_s, 1),
            "load_average_at_start": [round(x, 2) for x in load],
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "acceptance": numbers,
            "offpolicy": {name: _offpolicy(folder, numbers["true_improvement"][name]["mean"])
                          for name, folder in evals.items()},
            "command": f"python -m benchmarks.bench_offpolicy --scenario {scenario} --episodes {episodes} "
                       f"--seed {seed} --work WORK" + (" --archive" if archive else "")
                       + (f" --choose-among {choose_among}" if choose_among else "")}


def report_lines(result: dict[str, Any]) -> list[str]:
    """The numbers in plain lines."""
    a = result["acceptance"]
    best_constant = max(a["top1_constant"], key=a["top1_constant"].get)
    archived = f", {result.get('packets_archived', 0)} packets archived" if result.get("archive") else ", no archive"
    archived += f", choosing among the {result['choose_among']} families" if result.get("choose_among") else ""
    lines = [f"{result['scenario']} (seed {result['seed']}, {result['episodes']} episodes, {result['entries']} lines"
             f"{archived}): "
             f"test {a['n_test']} records in {a['episodes_test']} episodes; compile {result['compile_s']} s wall, "
             f"{result['compile_cpu_s']} s CPU (load {result['load_average_at_start'][0]})",
             f"1. top-1 among the allowed families: learned {a['top1_learned']:.3f} vs best constant {best_constant} "
             f"{a['top1_constant'][best_constant]:.3f}: margin {a['top1_margin']:+.3f} (need >= +0.15)"]
    if "top1_compliant" in a:
        c = a["top1_compliant"]
        lines.append(f"   among the protocol's compliant families: learned {c['learned']:.3f}, "
                     f"margin {c['margin']:+.3f}")
    for family, v in a["rules_per_family"].items():
        ratio = "n/a" if v["ratio"] is None else f"{v['ratio']:.2f}"
        lines.append(f"2. rules {family}: estimated {v['estimated']:.1f} / true {v['true']:.1f} = {ratio} (n {v['n']})")
    lines.append(f"3. logged corr(estimated, observed) {a['logged_corr']:.3f} (n {a['logged_corr_n']}; the truth's "
                 f"own {a['logged_corr_ceiling']:.3f}; need >= 0.4)")
    for name, t in a["true_improvement"].items():
        lines.append(f"4. true improvement {name}: {t['mean']:.1f} [{t['ci_low']:.1f}, {t['ci_high']:.1f}]")
    lines.append(f"   learned beats both: {a['learned_beats_both']}; learned pivot compliance "
                 f"{a['pivot_compliance_learned']:.3f}")
    for name, off in result["offpolicy"].items():
        lines.append(f"   off-policy {name}: " + ", ".join(_estimate_text(k, e) for k, e in off["estimates"].items()))
    return lines


def _estimate_text(name: str, estimate: dict[str, Any]) -> str:
    if estimate["value"] is None:
        return f"{name.upper()} unsupported (ESS {estimate['ess']:.1f})"
    if estimate["ci_low"] is None or estimate["ci_high"] is None:  # too few episodes for an interval
        return f"{name.upper()} {estimate['value']:.1f} (no interval)"
    where = "inside" if estimate["truth_inside"] else "outside"
    return (f"{name.upper()} {estimate['value']:.1f} [{estimate['ci_low']:.1f}, {estimate['ci_high']:.1f}] "
            f"(truth {where})")


def main(argv: Optional[list[str]] = None) -> int:
    """Run one scenario and print (and optionally save) its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(planner_scenarios.SCENARIOS), required=True)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    parser.add_argument("--archive", action="store_true",
                        help="the logs come with the runner's .advisor/ planner archives (bounds, simearly)")
    parser.add_argument("--choose-among", choices=("allowed", "compliant"), default=None,
                        help="the families planner.learned chooses among (the fit recipe's choose_among; default: "
                             "its default, allowed)")
    args = parser.parse_args(argv)
    result = run(args.scenario, args.episodes, args.seed, args.work, archive=args.archive,
                 choose_among=args.choose_among)
    print("\n".join(report_lines(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
