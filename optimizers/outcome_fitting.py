"""Fit the planner's outcome model and the deployed planner's propensity model with scikit-learn.

From a dataset's planner records or examples (the train split, and dev when given) every logged attempt with a
family and a best becomes a row: the packet's features for the family it tried (`runtime.outcome_features.candidate_row`),
whether it was valid, and the share of the best it took off (`evals.offpolicy.bandit`). Three things are fit:
- P(valid): gradient-boosted trees (`GradientBoostingClassifier`) or a logistic regression;
- the expected improvement share: gradient-boosted trees (`GradientBoostingRegressor`, depth 2 or 3) or a ridge
  regression over the row and its family interactions (`runtime.outcome.linear_expansion`);
- the propensity: a multinomial logistic regression of the logged family on the packet (`policy_row`).
Each candidate is scored by grouped k-fold cross-validation over the episodes (no episode in two parts: its
attempts are not independent), the best by held-out squared error (gain) or log loss (valid, propensity) is
refit on every row, and everything is seeded and deterministic. Trees are exported as arrays, linear models as
coefficients (`runtime.outcome`, `evals.offpolicy.propensity`): the runtime scores them with NumPy alone.
The chosen gain model's held-out predictions also calibrate it: each family's estimates are scaled so that, on
episodes the model did not see, their mean matches what that family's attempts brought (`family_scale`). The same
predictions, each fold scaled by the other folds' factor, are its per-family calibration on held-out episodes
(`family_calibration` in the fit entry; `evals.offpolicy.held_out`).

What the fit was trained on is recorded in one place, the model's `fit` entry (`OutcomeFit.chosen`): counts of
train and dev records, usable attempts and episodes, and the SHA-256 of the sorted record ids.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from evals.offpolicy.bandit import Attempt, TrainingData, attempt_of, attempt_of_example, training_data
from evals.offpolicy.held_out import family_calibration
from evals.offpolicy.propensity import PROPENSITY_KIND, PropensityModel
from runtime.advisor import FAMILIES
from runtime.outcome import MODEL_KIND, OutcomeModel, linear_expansion
from runtime.outcome_features import FEATURES_VERSION, ROW_NAMES
from runtime.records import PlannerRecord

from .blas import one_blas_thread

MIN_ATTEMPTS = 30  # usable logged attempts (a family in strategy_tags[0], a best before) a model needs
MIN_EPISODES = 2
MIN_SCALED = 20  # attempts of a family its calibration needs
MAX_SCALE = 2.0
MAX_WORKERS = 4  # threads the fits run on at most (`fit_workers`)


class OutcomeFitError(ValueError):
    """Logs the models cannot be fit on; the message is one line saying what is missing."""


@dataclass(frozen=True)
class OutcomeFitSettings:
    """What the fit tries and how (the `fit` recipe's planner settings)."""

    gain_models: tuple[str, ...] = ("trees:2", "trees:3", "linear:10")
    valid_models: tuple[str, ...] = ("trees:2",)
    propensity_C: tuple[float, ...] = (0.3, 3.0)
    n_estimators: int = 200
    learning_rate: float = 0.05
    min_samples_leaf: int = 20  # outcomes are noisy: leaves of 20 attempts (chosen on the development scenarios)
    folds: int = 3
    weighting: str = "propensity"  # "propensity": rows weighted by 1 / P(logged family), clipped; "none"
    max_weight: float = 3.0  # low: attempts of weight 10 made the fit chase their noisy gains (simearly, CV)
    # Attempts the cross-validation compares the candidates on: above it, whole episodes in a fixed order (the hash
    # of their ids) up to this many; the chosen candidate is still fit on every attempt. 0: every attempt.
    selection_max: int = 2_000

    def key(self) -> dict[str, Any]:
        """The settings as JSON data (part of a cached model's key)."""
        return {"gain_models": list(self.gain_models), "valid_models": list(self.valid_models),
                "propensity_C": list(self.propensity_C), "n_estimators": self.n_estimators,
                "learning_rate": self.learning_rate, "min_samples_leaf": self.min_samples_leaf, "folds": self.folds,
                "weighting": self.weighting, "max_weight": self.max_weight, "selection_max": self.selection_max}


@dataclass
class OutcomeFit:
    """The fitted models and what the fit chose, with the records they were fit on."""

    outcome: OutcomeModel
    propensity: PropensityModel
    chosen: dict[str, Any]
    grid: list[dict[str, Any]] = field(default_factory=list)
    trained_on: list[str] = field(default_factory=list)  # record ids of the rows the models saw


def _standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    spread = X.std(axis=0)
    return X.mean(axis=0), np.where(spread > 1e-12, spread, 1.0)


def _trees(kind: str, depth: int, settings: OutcomeFitSettings, seed: int) -> Any:
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

    cls = GradientBoostingRegressor if kind == "gain" else GradientBoostingClassifier
    return cls(n_estimators=settings.n_estimators, learning_rate=settings.learning_rate, max_depth=depth,
               min_samples_leaf=settings.min_samples_leaf, subsample=0.8, random_state=seed)


class _Candidate:
    """One model family with its settings, fit on rows and exportable as a `runtime.outcome.Scorer` state."""

    def __init__(self, spec: str, kind: str, settings: OutcomeFitSettings, seed: int) -> None:
        self.spec, self.kind = spec, kind
        family, _, value = spec.partition(":")
        self.family, self.value = family, float(value or 1)
        self.settings, self.seed = settings, seed
        self.held: Optional[np.ndarray] = None  # its held-out predictions over the folds (`_select`)

    def fit(self, X: np.ndarray, y: np.ndarray, weight: Optional[np.ndarray] = None) -> "_Candidate":
        if self.family == "trees":
            self.model = _trees(self.kind, int(self.value), self.settings, self.seed).fit(X, y, sample_weight=weight)
            return self
        from sklearn.linear_model import LogisticRegression, Ridge

        wide = linear_expansion(X)
        self.mean, self.scale = _standardise(wide)
        Z = (wide - self.mean) / self.scale
        self.model = (Ridge(alpha=self.value) if self.kind == "gain"
                      else LogisticRegression(C=self.value, max_iter=2000, random_state=self.seed)).fit(
            Z, y, sample_weight=weight)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        if self.family == "linear":
            X = (linear_expansion(X) - self.mean) / self.scale
        if self.kind == "gain":
            return np.maximum(self.model.predict(X), 0.0)
        return self.model.predict_proba(X)[:, 1]

    def state(self, X: np.ndarray) -> dict[str, Any]:
        link = "identity" if self.kind == "gain" else "logistic"
        if self.family == "linear":
            coef = np.ravel(self.model.coef_)
            intercept = float(np.ravel([self.model.intercept_])[0])
            return {"type": "linear", "link": link, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                    "coef": coef.tolist(), "intercept": intercept}
        rate = self.model.learning_rate
        trees, first = [], X[:1].astype(np.float32).astype(np.float64)
        total = 0.0
        for estimator in self.model.estimators_[:, 0]:
            t = estimator.tree_
            leaf = t.children_left < 0
            trees.append({"feature": np.where(leaf, 0, t.feature).tolist(),
                          "threshold": np.where(leaf, 0.0, t.threshold).tolist(),
                          "left": t.children_left.tolist(), "right": t.children_right.tolist(),
                          "value": (t.value[:, 0, 0] * rate).tolist()})
            total += float(estimator.predict(first)[0]) * rate
        raw = self.model.predict(first)[0] if self.kind == "gain" else self.model.decision_function(first)[0]
        return {"type": "trees", "link": link, "bias": float(raw) - total, "trees": trees}


def _constant(link: str, value: float) -> dict[str, Any]:
    """A constant scorer: the bias, and one tree of one leaf of 0 (the runtime refuses an empty tree list)."""
    if link == "logistic":
        p = min(max(value, 1e-3), 1 - 1e-3)
        value = math.log(p / (1 - p))
    leaf = {"feature": [0], "threshold": [0.0], "left": [-1], "right": [-1], "value": [0.0]}
    return {"type": "trees", "link": link, "bias": float(value), "trees": [leaf]}


def _folds(groups: Sequence[str], folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import GroupKFold

    n_groups = len(set(groups))
    if n_groups < MIN_EPISODES or folds < 2:
        return []
    return list(GroupKFold(n_splits=min(folds, n_groups)).split(np.zeros(len(groups)), groups=groups))


def _loss(kind: str, y: np.ndarray, predicted: np.ndarray, weight: np.ndarray) -> float:
    if kind == "gain":
        return float(np.average((y - predicted) ** 2, weights=weight))
    p = np.clip(predicted, 1e-6, 1 - 1e-6)
    return float(-np.average(y * np.log(p) + (1 - y) * np.log(1 - p), weights=weight))


def _episode_sample(groups: Sequence[str], cap: int) -> np.ndarray:
    """Indices of the rows the candidates are compared on: all up to `cap` (0: no cap), else whole episodes in the
    order of the SHA-256 of their ids until `cap` rows (the same logs choose the same episodes).

    Why a sample: a few thousand held-out attempts tell the candidates apart; fitting 200 trees per candidate and
    fold on every attempt of a year of logs would cost minutes, and the chosen one is refit on all anyway.
    """
    if not cap or len(groups) <= cap:
        return np.arange(len(groups))
    rows: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        rows.setdefault(group, []).append(index)
    chosen: list[int] = []
    for key in sorted(rows, key=lambda key: hashlib.sha256(key.encode("utf-8")).hexdigest()):
        if len(chosen) >= cap:
            break
        chosen += rows[key]
    return np.asarray(sorted(chosen), dtype=np.int64)


class _Selection:
    """A model selection in flight: the candidate of least held-out (weighted) loss over grouped folds (the first
    when there are no folds), refit on all rows. The folds split a sample of whole episodes when there are more than
    `selection_max` rows; the chosen candidate's held-out predictions (`held`) are NaN outside it. Every candidate's
    fold fits are handed to the pool at once, so the fits of two selections (gain and valid) share the cores;
    `choose` hands it the refit of the best on all rows."""

    def __init__(self, kind: str, specs: Sequence[str], X: np.ndarray, y: np.ndarray, groups: Sequence[str],
                 settings: OutcomeFitSettings, seed: int, weight: Optional[np.ndarray], pool: Executor) -> None:
        self.kind, self.specs, self.X, self.y, self.settings, self.seed = kind, list(specs), X, y, settings, seed
        self.sample = _episode_sample(groups, settings.selection_max)
        self.splits = [(self.sample[fit], self.sample[part])
                       for fit, part in _folds([groups[i] for i in self.sample], settings.folds)]
        self.w = np.ones(len(y)) if weight is None else weight
        from tqdm.auto import tqdm

        from evals.progress import auto_disable

        self.bar = tqdm(total=len(self.specs) * len(self.splits), desc=f"fit: {kind} candidates", unit="fit",
                        disable=auto_disable(), leave=False)  # on a terminal, unless the command said --no-progress
        self.folds: dict[str, list[Future]] = {spec: [] for spec in self.specs}
        for spec in self.specs:
            for fit, part in self.splits:
                future = pool.submit(self._held_out, spec, fit, part)
                future.add_done_callback(lambda _: self.bar.update(1))
                self.folds[spec].append(future)
        self.refit: Optional[Future] = None

    def _held_out(self, spec: str, fit: np.ndarray, part: np.ndarray) -> np.ndarray:
        if self.kind == "valid" and len(set(self.y[fit])) < 2:
            return np.full(len(part), float(self.y[fit].mean()))
        return _Candidate(spec, self.kind, self.settings, self.seed).fit(
            self.X[fit], self.y[fit], self.w[fit]).predict(self.X[part])

    def _fit_all(self, spec: str) -> "_Candidate":
        return _Candidate(spec, self.kind, self.settings, self.seed).fit(self.X, self.y, self.w)

    def choose(self, pool: Executor) -> "_Selection":
        """Wait for the fold fits, score each candidate, and hand the pool the refit of the best on every row."""
        self.grid, predictions = [], {}
        for spec in self.specs:
            if not self.splits:
                self.grid.append({"target": self.kind, "model": spec, "held_out_loss": None})
                continue
            held = np.full(len(self.y), np.nan)
            for (_, part), future in zip(self.splits, self.folds[spec]):
                held[part] = future.result()
            s = self.sample
            self.grid.append({"target": self.kind, "model": spec,
                              "held_out_loss": _loss(self.kind, self.y[s], held[s], self.w[s])})
            predictions[spec] = held
        self.bar.close()
        scored = [row for row in self.grid if row["held_out_loss"] is not None]
        self.best = min(scored, key=lambda row: row["held_out_loss"])["model"] if scored else self.specs[0]
        self.held = predictions.get(self.best)
        self.refit = pool.submit(self._fit_all, self.best)
        return self

    def result(self) -> tuple["_Candidate", list[dict[str, Any]]]:
        """The chosen candidate refit on all rows (its held-out predictions as `held`) and the grid."""
        if self.refit is None:
            raise RuntimeError("_Selection.result() before choose()")
        chosen = self.refit.result()
        chosen.held = self.held
        return chosen, self.grid


def fit_workers() -> int:
    """Threads the fits run on: the cores this process may use, at most `MAX_WORKERS`.

    Each fit is seeded and independent of the others, so the models are the same on any number of threads; the
    trees' C code and NumPy release the GIL, so two cores fit nearly twice as fast."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


@contextmanager
def _pool(pool: Optional[Executor] = None, workers: Optional[int] = None) -> Iterator[Executor]:
    """The given pool, else a new one of `workers` threads (`fit_workers()` when None), shut down after."""
    if pool is not None:
        yield pool
        return
    with ThreadPoolExecutor(max_workers=workers or fit_workers(), thread_name_prefix="outcome-fit") as running:
        yield running


def _family_scale(data: TrainingData, known: np.ndarray, weight: np.ndarray, held: Optional[np.ndarray],
                  families: Sequence[str]) -> dict[str, float]:
    """Per family: what its attempts brought over what the chosen model predicted for them on held-out episodes
    (both weighted), clipped to [1/MAX_SCALE, MAX_SCALE]; 1.0 without folds or with fewer than MIN_SCALED attempts
    (every family has its factor: the runtime refuses a model without one).

    Trees fit on few, heavy-tailed gains learn a family's rare large wins into the leaves of the other families'
    attempts too; the held-out means show by how much, and the estimates are scaled back to them."""
    scale = {name: 1.0 for name in families}
    if held is None:
        return scale
    family, w, y = data.family[known], weight[known], data.gain_share[known]
    seen = np.isfinite(held)  # the attempts the selection held out (all of them without a sample)
    for k in sorted(set(family[seen].tolist())):
        mine = (family == k) & seen
        predicted = float((w[mine] * held[mine]).sum())
        if mine.sum() >= MIN_SCALED and predicted > 0:
            scale[FAMILIES[k]] = float(np.clip((w[mine] * y[mine]).sum() / predicted, 1 / MAX_SCALE, MAX_SCALE))
    return scale


def _held_out_calibration(data: TrainingData, known: np.ndarray, weight: np.ndarray, selection: "_Selection",
                          held: Optional[np.ndarray], families: Sequence[str],
                          propensity: PropensityModel) -> Optional[dict[str, Any]]:
    """Per family, the chosen model's held-out predictions against what the attempts brought
    (`evals.offpolicy.held_out`), each fold scaled by the `family_scale` the other folds give (cross-fitted: the
    scale is set from held-out predictions too, and must not see the fold it is checked on). None without folds."""
    if held is None or not selection.splits:
        return None
    family = data.family[known]
    predicted = np.full(len(family), np.nan)
    for _, part in selection.splits:
        others = held.copy()
        others[part] = np.nan
        scale = _family_scale(data, known, weight, others, families)
        factor = np.asarray([scale.get(FAMILIES[k], 1.0) for k in family[part]])
        predicted[part] = np.maximum(held[part], 0.0) * factor  # the runtime clips a share at 0 too
    chosen = propensity.probabilities(data.policy_rows[known])[np.arange(len(family)), family]
    groups = [g for g, k in zip(data.groups, known) if k]
    return family_calibration(family, predicted, data.gain_share[known], groups, chosen)


def _propensity(data: TrainingData, settings: OutcomeFitSettings, seed: int,
                pool: Optional[Executor] = None) -> tuple[PropensityModel, dict[str, Any]]:
    from sklearn.linear_model import LogisticRegression

    X, y = data.policy_rows, data.family
    classes = sorted(set(y.tolist()))
    mean, scale = _standardise(X)
    Z = (X - mean) / scale
    names = [FAMILIES[k] for k in classes]
    info: dict[str, Any] = {"classes_seen": names}
    if len(classes) == 1:
        coef, intercept = np.zeros((1, X.shape[1])), np.zeros(1)
        info["model"] = "constant (one family logged)"
    else:
        splits = _folds(data.groups, settings.folds)

        def fold(C: float, fit: np.ndarray, part: np.ndarray) -> tuple[list[int], np.ndarray]:
            model = LogisticRegression(C=C, max_iter=2000, random_state=seed).fit(Z[fit], y[fit])
            return [classes.index(c) for c in model.classes_], model.predict_proba(Z[part])

        with _pool(pool) as running:
            jobs = {C: [running.submit(fold, C, fit, part) for fit, part in splits] for C in settings.propensity_C}
        losses = {}
        for C in settings.propensity_C:
            if not splits:
                break
            held = np.zeros((len(y), len(classes)))
            for (_, part), job in zip(splits, jobs[C]):
                columns, probabilities = job.result()
                held[np.ix_(part, columns)] = probabilities
            picked = held[np.arange(len(y)), [classes.index(c) for c in y]]
            losses[C] = float(-np.mean(np.log(np.clip(picked, 1e-6, 1))))
        C = min(losses, key=losses.get) if losses else settings.propensity_C[0]
        model = LogisticRegression(C=C, max_iter=2000, random_state=seed).fit(Z, y)
        coef, intercept = np.asarray(model.coef_), np.asarray(model.intercept_)
        if len(classes) == 2:  # scikit-learn keeps one row for two classes: the logit of the second
            coef, intercept = np.vstack([np.zeros_like(coef[0]), coef[0]]), np.asarray([0.0, intercept[0]])
        info.update(model=f"logistic C={C}", held_out_log_loss={str(k): round(v, 6) for k, v in losses.items()})
    state = {"kind": PROPENSITY_KIND, "features_version": FEATURES_VERSION, "classes": names, "mean": mean.tolist(),
             "scale": scale.tolist(), "coef": coef.tolist(), "intercept": intercept.tolist(), "fit": info}
    return PropensityModel(state), info


# What a fit reads: dataset records, attempts, or `programs.planner_example` examples (the `fit` recipe's trainset).
Logged = Union[PlannerRecord, Attempt, Any]


def _attempt(item: Logged) -> Attempt:
    if isinstance(item, Attempt):
        return item
    if isinstance(item, PlannerRecord):
        return attempt_of(item)
    return attempt_of_example(item)


def _record_id(item: Logged) -> str:
    """An item's record id without reading its packet (an example's packet is JSON text until it is needed)."""
    if isinstance(item, (Attempt, PlannerRecord)):
        return item.record_id
    return str(item.get("record_id") or "")


@dataclass
class _Read:
    """Logged items read once, one at a time, into the fit's rows (nothing else of them is kept): the rows, every
    item's record id in order, and how many items came from train and from dev."""

    data: TrainingData
    ids: list[str]
    n_train: int
    n_dev: int


def _read(train: Iterable[Logged], dev: Iterable[Logged]) -> _Read:
    ids: list[str] = []
    counts = [0, 0]

    def attempts(items: Iterable[Logged], part: int) -> Iterator[Attempt]:
        for item in items:
            attempt = _attempt(item)
            ids.append(attempt.record_id)
            counts[part] += 1
            yield attempt

    data = training_data(chain(attempts(train, 0), attempts(dev, 1)))
    return _Read(data, ids, counts[0], counts[1])


def _weights(data: TrainingData, propensity: PropensityModel, settings: OutcomeFitSettings) -> np.ndarray:
    """Row weights that make the logged attempts stand for every family alike: 1 / P(the deployed planner chose
    the logged family), clipped at `max_weight` and scaled to mean 1 (all 1 with `weighting` "none").

    The deployed planner chose families where it expected them to pay; unweighted, the model learns each family
    where it was chosen, and overrates it where it was not (where another program may choose it).
    """
    if settings.weighting == "none":
        return np.ones(data.n)
    chosen = propensity.probabilities(data.policy_rows)[np.arange(data.n), data.family]
    weight = np.minimum(1.0 / np.maximum(chosen, 1e-6), settings.max_weight)
    return weight / weight.mean()


def usable_data(train: Iterable[Logged], dev: Iterable[Logged] = ()) -> TrainingData:
    """The rows the models are fit on (train, then dev); OutcomeFitError when they cannot teach a model."""
    return _checked(_read(train, dev)).data


def _checked(read: _Read) -> _Read:
    data = read.data
    skipped = ", ".join(f"{count} {why}" for why, count in sorted(data.skipped.items()))
    if data.n < MIN_ATTEMPTS:
        raise OutcomeFitError(f"{data.n} usable logged attempt(s) in {read.n_train + read.n_dev} record(s) "
                              f"({skipped or 'none skipped'}): "
                              f"an outcome model needs at least {MIN_ATTEMPTS} attempts with a family in "
                              "strategy_tags[0] and a best before them; import more logs")
    if len(set(data.groups)) < MIN_EPISODES:
        raise OutcomeFitError(f"all {data.n} usable attempts come from one episode: an outcome model needs "
                              f"{MIN_EPISODES} or more episodes to be checked on attempts it did not see")
    if not data.valid.any():
        raise OutcomeFitError(f"all {data.n} usable attempts are invalid: nothing shows what a family can improve")
    if not (np.isfinite(data.gain_share) & (data.valid == 1)).any():
        raise OutcomeFitError(f"none of the {int(data.valid.sum())} valid attempts has measured cycles (cycles null "
                              "everywhere): an outcome model needs to see what an attempt brought")
    return read


def _digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


# The last fits by their records: a compile fits planner.learned's model on train + dev, and its evaluations ask the
# application for the dataset's models on the same records; the fit is deterministic, so the repeat is served here.
_FITTED: dict[tuple[Any, ...], OutcomeFit] = {}
_FITTED_KEEP = 4


def fit_outcome_models_once(train: Iterable[Logged], dev: Iterable[Logged] = (),
                            settings: OutcomeFitSettings = OutcomeFitSettings(), *, seed: int = 0) -> OutcomeFit:
    """`fit_outcome_models`, served from the last fits when the same records, settings and seed were fit before.

    Lists are looked up by their record ids before any packet is read (the `fit` recipe's examples carry theirs as
    JSON text); any other iterable, such as records streamed from a split, is read once into the fit's rows first
    (the records are not kept), then looked up."""
    setting = json.dumps(settings.key(), sort_keys=True)
    if isinstance(train, Sequence) and isinstance(dev, Sequence):
        key = (tuple(_record_id(item) for part in (train, dev) for item in part), len(train), setting, seed)
        if key not in _FITTED:
            _keep(key, fit_outcome_models(train, dev, settings, seed=seed))
        return _FITTED[key]
    read = _read(train, dev)
    key = (tuple(read.ids), read.n_train, setting, seed)
    if key not in _FITTED:
        with one_blas_thread(), _pool() as pool:
            _keep(key, _fit_read(_checked(read), settings, seed, pool))
    return _FITTED[key]


def _keep(key: tuple[Any, ...], fitted: OutcomeFit) -> None:
    while len(_FITTED) >= _FITTED_KEEP:
        _FITTED.pop(next(iter(_FITTED)))
    _FITTED[key] = fitted


def fit_outcome_models(train: Iterable[Logged], dev: Iterable[Logged] = (),
                       settings: OutcomeFitSettings = OutcomeFitSettings(), *, seed: int = 0,
                       workers: Optional[int] = None) -> OutcomeFit:
    """Fit P(valid), the improvement share and the propensity on train (+ dev); OutcomeFitError on unusable logs.
    The items are read once, one at a time (a stream of records is never held whole). The fits run on `workers`
    threads (`fit_workers()` when None); the models are the same on any number."""
    read = _checked(_read(train, dev))
    with one_blas_thread(), _pool(workers=workers) as pool:
        return _fit_read(read, settings, seed, pool)


def _fit_read(read: _Read, settings: OutcomeFitSettings, seed: int, pool: Executor) -> OutcomeFit:
    data = read.data
    X, groups = data.rows, data.groups
    known = np.isfinite(data.gain_share)
    propensity, propensity_info = _propensity(data, settings, seed, pool)
    weight = _weights(data, propensity, settings)
    # Both selections' fold fits go to the pool before either waits: the cores stay busy with one or the other.
    gain_fits = _Selection("gain", settings.gain_models, X[known], data.gain_share[known],
                           [g for g, k in zip(groups, known) if k], settings, seed, weight[known], pool)
    valid_fits = None if data.valid.all() else _Selection("valid", settings.valid_models, X, data.valid, groups,
                                                           settings, seed, weight, pool)
    gain_fits.choose(pool)  # its refit on every row runs while valid's folds finish
    if valid_fits is None:
        valid_state, valid_grid, valid_spec = _constant("logistic", 1.0), [], "constant (every attempt valid)"
    else:
        valid, valid_grid = valid_fits.choose(pool).result()
        valid_state, valid_spec = valid.state(X), valid.spec
    gain, gain_grid = gain_fits.result()
    families = sorted({FAMILIES[k] for k in data.family.tolist()}, key=FAMILIES.index)
    scale = _family_scale(data, known, weight, gain.held, families)
    calibrated = _held_out_calibration(data, known, weight, gain_fits, gain.held, families, propensity)
    chosen = {"gain_model": gain.spec, "valid_model": valid_spec, "propensity": propensity_info,
              "families": families, "n_train": read.n_train, "n_dev": read.n_dev, "attempts": data.n,
              "attempts_without_known_gain": int((~known).sum()), "episodes": len(set(groups)),
              "skipped": data.skipped, "folds": len(_folds(groups, settings.folds)), "seed": seed,
              "trained_on_sha256": _digest(data.record_ids), "settings": settings.key(),
              "family_scale": scale, "family_calibration": calibrated}
    state = {"kind": MODEL_KIND, "features_version": FEATURES_VERSION, "row_names": list(ROW_NAMES),
             "families": families, "valid": valid_state, "gain": gain.state(X[known]), "family_scale": scale,
             "fit": chosen}
    return OutcomeFit(outcome=OutcomeModel(state), propensity=propensity, chosen=chosen,
                      grid=[*gain_grid, *valid_grid], trained_on=list(data.record_ids))


__all__ = ["MAX_WORKERS", "MIN_ATTEMPTS", "OutcomeFit", "OutcomeFitError", "OutcomeFitSettings", "fit_outcome_models",
           "fit_outcome_models_once", "fit_workers", "usable_data"]
