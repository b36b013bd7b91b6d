"""The demo's plans (how much data and LM work each step gets), what it compiles, and the files it writes
for the commands (recipes, gates).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional


SUMMARY_FILE = "demo_summary.json"
FULLAUTO_BASELINES: tuple[str, ...] = ("logged", "rule", "full_auto.always_continue")
PLANNER_BASELINES: tuple[str, ...] = ("planner.rules",)
# What the demo compiles, in order: (program, optimizer). The trained model costs no LM call; the cascade's
# LM program (a compact one) sees only the turns the model hands over; the planner is the compact one.
COMPILES: tuple[tuple[str, str], ...] = (("full_auto.learned", "fit"), ("full_auto.cascade", "labeled_fewshot"),
                                         ("planner.compact", "labeled_fewshot"))
CASCADE = "full_auto.cascade"
# Each compile is compared on test with a program already on the board: no LM call is spent on a baseline.
COMPARED_WITH = {"full_auto": "logged", "planner": "planner.rules"}
PACKAGE_NAME = "fullauto-demo"
PACKAGE_VERSION = "1.0.0"
# The shadowed candidate: always continue, a program known to be worse than the deployed policy, so that a quick run
# reaches a verdict (reject, after about 700 decisions); a gain of a point or two needs thousands (reports/shadow.md).
SHADOW_PROGRAM = "full_auto.always_continue"
SHADOW_NAME = "fullauto-always-continue"
SHADOW_SEED = 11
# The share of turns a cascade fitted on the demo's train split hands to its LM at its default threshold
# (measured on the sample: about 0.2); only the estimate of LM calls printed at the start uses it.
CASCADE_LM_SHARE = 0.25


@dataclass(frozen=True)
class Plan:
    """How much data and LM work each step of the demo gets."""

    name: str
    fullauto_threads: int  # whole threads copied, shortest turn summaries first (at most the sample's)
    dev_records: tuple[int, int]  # Full Auto dev split (the import seed is chosen to give these sizes)
    test_records: tuple[int, int]  # Full Auto test split: compiles, leaderboard and promotion score all of it
    episodes: int  # experiment episodes copied from the sample
    episode_iterations: Optional[int]  # keep only the first iterations of each episode (None: whole episodes)
    planner_eval_limit: int  # planner records per split for the planner compile and board (seeded subset)
    fit_C: tuple[float, ...]  # the trained model's regularization strengths tried (cross-validated on train + dev)
    lm_demos: int  # labeled demos per prompt of the cascade's LM program
    lm_dev_limit: int  # dev records the cascade's compile and each search trial score (a seeded subset)
    planner_demos: int
    search_trials: int
    search_demos: tuple[int, int]
    loop_runs: int
    loop_max_turns: int
    estimated_minutes: float  # measured on 2 idle cores with the embedded model, see docs/demo.md
    shadow_runs: int = 90  # simulated sessions in which a candidate shadows the deployed policy (no LM)

    def cost_line(self, lm: str) -> str:
        """The demo's one line on its LM and cost: the plan's calls, their tokens and the measured minutes."""
        from guidebench.lm.cost import LOCAL_SPEED, describe_lm, lm_speed

        calls = self.lm_calls()
        speed = lm_speed(lm)
        minutes, basis = (self.estimated_minutes, "as measured on 2 idle cores") if speed is LOCAL_SPEED else \
            (calls * speed["seconds_per_call"] / 60, f"{speed['seconds_per_call']:g} s/call")
        return (f"LM {describe_lm(lm)}: about {calls} calls, ~{calls * DEMO_TOKENS_PER_CALL:,} tokens, ~{minutes:.1f} "
                f"min ({basis}; cached calls are free) for the {self.name} demo; each step prints "
                "its own estimate")

    def lm_calls(self) -> int:
        """A rough count of the LM calls the plan makes (no cache): the cascade's share of its turns, the planner."""
        dev, test = min(self.dev_records[1], self.lm_dev_limit), self.test_records[1]
        # the cascade's compile (dev and test), its search trials (dev), its promotion if it is exported (test)
        fullauto = CASCADE_LM_SHARE * (dev + 2 * test + self.search_trials * dev)
        planner = 2 * self.planner_eval_limit  # one compile, scored on dev and test
        return math.ceil(fullauto) + planner + 1 + self.loop_runs * self.loop_max_turns


