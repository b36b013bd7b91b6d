"""The shadow gate on the Full Auto simulator: how often it promotes what is not better, how fast it promotes what
is, and what a fixed-n test re-run at every look does instead.

The deployed program is the simulator's own noisy policy (the one the committed sample logs come from). Each
repetition plays seeded sessions with it deciding (the trajectory is the deployed program's) and, on every turn,
lets each candidate decide the same turn summary under the same guardrails, never enforced (decisions of run
"unknown" are left out, as the gate leaves them out). Both are scored as `evals.shadow` scores them
(the dispatched action against the simulator's true label), which gives one stream of paired differences per
candidate and repetition. The candidates:

- `aa`: the deployed policy itself, with its own random draws (an A/A test: identical in distribution, so every
  difference has conditional mean 0; an identical deterministic program would give differences of exactly 0);
- `better`: the same policy with less noise (noise 0.05, 1% unparseable answers instead of 0.15 and 4%);
- `worse`: the same policy with more noise (noise 0.25, 6% unparseable);
- `learned`: `full_auto.learned` fit on the committed sample (`guidebench compile --optimizer fit`), exported,
  deciding through its frozen module (the code `ShadowRunner` calls);
and end to end also `always_continue`: the `full_auto.always_continue` export, a clearly worse program.

The gate looks after every 50 labeled decisions (and, separately, after every one), up to 2,000 decisions for
the A/A question and 5,000 (the default `max_decisions`) for the others. A repetition plays on past 2,000
decisions only until every other candidate has its verdict (what it plays after that cannot change one), and
each candidate's true margin is estimated on the first 2,000 decisions of every repetition (a fixed length:
the mean up to a verdict would be biased). The fixed-n comparison re-runs a paired
t-test (two-sided, the normal-theory stand-in for the permutation test at these n) at the same looks and
"promotes" at the first look with p < alpha and a positive difference. The true margin of each candidate is the
mean of all its differences (every repetition, the whole horizon).

End to end, once per condition, the real path runs: `run-loop` with the shadow export, `data import`, `shadow
report`, a verdict and its ledger entry. A/A end to end is the learned export deciding and shadowing itself
(identical and deterministic); `better` is the learned export beside the deployed policy; `worse` is
`always_continue` beside it.

    .venv/bin/python -m benchmarks.shadow_gate --reps 200 --work /tmp/shadow-gate
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy import stats

from evals.metrics_fullauto import MAX_COST, decision_cost
from evals.sequential import confidence_sequence
from runtime import GuidanceDecision, apply_guardrails
from runtime.fullauto import GuardrailContext

ROOT = Path(__file__).resolve().parents[1]
LOOK = 50
AA_HORIZON = 2000
HORIZON = 5000
ALPHA = 0.05
POLICIES = {"aa": (0.15, 0.04), "better": (0.05, 0.01), "worse": (0.25, 0.06)}
MODULES = ("learned",)
EXPORTS = ("learned", "always_continue")
E2E = {"A/A": ("learned", "learned"), "better": (None, "learned"), "worse": (None, "always_continue")}
E2E_RUNS = 260  # sessions: about 2,100 decisions


def _cli(*argv: Any) -> None:
    from guidebench.cli import main

    code = main([str(part) for part in argv])
    if code not in (0,):
        raise SystemExit(f"guidebench {' '.join(map(str, argv))} exited {code}")


def build_candidates(work: Path) -> dict[str, Path]:
    """Import the committed sample, fit full_auto.learned on it, and export it and full_auto.always_continue."""
    exports = {name: work / "exports" / name for name in EXPORTS}
    if all((path / "manifest.json").is_file() for path in exports.values()):
        return exports
    data, fit = work / "sample-data", work / "fit"
    if not (data / "dataset.json").is_file():
        _cli("data", "import", ROOT / "datasets" / "sample" / "fullauto", "--kind", "fullauto", "--out", data,
             "--no-progress")
    if not (fit / "program.json").is_file():
        _cli("compile", "--program", "full_auto.learned", "--optimizer", "fit", "--data", data, "--baseline",
             "logged", "--no-progress", "--out", fit, "--force")
    _cli("export", "--program", "full_auto.learned", "--state", fit / "program.json", "--name", "learned",
         "--version", "1.0.0", "--out", exports["learned"], "--force")
    _cli("export", "--program", "full_auto.always_continue", "--name", "always-continue", "--version", "1.0.0",
         "--out", exports["always_continue"], "--force")
    return exports


def _objective(label: str, action: str) -> float:
    return 1.0 - decision_cost(label, action) / MAX_COST


def _policy(noise: float, unparseable: float) -> Callable[[Any, Any, random.Random], GuidanceDecision]:
    from guidebench.simulators.fullauto_policy import (PolicyNoise, chat_adapter_data, deployed_raw_output,
                                                       original_decision)

    settings = PolicyNoise(noise=noise, p_unparseable=unparseable)
    return lambda summary, _config, rng: original_decision(chat_adapter_data(
        deployed_raw_output(summary, rng, settings)))[0]


def _module(module: Any) -> Callable[[Any, Any, random.Random], GuidanceDecision]:
    return lambda summary, config, _rng: module.decide(summary, config)[0]


def _all_decided(diffs: dict[str, np.ndarray], n: int, names: list[str]) -> bool:
    """True when every named candidate's confidence sequence has crossed 0 (promote) or gone below 0 (reject)."""
    for name in names:
        cs = confidence_sequence(diffs[name][:n].astype(float), alpha=ALPHA)
        looks = np.arange(LOOK, n + 1, LOOK) - 1
        if not (np.any(cs.low[looks] > 0) or np.any(cs.high[looks] < 0)):
            return False
    return True


