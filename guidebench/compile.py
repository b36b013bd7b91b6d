"""One compile, start to finish: load the splits, compile a program with a recipe within a budget,
evaluate it on dev and test against the uncompiled baseline, save its state, track everything.

Stages and resume: a compile is an MLflow run; its checkpoint folder
`<GUIDEBENCH_HOME>/checkpoints/<run id>/` holds the request, the stage reached, the candidate
history, the compiled state and the compile's own DSPy disk cache. `--resume RUN_ID` reopens the
run: a compile that had not finished runs again and its finished LM calls come back from the cache
(no LM work repeated); a finished compile goes straight to evaluation.

Outputs (`--out`, default `<GUIDEBENCH_HOME>/compiles/<run id>/`): `program.json` (the compiled
state, DSPy's JSON format; load it with `optimizers.load_compiled`), `compile.json` (summary,
usage, paired comparison), `candidates.json` + `candidates.png`, and `dev/`, `test/`, `baseline/`
evaluation folders (metrics.json, results.parquet, summary.json, confusion-matrix and calibration
PNGs). `program.json` and `compile.json` carry the program's provenance (`runtime.provenance`: the train
and dev records that reached its fit, demos or selection), and each evaluation folder says how many of its
records are among them (a compile's dev scores usually are: it selected on dev).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import optimizers
from evals.replay import ReplayResult, compare
from optimizers.base import RecipeError
from optimizers.budget import Budget
from optimizers.candidates import Candidate, load_history
from optimizers.checkpoint import Checkpoint, atomic_write_json, disk_cache
from optimizers.estimate import CostEstimate, Stage
from runtime.provenance import PROVENANCE_KEY, Provenance, check_overlap, known, read_provenance

from guidebench.lm.cost import cost_line, lm_speed, token_counter
from guidebench.errors import GuidebenchError
from guidebench.evaluation.run import (learned_from_summary, metrics_for, planner_cycles, scored_replay,
                                       summary_table, write_outputs)
from guidebench.evaluation.compile_inputs import CompileData, load_compile_data

DEFAULT_LM = "local"
EVAL_SUBSET_SEED = 0
# The marker entry of a compile folder naming the MLflow run that wrote it (`compile --resume` takes only that one).
RUN_ID_KEY = "mlflow_run_id"


DEFAULT_FIT_LIMIT = 200_000  # labeled train examples a trained program's fit holds at most (reservoir-sampled)


@dataclass
class CompileRequest:
    """What `guidebench compile` was asked to do (stored in the checkpoint, so a resume repeats it)."""

    program: str
    optimizer: str
    data: str
    recipe: Optional[str] = None
    recipe_settings: dict[str, Any] = field(default_factory=dict)
    lm: str = DEFAULT_LM
    seed: int = 0
    max_lm_calls: Optional[int] = None
    max_tokens: Optional[int] = None
    baseline: Optional[str] = None  # default: the program itself, uncompiled
    threads: int = 1
    eval_limit: Optional[int] = None  # evaluate dev/test on a seeded subset of this many records
    dev_limit: Optional[int] = None  # evaluate dev on a seeded subset of this many records (wins over eval_limit)
    tracking_uri: Optional[str] = None
    out: Optional[str] = None
    rules: Optional[str] = None  # a rule-gated program's gate, "rule+rule" (None: the program's own)
    temperature: Optional[float] = None  # the LM's temperature (None: the LM's default)
    cycles_model: str = "auto"  # a planner's improvement estimate: sim | learned | auto (evaluation.outcome_models)
    fit_limit: Optional[int] = DEFAULT_FIT_LIMIT  # a trained program fits on at most this many train examples

    def budget(self) -> Budget:
        """The compile budget."""
        return Budget(max_lm_calls=self.max_lm_calls, max_tokens=self.max_tokens)

    def baseline_program(self) -> str:
        """The program the compiled one is compared with: `--baseline`, else the program uncompiled, else (a trained
        program, which has no uncompiled form) the deployed policy as logged."""
        if self.baseline:
            return self.baseline
        import programs

        spec = programs.spec(self.program)
        if not spec.trained:
            return self.program
        return "planner.logged" if spec.kind == "planner" else "logged"

    def build(self, name: Optional[str] = None) -> Any:
        """A fresh instance of the program (or of `name`), with the requested rule gate when it is this program.

        A search draws a rule-gated program's gate as a trial parameter (`rules`); passing it here makes a
        compile of the best trial's settings start from the program that trial compiled.
        """
        name = name or self.program
        program = (program_spec(name) if name == self.program else _registered(name, "--baseline")).build()
        if self.rules is not None and name == self.program:
            from programs.hybrid import parse_rule_set, rule_gate_of

            gate = rule_gate_of(program)
            if gate is None:
                raise GuidebenchError(f"--rules {self.rules}: {name} has no rule gate (full_auto.hybrid has one)")
            try:
                gate.rules = parse_rule_set(self.rules)
            except ValueError as exc:
                raise GuidebenchError(f"--rules {self.rules}: {exc}") from None
        return program

    def eval_records(self, records: list[Any], split: str = "test") -> list[Any]:
        """The records a split is evaluated on: all, or a seeded subset of its limit (kept in stored order)."""
        limit = self.dev_limit if split == "dev" and self.dev_limit else self.eval_limit
        return seeded_subset(records, limit) if limit else list(records)

    def eval_indices(self, n: int, split: str = "test") -> Optional[set[int]]:
        """The indices of the records `eval_records` keeps of a split of `n` (None: all of them)."""
        limit = self.dev_limit if split == "dev" and self.dev_limit else self.eval_limit
        return _subset_indices(n, limit) if limit and n > limit else None


def seeded_subset(items: Sequence[Any], limit: int) -> list[Any]:
    """The seeded subset of `limit` items that `--eval-limit` evaluates on (all when fewer), in stored order.

    A fixed seed, not the compile's: every compile with the same limit is scored on the same records, and a
    leaderboard's `--eval-limit` ranks on them.
    """
    if len(items) <= limit:
        return list(items)
    keep = _subset_indices(len(items), limit)
    return [item for index, item in enumerate(items) if index in keep]


def _subset_indices(n: int, limit: int) -> set[int]:
    import random

    return set(random.Random(EVAL_SUBSET_SEED).sample(range(n), limit))


@dataclass
class CompileOutcome:
    """What a compile produced."""

    run_id: Optional[str]
    out_dir: Path
    summary: dict[str, Any]  # what compile.json holds
    files: dict[str, Path]
    program: Any
    replays: dict[str, ReplayResult]  # dev, test, baseline
    paired: dict[str, Any]  # compiled vs baseline on test (evals.replay.compare)
    candidates: list[Candidate]


# ----- inputs -------------------------------------------------------------------------------------

def load_recipe(request: CompileRequest) -> optimizers.Recipe:
    """The recipe named by the request (file settings, then stored overrides)."""
    try:
        recipe = optimizers.load(name=request.optimizer, path=request.recipe)
        if request.recipe_settings:
            recipe = recipe.with_overrides(**request.recipe_settings)
    except RecipeError as exc:
        raise GuidebenchError(str(exc)) from None
    return recipe


def program_spec(name: str, option: str = "--program") -> Any:
    """The registry spec of a program that compiling changes (it calls an LM or fits a model on data)."""
    spec = _registered(name, option)
    if not spec.compilable:
        raise GuidebenchError(f"{option} {name!r} is a rule policy without an LM: there is nothing to compile")
    return spec


def check_pairing(spec: Any, recipe: optimizers.Recipe) -> None:
    """Refuse a recipe that has nothing to change in the program: an LM optimizer given a trained program without
    an LM (`full_auto.learned`: no prompt to compile, its model is the `fit` recipe's to fit)."""
    if spec.trained and not spec.uses_lm and recipe.compiles_lm:
        raise GuidebenchError(f"--program {spec.name} makes no LM call: {recipe.name} has no prompt of it to "
                              f"compile; fit its model with --optimizer fit")


def used_settings(request: CompileRequest, recipe: optimizers.Recipe) -> dict[str, Any]:
    """The recipe's settings the program uses, as compile.json and the run record them; a setting the recipe would
    leave unused on this program is refused (GuidebenchError naming it)."""
    try:
        return recipe.used_settings(request.build())
    except RecipeError as exc:
        raise GuidebenchError(str(exc)) from None


def check_evaluable(data: "CompileData", data_dir: Path) -> None:
    """Refuse a dataset whose test split is empty: the compile would report on nothing (dev, its selection split,
    comes first in the import, so an empty test means an empty dev too)."""
    if data.splits["test"].records:
        return
    n_dev = len(data.splits["dev"].records)
    dev = "dev holds " + str(n_dev) if n_dev else "dev is empty too"
    raise GuidebenchError(f"--data {data_dir}: its test split holds no record ({dev}), so the compile would "
                          "report on nothing; the import gives whole threads (episodes) to train, then test, then "
                          "dev: import logs of three or more into it again (`guidebench data import ... --force`)")


def baseline_spec(name: str, kind: str) -> Any:
    """The registry spec of the baseline: any program of the kind that runs as it is (a trained one needs fitting)."""
    spec = _registered(name, "--baseline")
    if spec.kind != kind:
        raise GuidebenchError(f"--baseline {name!r} is a {spec.kind} program; the compiled program is a {kind} one")
    if spec.trained:
        raise GuidebenchError(f"--baseline {name!r} must be fitted before it can run; compare with its compile "
                              "on the leaderboard instead (`guidebench leaderboard --results ...`)")
    return spec


def _registered(name: str, option: str) -> Any:
    import programs

    try:
        return programs.spec(name)
    except LookupError as exc:
        raise GuidebenchError(f"{option} {name!r}: {exc}") from None


def needs_only_ids(spec: Any, recipe: optimizers.Recipe) -> bool:
    """Whether the compile's optimizer reads only the record ids of its train examples: a trained planner's fit,
    whose outcome model is fit on the records streamed from the split (`StoredExample`)."""
    return spec.kind == "planner" and spec.trained and not recipe.compiles_lm


def fits_on_features(spec: Any, recipe: optimizers.Recipe) -> bool:
    """Whether the compile fits a trained Full Auto model without an LM optimizer: its fit reads its examples' ids,
    threads, label actions and turn features, and builds whole only the examples it scores (`load_compile_data`'s
    `featured`: a year of whole examples held for the fit was most of its memory)."""
    return spec.kind == "full_auto" and spec.trained and not recipe.compiles_lm


def _compile_data(request: CompileRequest, spec: Any, recipe: optimizers.Recipe,
                  models_seed: Optional[int] = None) -> CompileData:
    trained = spec.trained and not recipe.compiles_lm  # an LM optimizer draws its own few examples
    return load_compile_data(Path(request.data), spec.kind, stored_train=needs_only_ids(spec, recipe),
                             featured=fits_on_features(spec, recipe), models_seed=models_seed,
                             fit_limit=request.fit_limit if trained else None, fit_seed=request.seed)


# ----- dry run ------------------------------------------------------------------------------------

def estimate(request: CompileRequest, data: Optional[CompileData] = None) -> tuple[CostEstimate, CompileData]:
    """Estimated LM calls and tokens of the compile and of its evaluations (on `data`, else the request's); makes
    no LM call."""
    recipe = load_recipe(request)
    spec = program_spec(request.program)
    check_pairing(spec, recipe)
    used_settings(request, recipe)  # a setting the program has no use for is refused by the dry run too
    data = data or _compile_data(request, spec, recipe)
    check_evaluable(data, Path(request.data))
    program = request.build()
    speed = lm_speed(request.lm)
    cost = recipe.estimate(program, data.trainset, data.valset, count_tokens=token_counter(request.lm), **speed)
    # Evaluations after the compile run the compiled program once per record (per predictor; at most: a trained
    # program's model answers without its LM, a rule gate's rules too).
    predictors = len(program.predictors()) if spec.uses_lm else 0
    baseline = request.build(request.baseline_program())
    baseline_predictors = len(baseline.predictors()) if baseline_spec(request.baseline_program(), spec.kind).uses_lm \
        else 0
    demos = _demos_after(recipe)
    n_dev = len(request.eval_records(data.splits["dev"].records, "dev"))
    n_test = len(request.eval_records(data.splits["test"].records))
    evals = [Stage("evaluate dev", n_dev * predictors, demos=demos),
             Stage("evaluate test", n_test * predictors, demos=demos),
             Stage("baseline on test", n_test * baseline_predictors,
                   demos=sum(len(p.demos) for p in baseline.predictors()) / max(1, len(baseline.predictors())),
                   note="cached after the first compile on this split")]
    extra = CostEstimate.from_stages(recipe.name, evals, cost.sizes, **speed)
    cost.stages += extra.stages
    cost.notes += [f"{len(data.trainset)} labeled train / {len(data.valset)} labeled dev examples "
                   f"({data.unlabeled['train']} + {data.unlabeled['dev']} unlabeled left out)",
                   "counts marked 'at most' stop early when enough demos are accepted",
                   "a --max-lm-calls / --max-tokens budget caps the compile stages only"]
    return cost, data


def _work_text(request: CompileRequest, data: CompileData, recipe: optimizers.Recipe) -> str:
    """What the compile's estimate covers, for its up-front line."""
    n_dev = len(request.eval_records(data.splits["dev"].records, "dev"))
    n_test = len(request.eval_records(data.splits["test"].records))
    return (f"compiling {request.program} with {recipe.name} on {len(data.trainset)} train examples, then scoring "
            f"{n_dev} dev and {n_test} test records (--dry-run lists the stages)")


def _demos_after(recipe: optimizers.Recipe) -> float:
    settings = recipe.settings.model_dump()
    for key in ("k", "max_labeled_demos", "max_demos", "base_demos"):
        if key in settings:
            return float(settings[key])
    return 0.0


# ----- the compile --------------------------------------------------------------------------------

def checkpoint_root() -> Path:
    """Where compile checkpoints live."""
    from guidebench.tracking.runs import guidebench_home

    return guidebench_home() / "checkpoints"


def resume_request(run_id: str) -> CompileRequest:
    """The request stored in a compile's checkpoint."""
    checkpoint = Checkpoint.for_run(checkpoint_root(), run_id)
    if not checkpoint.exists():
        raise GuidebenchError(f"--resume {run_id}: no checkpoint in {checkpoint.dir} "
                              "(only compiles started on this machine can be resumed)")
    return CompileRequest(**checkpoint.read_request())


def run_compile(request: CompileRequest, *, resume_run_id: Optional[str] = None, progress: bool = True,
                track: bool = True, force: bool = False) -> CompileOutcome:
    """Compile, evaluate on dev and test, compare with the baseline, save and track; returns the outcome.

    The output folder follows `guidebench.outputs`: an earlier compile's folder is replaced only with
    `force`, or on a resume of the run that wrote it (its marker names the run); it is written aside and renamed
    into place once tracked.
    """
    from guidebench.outputs import claim_output
    from guidebench.tracking import runs as tracking
    from guidebench.tracking import compile as tracking_compile
    from guidebench.lm.factory import configure_lm, lm_info, make_lm

    recipe = load_recipe(request)
    spec = program_spec(request.program)
    check_pairing(spec, recipe)
    settings = used_settings(request, recipe)
    baseline = baseline_spec(request.baseline_program(), spec.kind)
    # A planner's train split is read once, for its examples and for the outcome models its cycles model uses.
    data = _compile_data(request, spec, recipe, models_seed=request.seed if spec.kind == "planner" else None)
    check_evaluable(data, Path(request.data))
    # A resume takes the folder its own run wrote (its marker names the run), never another compile's without force.
    resumed = {RUN_ID_KEY: resume_run_id} if resume_run_id else None
    # Checked before any LM work; the default folder is named after the run, so it is checked once that exists.
    output = claim_output(Path(request.out), "compile", force=force, inputs=[Path(request.data)], resume=resumed) \
        if request.out else None
    print(cost_line(request.lm, [estimate(request, data)[0]], _work_text(request, data, recipe)), flush=True)
    try:
        # A trained program compared with a rule policy calls no LM: none is set up (nor loaded).
        lm = configure_lm(request.lm, **({} if request.temperature is None else {"temperature": request.temperature})) \
            if spec.uses_lm or baseline.uses_lm else None
        role_lms = {role: make_lm(spec_) for role, spec_ in recipe.role_specs().items()}
    except GuidebenchError:
        raise
    except Exception as exc:
        raise GuidebenchError(f"--lm {request.lm}: cannot set up the LM: {type(exc).__name__}: {exc}") from exc
    cycles = planner_cycles(spec.kind, request.cycles_model, data.records_of("test") if spec.kind == "planner" else [],
                            data.dataset_dir, split="test", seed=request.seed)
    metric, feedback = metrics_for(spec.kind, cycles)

    params = tracking.run_params(
        program=request.program, dataset_id=data.dataset_id, split="train+dev", split_hash=data.split_hashes()["train"],
        lm=request.lm if lm is not None else "none", seed=request.seed, kind=spec.kind, run_type="compile",
        optimizer=recipe.name,
        optimizer_class=recipe.dspy_name, recipe_source=request.recipe or "defaults",
        recipe=json.dumps(settings, sort_keys=True), baseline=request.baseline_program(),
        **{f"split_hash.{name}": digest for name, digest in data.split_hashes().items()},
        **{f"n_labeled.{name}": len(examples) for name, examples in (("train", data.trainset), ("dev", data.valset))},
        n_test=len(data.splits["test"].records), threads=request.threads,
        lm_info=lm_info(lm) if lm is not None else "none",
        eval_limit=request.eval_limit or "none", dev_limit=request.dev_limit or "none",
        rules=request.rules or "program default",
        **({"cycles_model": cycles.name, "cycles_estimator": cycles.estimator} if cycles is not None else {}),
        temperature="lm default" if request.temperature is None else request.temperature,
        **recipe.params(), **request.budget().as_params())
    tags = {"guidebench.run_type": "compile", "guidebench.program": request.program,
            "guidebench.optimizer": recipe.name}
    run_name = f"compile {request.program} {recipe.name} seed{request.seed}"

    if not track:
        if output is None:
            return _compile_and_evaluate(request, recipe, data, metric, feedback, role_lms, None, None,
                                         progress, cycles)
        with output.writing() as staging:
            outcome = _compile_and_evaluate(request, recipe, data, metric, feedback, role_lms, None, staging,
                                            progress, cycles)
        return _moved(outcome, staging, Path(request.out))
    with tracking_compile.compile_run(dataset_id=data.dataset_id, kind=spec.kind, run_name=run_name, params=params,
                                      tags=tags, tracking_uri=request.tracking_uri,
                                      resume_run_id=resume_run_id) as run:
        run_id = run.info.run_id
        checkpoint = Checkpoint.for_run(checkpoint_root(), run_id)
        if not checkpoint.exists():
            checkpoint.write_request(asdict(request))
        print(f"MLflow run {run_id}; if interrupted, continue with `guidebench compile --resume {run_id}`")
        out = Path(request.out) if request.out else checkpoint_root().parent / "compiles" / run_id
        output = output or claim_output(out, "compile", force=force, inputs=[Path(request.data)],
                                        resume={RUN_ID_KEY: run_id})
        output.resume = {RUN_ID_KEY: run_id}  # the marker names the run, which a later --resume checks
        with output.writing() as staging:
            outcome = _compile_and_evaluate(request, recipe, data, metric, feedback, role_lms, checkpoint,
                                            staging, progress, cycles)
            outcome.run_id = run_id
            # Params cannot change on a resumed run: the effective settings of this part are tags.
            import mlflow

            mlflow.set_tags({"guidebench.eval_limit": str(request.eval_limit or "none"),
                             "guidebench.budget": json.dumps(request.budget().as_params(), sort_keys=True)})
            tracking_compile.track_compile(outcome, optimizer=recipe.dspy_name)
            outcome.summary["mlflow_run_id"] = run_id
            atomic_write_json(outcome.files["compile"], outcome.summary)
            mlflow.log_artifact(str(outcome.files["compile"]))
        checkpoint.mark("done", out=str(out))
        return _moved(outcome, staging, out)


def _moved(outcome: CompileOutcome, staging: Path, out: Path) -> CompileOutcome:
    """The outcome with its paths where the staged folder was renamed to."""
    outcome.out_dir = out
    outcome.files = {name: out / Path(path).relative_to(staging) for name, path in outcome.files.items()}
    return outcome


def _scored(request: CompileRequest, program: Any, records: list[Any], name: str, progress: bool,
            cycles: Any, chunks: Optional[Iterator[list[Any]]] = None) -> Any:
    """The replay of a split's records, or of `chunks` of them read as they are replayed (rows kept, not records)."""
    if chunks is not None:
        from evals.replay_tasks import replay_chunks

        return replay_chunks(program, chunks, seed=request.seed, name=name, progress=progress)
    return scored_replay(program, records, cycles, name=name, seed=request.seed, threads=request.threads,
                         progress=progress)


def _compile_and_evaluate(request: CompileRequest, recipe: optimizers.Recipe, data: CompileData,
                          metric: Any, feedback: Any, role_lms: dict[str, Any], checkpoint: Optional[Checkpoint],
                          out: Optional[Path], progress: bool, cycles: Any = None) -> CompileOutcome:
    """Compile (or take the checkpoint's program), evaluate on dev and test, compare with the baseline; `data`'s
    examples are emptied once the compile has used them."""
    out = out or Path(tempfile.mkdtemp(prefix="guidebench-compile-"))
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {"program": out / "program.json", "compile": out / "compile.json"}
    started = time.perf_counter()

    # 1. compile (or take the finished one from the checkpoint)
    stored = checkpoint.load_program() if checkpoint is not None and checkpoint.reached("compiled") else None
    if stored is not None:
        program = optimizers.load_compiled(request.build(), stored)
        # A checkpoint written before provenance (or content hashes) was recorded: any train or dev record may
        # have reached it.
        provenance = known(read_provenance(stored)) or data.provenance()
        compile_summary = dict(checkpoint.status().get("compile") or {})
        compile_summary["resumed_after_compile"] = True
        candidates = load_history(checkpoint.history_path)
        print(f"compile: finished before; loaded the compiled program from {checkpoint.program_path}")
    else:
        if checkpoint is not None and not checkpoint.reached("started"):
            checkpoint.mark("started")
        print(f"compile: {request.program} with {recipe.dspy_name} on {len(data.trainset)} train / "
              f"{len(data.valset)} dev examples (seed {request.seed})")
        try:
            result = recipe.compile(request.build(), data.trainset, data.valset, metric, request.budget(),
                                    seed=request.seed, feedback_metric=feedback, role_lms=role_lms,
                                    checkpoint=checkpoint)
        except RecipeError as exc:  # data the recipe cannot work with (a single label class, ...): the user's to fix
            raise GuidebenchError(f"--data {request.data}: {exc}") from None
        program, candidates = result.program, result.candidates
        # Nothing after the compile reads the examples (the provenance is the records' ids): their memory serves
        # the evaluations instead of adding to them (a year of examples is hundreds of MB).
        data.trainset, data.valset = [], []
        compile_summary = result.summary()
        if data.fit_sample is not None:
            compile_summary["fit_sample"] = data.fit_sample
        provenance = data.provenance(result.learned_from)
        if checkpoint is not None:
            checkpoint.save_program({**_state(program), PROVENANCE_KEY: provenance.model_dump(mode="json")})
            checkpoint.mark("compiled", compile=compile_summary)
        if result.stopped_by_budget:
            print(f"compile: stopped by budget ({result.stop_reason}); kept the {result.kept.replace('_', ' ')} program")
    save_program(program, files["program"], provenance)
    # The examples taught the program and are not read again (the evaluations replay the dev and test records):
    # let them go before the replays build their rows.
    data.trainset, data.valset = [], []

    # 2. evaluate the compiled program on dev and test (inside the compile's cache: a resume replays them)
    evals: dict[str, Any] = {}
    learned: dict[str, Any] = {}
    extra = {"dataset_id": data.dataset_id, "data": str(data.dataset_dir), "lm_spec": request.lm,
             "program_source": "compile", "optimizer": recipe.name}
    # A Full Auto compile whose programs call no LM scores dev and test as the records stream from the split:
    # it keeps their rows (scores), not a split's records (`evals.replay_tasks.replay_chunks`: the same rows).
    streamed = data.kind == "full_auto" and not program_spec(request.program).uses_lm and \
        not baseline_spec(request.baseline_program(), data.kind).uses_lm
    cache = disk_cache(checkpoint.cache_dir) if checkpoint is not None else contextlib.nullcontext()
    with cache:
        for split in ("dev", "test"):
            split_data = data.splits[split]
            records = []  # dev's records go before test's are read (a year of either is hundreds of MB)
            if not streamed:
                records = request.eval_records(data.records_of(split), split)
            # The identities the split was read with (the same order and subset): no content hashed again
            keys = request.eval_records(split_data.records, split)
            learned[split] = check_overlap(provenance, keys, dataset_id=data.dataset_id, split=split)
            del keys
            result = _scored(request, program, records, f"{request.program}+{recipe.name}", progress, cycles,
                             data.chunks_of(split, request.eval_indices(len(split_data.records), split))
                             if streamed else None)
            split_files, omitted = write_outputs(result, out / split, {
                **extra, "split": split, "split_hash": split_data.split_hash,
                "eval_limit": request.dev_limit if split == "dev" and request.dev_limit else request.eval_limit,
                "evaluated_records": [row["record_id"] for row in result.rows],
                **learned_from_summary(provenance, learned[split])}, learned[split], progress=progress)
            evals[split] = (result, split_files, omitted)
            print(f"\n{split} ({len(result.rows)} of {len(split_data.records)} records)\n"
                  f"{summary_table(result, omitted)}")
            if learned[split].overlaps:
                print(f"note: {learned[split].line()}")
    if checkpoint is not None:
        checkpoint.mark("evaluated", compile=compile_summary)

    # 3. the uncompiled baseline on test, same records: paired comparison (the shared LM cache keeps it cheap)
    baseline_name = request.baseline_program()
    baseline = _scored(request, request.build(baseline_name), records, baseline_name, progress, cycles,
                       data.chunks_of("test", request.eval_indices(len(data.splits["test"].records)))
                       if streamed else None)  # test's
    del records
    baseline_files, _ = write_outputs(baseline, out / "baseline", {**extra, "split": "test",
                                                                   "program_source": "registry (uncompiled)"},
                                      progress=progress)
    paired = compare(evals["test"][0], baseline, seed=request.seed)
    objective = paired["metrics"].get("objective")

    summary = {
        "request": asdict(request), "recipe": recipe.name, "optimizer": recipe.dspy_name,
        "settings": used_settings(request, recipe), "dataset_id": data.dataset_id,
        "split_hashes": data.split_hashes(), "compile": compile_summary,
        "provenance": provenance.model_dump(mode="json"),
        "learned_from": {split: check.model_dump(mode="json") for split, check in learned.items()},
        "dev": evals["dev"][0].metrics_dict(), "test": evals["test"][0].metrics_dict(),
        "baseline": {"program": baseline_name, "test": baseline.metrics_dict()},
        "test_vs_baseline": {name: value.to_dict() for name, value in paired["metrics"].items()},
        "mcnemar": paired["mcnemar"],
        "eval_usage": {split: evals[split][0].summary.get("usage", {}) for split in ("dev", "test")},
        "wall_s": round(time.perf_counter() - started, 2),
    }
    atomic_write_json(files["compile"], summary)
    if objective is not None and objective.diff is not None:
        p_value = "n/a" if objective.p_value is None else f"{objective.p_value:.3g}"
        span = (f"[{objective.ci_low:+.4f}, {objective.ci_high:+.4f}]" if objective.ci_low is not None
                else "(no interval)")
        print(f"\ntest objective vs {baseline_name}: {objective.diff:+.4f} {span}, p = {p_value}, "
              f"n = {objective.n} ({objective.describe()})")
    files.update({f"dev.{k}": v for k, v in evals["dev"][1].items()})
    files.update({f"test.{k}": v for k, v in evals["test"][1].items()})
    files.update({f"baseline.{k}": v for k, v in baseline_files.items()})
    return CompileOutcome(run_id=None, out_dir=out, summary=summary, files=files, program=program,
                          replays={"dev": evals["dev"][0], "test": evals["test"][0], "baseline": baseline},
                          paired=paired, candidates=list(candidates))


def _state(program: Any) -> dict[str, Any]:
    return json.loads(json.dumps(program.dump_state(), default=str))


def save_program(program: Any, path: Path, provenance: Provenance) -> None:
    """What `program.save(path)` writes (DSPy's JSON state and its `metadata`, the dependency versions), with the
    program's provenance as its `provenance` entry, written once and atomically: no reader ever finds the file
    without its provenance. An export of the file carries it; every loader of a state leaves the entry aside
    (`optimizers.load_compiled`)."""
    from dspy.utils.saving import get_dependency_versions

    atomic_write_json(Path(path), {**_state(program), "metadata": {"dependency_versions": get_dependency_versions()},
                                   PROVENANCE_KEY: provenance.model_dump(mode="json")})


__all__ = ["CompileData", "CompileOutcome", "CompileRequest", "estimate", "load_compile_data", "load_recipe",
           "resume_request", "run_compile"]
