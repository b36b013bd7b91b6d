"""`guidebench search` end to end: an Optuna study over program variants, optimizers and their main
settings on a dataset, every trial a nested MLflow run under one search run.

The study lives in SQLite under the workbench home by default (`--storage` takes any SQLAlchemy
URL); running the same command again resumes it (finished trials are kept, `--trials` is the
total) and reopens the same MLflow search run. The study, each trial and `trials.json` record the
task LM (`guidebench.lm.identity`): a study made with another LM is refused. Outputs (`--out`, default
`<GUIDEBENCH_HOME>/searches/<study>/`): `trials.json`, `trials.png`, and for the best trial
`program.json` (its compiled state, rule gate included) and `recipe.toml` (its optimizer settings, for
`guidebench compile --recipe`); `trials.json`'s `best_compile` is the `guidebench compile` command that
compiles that program again from these files (program, `--rules`, recipe, seed, temperature, LM: a trial's
optimizer selects on the whole labeled dev split, as compile's does). The best trial, chosen on
dev, is then replayed once on the whole test split at its temperature (`test/`, the same files as
`guidebench eval --out`, so `guidebench leaderboard --results OUT/test` ranks it); nothing is selected on test.
OUT follows `guidebench.outputs`: checked before the search, written aside and renamed into place at its
end; the same study's earlier folder is replaced without `--force` (the search resumes it), another
study's only with `--force`. `program.json` carries the best trial's provenance (`runtime.provenance`: the
records its compile learned from and the dev records the trials were judged on), so an export of it is never
judged on them; the test re-score says how many of its records are among them (none, unless the logs repeat
inputs across splits). The study's DSPy cache is kept apart, in `<GUIDEBENCH_HOME>/search-cache/<study>/`.
"""

from __future__ import annotations

import json
import math
import shlex
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import dspy

import optimizers
from optimizers.budget import Budget
from optimizers.checkpoint import atomic_write_json
from guidebench.search.engine import SearchConfig, SearchResult, SearchSpace, TrialOutcome, run_search, trial_seed

from runtime.provenance import PROVENANCE_KEY, Provenance, check_overlap

from guidebench.evaluation.compile_inputs import CompileData, load_compile_data
from guidebench.errors import GuidebenchError, check_interrupted
from guidebench.evaluation.run import metrics_for, planner_cycles
from guidebench.lm.identity import LMIdentity, lm_identity

FAMILIES: tuple[str, ...] = ("full_auto", "planner")


@dataclass
class SearchRequest:
    """What `guidebench search` was asked to do."""

    family: str
    data: str
    trials: int
    storage: Optional[str] = None
    study: Optional[str] = None
    lm: str = "local"
    seed: int = 0
    programs: Optional[list[str]] = None
    optimizers: Optional[list[str]] = None
    demos: tuple[int, int] = (1, 6)
    temperature: tuple[float, float] = (0.0, 1.0)
    candidates: tuple[int, int] = (2, 5)
    minibatch_size: int = 8
    max_lm_calls_per_trial: Optional[int] = None
    dev_limit: Optional[int] = None  # score trials on a seeded subset of this many labeled dev records
    rescore_test: bool = True  # replay the best trial on the test split after the search
    tracking_uri: Optional[str] = None
    out: Optional[str] = None
    force: bool = False  # replace an output folder of another study


def family_programs(family: str) -> list[str]:
    """The LM programs of a family (rule policies have nothing to compile)."""
    import programs

    return [name for name in programs.names() if programs.spec(name).kind == family and programs.spec(name).uses_lm]


def build_space(request: SearchRequest) -> SearchSpace:
    """The search space of a request, checked against the registries."""
    import programs

    if request.family not in FAMILIES:
        raise GuidebenchError(f"--program-family {request.family!r}: use one of {', '.join(FAMILIES)}")
    names = request.programs or family_programs(request.family)
    for name in names:
        try:
            spec = programs.spec(name)
        except LookupError as exc:
            raise GuidebenchError(f"--programs: {exc}") from None
        if spec.kind != request.family or not spec.uses_lm:
            raise GuidebenchError(f"--programs: {name} is not an LM program of the {request.family} family")
    try:
        return SearchSpace(programs=tuple(names), optimizers=tuple(request.optimizers or SearchSpace.optimizers),
                           demos=request.demos, temperature=request.temperature, candidates=request.candidates)
    except (ValueError, optimizers.RecipeError) as exc:
        raise GuidebenchError(f"search space: {exc}") from None


