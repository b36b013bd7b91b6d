"""The one small interface every optimizer recipe implements.

A recipe is a DSPy optimizer plus its documented settings. Subclasses declare:

- `name` (registry key), `dspy_name` (the DSPy class, as the runtime manifest records it),
  `summary` (one line for `guidebench optimizers`);
- `Settings`: a pydantic model whose field defaults and descriptions *are* the documented defaults
  (the recipe files in `optimizers/recipes/` are rendered from them and a test keeps them equal);
- `_optimize(program, trainset, valset, ctx) -> dspy.Module`: run the DSPy optimizer;
- `_plan(n_train, n_val, n_predictors) -> list[Stage]`: how many LM calls each stage makes, with
  how many demos in the prompt, for `estimate()` (the `--dry-run`);
- optionally `_salvage(ctx)`: the best program the optimizer holds when the budget stops it;
- `selects_on_dev` (False for a recipe that never looks at the valset) and, to be more precise than "every
  training example it was given", `_reached(compiled, trainset, valset)`.

`CompileResult.learned_from` lists the record ids of every example that reached a fit, a demo or a selection
(the training examples the optimizer was given, the dev examples it selected on, and train + dev when a
program's trained part was fitted first): the compile records them as the program's provenance
(`runtime.provenance`), so that it is never judged on them.

`Recipe.compile` wraps `_optimize` with the budget guard, the candidate tracker and the compile's
disk cache, catches `BudgetExceeded` at the compile boundary and returns a `CompileResult`. A program
that decides some inputs without its LM offers `lm_examples(trainset)` (`full_auto.hybrid`): the
optimizer then learns from the examples its LM decides; the valset still scores the whole program.

Transient LM failures (rate limits, timeouts, server errors, lost connections): each LM call first
gets the LM's own retries (DSPy's `num_retries`, exponential backoff honouring `retry_after`). A
failure that outlasts them either aborts the optimizer or is swallowed by it (DSPy's bootstrap and
`Evaluate` score a failed call as a miss), which would bias what it selects. So when an attempt saw
any transient LM failure, `compile` waits (exponential backoff, `retry_after` honoured) and runs the
optimizer again, up to `COMPILE_RETRIES` times. Progress is kept: finished LM calls come back from
the cache and the candidates already evaluated stay in the history (and the checkpoint).
A failure no wait can cure (bad API key, billing, unknown model, LM misconfigured) fails the compile
instead of letting the optimizer return a program built without the LM.
"""

from __future__ import annotations

import logging
import random
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

import dspy
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .budget import Budget, BudgetExceeded, BudgetGuard
from .candidates import Candidate, CandidateTracker, count_demos
from .checkpoint import Checkpoint, disk_cache
from .demos import seed_everything
from .estimate import CostEstimate, PromptSizes, Stage, measure_prompts
from .keys import recipe_key
from .lm_failures import LMFailures, backoff, extra_callbacks, is_transient_lm_error, short_error
from .metric_adapters import Metric, feedback_from_scalar
from .recipe_files import RecipeError, explain_errors, read_recipe_file, toml_value, wrap_words

logger = logging.getLogger(__name__)
# Whole-optimizer retries after transient LM failures (see the module docstring), and their backoff.
COMPILE_RETRIES = 3
RETRY_BACKOFF_S = 2.0


def train_cap(default: int) -> Any:
    """The `max_train_examples` field with a recipe's default."""
    return Field(default, ge=0, description="Training examples the optimizer sees (a seeded sample; 0: all). "
                                            "Caps bootstrapping and reflection on a slow LM.")


def val_cap(default: int) -> Any:
    """The `max_val_examples` field with a recipe's default."""
    return Field(default, ge=0, description="Dev examples the optimizer selects on (a seeded sample; 0: all). "
                                            "Every candidate is scored on each of them.")