def stream(rep: int, shadows: dict[str, Callable], horizon: int) -> dict[str, np.ndarray]:
    """One repetition: the paired differences of each candidate (NaN after the repetition stopped)."""
    from guidebench.simulators.fullauto import FullAutoSimulator

    simulator = FullAutoSimulator(10_000 + rep)
    diffs = {name: np.full(horizon, np.nan, dtype=np.float32) for name in shadows}
    others = [name for name in shadows if name != "aa"]
    n, index = 0, 0
    while n < horizon:
        episode = simulator.episode(index)
        rngs = {name: random.Random(f"shadow-{name}:{rep}:{index}") for name in shadows}
        index += 1
        while not episode.done and n < horizon:
            summary = episode.observe()
            result = episode.step(episode.deployed_decision())
            line = episode.decision_lines[-1]
            if line.run_id == "unknown":  # the gate leaves these out (see evals.shadow)
                continue
            config = episode.guardrails
            label, context = result.label.action, GuardrailContext.from_summary(summary)
            deployed = _objective(label, line.action)
            for name, shadow in shadows.items():
                enforced, _ = apply_guardrails(shadow(summary, config, rngs[name]), context, config)
                diffs[name][n] = _objective(label, enforced.action) - deployed
            n += 1
            if n >= AA_HORIZON and n % LOOK == 0 and _all_decided(diffs, n, others):
                return diffs
    return diffs


def _share(hits: int, reps: int) -> dict[str, Any]:
    """A share with its Monte Carlo error: the binomial standard error and the exact (Clopper-Pearson) 95% interval."""
    low = float(stats.beta.ppf(0.025, hits, reps - hits + 1)) if hits else 0.0
    high = float(stats.beta.ppf(0.975, hits + 1, reps - hits)) if hits < reps else 1.0
    share = hits / reps
    return {"hits": hits, "reps": reps, "share": share, "se": math.sqrt(share * (1 - share) / reps),
            "ci95": [low, high]}


def _first(mask: np.ndarray) -> np.ndarray:
    """Per row, the index of the first True (or -1)."""
    any_ = mask.any(axis=1)
    return np.where(any_, mask.argmax(axis=1), -1)


def _fixed_n_promotes(diffs: np.ndarray, looks: np.ndarray) -> np.ndarray:
    """Per repetition, the first look at which a paired t-test has p < alpha and a positive mean (-1: never)."""
    d = diffs.astype(float)
    total, squares = np.cumsum(d, axis=1)[:, looks - 1], np.cumsum(d * d, axis=1)[:, looks - 1]
    n = looks.astype(float)
    mean = total / n
    variance = np.maximum(squares - n * mean * mean, 0.0) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(variance > 0, mean / np.sqrt(variance / n), 0.0)
    p = 2 * stats.t.sf(np.abs(t), n - 1)
    return _first((p < ALPHA) & (mean > 0))


