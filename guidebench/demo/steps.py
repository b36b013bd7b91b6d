"""The demo's steps, in order, over one Runner, and `run_demo` (what `guidebench demo` runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from guidebench.demo.plan import (CASCADE, COMPARED_WITH, COMPILES, FULL, FULLAUTO_BASELINES, PACKAGE_NAME,
                                  PACKAGE_VERSION, PLANNER_BASELINES, QUICK, SHADOW_NAME, SHADOW_PROGRAM, SHADOW_SEED,
                                  SUMMARY_FILE,
                                  gates_text, recipe_settings, recipe_text)
from guidebench.demo.runner import Runner, StepFailed, demo_environment, share_model_files
from guidebench.demo.sample import (choose_fullauto_subset, jsonl, sample_dir, write_experiment_subset,
                                    write_fullauto_subset)
from guidebench.demo.summary import (board_rows, closing_lines, fmt, format_rows, metric_value, now,
                                     quality_and_cost, read_json, ui_command, write_json)
from guidebench.errors import GuidebenchError


@dataclass
class DemoOptions:
    """What `guidebench demo` was asked for."""

    out: Path
    quick: bool = False
    lm: str = "local"
    progress: bool = True
    force: bool = False  # replace OUT when it holds an earlier demo


class Demo:
    """The demo's steps over one Runner; `run()` returns the summary written to OUT/demo_summary.json."""

    def __init__(self, options: DemoOptions, parser: Callable[[], argparse.ArgumentParser],
                 echo: Optional[Callable[[str], None]] = None) -> None:
        self.options = options
        self.parser = parser
        self.plan = QUICK if options.quick else FULL
        self.out = options.out.absolute()
        self.home = self.out / "home"
        self.echo = echo or (_bar_safe_print if options.progress else print)
        self.summary: dict[str, Any] = {}
        self.runner: Optional[Runner] = None

    # --- paths
    def path(self, *parts: str) -> Path:
        """A path under OUT."""
        return self.out.joinpath(*parts)

    def _no_progress(self) -> list[str]:
        return [] if self.options.progress else ["--no-progress"]

    def run(self) -> dict[str, Any]:
        """Run every step into OUT; write and return the summary (also when a step fails, then re-raise).

        OUT follows `guidebench.outputs`, but is written in place: the MLflow store, checkpoints and
        recipes under it record absolute paths, so a folder written aside could not be moved into
        place. It stays marked unfinished until the last step, so a killed demo is never taken for one.
        """
        from guidebench.outputs import claim_output

        try:
            inputs = [sample_dir()]
        except GuidebenchError:
            inputs = []  # the first step says so, naming the step
        output = claim_output(self.out, "demo", force=self.options.force, inputs=inputs)
        with output.in_place():
            return self._run_steps()

    def _run_steps(self) -> dict[str, Any]:
        started = time.perf_counter()
        self.runner = Runner(self.out, self.echo, self.parser)
        plan = self.plan
        self.summary = {
            "status": "running", "mode": plan.name, "lm": self.options.lm, "out": str(self.out),
            "guidebench_home": str(self.home), "started_at": now(), "plan": asdict(plan),
            "estimated_lm_calls": plan.lm_calls(),
        }
        steps: list[tuple[str, Callable[[], None]]] = [
            ("prepare the sample logs", self.step_prepare),
            ("import the Full Auto decision logs", self.step_import_fullauto),
            ("import the experiment logs", self.step_import_experiments),
            ("score the baselines", self.step_baselines),
            *[(f"compile {program} with {optimizer}", lambda p=program, o=optimizer: self.step_compile(p, o))
              for program, optimizer in COMPILES],
            ("search the cascade's threshold and LM program with Optuna", self.step_search),
            ("leaderboard of the Full Auto variants", lambda: self.step_leaderboard("full_auto")),
            ("leaderboard of the planner variants", lambda: self.step_leaderboard("planner")),
            ("export the best compiled Full Auto variant", self.step_export),
            ("promote it through the gates", self.step_promote),
            ("load it with the runtime and drive simulated runs", self.step_loop),
            ("shadow a candidate beside the deployed policy", self.step_shadow),
        ]
        self.echo(f"guidebench demo ({plan.name}): {len(steps)} steps; everything goes to {self.out}")
        self.echo(plan.cost_line(self.options.lm))
        self.echo(f"the commands below run with GUIDEBENCH_HOME={self.home}")
        bar = _step_bar(len(steps), self.options.progress)
        try:
            try:  # before GUIDEBENCH_HOME moves: the usual home is where the model file already is
                shared = share_model_files(self.home)
            except OSError as exc:  # no symlinks here: the model is assembled under OUT/home instead
                self.echo(f"note: cannot share the model folder ({exc}); it is assembled under {self.home}")
                shared = None
            if shared is not None:
                self.summary["model_files"] = str(shared)
            with demo_environment(self.home):
                from guidebench.tracking.runs import default_tracking_uri

                uri = default_tracking_uri()  # MLFLOW_TRACKING_URI when the user set one, else OUT/home/mlflow.db
                self.summary["llama_threads"] = os.environ.get("GUIDEBENCH_LLAMA_THREADS", "default")
                self.summary["load_average_at_start"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
                self.summary["mlflow"] = {"tracking_uri": uri, "ui_command": ui_command(uri)}
                for name, action in steps:
                    bar.set_postfix_str(name[:40])
                    with self.runner.step(name):
                        action()
                    bar.update(1)
            self.summary["status"] = "ok"
        except StepFailed as exc:
            self.summary["status"] = "failed"
            self.summary["error"] = str(exc)
            raise
        except KeyboardInterrupt:
            self.summary["status"] = "interrupted"
            raise
        finally:
            bar.close()
            self.summary["wall_s"] = round(time.perf_counter() - started, 1)
            self.summary["steps"] = [asdict(step) for step in self.runner.steps]
            self.summary["timings_s"] = {step.name: step.seconds for step in self.runner.steps}
            self.summary["cpu_s"] = {step.name: step.cpu_seconds for step in self.runner.steps}
            self.summary["finished_at"] = now()
            self.summary["reports_dir"] = str(self.path("reports"))
            write_json(self.path(SUMMARY_FILE), self.summary)
        return self.summary

    # --- step 1-3: data
    def step_prepare(self) -> None:
        """Copy a subset of the committed sample logs into OUT/logs (the plan's size)."""
        sample = sample_dir()
        subset = choose_fullauto_subset(sample, self.plan)
        decisions = write_fullauto_subset(sample, subset, self.path("logs", "sample", "fullauto"))
        episodes = write_experiment_subset(sample, self.plan.episodes, self.path("logs", "sample", "experiments"),
                                           self.plan.episode_iterations)
        self.fullauto_seed = subset.seed
        self.summary["sample"] = {"source": str(sample), "fullauto_threads": len(subset.threads),
                                  "fullauto_runs": len(subset.runs),
                                  "fullauto_decisions": decisions, "fullauto_split_seed": subset.seed,
                                  "expected_fullauto_splits": subset.expected, "episodes": episodes,
                                  "episode_iterations": self.plan.episode_iterations}
        self.echo(f"copied {len(subset.threads)} threads ({len(subset.runs)} runs, {decisions} decisions) and "
                  f"{episodes} episodes of {sample} "
                  f"to {self.path('logs', 'sample')}")

    def _import(self, kind: str, source: Path, target: Path, seed: int) -> dict[str, Any]:
        self.runner.run(["data", "import", source, "--kind", kind, "--out", target, "--seed", seed,
                         "--progress" if self.options.progress else "--no-progress"])
        info = read_json(target / "dataset.json")
        splits = {name: value["n"] for name, value in info["splits"].items()}
        self.echo(f"dataset {info['dataset_id'][:12]}: " + ", ".join(f"{k} {v}" for k, v in splits.items()))
        return {"dir": str(target), "dataset_id": info["dataset_id"], "splits": splits}

    def step_import_fullauto(self) -> None:
        """Import the Full Auto threads (the seed that gives the plan's split sizes)."""
        info = self._import("fullauto", self.path("logs", "sample", "fullauto"), self.path("data", "fullauto"),
                            self.fullauto_seed)
        expected = self.summary["sample"]["expected_fullauto_splits"]
        if info["splits"] != expected:  # sizes were planned from the sample; the import is the truth
            self.echo(f"note: the import split the threads as {info['splits']}, the plan expected {expected}")
        self.summary.setdefault("datasets", {})["fullauto"] = info
        self.fullauto_data = Path(info["dir"])
        self.test_records = info["splits"]["test"]

    def step_import_experiments(self) -> None:
        """Import the experiment episodes (one planner record per iteration)."""
        info = self._import("experiments", self.path("logs", "sample", "experiments"),
                            self.path("data", "experiments"), 0)
        self.summary.setdefault("datasets", {})["experiments"] = info
        self.planner_data = Path(info["dir"])

    # --- step 4: baselines
    def step_baselines(self) -> None:
        """Score the rule baselines and the logged decisions on both test splits (no LM)."""
        report = self.path("reports", "baselines.md")
        self.runner.run(["baselines", "--fullauto", self.fullauto_data, "--experiments", self.planner_data,
                         "--fullauto-programs", ",".join(FULLAUTO_BASELINES),
                         "--planner-programs", ",".join(PLANNER_BASELINES), "--out", report,
                         *self._no_progress()])
        self.summary.setdefault("reports", {})["baselines"] = str(report)

    # --- steps 5-7: compiles
    def step_compile(self, program: str, optimizer: str) -> None:
        """Compile a program with an optimizer; it is evaluated on dev and test and compared on test with a
        program already on the board (the deployed policy, the rule planner)."""
        family = program.split(".", 1)[0]
        settings = recipe_settings(optimizer, self.plan, family)
        recipe = self.path("recipes", f"{program}-{optimizer}.toml")
        recipe.parent.mkdir(parents=True, exist_ok=True)
        recipe.write_text(recipe_text(optimizer, settings), encoding="utf-8")
        out = self.path("compiles", f"{program}-{optimizer}")
        data = self.fullauto_data if family == "full_auto" else self.planner_data
        argv = ["compile", "--program", program, "--optimizer", optimizer, "--data", data, "--recipe", recipe,
                "--lm", self.options.lm, "--seed", 0, "--baseline", COMPARED_WITH[family], "--out", out,
                *self._no_progress()]
        if family == "planner":
            argv += ["--eval-limit", self.plan.planner_eval_limit]
        elif program == CASCADE:  # its LM answers some dev turns: a seeded subset of dev is enough to show it
            argv += ["--dev-limit", self.plan.lm_dev_limit]
        self.runner.run(argv)
        summary = read_json(out / "compile.json")
        test = summary.get("test") or {}
        entry = {"family": family, "program": program, "optimizer": optimizer, "settings": settings,
                 "dir": str(out), "mlflow_run_id": summary.get("mlflow_run_id"),
                 "dev_objective": metric_value(summary.get("dev")), "test_objective": metric_value(test),
                 "test_records": (test.get("objective") or {}).get("n"), "test_lm_share": metric_value(test, "lm_share"),
                 "compared_with": COMPARED_WITH[family],
                 "baseline_test_objective": metric_value((summary.get("baseline") or {}).get("test"))}
        self.summary.setdefault("compiles", []).append(entry)
        self.echo(f"{program} + {optimizer}: test objective {fmt(entry['test_objective'])} "
                  f"({COMPARED_WITH[family]} {fmt(entry['baseline_test_objective'])}), dev "
                  f"{fmt(entry['dev_objective'])}, share of test decisions sent to the LM "
                  f"{fmt(entry['test_lm_share'], 2)}")

    def compiles(self, family: str) -> list[dict[str, Any]]:
        """The compiles of one family, in the order they ran."""
        return [c for c in self.summary.get("compiles", []) if c["family"] == family]

    # --- step 8: search
    def step_search(self) -> None:
        """A small Optuna study over the cascade's threshold and LM program, its demos and temperature, on dev."""
        out = self.path("search", "full_auto")
        low, high = self.plan.search_demos
        scored = min(self.summary["datasets"]["fullauto"]["splits"]["dev"], self.plan.lm_dev_limit)
        argv = ["search", "--program-family", "full_auto", "--data", self.fullauto_data,
                "--trials", self.plan.search_trials, "--programs", CASCADE, "--optimizers", "labeled_fewshot",
                "--demos", f"{low}:{high}", "--temperature", "0:0.5", "--dev-limit", scored,
                "--minibatch-size", max(1, scored), "--no-test", "--lm", self.options.lm,
                "--study", f"demo-{self.plan.name}", "--out", out, *self._no_progress()]
        self.runner.run(argv)
        trials = read_json(out / "trials.json")
        self.summary["search"] = {"dir": str(out), "study": trials.get("study"), "best_trial": trials.get("best_trial"),
                                  "best_dev_objective": trials.get("best_value"),
                                  "best_params": trials.get("best_params"), "dev_records": scored,
                                  "trials": [{"number": t.get("number"), "state": t.get("state"),
                                              "value": t.get("value"), "params": t.get("params")}
                                             for t in trials.get("trials", [])]}
        self.echo(f"search: best trial {trials.get('best_trial')} with dev objective "
                  f"{fmt(trials.get('best_value'))} on {scored} dev records: {trials.get('best_params')}")

    # --- steps 9-10: leaderboards
    def step_leaderboard(self, family: str) -> None:
        """Rank the baselines and the compiled variants on one test split."""
        compiles = self.compiles(family)
        if not compiles:
            raise GuidebenchError(f"no {family} compile to rank")
        board_dir = self.path("reports", f"leaderboard-{family}")
        data = self.fullauto_data if family == "full_auto" else self.planner_data
        baselines = FULLAUTO_BASELINES if family == "full_auto" else PLANNER_BASELINES
        # Compiled variants join with the results their compile scored on exactly this split (`--results`):
        # no LM call is repeated, and the board refuses any other split.
        results = [Path(c["dir"]) / "test" for c in compiles]
        argv = ["leaderboard", "--data", data, "--split", "test", "--programs", ",".join(baselines),
                "--results", *results, "--out", board_dir]
        if family == "planner":
            argv += ["--eval-limit", self.plan.planner_eval_limit]
        if self.options.progress:
            argv.append("--progress")
        self.runner.run(argv)
        board = read_json(board_dir / "leaderboard.json")
        rows = board_rows(board)
        entry = {"dir": str(board_dir), "json": str(board_dir / "leaderboard.json"),
                 "markdown": str(board_dir / "leaderboard.md"), "html": str(board_dir / "leaderboard.html"),
                 "split": board.get("split"), "n_records": board.get("n_records"), "champion": board.get("champion"),
                 "rows": rows}
        self.summary.setdefault("leaderboards", {})[family] = entry
        for line in format_rows(rows):
            self.echo(line)

    # --- step 11: export
    def ranked_compiles(self) -> list[dict[str, Any]]:
        """The compiled Full Auto variants in leaderboard order, with their rank and row name."""
        rows = self.summary["leaderboards"]["full_auto"]["rows"]
        by_results = {str(Path(c["dir"]) / "test"): c for c in self.compiles("full_auto")}
        ranked = []
        for row in rows:
            source = str(row.get("source") or "")
            ranked += [{**c, "rank": row["rank"], "name": row["name"]} for d, c in by_results.items()
                       if source.endswith(d)]
        if not ranked:
            raise GuidebenchError("no compiled Full Auto variant is on the leaderboard")
        return ranked

    def step_export(self) -> None:
        """Export the best compiled Full Auto variant on the board, from its MLflow compile run."""
        target = self.path("export", PACKAGE_NAME)
        target.parent.mkdir(parents=True, exist_ok=True)
        winner = self.ranked_compiles()[0]
        if not winner.get("mlflow_run_id"):
            raise GuidebenchError(f"the best compiled Full Auto variant {winner['name']} has no MLflow run id to "
                                  "export from")
        self.runner.run(["export", winner["mlflow_run_id"], "--name", PACKAGE_NAME, "--version", PACKAGE_VERSION,
                         "--out", target, "--force", "--tag", "demo", "--tag", winner["optimizer"]])
        manifest = read_json(target / "manifest.json")
        self.summary["export"] = {
            "dir": str(target), "package": f"{manifest.get('name')}@{manifest.get('version')}", "entry": manifest.get("entry"),
            "kind": manifest.get("kind"), "optimizer": winner["optimizer"], "leaderboard_rank": winner["rank"],
            "leaderboard_name": winner["name"], "mlflow_run_id": winner["mlflow_run_id"],
            "uses_lm": manifest.get("uses_lm"), "demo_selection": manifest.get("demo_selection"),
            "load": f"from runtime import load_frozen; module = load_frozen({str(target)!r})",
            "board_row": next(row for row in self.summary["leaderboards"]["full_auto"]["rows"]
                              if row["name"] == winner["name"]),
        }
        self.summary["export_dir"] = str(target)
        self.echo(f"exported {winner['name']} (rank {winner['rank']} on the board) to {target}")
        self.echo("  " + quality_and_cost(self.summary["export"]["board_row"]))

    # --- step 12: promotion
    def step_promote(self) -> None:
        """Replay the module and the champion (none yet: the logged decisions) on test; apply the gates."""
        gates = self.path("gates.toml")
        gates.write_text(gates_text(self.test_records), encoding="utf-8")
        module = Path(self.summary["export_dir"])
        code = self.runner.run(["promote", module, "--data", self.fullauto_data, "--split", "test", "--gates", gates,
                                "--lm", self.options.lm], ok=(0, 1))
        ledger = self.home / "promotions.jsonl"
        records = list(jsonl(ledger)) if ledger.is_file() else []
        last = records[-1] if records else {}
        checks = [{"gate": c.get("gate"), "passed": c.get("passed"), "reason": c.get("reason")}
                  for c in last.get("checks") or []]
        self.summary["promotion"] = {"outcome": last.get("outcome", "unknown"), "promoted": code == 0,
                                     "gates": str(gates), "ledger": str(ledger), "checks": checks,
                                     "reasons": last.get("reasons", [])}
        self.echo(f"promotion: {last.get('outcome', 'unknown')}")
        for check in checks:
            self.echo(f"  [{'pass' if check['passed'] else 'FAIL'}] {check['reason']}")
        if code != 0:
            from guidebench.release.gates import load_gates

            needed = load_gates(gates).min_records
            enough = self.test_records >= needed
            self.echo("  the module stays a candidate; the demo goes on with it "
                      + ("(the gates judged, nothing broke)" if enough else
                         f"(not enough evidence to promote: n = {self.test_records}; at least {needed} needed)"))

    # --- step 13: runtime + closed loop
    def step_loop(self) -> None:
        """Load the export with `runtime.load_frozen`, decide one held-out turn, then let it drive simulated runs."""
        self.summary["runtime"] = runtime_check(Path(self.summary["export_dir"]), self.fullauto_data,
                                                self.options.lm)
        decision = self.summary["runtime"]
        self.echo(f"runtime.load_frozen: {decision['module']}; held-out turn {decision['record_id']}: enforced "
                  f"{decision['enforced_action']} (model {decision['model_action']}, label {decision['label']})")
        logs = self.path("loop", "logs")
        self.runner.run(["run-loop", "--module", self.summary["export_dir"], "--runs", self.plan.loop_runs,
                         "--seed", 7, "--max-turns", self.plan.loop_max_turns, "--lm", self.options.lm,
                         "--out", logs])
        dataset = self.path("loop", "data")
        self.runner.run(["data", "import", logs, "--kind", "fullauto", "--out", dataset, "--no-progress"])
        info = read_json(dataset / "dataset.json")
        actions = Counter(line.get("action") for line in jsonl(logs / "fullauto-decisions.jsonl"))
        self.summary["run_loop"] = {"logs": str(logs), "dataset": str(dataset), "runs": self.plan.loop_runs,
                                    "decisions": sum(actions.values()), "enforced_actions": dict(actions),
                                    "reimported_records": sum(v["n"] for v in info["splits"].values())}
        self.echo(f"run-loop: {sum(actions.values())} decisions ({dict(actions)}), read back as dataset "
                  f"{info['dataset_id'][:12]}")


    # --- step 14: shadow
    def step_shadow(self) -> None:
        """Let a candidate decide beside the simulator's deployed policy (never enforced), import the logs with its
        shadow decisions, and judge it with the sequential gate (no LM call)."""
        module, logs, data = self.path("export", SHADOW_NAME), self.path("shadow", "logs"), self.path("shadow", "data")
        report = self.path("reports", "shadow")
        self.runner.run(["export", "--program", SHADOW_PROGRAM, "--name", SHADOW_NAME, "--version", PACKAGE_VERSION,
                         "--out", module, "--force", "--tag", "demo"])
        self.runner.run(["run-loop", "--shadow", module, "--runs", self.plan.shadow_runs, "--seed", SHADOW_SEED,
                         "--out", logs])
        self.runner.run(["data", "import", logs, "--kind", "fullauto", "--shadow-module", module, "--out", data,
                         "--no-progress"])
        self.runner.run(["shadow", "report", "--module", module, "--data", data, "--out", report])
        found = read_json(report / "shadow_report.json")
        evidence = found["evidence"]
        self.summary["shadow"] = {"module": str(module), "logs": str(logs), "dataset": str(data),
                                  "report": str(report), "plot": str(report / "shadow_report.png"),
                                  "verdict": evidence["verdict"], "n": evidence["n"],
                                  "decided_at": evidence["decided_at"], "difference": evidence["difference"],
                                  "cs": [evidence["cs_low"], evidence["cs_high"]], "reason": found["reason"],
                                  "ledger": (found["ledger"] or {}).get("to_state")}
        self.echo(f"shadow gate on {SHADOW_PROGRAM}: {evidence['verdict']} ({found['reason']}); "
                  f"{evidence['n']} labeled decisions paired; plot {report / 'shadow_report.png'}")


def runtime_check(module_dir: Path, data: Path, lm_spec: str) -> dict[str, Any]:
    """Load a Full Auto export with the runtime loader and decide the first held-out test turn with it."""
    from evals.data import load_records
    from runtime.frozen.loader import FrozenModuleError, load_frozen

    from guidebench.lm.factory import make_lm

    lm = make_lm(lm_spec)
    try:
        module = load_frozen(module_dir, lm=lm)
        how = "load_frozen(DIR)"
    except FrozenModuleError:
        # A module whose logic is code (not one predictor) needs the installed program: the runtime's documented path.
        import programs

        manifest = read_json(module_dir / "manifest.json")
        module = load_frozen(module_dir, program=programs.spec(manifest["entry"]).factory,
                             inputs=programs.decision_inputs, lm=lm)
        how = "load_frozen(DIR, program=<installed factory>)"
    record = load_records(data, "test")[0]
    enforced, audit, _ = module(record.summary, record.config)
    model_action = getattr(audit, "original_action", None) or enforced.action
    return {"module": repr(module), "how": how, "record_id": record.record_id, "enforced_action": enforced.action,
            "model_action": model_action, "guardrail_rule": getattr(audit, "rule", None),
            "label": record.label.action if record.label else None}


def _bar_safe_print(text: str) -> None:
    """Print a line without tearing the progress bars."""
    from tqdm.auto import tqdm

    tqdm.write(text, file=sys.stdout)


def _step_bar(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="guidebench demo", unit="step", position=0, leave=True, disable=not enabled,
                file=sys.stderr, bar_format="{desc}: {n_fmt}/{total_fmt} steps |{bar}| {elapsed} {postfix}")


def run_demo(options: DemoOptions, parser: Callable[[], argparse.ArgumentParser],
             echo: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Run the demo (its commands parsed by `parser()`, the CLI's) and print its closing summary; returns it."""
    demo = Demo(options, parser, echo=echo)
    summary = demo.run()
    for line in closing_lines(summary):
        demo.echo(line)
    return summary
