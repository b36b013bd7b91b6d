"""Optuna search over program variant, optimizer and its main settings.

    space = SearchSpace(programs=("full_auto.predict", "full_auto.cot"))
    result = run_search(SearchConfig(study_name="fa", trials=12), space, trainset, devset, metric)

- Dimensions: program variant, optimizer recipe, demos per prompt, LM temperature at inference,
  candidates (only for recipes that search over candidates), the rule gate (only for a program
  that has one, `full_auto.hybrid`: which rules decide before its LM, one of `rule_sets`), and for a
  cascade (`full_auto.cascade`) the probability at which its trained model answers (`threshold`) and
  the LM program that answers the rest (`lm_program`, one of `lm_programs`).
- Sampler: TPE, seeded; pruning: each trial's program is scored on the dev set in minibatches and
  reports the running mean after each one, so a trial clearly below the median stops early.
- Storage: SQLite by default (a killed search resumes: `trials` is the total number of finished
  trials wanted, finished ones are not run again); any SQLAlchemy URL (PostgreSQL...) lets several
  workers share one study. Trials killed without a goodbye are detected by their heartbeat and
  retried once; on the same host a trial whose process died (`kill -9`) is failed and queued for its
  retry as soon as the search starts again (`reap_dead_trials`: each trial records its owner).
- Each trial stores its compiled program state, compile summary and the record ids its compile learned from
  (`CompileResult.learned_from`, the search's provenance of its best trial) as trial attributes, and an
  optional `TrialObserver` (the application's MLflow nested runs) sees every trial.
- The task LM's identity (`SearchConfig.lm`) is recorded on the study and on each trial; a study
  recorded with another model (or model file), or one holding trials but no LM, is refused
  (`StudyLMError`): its trials were scored with another LM, so resuming would mix their scores.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Optional, Protocol, Sequence

import dspy
import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState
from tqdm.auto import tqdm

from programs.hybrid import RULE_SET_CHOICES, parse_rule_set, rule_gate_of
from programs.learned import FullAutoCascade, check_lm_program, check_threshold

from optimizers.base import RecipeError
from optimizers.budget import Budget
from optimizers.candidates import program_state
from optimizers.checkpoint import disk_cache
from optimizers.liveness import owner_alive, owner_token
from optimizers.metric_adapters import Metric
from optimizers.registry import get as get_recipe

from guidebench.errors import check_interrupted

DEFAULT_OPTIMIZERS: tuple[str, ...] = ("labeled_fewshot", "knn_fewshot", "bootstrap_fewshot", "bootstrap_random_search")
# The compact LM programs: a cascade asks its LM about few turns, each at the model's token rate.
CASCADE_SEARCH_LM_PROGRAMS: tuple[str, ...] = ("full_auto.compact_state", "full_auto.compact")
FINISHED: tuple[TrialState, ...] = (TrialState.COMPLETE, TrialState.PRUNED)
HEARTBEAT_S = 30
GRACE_S = 120
OWNER_ATTR = "owner"  # trial user attribute: the process running it (`optimizers.liveness.owner_token`)
TRACKING_RUN_ATTR = "mlflow_run_id"  # trial user attribute: the tracking run of the trial, when one is observed
LM_ATTR = "lm"  # study and trial user attribute: the task LM's identity (`SearchConfig.lm`)
LEARNED_ATTR = "learned_from"  # trial user attribute: the record ids its compile learned from
LM_IDENTITY_KEYS: tuple[str, ...] = ("model", "model_sha256")  # what must match to resume a study


@dataclass(frozen=True)
class SearchSpace:
    """What a trial may choose."""

    programs: tuple[str, ...]
    optimizers: tuple[str, ...] = DEFAULT_OPTIMIZERS
    demos: tuple[int, int] = (1, 6)
    temperature: tuple[float, float] = (0.0, 1.0)
    candidates: tuple[int, int] = (2, 5)
    # The rule gates a rule-gated program chooses from, each "rule+rule" (programs.hybrid.RULE_SET_CHOICES).
    rule_sets: tuple[str, ...] = RULE_SET_CHOICES
    # A cascade's threshold range (steps of 0.05) and the LM programs it may hand unsure turns to.
    thresholds: tuple[float, float] = (0.5, 0.95)
    lm_programs: tuple[str, ...] = CASCADE_SEARCH_LM_PROGRAMS

    def __post_init__(self) -> None:
        if not self.programs:
            raise ValueError("the search space needs at least one program")
        if not self.optimizers:
            raise ValueError("the search space needs at least one optimizer")
        for name in self.optimizers:
            get_recipe(name)
        for choice in self.rule_sets:
            parse_rule_set(choice)
        for name in self.lm_programs:
            check_lm_program(name)
        check_threshold(self.thresholds[0]), check_threshold(self.thresholds[1])
        for dim in ("demos", "temperature", "candidates", "thresholds"):
            low, high = getattr(self, dim)
            if low > high:
                raise ValueError(f"{dim}: low {low} is above high {high}")


@dataclass(frozen=True)
class SearchConfig:
    """How the study runs."""

    study_name: str
    trials: int
    storage: Optional[str] = None  # None: sqlite:///<cache_dir or cwd>/optuna.db
    seed: int = 0
    minibatch_size: int = 8
    n_startup_trials: int = 4
    budget: Budget = field(default_factory=Budget)  # per trial compile
    cache_dir: Optional[Path] = None  # DSPy disk cache shared by the study's trials
    threads: int = 1
    # The task LM's identity ({"spec", "model", "model_sha256"}); None records none and checks none.
    lm: Optional[dict[str, Any]] = None


class StudyLMError(RecipeError):
    """The study was made with another LM (or records none): its trials' scores do not hold for this one."""

    def __init__(self, message: str, recorded: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.recorded = recorded


@dataclass
class TrialOutcome:
    """One finished (or pruned, or failed) trial."""

    number: int
    state: str
    params: dict[str, Any]
    value: Optional[float]
    minibatch_means: list[float] = field(default_factory=list)
    compile_summary: dict[str, Any] = field(default_factory=dict)
    lm: Optional[dict[str, Any]] = None  # the task LM it ran with


@dataclass
class SearchResult:
    """The study after this run."""

    study_name: str
    storage: str
    best_params: dict[str, Any]
    best_value: Optional[float]
    best_trial: Optional[int]
    trials: list[TrialOutcome]
    ran_now: int
    lm: Optional[dict[str, Any]] = None  # the study's task LM
    seed: int = 0  # the study's seed: trial n compiles with `trial_seed(seed, n)`
    max_lm_calls_per_trial: Optional[int] = None

    def best_state(self, study: Optional[optuna.Study] = None) -> Optional[dict[str, Any]]:
        """The compiled program state of the best trial."""
        study = study or optuna.load_study(study_name=self.study_name, storage=self.storage)
        if self.best_trial is None:
            return None
        attrs = study.trials[self.best_trial].user_attrs
        return json.loads(attrs["program_state"]) if "program_state" in attrs else None

    def best_learned_from(self, study: Optional[optuna.Study] = None) -> Optional[list[str]]:
        """The record ids the best trial's compile learned from (None: a trial recorded before they were kept)."""
        study = study or optuna.load_study(study_name=self.study_name, storage=self.storage)
        if self.best_trial is None:
            return None
        return study.trials[self.best_trial].user_attrs.get(LEARNED_ATTR)


class TrialObserver(Protocol):
    """Hooks for tracking trials (e.g. one nested MLflow run each)."""

    def trial(self, number: int, params: dict[str, Any]) -> ContextManager[Any]:
        """Context around one trial."""
        ...

    def finished(self, outcome: TrialOutcome, program: Optional[dspy.Module]) -> None:
        """Called inside the trial's context once it is done (pruned and failed trials too)."""
        ...


def default_storage(directory: Path) -> str:
    """The SQLite study store in a directory."""
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(directory / 'optuna.db').absolute()}"