class RecipeSettings(BaseModel):
    """Settings every recipe has."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    num_threads: int = Field(1, ge=1, description="Parallel LM calls while compiling (the embedded model "
                                                   "serialises calls anyway; raise it for a remote LM).")
    max_train_examples: int = train_cap(0)
    max_val_examples: int = val_cap(0)

    def subsets(self, trainset: Sequence[Any], valset: Sequence[Any], seed: int) -> tuple[list[Any], list[Any]]:
        """The seeded training and dev samples the optimizer works on (all of a split when its cap is 0)."""
        return _sample(trainset, self.max_train_examples, seed), _sample(valset, self.max_val_examples, seed)


def _sample(examples: Sequence[Any], cap: int, seed: int) -> list[Any]:
    if not cap or len(examples) <= cap:
        return list(examples)
    return random.Random(seed).sample(list(examples), cap)


@dataclass
class CompileContext:
    """What `_optimize` gets besides the program and the data."""

    metric: Metric
    seed: int
    settings: RecipeSettings
    feedback_metric: Optional[Metric] = None
    role_lms: Mapping[str, dspy.BaseLM] = field(default_factory=dict)
    checkpoint: Optional[Checkpoint] = None
    tracker: CandidateTracker = field(default_factory=CandidateTracker)
    guard: BudgetGuard = field(default_factory=BudgetGuard)
    state: dict[str, Any] = field(default_factory=dict)  # the recipe's scratch, read by `_salvage`

    def lm_for(self, role: str) -> Optional[dspy.BaseLM]:
        """The LM configured for a role (e.g. "reflection", "prompt"), or None for the task LM."""
        return self.role_lms.get(role)


@dataclass
class CompileResult:
    """A compiled program and how it was obtained."""

    program: dspy.Module
    recipe: str
    optimizer: str
    settings: dict[str, Any]
    seed: int
    stopped_by_budget: bool
    stop_reason: Optional[str]
    kept: str  # "optimizer" | "best_candidate" | "salvaged" | "uncompiled"
    candidates: list[Candidate]
    usage: dict[str, Any]
    wall_s: float
    retries: int = 0  # optimizer runs repeated after transient LM failures
    transient_lm_errors: int = 0  # LM calls that still failed after their own retries (all attempts)
    details: dict[str, Any] = field(default_factory=dict)  # what a recipe reports of its choices (the fit's grid)
    learned_from: list[str] = field(default_factory=list)  # record ids that reached a fit, a demo or a selection

    @property
    def best_candidate(self) -> Optional[Candidate]:
        """The best evaluated candidate, if the optimizer evaluated any."""
        if not self.candidates:
            return None
        return max(self.candidates, key=lambda c: (c.n_examples, c.score, -c.index))

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (no program state)."""
        return {
            "recipe": self.recipe, "optimizer": self.optimizer, "settings": self.settings, "seed": self.seed,
            "stopped_by_budget": self.stopped_by_budget, "stop_reason": self.stop_reason, "kept": self.kept,
            "n_candidates": len(self.candidates), "demo_count": count_demos(self.program),
            "usage": self.usage, "wall_s": round(self.wall_s, 3), "retries": self.retries,
            "transient_lm_errors": self.transient_lm_errors, **({"details": self.details} if self.details else {}),
        }


