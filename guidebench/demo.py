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
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import os
import shlex
import shutil
import sys
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from guidebench.errors import GuidebenchError

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
ORPHAN_RUN = "unknown"  # the writer's run id of decisions made after their run state was dropped
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
    fit_C: tuple[float, ...]  # the trained model's regularization strengths tried (fit on train, chosen on dev)
    lm_demos: int  # labeled demos per prompt of the cascade's LM program
    lm_dev_limit: int  # dev records the cascade's compile and each search trial score (a seeded subset)
    planner_demos: int
    search_trials: int
    search_demos: tuple[int, int]
    loop_runs: int
    loop_max_turns: int
    estimated_minutes: float  # measured on 2 idle cores with the embedded model, see docs/demo.md

    def cost_line(self, lm: str) -> str:
        """The demo's one line on its LM and cost: the plan's calls, their tokens and the measured minutes."""
        from guidebench.cost import LOCAL_SPEED, describe_lm, lm_speed

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
            estimated_minutes=20.0)


# ----- the sample logs -----------------------------------------------------------------------------

def sample_dir() -> Path:
    """The committed sample logs: `datasets/sample` of the clone this package runs from, else of the cwd."""
    for root in (Path(__file__).resolve().parents[1], Path.cwd()):
        folder = root / "datasets" / "sample"
        if (folder / "fullauto" / "fullauto-decisions.jsonl").is_file() and (folder / "experiments").is_dir():
            return folder
    raise GuidebenchError("the committed sample logs (datasets/sample/) were not found: run the demo from a clone "
                          "of the repository")


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


@dataclass
class FullAutoSubset:
    """Which sample threads the demo imports (with their runs), and the split seed that gives its sizes."""

    threads: list[str]
    runs: list[str]  # every run of those threads (orphan decisions of run "unknown" come with their thread)
    seed: int
    expected: dict[str, int]  # records per split, as the import will assign them


def _label_key(line: dict[str, Any]) -> tuple[Any, Any, Any]:
    # (run, sequence, turn): orphan decisions all have run "unknown" and sequence 0, their turns differ
    return line.get("run_id"), line.get("sequence_id"), line.get("turn_id")


# A test split the board can separate policies on: at least three labeled actions, none above this share (the
# whole sample's test split: continue 0.67). On a split of continues, always-continue ties every good policy.
MAX_LABEL_SHARE = 0.7


def _mixed(labels: Counter) -> bool:
    total = sum(labels.values())
    return len(labels) >= 3 and max(labels.values()) <= MAX_LABEL_SHARE * total