def open_study(config: SearchConfig) -> optuna.Study:
    """Create or load the study (TPE seeded, median pruner, heartbeat so killed trials are retried)."""
    storage_url = config.storage or default_storage(config.cache_dir or Path.cwd())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if storage_url.startswith("inmemory"):
            storage = optuna.storages.InMemoryStorage()
        else:
            storage = rdb_storage(storage_url)
        sampler = optuna.samplers.TPESampler(seed=config.seed, n_startup_trials=config.n_startup_trials,
                                             multivariate=True, group=True)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    study = optuna.create_study(study_name=config.study_name, storage=storage, sampler=sampler, pruner=pruner,
                                direction="maximize", load_if_exists=True)
    claim_study_lm(study, config.lm)
    return study


def claim_study_lm(study: optuna.Study, lm: Optional[dict[str, Any]]) -> None:
    """Record the LM on a study without trials; refuse a study recorded with another LM, or with none but trials."""
    if lm is None:
        return
    recorded = study.user_attrs.get(LM_ATTR)
    if recorded is None:
        held = len(study.get_trials(deepcopy=False))
        if held:
            raise StudyLMError(f"study {study.study_name!r} holds {held} trial(s) but records no LM (it was made "
                               "before studies recorded one): their scores may come from another LM")
        study.set_user_attr(LM_ATTR, dict(lm))
        return
    if any(recorded.get(key) != lm.get(key) for key in LM_IDENTITY_KEYS):
        raise StudyLMError(f"study {study.study_name!r} was made with LM {_lm_text(recorded)}, this search uses "
                           f"{_lm_text(lm)}: its trials were scored with the other LM", recorded)