class Recipe:
    """Base class of the optimizer recipes: a DSPy optimizer with validated, documented settings."""

    name: ClassVar[str]
    dspy_name: ClassVar[str]
    summary: ClassVar[str]
    Settings: ClassVar[type[RecipeSettings]] = RecipeSettings
    # Settings that name an LM for a role (e.g. {"reflection_lm": "reflection"}); "" means the task LM.
    lm_roles: ClassVar[Mapping[str, str]] = {}
    # True when the recipe needs the feedback metric (GEPA).
    needs_feedback: ClassVar[bool] = False
    # True when the search's "candidates" dimension means something for this recipe.
    uses_candidates: ClassVar[bool] = False
    # False for a recipe that fits a trained model instead of compiling LM predictors (`fit`): it sees every
    # training example, and a program's trained part is not fitted beforehand.
    compiles_lm: ClassVar[bool] = True
    # False for a recipe that never looks at the valset (it learns from train alone: demos, bootstrapped traces).
    selects_on_dev: ClassVar[bool] = True

    def __init__(self, settings: RecipeSettings | Mapping[str, Any] | None = None, *, source: str = "defaults") -> None:
        self.source = source
        if isinstance(settings, RecipeSettings):  # the settings it names, as named (the rest keep their defaults)
            self.settings = self.Settings.model_validate(settings.model_dump(exclude_unset=True))
        else:
            try:
                self.settings = self.Settings.model_validate(dict(settings or {}))
            except ValidationError as exc:
                raise RecipeError(f"{source}: invalid settings for recipe {self.name!r}: {explain_errors(exc)}") from None

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The documented default settings."""
        return cls.Settings().model_dump()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "<mapping>") -> "Recipe":
        """A recipe from a parsed recipe file: `{"optimizer": name, "settings": {...}}`."""
        data = dict(data)
        named = data.pop("optimizer", None)
        if named is not None and recipe_key(named) not in {recipe_key(cls.name), recipe_key(cls.dspy_name)}:
            raise RecipeError(f"{source}: field 'optimizer' is {named!r}, but this is the {cls.name!r} recipe")
        settings = data.pop("settings", {})
        if data:
            raise RecipeError(f"{source}: unknown top-level field(s) {sorted(data)}; expected 'optimizer' and 'settings'")
        if not isinstance(settings, Mapping):
            raise RecipeError(f"{source}: field 'settings' must be a table/mapping")
        return cls(settings, source=source)

    @classmethod
    def from_file(cls, path: str | Path) -> "Recipe":
        """Read a TOML or YAML recipe file for this recipe."""
        return cls.from_mapping(read_recipe_file(path), source=str(path))

    @classmethod
    def render_toml(cls, values: Optional[Mapping[str, Any]] = None) -> str:
        """The recipe file with every setting documented: the defaults (what `optimizers/recipes/` holds),
        or the given values."""
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        intro = ("# Every setting below is the default; copy this file, change what you need and pass it"
                 if values is None else "# Settings chosen for this run (defaults where not chosen); pass it")
        lines = [f"# {cls.dspy_name} ({cls.name}): {doc}", f"# {cls.summary}.", intro,
                 "# with `guidebench compile --recipe FILE` (YAML with the same keys works too).",
                 "", f'optimizer = "{cls.name}"', "", "[settings]"]
        for name, info in cls.Settings.model_fields.items():
            value = info.get_default(call_default_factory=True) if values is None else values[name]
            for chunk in wrap_words(info.description or "", 96):
                lines.append(f"# {chunk}")
            lines.append(f"{name} = {toml_value(value)}")
        return "\n".join(lines) + "\n"

    def to_toml(self) -> str:
        """This recipe's settings as a recipe file."""
        return self.render_toml(self.settings.model_dump())

    def with_overrides(self, **overrides: Any) -> "Recipe":
        """A copy with some settings changed (validated)."""
        merged = {**self.settings.model_dump(exclude_unset=True), **overrides}
        return type(self)(merged, source=f"{self.source} + overrides")

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, Any]:
        """Settings for the search's generic dimensions (demos per prompt, candidates to try)."""
        raise NotImplementedError(f"{cls.name} does not take part in the search")

    def params(self) -> dict[str, Any]:
        """Flat settings for tracking: `recipe.<setting>`."""
        return {f"recipe.{k}": v for k, v in self.settings.model_dump().items()}

    def used_settings(self, program: dspy.Module) -> dict[str, Any]:
        """The settings this recipe uses on `program`, as a compile records them; RecipeError, naming the setting,
        for one it would leave unused (a recipe's setting is used or refused, never recorded and ignored)."""
        return self.settings.model_dump()

    def role_specs(self) -> dict[str, str]:
        """LM specs this recipe asks for, by role (only the roles whose setting is not empty)."""
        found = {}
        for setting, role in self.lm_roles.items():
            spec = getattr(self.settings, setting, "")
            if spec:
                found[role] = spec
        return found

    # -- compile -------------------------------------------------------------------------------
    def compile(
        self,
        program: dspy.Module,
        trainset: Sequence[dspy.Example],
        valset: Sequence[dspy.Example],
        metric: Metric,
        budget: Optional[Budget] = None,
        *,
        seed: int = 0,
        feedback_metric: Optional[Metric] = None,
        role_lms: Optional[Mapping[str, dspy.BaseLM]] = None,
        checkpoint: Optional[Checkpoint] = None,
        retries: Optional[int] = None,
        backoff_s: Optional[float] = None,
    ) -> CompileResult:
        """Optimize `program` on trainset (selecting on valset) within the budget; never raises BudgetExceeded.

        `retries` / `backoff_s`: optimizer runs repeated after transient LM failures and the first wait
        (default `COMPILE_RETRIES`, `RETRY_BACKOFF_S`; see the module docstring).
        """
        if not trainset:
            raise RecipeError(f"{self.name}: the training set is empty")
        settings = self.used_settings(program)
        reached: list[dspy.Example] = []
        if self.compiles_lm:
            fitted = _fitted_first(program, trainset, valset, metric, seed)
            if fitted is not program:  # the fit learned from train and selected on train + dev
                reached += [*trainset, *valset]
            program = fitted
            narrow = getattr(program, "lm_examples", None)
            if callable(narrow):
                # A program that decides some inputs without its LM (full_auto.hybrid's rule gate, a cascade's sure
                # model) trains its LM on the rest: demos of turns decided elsewhere would only crowd the prompt.
                # Selection still scores it all.
                trainset = narrow(list(trainset))
        trainset, valset = self.settings.subsets(trainset, valset, seed)
        if self.needs_feedback and feedback_metric is None:
            feedback_metric = feedback_from_scalar(metric)
        retries = COMPILE_RETRIES if retries is None else max(0, retries)
        backoff_s = RETRY_BACKOFF_S if backoff_s is None else max(0.0, backoff_s)
        guard = BudgetGuard(budget)
        tracker = CandidateTracker(checkpoint.history_path if checkpoint else None)
        ctx = CompileContext(metric=metric, seed=seed, settings=self.settings, feedback_metric=feedback_metric,
                             role_lms=dict(role_lms or {}), checkpoint=checkpoint, tracker=tracker, guard=guard)
        started = time.perf_counter()
        transient_total = 0
        attempt = 0
        while True:
            seed_everything(seed)  # every attempt replays the same seeded optimizer: its done calls are cached
            stop_reason: Optional[str] = None
            failure: Optional[Exception] = None
            watcher = LMFailures()
            with ExitStack() as stack:
                if checkpoint is not None:
                    stack.enter_context(disk_cache(checkpoint.cache_dir))
                stack.enter_context(guard.active())
                stack.enter_context(extra_callbacks(tracker, watcher))
                try:
                    compiled = self._optimize(program.deepcopy(), list(trainset), list(valset), ctx)
                    kept = "optimizer"
                except BudgetExceeded as exc:
                    stop_reason = exc.reason
                    compiled, kept = self._keep_best(program, ctx)
                except Exception as exc:
                    failure = exc
            transient_total += watcher.count
            if failure is None and watcher.fatal is not None:
                failure = watcher.fatal  # the optimizer swallowed it; its program was built without the LM
            transient = watcher.fatal is None and (
                watcher.count > 0 or (failure is not None and is_transient_lm_error(failure)))
            if stop_reason is not None or not transient or attempt >= retries:
                if failure is not None:
                    raise failure
                break
            delay = backoff(backoff_s, attempt, watcher.retry_after)
            logger.warning("%s: %s after %d transient LM failure(s) (last: %s); running the optimizer again in "
                           "%.1f s (retry %d of %d; finished LM calls come back from the cache)", self.name,
                           "failed" if failure is not None else "finished", watcher.count,
                           watcher.last or (failure and short_error(failure)), delay, attempt + 1, retries)
            time.sleep(delay)
            attempt += 1
        return CompileResult(
            program=compiled, recipe=self.name, optimizer=self.dspy_name, settings=settings,
            seed=seed, stopped_by_budget=stop_reason is not None, stop_reason=stop_reason, kept=kept,
            candidates=list(tracker.candidates), usage=guard.usage(), wall_s=time.perf_counter() - started,
            retries=attempt, transient_lm_errors=transient_total, details=dict(ctx.state.get("details") or {}),
            learned_from=_record_ids([*reached, *self._reached(compiled, trainset, valset)]),
        )

    def _keep_best(self, program: dspy.Module, ctx: CompileContext) -> tuple[dspy.Module, str]:
        best = ctx.tracker.best()
        if best is not None:
            restored = program.deepcopy()
            restored.load_state(best.state)
            return restored, "best_candidate"
        salvaged = self._salvage(program, ctx)
        if salvaged is not None:
            return salvaged, "salvaged"
        return program.deepcopy(), "uncompiled"

    # -- what subclasses implement ------------------------------------------------------------------
    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        raise NotImplementedError

    def _reached(self, compiled: dspy.Module, trainset: Sequence[dspy.Example],
                 valset: Sequence[dspy.Example]) -> list[dspy.Example]:
        """The examples that reached a demo or a selection: every training example the optimizer was given, and the
        dev examples when it selects on them."""
        return [*trainset, *(valset if self.selects_on_dev else [])]

    def _salvage(self, program: dspy.Module, ctx: CompileContext) -> Optional[dspy.Module]:
        """The best program the optimizer built before the budget stopped it (None: nothing usable)."""
        return None

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        raise NotImplementedError

    # -- dry run -------------------------------------------------------------------------------
    def estimate(
        self,
        program: dspy.Module,
        trainset: Sequence[dspy.Example],
        valset: Sequence[dspy.Example],
        *,
        sizes: Optional[PromptSizes] = None,
        count_tokens: Optional[Callable[[str], int]] = None,
        seconds_per_call: float = 1.8,
        prompt_tokens_per_s: float = 0.0,
        completion_tokens_per_s: float = 0.0,
    ) -> CostEstimate:
        """Estimate LM calls and tokens of `compile` from the settings and measured prompt sizes; no LM call."""
        trainset, valset = self.settings.subsets(trainset, valset, 0)
        if sizes is None:
            sizes = measure_prompts(program, list(trainset), count_tokens=count_tokens)
        stages = self._plan(len(trainset), len(valset), max(1, len(program.predictors())))
        return CostEstimate.from_stages(self.name, stages, sizes, seconds_per_call=seconds_per_call,
                                        prompt_tokens_per_s=prompt_tokens_per_s,
                                        completion_tokens_per_s=completion_tokens_per_s)