# Tokens of one demo call on the embedded model, prompt and answer: ~1,200 for a compact Full Auto decision of the
# cascade (most of the calls), ~2,300 for a planner directive (reports/bench.md, `benchmarks/bench_lm.py`).
DEMO_TOKENS_PER_CALL = 1_400
# Quick: a test split of at least 20 records, so the promotion gates can judge (they need 20 paired records),
# and a train split of about 200 for the trained model. A planner prompt grows by ~55 tokens per line of the
# packet's log tail (up to 20 lines), so early iterations cost about half of late ones: the first 6 of each
# episode are kept.
QUICK = Plan(name="quick", fullauto_threads=30, dev_records=(10, 25), test_records=(20, 30), episodes=8,
             episode_iterations=6, planner_eval_limit=1, fit_C=(0.5, 2.0), lm_demos=2, lm_dev_limit=6,
             planner_demos=1, search_trials=2, search_demos=(1, 2), loop_runs=1, loop_max_turns=2,
             estimated_minutes=3.0)
# Full: every thread of the sample (the whole split sizes of its default import).
FULL = Plan(name="full", fullauto_threads=10_000, dev_records=(100, 250), test_records=(150, 300), episodes=24,
            episode_iterations=None, planner_eval_limit=2, fit_C=(0.5, 2.0, 8.0), lm_demos=3, lm_dev_limit=40,
            planner_demos=1, search_trials=3, search_demos=(1, 3), loop_runs=2, loop_max_turns=5,
            estimated_minutes=20.0, shadow_runs=150)


def gates_text(n_records: int) -> str:
    """The demo's promotion gates: the defaults, unrelaxed. On too few records the gates say so ("not enough
    evidence to promote") rather than pass on noise."""
    from evals.paired import min_records_for

    from guidebench.release.gates import GatesConfig

    defaults = GatesConfig()
    return (
        "# Promotion gates of `guidebench demo` (guidebench.release.gates documents every key).\n"
        f"# The defaults, unrelaxed: at least {defaults.min_records} paired records (a paired test on n records "
        f"cannot reach p < {defaults.max_p_value:g} below\n"
        f"# {min_records_for(defaults.max_p_value)} records: 2/2^n), and the demo's test split has {n_records}. "
        "The gates judge the candidate\n"
        "# against the deployed policy; whatever they decide, the demo then loads and runs the candidate.\n"
        f"min_records = {defaults.min_records}\n"
        f"max_p_value = {defaults.max_p_value:g}\n"
        f"min_objective_delta = {defaults.min_objective_delta:g}\n"
        f"max_cost_ratio = {defaults.max_cost_ratio:g}\n"
        "[max_increase]\n"
        + "".join(f"{name} = {value!r}\n" for name, value in sorted(defaults.not_worse("full_auto").items()))
    )


def recipe_settings(optimizer: str, plan: Plan, family: str) -> dict[str, Any]:
    """The settings the demo's recipe file sets for an optimizer (every other setting is the default)."""
    if optimizer == "fit":  # a small grid: every point is one fit of the linear model
        return {"C": list(plan.fit_C), "class_weight": ["none"]}
    return {"k": plan.lm_demos if family == "full_auto" else plan.planner_demos}


def recipe_text(optimizer: str, settings: dict[str, Any]) -> str:
    """A recipe file with the given settings of an optimizer (other settings: defaults)."""
    lines = "".join(f"{name} = {json.dumps(value)}\n" for name, value in settings.items())
    return (f"# Written by `guidebench demo`: {optimizer} with the settings below; prompt length dominates the\n"
            f"# embedded model's cost. Every other setting is the default (`guidebench optimizers --show {optimizer}`).\n"
            f'optimizer = "{optimizer}"\n\n[settings]\n{lines}')