def _sequential(diffs: np.ndarray, looks: np.ndarray, min_effect: float = 0.0) -> tuple[np.ndarray, np.ndarray,
                                                                                        np.ndarray, np.ndarray]:
    """Per repetition: the first look (index into `looks`) that promotes and that rejects, and the same for
    looking after every decision (decision counts), -1 for never."""
    low = np.empty(diffs.shape)
    high = np.empty(diffs.shape)
    for row, values in enumerate(diffs):
        cs = confidence_sequence(values.astype(float), alpha=ALPHA)
        low[row], high[row] = cs.low, cs.high
    promote_look, reject_look = _first(low[:, looks - 1] > 0), _first(high[:, looks - 1] < min_effect)
    return promote_look, reject_look, _first(low > 0), _first(high < min_effect)


def _decided_first(promote: np.ndarray, reject: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Promotions and rejections that came first (a repetition stops at its first verdict)."""
    never = np.iinfo(np.int64).max
    p = np.where(promote >= 0, promote, never)
    r = np.where(reject >= 0, reject, never)
    return np.where(p <= r, promote, -1), np.where(r < p, reject, -1)


def _spread(decisions: np.ndarray) -> dict[str, Any]:
    if not decisions.size:
        return {"median": None, "min": None, "max": None, "q25": None, "q75": None}
    q25, median, q75 = np.percentile(decisions, [25, 50, 75])
    return {"median": float(median), "min": int(decisions.min()), "max": int(decisions.max()), "q25": float(q25),
            "q75": float(q75)}


def analyse(diffs: np.ndarray, horizon: int, fixed_n: bool = False) -> dict[str, Any]:
    """The gate's and the fixed-n test's verdicts over the repetitions of one candidate (a stream that stopped
    early, NaN-padded, had its verdict: the padding never reaches a look before it)."""
    diffs = diffs[:, :horizon]
    margin_part = diffs[:, :AA_HORIZON].astype(float)
    diffs = np.nan_to_num(diffs.astype(float), nan=0.0)
    reps = diffs.shape[0]
    looks = np.arange(LOOK, horizon + 1, LOOK)
    promote_look, reject_look, promote_any, reject_any = _sequential(diffs, looks)
    promoted, rejected = _decided_first(promote_look, reject_look)
    promoted_any, _ = _decided_first(promote_any, reject_any)
    # the fixed-n test at every look needs the whole stream: only the A/A streams run to their horizon
    fixed = _fixed_n_promotes(diffs, looks) if fixed_n else np.full(reps, -1)
    rep_means = margin_part.mean(axis=1)
    margin_se = float(rep_means.std(ddof=1) / math.sqrt(reps))
    margin = float(margin_part.mean())
    return {
        "reps": reps, "horizon": horizon, "looks": len(looks),
        "margin": margin, "margin_ci95": [margin - 1.96 * margin_se, margin + 1.96 * margin_se],
        "sequential_promoted": _share(int((promoted >= 0).sum()), reps),
        "sequential_ever_crossed_above_0": _share(int((promote_look >= 0).sum()), reps),
        "sequential_rejected": _share(int((rejected >= 0).sum()), reps),
        "sequential_promoted_every_decision": _share(int((promoted_any >= 0).sum()), reps),
        **({"fixed_n_promoted": _share(int((fixed >= 0).sum()), reps)} if fixed_n else {}),
        "decisions_to_promote": _spread(looks[promoted[promoted >= 0]]),
        "decisions_to_reject": _spread(looks[rejected[rejected >= 0]]),
        **({"fixed_n_share_by_look": [float((fixed[(fixed >= 0)] <= k).sum() / reps) for k in range(len(looks))]}
           if fixed_n else {}),
        "sequential_share_by_look": [float((promoted[(promoted >= 0)] <= k).sum() / reps) for k in range(len(looks))],
    }


_SHADOWS: dict[str, Callable] = {}


def _init_worker(exports: dict[str, Path]) -> None:
    """A worker process's candidates (each process loads the exported modules once)."""
    from guidebench.release.export import load_exported

    _SHADOWS.update({name: _policy(*noise) for name, noise in POLICIES.items()})
    _SHADOWS.update({name: _module(load_exported(exports[name])) for name in MODULES})


def _one(rep: int) -> dict[str, np.ndarray]:
    return stream(rep, _SHADOWS, HORIZON)


def streams(reps: int, work: Path, exports: dict[str, Path], processes: int) -> dict[str, np.ndarray]:
    """Every candidate's differences for every repetition (cached in WORK/streams-REPS.npz)."""
    import multiprocessing

    cache = work / f"streams-{reps}.npz"
    if cache.is_file():
        with np.load(cache) as data:
            return {name: data[name] for name in data.files}
    load = os.getloadavg()[0]
    rows: dict[str, list[np.ndarray]] = {}
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(processes, _init_worker, (exports,)) as pool:
        for done, result in enumerate(pool.imap(_one, range(reps)), start=1):
            for name, values in result.items():
                rows.setdefault(name, []).append(values)
            if done % 20 == 0:
                print(f"  {done}/{reps} repetitions, {time.perf_counter() - started:.0f} s", flush=True)
    out = {name: np.stack(values) for name, values in rows.items()}
    # how long the repetitions took, and on how busy a machine: `_`-names are not candidates
    out["_wall_s"], out["_load_average"] = np.array(time.perf_counter() - started), np.array(load)
    np.savez_compressed(cache, **out)
    return out


def end_to_end(work: Path, exports: dict[str, Path]) -> dict[str, Any]:
    """The real path once per condition: run-loop with the shadow, import, shadow report, verdict, ledger."""
    results = {}
    for condition, (module, shadow) in E2E.items():
        folder = work / "e2e" / condition.replace("/", "")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        os.environ["GUIDEBENCH_HOME"] = str(folder / "home")
        started = time.perf_counter()
        loop = ["run-loop", "--shadow", exports[shadow], "--runs", E2E_RUNS, "--seed", 77, "--out", folder / "logs"]
        _cli(*loop, *(["--module", exports[module]] if module else []))
        _cli("data", "import", folder / "logs", "--kind", "fullauto", "--shadow-module", exports[shadow],
             "--out", folder / "data", "--no-progress")
        _cli("shadow", "report", "--module", exports[shadow], "--data", folder / "data", "--out", folder / "report")
        report = json.loads((folder / "report" / "shadow_report.json").read_text())
        counts = json.loads((folder / "data" / "import_report.json").read_text())
        ledger = [json.loads(line) for line in (folder / "home" / "promotions.jsonl").read_text().splitlines()]
        evidence = report["evidence"]
        results[condition] = {
            "deciding": module or "the simulator's deployed policy", "shadow": shadow,
            "seconds": round(time.perf_counter() - started, 1), "verdict": evidence["verdict"], "n": evidence["n"],
            "decided_at": evidence["decided_at"], "difference": evidence["difference"],
            "cs": [evidence["cs_low"], evidence["cs_high"]], "reason": report["reason"],
            "shadow_counts": {k: v for k, v in counts.items() if k.startswith("shadow_") and isinstance(v, int)},
            "ledger": [f"{entry['from_state']} -> {entry['to_state']}" for entry in ledger],
        }
        print(f"  end to end {condition}: {evidence['verdict']} after {evidence['decided_at'] or evidence['n']} "
              f"decisions; ledger {results[condition]['ledger']}", flush=True)
    return results


def looks_plot(results: dict[str, Any], path: Path) -> None:
    """Share of A/A repetitions that said "promote" by each look: fixed-n test vs the sequential gate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    aa = results["aa"]
    looks = np.arange(LOOK, AA_HORIZON + 1, LOOK)
    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=110)
    ax.plot(looks, aa["fixed_n_share_by_look"], color="tab:red", label="fixed-n paired test, re-run at every look")
    ax.plot(looks, aa["sequential_share_by_look"], color="tab:blue", label="sequential gate (confidence sequence)")
    ax.axhline(ALPHA, color="black", lw=0.8, ls="--", label=f"alpha = {ALPHA:g}")
    ax.set_xlabel("labeled decisions so far (a look every 50)")
    ax.set_ylabel("share of A/A runs that said promote")
    ax.set_title(f"A candidate no better than the deployed program ({aa['reps']} seeded runs)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _pct(share: dict[str, Any]) -> str:
    low, high = share["ci95"]
    return (f"{share['hits']}/{share['reps']} = {100 * share['share']:.1f}% (SE {100 * share['se']:.1f} points; "
            f"exact 95% CI {100 * low:.1f}-{100 * high:.1f}%)")


def _decisions(spread: dict[str, Any]) -> str:
    if spread["median"] is None:
        return "never"
    return (f"median {spread['median']:,.0f} (quartiles {spread['q25']:,.0f}-{spread['q75']:,.0f}, range "
            f"{spread['min']:,}-{spread['max']:,})")


def render(summary: dict[str, Any]) -> str:
    """reports/shadow.md from the measured summary."""
    c = summary["candidates"]
    aa = c["aa"]
    rows = []
    for name, what in (("better", "less noisy policy (noise 0.05, 1% unparseable)"),
                       ("learned", "`full_auto.learned` fit on the committed sample"),
                       ("worse", "noisier policy (noise 0.25, 6% unparseable)")):
        r = c[name]
        rows.append(f"| {name} | {what} | {r['margin']:+.4f} [{r['margin_ci95'][0]:+.4f}, {r['margin_ci95'][1]:+.4f}] | "
                    f"{_pct(r['sequential_promoted'])} | {_decisions(r['decisions_to_promote'])} | "
                    f"{_pct(r['sequential_rejected'])} | {_decisions(r['decisions_to_reject'])} |")
    e2e = summary.get("end_to_end") or {}
    e2e_rows = [f"| {name} | {r['deciding']} | {r['shadow']} | {r['n']:,} | {r['verdict']} | "
                f"{r['decided_at'] if r['decided_at'] else '-'} | {r['difference']:+.4f} [{r['cs'][0]:+.4f}, "
                f"{r['cs'][1]:+.4f}] | {', '.join(r['ledger'])} | {r['shadow_counts'].get('shadow_joined', 0):,} of "
                f"{r['shadow_counts'].get('shadow_lines', 0):,} | {r['seconds']} s |" for name, r in e2e.items()]
    return f"""# The shadow gate, measured on the Full Auto simulator

Reproduce: `{summary['command']}` (`benchmarks/shadow_gate.py`). The repetitions ran in {summary['processes']}
processes in {summary['repetitions_wall_s'] / 60:.0f} min on 2 shared cores (load average
{summary['repetitions_load_average_at_start']:.1f} at their start: other jobs shared the machine); the end-to-end runs
below, in {sum(r['seconds'] for r in (summary.get('end_to_end') or {{}}).values()) / 60:.1f} min (load average
{summary['load_average_at_start']:.1f}).
The deployed program is the simulator's noisy policy (the one the committed sample logs come from); every
repetition plays seeded sessions with it deciding and lets each candidate decide the same turns, never enforced,
scored as `guidebench shadow report` scores them (the dispatched action against the simulator's true label).
The gate: alpha {summary['alpha']}, min_effect 0, a look every {summary['look_every']} labeled decisions
(`evals.sequential`: the empirical-Bernstein confidence sequence of Howard et al. 2021). Monte Carlo errors:
the binomial standard error and the exact (Clopper-Pearson) 95% interval of each share.

## A/A: a candidate that is not better

The candidate is the deployed policy itself with its own random draws (identical in distribution: true
difference {aa['margin']:+.4f} [{aa['margin_ci95'][0]:+.4f}, {aa['margin_ci95'][1]:+.4f}]), looked at after every
50 labeled decisions up to {aa['horizon']:,} ({aa['looks']} looks), {aa['reps']} seeded repetitions:

| test | share of repetitions that ever said "promote" |
|---|---|
| sequential gate, a look every 50 | {_pct(aa['sequential_promoted'])} |
| sequential gate, a look after every decision | {_pct(aa['sequential_promoted_every_decision'])} |
| fixed-n paired t-test (p < 0.05, difference > 0), re-run at every look | {_pct(aa['fixed_n_promoted'])} |

At one look the fixed-n rule promotes a candidate that is no better with probability 2.5% (the positive half of
a two-sided 5% test); re-run at {aa['looks']} looks it does so in {100 * aa['fixed_n_promoted']['share']:.0f}% of
the repetitions, and more the longer one watches (the figure). The sequential gate's guarantee is at most
alpha / 2 = 2.5% for "promote" however many looks; it said "promote" in none of them (the bound is conservative:
the stitched boundary holds for every stream bounded in [-1, 1], these streams use little of it).
An identical deterministic candidate (the same export deciding and shadowing) differs on no turn: its sequence
never leaves 0 and the gate never promotes it (end to end below).

![Share of A/A runs that said promote by each look](../docs/img/shadow_looks.png)

## Candidates that are better or worse

Up to 5,000 labeled decisions (the default `max_decisions`), {c['better']['reps']} repetitions each. The true
margin is the mean difference over the first 2,000 decisions of every repetition, with a 95% interval over
repetitions.

| candidate | what | true margin | promoted | decisions to promote | rejected | decisions to reject |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}

The smaller the gain, the more decisions it takes: {c['better']['margin']:+.3f} was shown after a median of
{c['better']['decisions_to_promote']['median']:,.0f} labeled decisions, {c['learned']['margin']:+.3f} after
{c['learned']['decisions_to_promote']['median']:,.0f}; the worse candidate was never promoted. The confidence
sequence is the price of looking as often as one likes: at the same n it is wider than a fixed-n interval, so a
gain takes longer to show than one test at a sample size fixed in advance would need, but the gate may stop the
first time it clears.

## End to end, once per condition

The real path: `guidebench run-loop --shadow EXPORT --runs 260 --seed 77` (the runtime's `ShadowRunner` writing
`shadow-decisions.jsonl`), `guidebench data import --shadow-module EXPORT`, `guidebench shadow report --module
EXPORT`, in a fresh `GUIDEBENCH_HOME` each (its promotion ledger and MLflow registry).

| condition | deciding | shadow | labeled decisions | verdict | after | difference [CS] at the verdict | ledger | shadow lines joined | wall |
|---|---|---|---:|---|---:|---|---|---|---:|
{chr(10).join(e2e_rows)}

The "better" run's report plot:

![The learned module shadowing the deployed policy](../docs/img/shadow_report.png)
"""


def main() -> None:
    """Measure and write reports/shadow_gate.json (and the figures)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--work", type=Path, default=Path("/tmp/shadow-gate"))
    parser.add_argument("--out", type=Path, default=ROOT / "reports")
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "img",
                        help="where the two figures go (the manual shows them; reports/shadow.md links them)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--no-e2e", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    exports = build_candidates(args.work)
    data = streams(args.reps, args.work, exports, args.processes)
    timing = {"repetitions_wall_s": round(float(data.pop("_wall_s")), 1),
              "repetitions_load_average_at_start": round(float(data.pop("_load_average")), 2)}
    results = {name: analyse(values, AA_HORIZON, fixed_n=True) if name == "aa" else analyse(values, HORIZON)
               for name, values in data.items()}
    e2e = {} if args.no_e2e else end_to_end(args.work, exports)
    summary = {"command": f"python -m benchmarks.shadow_gate --reps {args.reps}", "alpha": ALPHA, "look_every": LOOK,
               "processes": args.processes, **timing,
               "load_average_at_start": load, "seconds": round(time.perf_counter() - started, 1),
               "candidates": results, "end_to_end": e2e}
    (args.out / "shadow_gate.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (args.out / "shadow.md").write_text(render(summary), encoding="utf-8")
    args.figures.mkdir(parents=True, exist_ok=True)
    looks_plot(results, args.figures / "shadow_looks.png")
    if "better" in e2e:
        shutil.copy(args.work / "e2e" / "better" / "report" / "shadow_report.png", args.figures / "shadow_report.png")
    print(json.dumps({name: {k: v for k, v in value.items() if not k.endswith("by_look")}
                      for name, value in results.items()}, indent=1))


if __name__ == "__main__":
    main()