class MlflowTrials:
    """One nested MLflow run per trial: params, minibatch means (by step), value, compile usage, state."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    @contextmanager
    def trial(self, number: int, params: dict[str, Any]) -> Iterator[Any]:
        """A nested run around one trial."""
        import mlflow

        from guidebench.tracking.runs import owner_tags

        with mlflow.start_run(run_name=f"trial {number}", nested=True,
                              tags={"guidebench.run_type": "search_trial", "optuna.trial": str(number),
                                    **owner_tags()}) as run:
            mlflow.log_params({f"trial.{k}": v for k, v in params.items()})
            yield run

    def finished(self, outcome: TrialOutcome, program: Optional[dspy.Module]) -> None:
        """Log what the trial produced (pruned and failed trials too)."""
        import mlflow

        from guidebench.tracking import compile as tracking_compile

        mlflow.set_tag("optuna.state", outcome.state)
        for step, mean in enumerate(outcome.minibatch_means):
            mlflow.log_metric("dev.minibatch_mean_objective", mean, step=step)
        if outcome.value is not None and math.isfinite(outcome.value):
            mlflow.log_metric("dev.objective", outcome.value)
        usage = outcome.compile_summary.get("usage", {})
        tracking_compile.log_numbers({k: usage.get(k) for k in tracking_compile.USAGE_KEYS}, prefix="compile.")
        tracking_compile.log_numbers({"wall_s": outcome.compile_summary.get("wall_s"),
                                      "stopped_by_budget": bool(outcome.compile_summary.get("stopped_by_budget"))},
                                     prefix="compile.")
        if program is not None:
            mlflow.log_dict(json.loads(json.dumps(program.dump_state(), default=str)), "program_state.json")


def run_search_command(request: SearchRequest, *, progress: bool = True) -> tuple[SearchResult, Path]:
    """Run or resume the study with tracking; write the trials table and the best program; returns (result, out)."""
    import mlflow

    import programs

    from guidebench.tracking import runs as tracking

    from guidebench.tracking import compile as tracking_compile
    from guidebench.lm.factory import configure_lm, lm_info
    from guidebench.outputs import claim_output
    from guidebench.tracking.runs import guidebench_home

    if request.trials < 1:
        raise GuidebenchError(f"--trials {request.trials}: must be at least 1")
    space = build_space(request)
    data = load_compile_data(Path(request.data), request.family)
    if not data.valset:
        raise GuidebenchError(f"--data {request.data}: the dev split has no labeled record to score trials on")
    selection = list(data.valset)  # what a trial's optimizer selects on: the whole labeled dev, as compile's
    if request.dev_limit and len(data.valset) > request.dev_limit:
        import random

        keep = sorted(random.Random(request.seed).sample(range(len(data.valset)), request.dev_limit))
        data.valset = [data.valset[index] for index in keep]
    study_name = request.study or f"{request.family}-{data.dataset_id[:12]}"
    home = guidebench_home()
    storage = request.storage or f"sqlite:///{home / 'optuna.db'}"
    out = Path(request.out) if request.out else home / "searches" / study_name
    output = claim_output(out, "search", force=request.force, inputs=[Path(request.data)],
                          resume={"study": study_name})
    lm = configure_lm(request.lm)
    cycles = planner_cycles(request.family, "auto", data.splits["test"].records, data.dataset_dir, split="test",
                            seed=request.seed)
    metric, feedback = metrics_for(request.family, cycles)
    announce_search(request, space, data, selection)
    config = SearchConfig(study_name=study_name, trials=request.trials, storage=storage, seed=request.seed,
                          minibatch_size=request.minibatch_size, cache_dir=home / "search-cache" / study_name,
                          budget=Budget(max_lm_calls=request.max_lm_calls_per_trial))
    config = claim_study(config, lm_identity(request.lm, lm))
    params = tracking.run_params(
        program=",".join(space.programs), dataset_id=data.dataset_id, split="train+dev",
        split_hash=data.split_hashes()["dev"], lm=request.lm, seed=request.seed, kind=request.family,
        run_type="search", study=study_name, storage=_safe_url(storage), trials=request.trials,
        space=json.dumps(asdict(space)), minibatch_size=request.minibatch_size, lm_info=lm_info(lm),
        max_lm_calls_per_trial=request.max_lm_calls_per_trial or "none", dev_limit=request.dev_limit or "none",
        **{f"split_hash.{name}": digest for name, digest in data.split_hashes().items()})
    parent = _existing_search_run(data.dataset_id, request.family, study_name, request.tracking_uri)
    with tracking_compile.compile_run(dataset_id=data.dataset_id, kind=request.family, run_name=f"search {study_name}",
                                      params=params, tags={"guidebench.run_type": "search",
                                                           "guidebench.study": study_name},
                                      tracking_uri=request.tracking_uri, resume_run_id=parent, autolog=False) as run:
        print(f"study {study_name} in {_safe_url(storage)}; MLflow run {run.info.run_id}")
        check_interrupted()  # a Ctrl-C swallowed while the study and the run were made: no trial starts
        result = run_search(config, space, data.trainset, data.valset, metric, program_factory=programs.get,
                            feedback_metric=feedback, observer=MlflowTrials(out), progress=progress,
                            valset=selection)
        if result.best_value is not None:
            mlflow.log_metric("best.dev.objective", result.best_value)
            # Tags, not params: a resumed study may find a new best, and params cannot change.
            mlflow.set_tags({f"best.{k}": str(v) for k, v in {**result.best_params, "trial": result.best_trial}.items()})
        tracking_compile.log_numbers({"trials.finished": sum(t.state in ("COMPLETE", "PRUNED") for t in result.trials),
                                      "trials.pruned": sum(t.state == "PRUNED" for t in result.trials),
                                      "trials.failed": sum(t.state == "FAIL" for t in result.trials)})
        provenance = search_provenance(result, data)
        with output.writing() as staging:
            files = _write_outputs(result, staging, data, provenance)
            for path in files.values():
                mlflow.log_artifact(str(path))
            if request.rescore_test and result.best_value is not None and result.best_state() is not None:
                rescore_best_on_test(result, data, staging / "test", lm=lm, seed=request.seed, progress=progress,
                                     provenance=provenance, cycles=cycles)
    return result, out


def claim_study(config: SearchConfig, lm: LMIdentity) -> SearchConfig:
    """The config with its LM, once the study accepts it (opened before any tracking): a study made with another
    LM is refused, a new one records this LM."""
    from dataclasses import replace

    from guidebench.search.engine import StudyLMError, open_study

    config = replace(config, lm=lm.model_dump())
    try:
        open_study(config)
    except StudyLMError as exc:
        other = f" or search with --lm {exc.recorded['spec']}" if exc.recorded else ""
        raise GuidebenchError(f"{exc}; name a new study with --study NAME{other}") from None
    return config


def search_provenance(result: SearchResult, data: CompileData) -> Provenance:
    """What the best trial learned from: the records its compile did and the dev records the trials were judged on
    (the search chose it on them); every train and dev record for a trial recorded before they were kept."""
    ids = result.best_learned_from()
    if ids is None:
        return data.provenance()
    return data.provenance([*ids, *(str(ex.get("record_id")) for ex in data.valset)])


def rescore_best_on_test(result: SearchResult, data: CompileData, out: Path, *, lm: Any, seed: int,
                         progress: bool = True, provenance: Optional[Provenance] = None, cycles: Any = None) -> Any:
    """Replay the best trial (chosen on dev) on the whole test split at its temperature (a planner's with the
    search's `cycles` model); write and log it, with how many test records the best trial learned from
    (`provenance`, default `search_provenance`)."""
    import mlflow

    import programs
    from guidebench.evaluation.run import learned_from_summary, scored_replay, summary_table, write_outputs
    from guidebench.tracking import compile as tracking_compile

    best = result.best_params
    program = optimizers.load_compiled(programs.get(best["program"]), result.best_state())
    split, records = data.splits["test"], data.records_of("test")
    provenance = provenance or search_provenance(result, data)
    learned = check_overlap(provenance, records, dataset_id=data.dataset_id, split="test")
    name = f"search best (trial {result.best_trial})"
    with dspy.context(lm=lm.copy(temperature=float(best.get("temperature", 0.0)))):
        evaluation = scored_replay(program, records, cycles, name=name, seed=seed, progress=progress)
    _, omitted = write_outputs(evaluation, out, {"dataset_id": data.dataset_id, "data": str(data.dataset_dir), "split": "test",
                                    "split_hash": split.split_hash, "program": best["program"],
                                    "program_source": f"search {result.study_name}, trial {result.best_trial}",
                                    "optimizer": best["optimizer"], "best_params": best,
                                    **learned_from_summary(provenance, learned)}, learned, progress=progress)
    tracking_compile.log_split_metrics(evaluation.metrics, "best.test")
    tracking_compile.log_numbers(evaluation.summary.get("usage", {}), prefix="best.test.usage.")
    tracking_compile.log_numbers({"learned_from_overlap": learned.n_overlap}, prefix="best.test.")
    mlflow.log_artifacts(str(out), artifact_path="best_test")
    print(f"\nbest trial {result.best_trial} re-scored on test ({len(split.records)} records, selected on dev)\n"
          f"{summary_table(evaluation, omitted)}")
    if learned.overlaps:
        print(f"note: {learned.line()}")
    return evaluation


def _existing_search_run(dataset_id: str, kind: str, study: str, tracking_uri: Optional[str]) -> Optional[str]:
    """The MLflow run of an earlier part of this study, so a resumed search keeps one parent run."""
    import mlflow

    from guidebench.tracking import runs as tracking

    experiment_id = tracking.ensure_experiment(dataset_id, kind, tracking_uri)
    found = mlflow.search_runs(experiment_ids=[experiment_id], output_format="list", max_results=1,
                               filter_string=f"tags.`guidebench.study` = '{study}' and "
                                             "tags.`guidebench.run_type` = 'search'",
                               order_by=["attributes.start_time DESC"])
    return found[0].info.run_id if found else None


def _safe_url(url: str) -> str:
    # A shared study's URL may carry a password: never log it.
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def _write_outputs(result: SearchResult, out: Path, data: CompileData, provenance: Provenance) -> dict[str, Path]:
    from guidebench.tracking.compile import candidate_plot

    files = {"trials": out / "trials.json"}
    trials = {"study": result.study_name, "best_trial": result.best_trial, "best_value": result.best_value,
              "best_params": result.best_params, "dataset_id": data.dataset_id, "lm": result.lm,
              "trials": [asdict(t) for t in result.trials]}
    scored = [{"index": t.number, "score": t.value, "n_examples": len(data.valset)} for t in result.trials
              if t.value is not None]
    if scored:
        files["trials_png"] = candidate_plot(scored, out / "trials.png", f"study {result.study_name}")
    state = result.best_state()
    if state is not None:
        files["program"] = out / "program.json"
        atomic_write_json(files["program"], {**state, PROVENANCE_KEY: provenance.model_dump(mode="json")})
        recipe_cls = optimizers.get(result.best_params["optimizer"])
        recipe = recipe_cls(recipe_cls.search_overrides(result.best_params["demos"],
                                                        result.best_params.get("candidates", 0)))
        files["recipe"] = out / RECIPE_FILE
        argv = best_compile_argv(result, data.dataset_dir)
        files["recipe"].write_text(f"# The settings of trial {result.best_trial} of study {result.study_name}; in "
                                   f"this folder, its program again:\n# {shlex.join(argv)}\n{recipe.to_toml()}",
                                   encoding="utf-8")
        trials["best_compile"] = argv
    atomic_write_json(files["trials"], trials)  # once, whole: with the best trial's compile command when there is one
    return files


RECIPE_FILE = "recipe.toml"


def best_compile_argv(result: SearchResult, data_dir: Path, recipe: str = RECIPE_FILE) -> list[str]:
    """The `guidebench compile` command that compiles the best trial's program again from the saved files: its
    program (with its rule gate), optimizer settings (`recipe`, relative to the search's folder by default), seed,
    temperature, LM and dataset."""
    best = result.best_params
    lm = getattr(dspy.settings.lm, "model", None) or "local"
    argv = ["guidebench", "compile", "--program", best["program"], "--optimizer", best["optimizer"],
            "--recipe", recipe, "--seed", str(trial_seed(result.seed, result.best_trial)),
            "--temperature", str(best.get("temperature", 0.0)), "--lm", lm]
    if "rules" in best:
        argv += ["--rules", best["rules"]]
    if result.max_lm_calls_per_trial is not None:
        argv += ["--max-lm-calls", str(result.max_lm_calls_per_trial)]
    return [*argv, "--data", str(data_dir)]


def announce_search(request: SearchRequest, space: SearchSpace, data: CompileData, selection: Sequence[Any]) -> str:
    """Print (and return) the one line before the trials: the LM, and what `--trials` trials and the best trial's
    test re-score cost at most (each trial costed as the dearest program and optimizer at the space's highest
    demos and candidates, its optimizer selecting on `selection`, its score on `data.valset`)."""
    import programs
    from optimizers.estimate import CostEstimate, Stage, measure_prompts

    from guidebench.lm.cost import Totals, cost_line, lm_speed, token_counter

    counter, speed = token_counter(request.lm), lm_speed(request.lm)
    demos, candidates = space.demos[1], space.candidates[1]
    trials, tests = [], []
    for name in space.programs:
        program = programs.get(name)
        predictors = max(1, len(program.predictors()))
        sizes = measure_prompts(program, data.trainset, count_tokens=counter)
        dev = CostEstimate.from_stages(name, [Stage("score dev", len(data.valset) * predictors, demos=demos)],
                                       sizes, **speed)
        tests.append(CostEstimate.from_stages(name, [Stage("best on test", len(data.splits["test"].records)
                                                           * predictors, demos=demos)], sizes, **speed))
        for optimizer in space.optimizers:
            recipe_cls = optimizers.get(optimizer)
            recipe = recipe_cls(recipe_cls.search_overrides(demos, candidates))
            trials.append(Totals.of([recipe.estimate(program, data.trainset, selection, sizes=sizes, **speed), dev]))
    dearest = lambda costs: max(costs, key=lambda c: (c.minutes, c.total_tokens))  # noqa: E731
    total = [Totals.of([dearest(trials)], times=request.trials)]
    if request.rescore_test:
        total.append(dearest(tests))
    line = cost_line(request.lm, total, f"{request.trials} trials of {len(space.programs)} program(s) x "
                                        f"{len(space.optimizers)} optimizer(s) up to {demos} demos, scored on "
                                        f"{len(data.valset)} dev examples"
                                        + (f", the best re-scored on {len(data.splits['test'].records)} test records"
                                           if request.rescore_test else ""))
    print(line, flush=True)
    return line


def summary_lines(result: SearchResult, out: Path) -> Sequence[str]:
    """What the command prints at the end."""
    lines = [f"{'trial':>5}  {'state':<8} {'dev objective':>13}  params"]
    for t in result.trials:
        value = "-" if t.value is None else f"{t.value:.4f}"
        lines.append(f"{t.number:>5}  {t.state:<8} {value:>13}  {json.dumps(t.params, sort_keys=True)}")
    lines.append(f"ran {result.ran_now} trial(s) now; {len(result.trials)} in the study")
    if result.best_trial is not None:
        best = result.best_params
        lines.append(f"best: trial {result.best_trial}, dev objective {result.best_value:.4f}: {best}")
        try:
            argv = list(json.loads((out / "trials.json").read_text(encoding="utf-8"))["best_compile"])
        except (OSError, ValueError, KeyError, TypeError):
            argv = []
        if "--recipe" in argv:
            argv[argv.index("--recipe") + 1] = str(out / RECIPE_FILE)
            lines.append(f"its program again, from the saved files: {shlex.join(argv)}")
        lines.append(f"or export it as it is: guidebench export --program {best['program']} --state "
                     f"{out / 'program.json'} --name NAME --version 0.1.0 --out DIR (its rule gate included)")
    return lines