def _lm_text(lm: dict[str, Any]) -> str:
    digest = lm.get("model_sha256")
    return f"{lm.get('spec')!r} ({lm.get('model')}{f', model file sha256 {digest[:12]}' if digest else ''})"


def reap_dead_trials(study: optuna.Study, grace_s: Optional[float] = None) -> list[int]:
    """Fail the RUNNING trials whose process is certainly dead, or that never beat in `grace_s` (default
    GRACE_S), and queue their retry; returns their numbers.

    What the heartbeat does after its grace period (`optuna.storages.fail_stale_trials`), done at once
    for the trials of processes on this host that are gone; trials of live or remote processes are left
    to the heartbeat.
    """
    dead = [trial._trial_id for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if owner_alive(trial.user_attrs.get(OWNER_ATTR)) is False]
    return _fail_and_retry(study, dead) + fail_silent_trials(study, GRACE_S if grace_s is None else grace_s)


def fail_silent_trials(study: optuna.Study, grace_s: float) -> list[int]:
    """Fail (and queue the retry of) RUNNING trials that started over `grace_s` ago and never beat.

    A process killed between `study.ask()` and its heartbeat thread's first beat leaves a RUNNING trial
    with no heartbeat row, which `fail_stale_trials` skips forever. A live trial beats within moments of
    starting, so one still silent after the grace period belongs to a dead process.
    """
    import sqlalchemy

    database = getattr(study._storage, "_backend", study._storage)  # optuna wraps an RDBStorage in a cache
    if not isinstance(database, RDBStorage):
        return []
    cutoff = datetime.now() - timedelta(seconds=grace_s)  # datetime_start is the worker's local time
    query = sqlalchemy.text(
        "SELECT t.trial_id FROM trials t LEFT JOIN trial_heartbeats h ON h.trial_id = t.trial_id "
        "WHERE t.study_id = :study AND t.state = 'RUNNING' AND h.trial_id IS NULL AND t.datetime_start < :cutoff"
    ).bindparams(sqlalchemy.bindparam("cutoff", type_=sqlalchemy.DateTime()))  # compared as the column stores it
    with database.engine.connect() as connection:
        silent = [row[0] for row in connection.execute(query, {"study": study._study_id, "cutoff": cutoff})]
    return _fail_and_retry(study, silent)