def choose_fullauto_subset(sample: Path, plan: Plan) -> FullAutoSubset:
    """Whole threads and an import seed whose dev/test splits have the plan's sizes, the test labels mixed.

    The import splits by thread (a thread's runs and its labels belong together, `evals.data.group_of`), so
    the demo copies whole threads, those with the shortest turn summaries first: short summaries make short
    prompts for the LM steps.
    """
    from evals.data import SPLITS, assign_splits

    counts: Counter = Counter()
    chars: Counter = Counter()
    runs: dict[str, set[str]] = {}
    thread_of: dict[tuple[Any, Any, Any], str] = {}
    with (sample / "fullauto" / "fullauto-decisions.jsonl").open(encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            line = json.loads(text)
            thread = line.get("thread_id") or line["run_id"]  # the import's group
            counts[thread] += 1
            chars[thread] += len(text)
            runs.setdefault(thread, set()).add(line["run_id"])
            thread_of[_label_key(line)] = thread
    labels: dict[str, Counter] = {}
    labels_file = sample / "fullauto" / "labels.jsonl"
    if labels_file.is_file():
        for line in _jsonl(labels_file):
            thread = thread_of.get(_label_key(line))
            if thread is not None:
                labels.setdefault(thread, Counter())[str((line.get("label") or {}).get("action"))] += 1
    threads = sorted(counts, key=lambda thread: (chars[thread] / counts[thread], thread))
    size = min(plan.fullauto_threads, len(threads))
    # Deterministic search: windows of the threads by summary length, then import seeds; the first fit wins.
    for offset in range(len(threads) - size + 1):
        subset = threads[offset:offset + size]
        for seed in range(64):
            assignment = assign_splits(subset, seed)
            per_split = {name: sum(counts[t] for t in subset if assignment[t] == name) for name in SPLITS}
            test_labels = sum((labels.get(t, Counter()) for t in subset if assignment[t] == "test"), Counter())
            if (plan.dev_records[0] <= per_split["dev"] <= plan.dev_records[1]
                    and plan.test_records[0] <= per_split["test"] <= plan.test_records[1]
                    and (not labels or _mixed(test_labels))):
                return FullAutoSubset(threads=sorted(subset), runs=sorted(set().union(*(runs[t] for t in subset))),
                                      seed=seed, expected=per_split)
    raise GuidebenchError(f"no {size} sample threads give a dev split of {plan.dev_records} and a test split of "
                          f"{plan.test_records} records; the sample logs changed?")


def write_fullauto_subset(sample: Path, subset: FullAutoSubset, out: Path) -> int:
    """Copy the chosen threads of the sample workspace log (same layout); returns the decisions copied."""
    source = sample / "fullauto"
    threads = set(subset.threads)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    kept: set[tuple[Any, Any, Any]] = set()
    copied = 0
    with (source / "fullauto-decisions.jsonl").open(encoding="utf-8") as src, \
            (out / "fullauto-decisions.jsonl").open("w", encoding="utf-8") as dst:
        for line in src:
            item = json.loads(line) if line.strip() else None
            if item is not None and (item.get("thread_id") or item.get("run_id")) in threads:
                dst.write(line)
                kept.add(_label_key(item))
                copied += 1
    # Raw lines and labels of a run go with it (unmatched ones too, as in the sample); the orphan run
    # "unknown" holds decisions of every thread, so its lines go with their decision only.
    whole_runs = set(subset.runs) - {ORPHAN_RUN}
    for name in ("fullauto-decisions-raw.jsonl", "labels.jsonl"):
        if not (source / name).is_file():
            continue
        with (source / name).open(encoding="utf-8") as src, (out / name).open("w", encoding="utf-8") as dst:
            for line in src:
                item = json.loads(line) if line.strip() else None
                if item is not None and (item.get("run_id") in whole_runs or _label_key(item) in kept):
                    dst.write(line)
    for run_id in subset.runs:
        for suffix in (".json", "_events.jsonl"):
            path = source / "runs" / f"{run_id}{suffix}"
            if path.is_file():
                shutil.copy2(path, out / "runs" / path.name)
    return copied


def write_experiment_subset(sample: Path, episodes: int, out: Path, iterations: Optional[int] = None) -> int:
    """Copy the first episodes of the sample experiment logs (optionally their first iterations only)."""
    folders = sorted(p for p in (sample / "experiments").iterdir() if (p / "log.jsonl").is_file())[:episodes]
    for folder in folders:
        target = out / folder.name
        if iterations is None:
            shutil.copytree(folder, target)
            continue
        # An episode cut after N iterations is the log as it stood then: every packet is rebuilt from
        # the entries before it, so the kept records are exactly those of the whole episode.
        target.mkdir(parents=True)
        lines = (folder / "log.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if line.strip()][:iterations]
        (target / "log.jsonl").write_text("".join(kept), encoding="utf-8")
        ids = {json.loads(line).get("iteration_id") for line in kept}
        for side in sorted(folder.glob("*.jsonl")):
            if side.name == "log.jsonl":
                continue
            with side.open(encoding="utf-8") as src, (target / side.name).open("w", encoding="utf-8") as dst:
                for line in src:
                    item = json.loads(line) if line.strip() else None
                    if item is not None and ("iteration_id" not in item or item["iteration_id"] in ids):
                        dst.write(line)  # header lines (no iteration id) and the kept iterations
    return len(folders)


# ----- running the steps ---------------------------------------------------------------------------

def command_text(argv: Sequence[str]) -> str:
    """The command as a user types it."""
    return "guidebench " + shlex.join(str(a) for a in argv)


@dataclass
class StepRecord:
    """One step of the demo: what ran, how long, how it ended."""

    name: str
    commands: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # CPU time of this process: what the step costs on an idle machine
    status: str = "pending"
    log: str = ""


class StepFailed(GuidebenchError):
    """A demo step failed; the message names the step."""


class Runner:
    """Runs CLI commands in-process, echoes them, keeps their output in a log per step."""

    def __init__(self, out: Path, echo: Callable[[str], None], parser: Callable[[], argparse.ArgumentParser]) -> None:
        self.echo = echo
        self.parser = parser  # the CLI's `build_parser`, passed down by the command (the demo sits below it)
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.steps: list[StepRecord] = []
        self.current: Optional[StepRecord] = None

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[StepRecord]:
        """Time one step; any failure inside becomes a one-line StepFailed naming it."""
        record = StepRecord(name=name, log=str(self.logs / f"{len(self.steps) + 1:02d}-{_slug(name)}.log"))
        self.steps.append(record)
        self.current = record
        self.echo(f"\n== step {len(self.steps)}: {name}")
        started, cpu = time.perf_counter(), time.process_time()
        try:
            yield record
            record.status = "ok"
        except StepFailed:
            record.status = "failed"
            raise
        except KeyboardInterrupt:
            record.status = "interrupted"
            raise
        except GuidebenchError as exc:
            record.status = "failed"
            raise StepFailed(f"demo step '{name}' failed: {exc}") from None
        except Exception as exc:  # an internal error still ends the demo with one line, the traceback in the log
            import traceback

            record.status = "failed"
            with open(record.log, "a", encoding="utf-8") as handle:
                handle.write(traceback.format_exc())
            raise StepFailed(f"demo step '{name}' failed: {type(exc).__name__}: {exc} (traceback in {record.log})"
                             ) from None
        finally:
            record.seconds = round(time.perf_counter() - started, 2)
            record.cpu_seconds = round(time.process_time() - cpu, 2)
            self.current = None

    def run(self, argv: Sequence[str], *, ok: Sequence[int] = (0,)) -> int:
        """Run one `guidebench` command in-process; its stdout goes to the step's log."""
        record = self.current
        assert record is not None, "commands run inside a step"
        argv = [str(a) for a in argv]
        text = command_text(argv)
        record.commands.append(text)
        self.echo(f"$ {text}")
        refused = io.StringIO()
        try:
            with contextlib.redirect_stderr(refused):
                args = self.parser().parse_args(argv)
        except SystemExit:  # argparse refused the arguments: a bug of the demo, named as such
            last = (refused.getvalue().strip().splitlines() or ["no message"])[-1]
            raise GuidebenchError(f"`{text}` was refused by the CLI: {last}") from None
        # Line-buffered, so `tail -f` on the log follows a long step.
        with open(record.log, "a", encoding="utf-8", buffering=1) as log, contextlib.redirect_stdout(log):
            log.write(f"$ {text}\n")
            try:
                code = int(args.func(args) or 0)
            except GuidebenchError as exc:
                raise GuidebenchError(f"{exc} (command: {text}; output in {record.log})") from None
        if code not in ok:
            raise GuidebenchError(f"`{text}` exited with {code}; output in {record.log}")
        return code


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")[:60]


# ----- helpers on the outputs of the commands -------------------------------------------------------

def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuidebenchError(f"{path}: expected output is missing or unreadable: {exc}") from None


def _metric(metrics: dict[str, Any], name: str = "objective") -> Optional[float]:
    value = (metrics or {}).get(name)
    if isinstance(value, dict):
        value = value.get("value")
    return None if value is None else float(value)


def board_rows(board: dict[str, Any], top: Optional[int] = None) -> list[dict[str, Any]]:
    """Leaderboard rows reduced to what a summary needs: rank, name, objective with interval, comparison
    (difference, p, records compared, test, plain-words verdict), the share of decisions sent to an LM and
    the cost per 1,000 decisions."""
    from evals.stats import describe_test

    from guidebench.leaderboard.models import Comparison

    rows = []
    for row in board.get("rows", [])[:top]:
        metrics = row.get("metrics") or {}
        objective = metrics.get("objective") or {}
        comparison = row.get("comparison") or {}
        cost = row.get("cost") or {}
        compared = Comparison.model_validate(comparison) if comparison else None
        verdict = "champion" if row.get("champion") else compared.verdict() if compared else "not compared"
        rows.append({"rank": row.get("rank"), "name": row.get("name"), "source": row.get("source"),
                     "objective": objective.get("value"), "ci_low": objective.get("ci_low"),
                     "ci_high": objective.get("ci_high"), "n": objective.get("n"),
                     "diff_vs_champion": comparison.get("diff"), "p_value": comparison.get("p_value"),
                     "n_compared": comparison.get("n"), "test": describe_test(comparison.get("method")),
                     "test_detail": compared.test() if compared else None,
                     "ci_method": comparison.get("ci_method"), "verdict": verdict,
                     "lm_share": _metric(metrics, "lm_share"),
                     "cost_per": cost.get("per_decisions", 1000), "lm_decisions_per_1k": cost.get("lm_decisions"),
                     "lm_calls_per_1k": cost.get("lm_calls"), "tokens_per_1k": cost.get("total_tokens"),
                     "seconds_per_1k": cost.get("seconds"), "champion": row.get("champion", False)})
    return rows


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _count(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_rows(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Leaderboard rows as aligned text lines: objective, the comparison with the champion (records compared,
    test, plain-words verdict), then the share of decisions sent to an LM and the cost per 1,000 decisions."""
    lines = [f"  {'#':>2}  {'variant':<34} {'objective [95% CI]':<24} {'n':>4}  {'test vs champion':<28} "
             f"{'verdict':<36} {'LM share':>8} {'LM calls/1k':>11} {'tokens/1k':>10} {'s/1k':>7}"]
    for row in rows:
        interval = f"{_fmt(row['objective'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"
        n = row.get("n_compared")
        lines.append(f"  {row['rank']:>2}  {str(row['name'])[:34]:<34} {interval:<24} {'-' if n is None else n:>4}  "
                     f"{str(row.get('test') or '-'):<28} {str(row.get('verdict') or '-'):<36} "
                     f"{_fmt(row.get('lm_share'), 2):>8} {_count(row.get('lm_calls_per_1k')):>11} "
                     f"{_count(row.get('tokens_per_1k')):>10} {_count(row.get('seconds_per_1k')):>7}")
    return lines


@contextlib.contextmanager
def demo_environment(home: Path) -> Iterator[None]:
    """GUIDEBENCH_HOME=home for the demo (restored after); warnings and library logs go to a log file."""
    import optuna

    settings = {"GUIDEBENCH_HOME": str(home), **llama_threads(),
                # MLflow's INFO lines and download bars would bury the demo's own lines; warnings still show.
                "MLFLOW_LOGGING_LEVEL": os.environ.get("MLFLOW_LOGGING_LEVEL") or "WARNING",
                "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    previous = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    optuna_verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    mlflow_logger = logging.getLogger("mlflow")
    mlflow_level = mlflow_logger.level
    file_handler = logging.FileHandler(home.parent / "logs" / "demo-library.log", encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    try:
        # Library chatter (MLflow, DSPy, Optuna warnings) would bury the demo's own lines: keep it in a file.
        for handler in handlers:
            root.removeHandler(handler)
        root.addHandler(file_handler)
        root.setLevel(logging.INFO)
        mlflow_logger.setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.captureWarnings(True)
            yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(file_handler)
        file_handler.close()
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        mlflow_logger.setLevel(mlflow_level)
        optuna.logging.set_verbosity(optuna_verbosity)
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def llama_threads() -> dict[str, str]:
    """`GUIDEBENCH_LLAMA_THREADS` for the demo: every core (up to 4) when the machine is idle, else unchanged.

    The embedded model defaults to half the cores because spinning threads on busy cores are 3-5x
    slower; on an idle machine all cores are up to twice as fast, and the demo is LM-bound.
    """
    if os.environ.get("GUIDEBENCH_LLAMA_THREADS"):
        return {}
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: keep the default
        return {}
    return {"GUIDEBENCH_LLAMA_THREADS": str(min(cores, 4))} if cores >= 2 and load < 1.0 else {}


def share_model_files(home: Path, usual_home: Optional[Path] = None) -> Optional[Path]:
    """Link HOME/models to the usual home's model folder so the 250 MB model is assembled once per machine."""
    from guidebench.home import guidebench_home

    usual = (usual_home or guidebench_home()) / "models"
    if usual.resolve() == (home / "models").resolve():
        return None
    usual.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "models").symlink_to(usual, target_is_directory=True)
    return usual


def gates_text(n_records: int) -> str:
    """The demo's promotion gates: the defaults, unrelaxed. On too few records the gates say so ("not enough
    evidence to promote") rather than pass on noise."""
    from evals.stats import min_records_for

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
        + "".join(f"{name} = {value!r}\n" for name, value in sorted(defaults.max_increase.items()))
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


# ----- the demo ------------------------------------------------------------------------------------

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
            "guidebench_home": str(self.home), "started_at": _now(), "plan": asdict(plan),
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
            self.summary["finished_at"] = _now()
            self.summary["reports_dir"] = str(self.path("reports"))
            _write_json(self.path(SUMMARY_FILE), self.summary)
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
        info = _read_json(target / "dataset.json")
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
        summary = _read_json(out / "compile.json")
        test = summary.get("test") or {}
        entry = {"family": family, "program": program, "optimizer": optimizer, "settings": settings,
                 "dir": str(out), "mlflow_run_id": summary.get("mlflow_run_id"),
                 "dev_objective": _metric(summary.get("dev")), "test_objective": _metric(test),
                 "test_records": (test.get("objective") or {}).get("n"), "test_lm_share": _metric(test, "lm_share"),
                 "compared_with": COMPARED_WITH[family],
                 "baseline_test_objective": _metric((summary.get("baseline") or {}).get("test"))}
        self.summary.setdefault("compiles", []).append(entry)
        self.echo(f"{program} + {optimizer}: test objective {_fmt(entry['test_objective'])} "
                  f"({COMPARED_WITH[family]} {_fmt(entry['baseline_test_objective'])}), dev "
                  f"{_fmt(entry['dev_objective'])}, share of test decisions sent to the LM "
                  f"{_fmt(entry['test_lm_share'], 2)}")

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
        trials = _read_json(out / "trials.json")
        self.summary["search"] = {"dir": str(out), "study": trials.get("study"), "best_trial": trials.get("best_trial"),
                                  "best_dev_objective": trials.get("best_value"),
                                  "best_params": trials.get("best_params"), "dev_records": scored,
                                  "trials": [{"number": t.get("number"), "state": t.get("state"),
                                              "value": t.get("value"), "params": t.get("params")}
                                             for t in trials.get("trials", [])]}
        self.echo(f"search: best trial {trials.get('best_trial')} with dev objective "
                  f"{_fmt(trials.get('best_value'))} on {scored} dev records: {trials.get('best_params')}")

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
        board = _read_json(board_dir / "leaderboard.json")
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
        manifest = _read_json(target / "manifest.json")
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
        records = list(_jsonl(ledger)) if ledger.is_file() else []
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
        info = _read_json(dataset / "dataset.json")
        actions = Counter(line.get("action") for line in _jsonl(logs / "fullauto-decisions.jsonl"))
        self.summary["run_loop"] = {"logs": str(logs), "dataset": str(dataset), "runs": self.plan.loop_runs,
                                    "decisions": sum(actions.values()), "enforced_actions": dict(actions),
                                    "reimported_records": sum(v["n"] for v in info["splits"].values())}
        self.echo(f"run-loop: {sum(actions.values())} decisions ({dict(actions)}), read back as dataset "
                  f"{info['dataset_id'][:12]}")


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

        manifest = _read_json(module_dir / "manifest.json")
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


def ui_command(tracking_uri: str) -> str:
    """The command that opens the MLflow UI on a store (a server URI is already a UI)."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"open {tracking_uri} in a browser"
    return f"mlflow ui --backend-store-uri {tracking_uri}"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def quality_and_cost(row: dict[str, Any]) -> str:
    """One board row in words: quality with its interval, the share of decisions sent to the LM, cost per 1,000."""
    per = row.get("cost_per") or 1000
    return (f"{row['name']}: objective {_fmt(row['objective'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}] "
            f"on {row.get('n')} test records; {_fmt(row.get('lm_share'), 2)} of its decisions sent to the LM; per "
            f"{per:,} decisions {_count(row.get('lm_calls_per_1k'))} LM calls, {_count(row.get('tokens_per_1k'))} "
            f"tokens, {_count(row.get('seconds_per_1k'))} s")


def closing_lines(summary: dict[str, Any]) -> list[str]:
    """The short summary printed at the end of the demo."""
    out = Path(summary["out"])
    lines = [f"\nguidebench demo ({summary['mode']}) finished in {summary['wall_s'] / 60:.1f} min"]
    for family, title in (("full_auto", "Full Auto"), ("planner", "planner")):
        board = (summary.get("leaderboards") or {}).get(family)
        if board:
            lines.append(f"{title} leaderboard ({board['split']}, {board['n_records']} records), top rows:")
            lines += format_rows(board["rows"][:5])
    promotion = summary.get("promotion") or {}
    export = summary.get("export") or {}
    mlflow = summary.get("mlflow") or {}
    lines += [
        f"reports:         {out / 'reports'}  (baselines.md; leaderboard-*/leaderboard.html opens in a browser)",
        f"compiles:        {out / 'compiles'}  (per split: metrics, per-record results, confusion matrix, "
        "calibration)",
        f"exported module: {export.get('dir')}  (promotion: {promotion.get('outcome', 'n/a')})",
        f"  it is          {quality_and_cost(export['board_row']) if export.get('board_row') else 'n/a'}",
        f"load it:         {export.get('load')}",
        f"MLflow:          {mlflow.get('tracking_uri')}",
        f"open its UI:     {mlflow.get('ui_command')}",
        f"summary:         {out / SUMMARY_FILE}",
    ]
    return lines


def run_demo(options: DemoOptions, parser: Callable[[], argparse.ArgumentParser],
             echo: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Run the demo (its commands parsed by `parser()`, the CLI's) and print its closing summary; returns it."""
    demo = Demo(options, parser, echo=echo)
    summary = demo.run()
    for line in closing_lines(summary):
        demo.echo(line)
    return summary