def _record_ids(examples: Sequence[dspy.Example]) -> list[str]:
    """The sorted, distinct record ids of examples (an example built without one has none to give)."""
    return sorted({str(ex.get("record_id")) for ex in examples if ex.get("record_id")})


def _fitted_first(program: dspy.Module, trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example],
                  metric: Metric, seed: int) -> dspy.Module:
    """The program, with its trained part fitted first when it has an unfitted one (the `fit` recipe's
    defaults, fit on train alone).

    A cascade's LM program learns from the turns its model hands over, so the model must exist before
    an LM optimizer narrows the training set. The model is not refit on dev: the cascade is judged on dev
    (its threshold and LM program are a search's trial parameters), and a model fit on dev would be surer
    there than on turns it never saw, handing the LM fewer turns on dev than it will in production.
    """
    from programs.learned import needs_fitting

    if not needs_fitting(program):
        return program
    from .fitting import FitError, FitSettings, fit_program

    fitted = program.deepcopy()
    try:
        fit_program(fitted, trainset, valset, metric, FitSettings(refit_on_dev=False), seed=seed)
    except FitError as exc:
        raise RecipeError(f"fitting the trained model first: {exc}") from None
    logger.info("fitted the program's trained model with the fit recipe's defaults before compiling its LM")
    return fitted


__all__ = ["COMPILE_RETRIES", "CompileContext", "CompileResult", "Recipe", "RecipeError", "RecipeSettings", "train_cap",
           "val_cap"]
