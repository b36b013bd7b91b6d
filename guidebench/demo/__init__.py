"""`guidebench demo`: the whole story on the committed sample logs, one CLI command at a time.

import the sample logs -> score the baselines -> fit a decision model on the logs (`full_auto.learned`),
compile a cascade that hands the turns its model is unsure of to the embedded model
(`full_auto.cascade`) and a planner with it -> an Optuna search over the cascade's threshold and LM
program -> leaderboards -> export the best compiled Full Auto variant -> promotion gates -> load it
with the runtime and let it drive a few simulated turns.

Every step runs a real `guidebench` command in this process (printed as it would be typed, its
output kept in `OUT/logs/`), so the demo shows what to type and never takes a private shortcut.
Everything the demo writes stays under OUT, the workbench state included
(`GUIDEBENCH_HOME=OUT/home`: MLflow store, DSPy cache, checkpoints, promotion ledger); only the
assembled model file is shared with the usual home, so it is not rebuilt for every demo.

Sizes: the embedded model costs about a second per compact decision and several per planner
directive on two cores, so each plan fixes what the LM sees (see `QUICK` and `FULL`): the trained
model and the rules read every record, the cascade asks the LM only about the turns its model is
unsure of, and the planner's LM steps score a seeded subset.

The package: `plan` (the QUICK and FULL plans, what is compiled, the recipe and gates files), `sample` (the
sample logs and the subset a plan copies), `runner` (one command per step, in-process, and the environment),
`steps` (the steps in order, `run_demo`), `summary` (what is read back and printed). Its public names are
re-exported here lazily (`runtime._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.demo.plan import (
        SUMMARY_FILE, FULLAUTO_BASELINES, PLANNER_BASELINES, COMPILES, CASCADE, PACKAGE_NAME, Plan, QUICK,
        FULL, gates_text, recipe_settings, recipe_text
    )
    from guidebench.demo.sample import (
        MAX_LABEL_SHARE, sample_dir, choose_fullauto_subset, write_fullauto_subset, write_experiment_subset
    )
    from guidebench.demo.runner import Runner, StepFailed, share_model_files
    from guidebench.demo.summary import board_rows, format_rows, quality_and_cost, closing_lines
    from guidebench.demo.steps import Demo, DemoOptions, run_demo

_MODULES: dict[str, tuple[str, ...]] = {
    "plan": ("SUMMARY_FILE", "FULLAUTO_BASELINES", "PLANNER_BASELINES", "COMPILES", "CASCADE", "PACKAGE_NAME",
        "Plan", "QUICK", "FULL", "gates_text", "recipe_settings", "recipe_text"),
    "sample": ("MAX_LABEL_SHARE", "sample_dir", "choose_fullauto_subset", "write_fullauto_subset",
        "write_experiment_subset"),
    "runner": ("Runner", "StepFailed", "share_model_files"),
    "summary": ("board_rows", "format_rows", "quality_and_cost", "closing_lines"),
    "steps": ("Demo", "DemoOptions", "run_demo"),
}
_WHERE: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