def _fail_and_retry(study: optuna.Study, trial_ids: Sequence[int]) -> list[int]:
    storage = study._storage
    failed: list[int] = []
    for trial_id in trial_ids:
        try:
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                failed.append(trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:  # it ended, or another process failed it first
            continue
    get_callback = getattr(storage, "get_heartbeat_stale_trial_callback", None)
    retry = get_callback() if get_callback is not None else None
    numbers = []
    for trial_id in failed:
        frozen = storage.get_trial(trial_id)
        numbers.append(frozen.number)
        if retry is not None:
            retry(study, frozen)
    return numbers


def rdb_storage(url: str, grace_s: float = GRACE_S) -> RDBStorage:
    """The RDB storage of a search (heartbeat, one retry of a stale trial); its schema is created by one
    process at a time.

    Optuna creates its tables and version row when a process first opens a new storage; two searches
    starting together both try, and one fails on the version row (`UNIQUE constraint failed:
    alembic_version`). For SQLite an exclusive lock on `<db>.lock` serialises the first open; for a
    server database the loser simply opens again, finding the schema the winner made.
    """
    import sqlalchemy.exc

    for attempt in range(3):
        try:
            with _sqlite_lock(url):
                return RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=grace_s,
                                  heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
                                  engine_kwargs=_engine_kwargs(url))
        # PostgreSQL reports the lost race as a duplicate type or table (IntegrityError, ProgrammingError).
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.OperationalError, sqlalchemy.exc.ProgrammingError):
            if attempt == 2:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _sqlite_lock(url: str) -> Iterator[None]:
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""
    if not path or path.startswith(":memory:"):
        yield
        return
    try:
        import fcntl
    except ImportError:  # no advisory locks here: rely on the retry
        yield
        return
    lock_path = Path(path).with_name(Path(path).name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a", encoding="utf-8") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _engine_kwargs(url: str) -> dict[str, Any]:
    # SQLite and threads: each trial writes from the main thread, but heartbeats come from another.
    return {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}


def trial_seed(seed: int, number: int) -> int:
    """The seed trial `number` of a study seeded `seed` compiles with (`guidebench compile --seed` repeats it)."""
    return seed + number


def suggest(trial: optuna.Trial, space: SearchSpace) -> dict[str, Any]:
    """Draw one configuration (candidates only for recipes that use them)."""
    params: dict[str, Any] = {
        "program": trial.suggest_categorical("program", list(space.programs)),
        "optimizer": trial.suggest_categorical("optimizer", list(space.optimizers)),
        "demos": trial.suggest_int("demos", *space.demos),
        "temperature": round(trial.suggest_float("temperature", *space.temperature, step=0.1), 2)
        if space.temperature[0] < space.temperature[1] else space.temperature[0],
    }
    if get_recipe(params["optimizer"]).uses_candidates:
        params["candidates"] = trial.suggest_int("candidates", *space.candidates)
    return params


def suggest_rule_gate(trial: optuna.Trial, space: SearchSpace, student: dspy.Module) -> dict[str, Any]:
    """For a rule-gated student (`full_auto.hybrid`), draw its rule gate and set it; {} for any other program."""
    gate = rule_gate_of(student)
    if gate is None or not space.rule_sets:
        return {}
    choice = trial.suggest_categorical("rules", list(space.rule_sets))
    gate.rules = parse_rule_set(choice)
    return {"rules": choice}


def suggest_cascade(trial: optuna.Trial, space: SearchSpace, student: dspy.Module) -> dict[str, Any]:
    """For a cascade student, draw its threshold and LM program and set them; {} for any other program."""
    if not isinstance(student, FullAutoCascade):
        return {}
    low, high = space.thresholds
    threshold = round(trial.suggest_float("threshold", low, high, step=0.05), 2) if low < high else low
    lm_program = trial.suggest_categorical("lm_program", list(space.lm_programs))
    student.configure(threshold=threshold, lm_program=lm_program)
    return {"threshold": threshold, "lm_program": lm_program}


def score_in_minibatches(program: dspy.Module, devset: Sequence[dspy.Example], metric: Metric, *,
                         minibatch_size: int, report: Callable[[float, int], bool],
                         means: Optional[list[float]] = None, progress: bool = True) -> float:
    """Mean metric over devset; after each minibatch the running mean goes to `report` (and is appended to
    `means`), and a True answer prunes the trial."""
    scores: list[float] = []
    means = [] if means is None else means
    bar = tqdm(total=len(devset), desc="dev minibatches", unit="ex", leave=False, disable=not progress)
    try:
        for start in range(0, len(devset), max(1, minibatch_size)):
            for example in devset[start:start + minibatch_size]:
                scores.append(_score_one(program, example, metric))
                bar.update(1)
            means.append(sum(scores) / len(scores))
            if report(means[-1], len(means) - 1):
                raise optuna.TrialPruned(f"pruned after {len(scores)} dev examples (mean {means[-1]:.3f})")
    finally:
        bar.close()
    return sum(scores) / len(scores) if scores else 0.0


def _score_one(program: dspy.Module, example: dspy.Example, metric: Metric) -> float:
    try:
        value = metric(example, program(**example.inputs()))
    except Exception:  # a program that raises earns 0, as in replay
        return 0.0
    value = getattr(value, "score", value)
    value = float(value)
    return 0.0 if math.isnan(value) else value


def run_search(config: SearchConfig, space: SearchSpace, trainset: Sequence[dspy.Example],
               devset: Sequence[dspy.Example], metric: Metric, *, program_factory: Callable[[str], dspy.Module],
               feedback_metric: Optional[Metric] = None, observer: Optional[TrialObserver] = None,
               progress: bool = True, valset: Optional[Sequence[dspy.Example]] = None) -> SearchResult:
    """Run (or resume) the study until it holds `config.trials` finished trials.

    Each trial is scored on `devset` in minibatches; its optimizer selects on `valset` (default `devset`), in the
    given order, as `guidebench compile` passes its dev split: the best trial's settings compile the same program.
    """
    if config.trials < 1:
        raise RecipeError("trials must be at least 1")
    if not trainset or not devset:
        raise RecipeError("the search needs labeled training and dev examples")
    study = open_study(config)
    reap_dead_trials(study)
    done = len(study.get_trials(deepcopy=False, states=FINISHED))
    remaining = max(0, config.trials - done)
    # One fixed order for every trial: minibatch means are comparable across trials (what pruning needs).
    ordered = list(devset)
    random.Random(config.seed).shuffle(ordered)
    base_lm = dspy.settings.lm

    def objective(trial: optuna.Trial) -> float:
        check_interrupted()  # a Ctrl-C swallowed since the last trial (or while the study opened) stops it here
        trial.set_user_attr(OWNER_ATTR, owner_token())
        if config.lm is not None:
            trial.set_user_attr(LM_ATTR, dict(config.lm))
        params = suggest(trial, space)
        # The student is built before the trial is observed: a rule-gated program draws its gate as a parameter too.
        student = program_factory(params["program"])
        params.update(suggest_rule_gate(trial, space, student))
        params.update(suggest_cascade(trial, space, student))
        observed = observer.trial(trial.number, params) if observer else contextlib.nullcontext()
        with observed as handle:
            # An observer that tracks the trial (an MLflow run) is named on the trial: the Optuna dashboard
            # then shows, next to each trial, the run that holds its metrics and program state.
            run_id = getattr(getattr(handle, "info", None), "run_id", None)
            if isinstance(run_id, str) and run_id:
                trial.set_user_attr(TRACKING_RUN_ATTR, run_id)
            outcome = TrialOutcome(number=trial.number, state="RUNNING", params=params, value=None)
            program: Optional[dspy.Module] = None
            try:
                recipe_cls = get_recipe(params["optimizer"])
                recipe = recipe_cls(recipe_cls.search_overrides(params["demos"], params.get("candidates", 0)),
                                    source=f"search trial {trial.number}")
                with _temperature(base_lm, params["temperature"]):
                    result = recipe.compile(student, trainset, list(devset if valset is None else valset), metric,
                                            config.budget, seed=trial_seed(config.seed, trial.number),
                                            feedback_metric=feedback_metric)
                    program = result.program
                    outcome.compile_summary = result.summary()
                    trial.set_user_attr("compile", json.dumps(outcome.compile_summary, default=str))
                    trial.set_user_attr("program_state", json.dumps(program_state(program)))
                    trial.set_user_attr(LEARNED_ATTR, result.learned_from)

                    def report(mean: float, step: int) -> bool:
                        trial.report(mean, step)
                        return trial.should_prune()

                    value = score_in_minibatches(program, ordered, metric, minibatch_size=config.minibatch_size,
                                                 report=report, means=outcome.minibatch_means, progress=progress)
                outcome.value, outcome.state = value, "COMPLETE"
                return value
            except optuna.TrialPruned:
                outcome.state = "PRUNED"
                outcome.value = outcome.minibatch_means[-1] if outcome.minibatch_means else None
                raise
            except BaseException:
                outcome.state = "FAIL"
                raise
            finally:
                if observer is not None:
                    observer.finished(outcome, program)

    if remaining:
        with _maybe_cache(config.cache_dir), warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # A trial whose recipe fails is recorded as FAIL and the search goes on; Ctrl-C stops it.
            study.optimize(objective, n_trials=remaining, callbacks=[MaxTrialsCallback(config.trials, states=FINISHED)],
                           catch=(Exception,), show_progress_bar=progress, gc_after_trial=False)
    return _result(study, config, ran_now=remaining)


@contextlib.contextmanager
def _temperature(lm: Optional[dspy.BaseLM], temperature: float) -> Iterator[None]:
    if lm is None:
        yield
        return
    with dspy.context(lm=lm.copy(temperature=float(temperature))):
        yield


@contextlib.contextmanager
def _maybe_cache(directory: Optional[Path]) -> Iterator[None]:
    if directory is None:
        yield
        return
    with disk_cache(directory / "dspy-cache"):
        yield


def _result(study: optuna.Study, config: SearchConfig, *, ran_now: int) -> SearchResult:
    trials = []
    for t in study.get_trials(deepcopy=False):
        summary = json.loads(t.user_attrs["compile"]) if "compile" in t.user_attrs else {}
        means = [t.intermediate_values[k] for k in sorted(t.intermediate_values)]
        trials.append(TrialOutcome(number=t.number, state=t.state.name, params=_clean(t.params), value=t.value,
                                   minibatch_means=means, compile_summary=summary, lm=t.user_attrs.get(LM_ATTR)))
    completed = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    best = max(completed, key=lambda t: (t.value, -t.number)) if completed else None
    storage = config.storage or default_storage(config.cache_dir or Path.cwd())
    return SearchResult(study_name=study.study_name, storage=storage, best_params=_clean(best.params) if best else {},
                        best_value=best.value if best else None, best_trial=best.number if best else None,
                        trials=trials, ran_now=ran_now, lm=study.user_attrs.get(LM_ATTR), seed=config.seed,
                        max_lm_calls_per_trial=config.budget.max_lm_calls)


def _clean(params: dict[str, Any]) -> dict[str, Any]:
    # Optuna stores stepped floats with binary noise (0.7000000000000001).
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in params.items()}
