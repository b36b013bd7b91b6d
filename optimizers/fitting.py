"""Fit the trained decision model of a program (`full_auto.learned`, `full_auto.cascade`) on labeled examples.

scikit-learn fits, the runtime scores: features come from `runtime.trained` (the very functions a frozen
module runs), a multinomial `LogisticRegression` is fit on the train split for every point of the grid
(regularization x class weights), each fitted model's temperature is fit on dev (calibration: one number
that minimises the dev log loss), and the grid point whose model scores best on dev by the compile's
metric (the objective, guardrails applied) wins; ties go to the lower dev log loss. The winner is then
fit once more on train + dev when `refit_on_dev` (more data; test stays unseen) and keeps its temperature.
Everything is seeded and deterministic (lbfgs), and no LM is called: selection scores the model alone,
also for a cascade, straight through the runtime scorer and the metric (no DSPy call per example).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import dspy
import numpy as np
from scipy import sparse
from scipy.optimize import minimize_scalar

from evals.metrics_fullauto import COST
from programs.learned import trained_parameters
from programs.results import decision_prediction
from runtime.fullauto import ACTIONS
from runtime.frozen.knn import TfidfVectorizer
from runtime.trained import FEATURES_VERSION, NUMBER_NAMES, TrainedDecisionModel, turn_features

Metric = Callable[..., Any]


class FitError(ValueError):
    """Data the model cannot be fit on; the message says what to do."""


@dataclass(frozen=True)
class FitSettings:
    """What the fit searches and how (the `fit` recipe's settings)."""

    C: tuple[float, ...] = (0.5, 2.0, 8.0, 32.0)
    class_weight: tuple[str, ...] = ("none", "balanced")
    ngram_max: int = 2
    max_features: int = 20_000
    max_iter: int = 3_000
    refit_on_dev: bool = True


@dataclass
class FitOutcome:
    """The fitted model and what the fit chose."""

    model: TrainedDecisionModel
    chosen: dict[str, Any]
    grid: list[dict[str, Any]]


class _Features:
    """The train split's feature space: its TF-IDF vocabulary and the numbers' mean and spread."""

    def __init__(self, inputs: Sequence[dict[str, Any]], settings: FitSettings) -> None:
        features = [turn_features(x) for x in inputs]
        self.vectorizer = TfidfVectorizer(max_features=settings.max_features, ngram_range=(1, settings.ngram_max))
        self.vectorizer.fit([text for text, _ in features])
        numbers = np.asarray([numbers for _, numbers in features], dtype=np.float64)
        self.mean = numbers.mean(axis=0)
        spread = numbers.std(axis=0)
        self.scale = np.where(spread > 1e-12, spread, 1.0)

    def matrix(self, inputs: Sequence[dict[str, Any]]) -> sparse.csr_matrix:
        """Rows of TF-IDF text features followed by the standardised numbers."""
        features = [turn_features(x) for x in inputs]
        rows, cols, values = [], [], []
        for i, (text, _) in enumerate(features):
            for j, v in self.vectorizer.transform_one(text).items():
                rows.append(i)
                cols.append(j)
                values.append(v)
        text = sparse.csr_matrix((values, (rows, cols)), shape=(len(inputs), len(self.vectorizer.idf)))
        numbers = (np.asarray([n for _, n in features], dtype=np.float64) - self.mean) / self.scale
        return sparse.hstack([text, sparse.csr_matrix(numbers)], format="csr")


def _labels(examples: Sequence[dspy.Example]) -> list[str]:
    labels = [str(getattr(ex, "action", "") or "").strip().lower() for ex in examples]
    unknown = sorted({label for label in labels if label not in ACTIONS})
    if unknown:
        raise FitError(f"labels {unknown} are not actions of {list(ACTIONS)}")
    return labels


def _softmax(scores: np.ndarray) -> np.ndarray:
    z = np.exp(scores - scores.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _log_loss(scores: np.ndarray, classes: list[str], labels: Sequence[str], temperature: float) -> float:
    known = [(i, classes.index(label)) for i, label in enumerate(labels) if label in classes]
    if not known:
        return math.inf
    probabilities = _softmax(scores / temperature)
    return float(-np.mean([math.log(max(probabilities[i, k], 1e-12)) for i, k in known]))


def _temperature(scores: np.ndarray, classes: list[str], labels: Sequence[str]) -> float:
    """The temperature that minimises the dev log loss (1.0 when dev has no label the model knows)."""
    if not any(label in classes for label in labels):
        return 1.0
    found = minimize_scalar(lambda log_t: _log_loss(scores, classes, labels, math.exp(log_t)),
                            bounds=(-3.0, 3.0), method="bounded", options={"xatol": 1e-4})
    return float(round(math.exp(found.x), 6))


def _state(classifier: Any, features: _Features, temperature: float, fit: dict[str, Any]) -> dict[str, Any]:
    coef, intercept = np.asarray(classifier.coef_), np.asarray(classifier.intercept_)
    if len(classifier.classes_) == 2:  # scikit-learn keeps one row for two classes: its logit of the second
        coef = np.vstack([np.zeros_like(coef[0]), coef[0]])
        intercept = np.asarray([0.0, intercept[0]])
    return {"kind": "linear", "features_version": FEATURES_VERSION, "classes": [str(c) for c in classifier.classes_],
            "vectorizer": features.vectorizer.to_state(), "numbers": list(NUMBER_NAMES),
            "mean": features.mean.tolist(), "scale": features.scale.tolist(), "coef": coef.tolist(),
            "intercept": intercept.tolist(), "temperature": temperature,
            "cost": {right: {answer: COST[right][answer] for answer in COST} for right in COST}, "fit": fit}


def _classifier(C: float, class_weight: str, settings: FitSettings, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, class_weight=None if class_weight == "none" else class_weight,
                              max_iter=settings.max_iter, random_state=seed)


def dev_scorer(valset: Sequence[dspy.Example], metric: Metric) -> Callable[[TrainedDecisionModel], float]:
    """Scores a model alone (never a cascade's LM) on dev with the compile's metric: its mean over the examples."""
    def score(model: TrainedDecisionModel) -> float:
        values = [float(metric(ex, decision_prediction(model.decide(ex.inputs().toDict())))) for ex in valset]
        return sum(values) / len(values)
    return score


@dataclass
class _Candidate:
    """One grid point's model, fit on train and scored on dev."""

    point: dict[str, Any]
    model: TrainedDecisionModel
    score: float
    loss: float

    def row(self) -> dict[str, Any]:
        return {**self.point, "temperature": self.model.temperature, "dev_objective": round(self.score, 6),
                "dev_log_loss": round(self.loss, 6)}


def fit_model(trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example], metric: Metric,
              settings: FitSettings = FitSettings(), *, seed: int = 0,
              on_candidate: Optional[Callable[[TrainedDecisionModel, float], None]] = None) -> FitOutcome:
    """Fit the grid on train, select on dev, refit the winner; FitError when the data cannot teach a model.

    `on_candidate(model, dev score)` sees every grid point's model (the compile's candidate history).
    """
    if not trainset:
        raise FitError("the train split has no labeled example to fit on")
    carved = not valset
    if carved:  # small logs may import without a dev split: select on a held-out fifth of train's threads
        trainset, valset = selection_split(trainset)
    if len(set(_labels(trainset))) < 2:
        raise FitError(f"every labeled train example is {_labels(trainset)[0]!r}: a decision model needs two or "
                       "more label classes (label more of the logs, or use a rule policy)")
    grid = _grid(trainset, valset, metric, settings, seed)
    for candidate in grid:
        if on_candidate is not None:
            on_candidate(candidate.model, candidate.score)
    best = max(grid, key=lambda c: (c.score, -c.loss))  # the first of equals: the grid's order
    chosen = {**best.row(), "ngram_max": settings.ngram_max, "max_features": settings.max_features,
              "n_train": len(trainset), "n_dev": len(valset), "refit": "train",
              "selected_on": "train threads held out" if carved else "dev"}
    model = best.model
    if settings.refit_on_dev or carved:  # the chosen settings on all the labeled data test does not hold
        chosen["refit"] = "train" if carved else "train+dev"
        model = _fit_one([*trainset, *valset], best.point, model.temperature, chosen, settings, seed)
    chosen["vocabulary"] = len(model.vectorizer.idf)
    model.fit_info = dict(chosen)
    return FitOutcome(model=model, chosen=chosen, grid=[candidate.row() for candidate in grid])


def _grid(trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example], metric: Metric, settings: FitSettings,
          seed: int) -> list[_Candidate]:
    """Every grid point fit on train, its temperature fit on dev, scored on dev."""
    train_x, dev_x = [ex.inputs().toDict() for ex in trainset], [ex.inputs().toDict() for ex in valset]
    train_y, dev_y = _labels(trainset), _labels(valset)
    features = _Features(train_x, settings)
    X_train, X_dev = features.matrix(train_x), features.matrix(dev_x)
    score_on_dev = dev_scorer(valset, metric)
    grid = []
    for C in settings.C:
        for weight in settings.class_weight:
            point = {"C": C, "class_weight": weight}
            classifier = _classifier(C, weight, settings, seed).fit(X_train, train_y)
            classes = [str(c) for c in classifier.classes_]
            dev_scores = _dev_scores(classifier, X_dev)
            temperature = _temperature(dev_scores, classes, dev_y)
            model = TrainedDecisionModel(_state(classifier, features, temperature, {**point, "refit": "train"}))
            grid.append(_Candidate(point, model, score_on_dev(model),
                                   _log_loss(dev_scores, classes, dev_y, temperature)))
    return grid


def _fit_one(examples: Sequence[dspy.Example], point: dict[str, Any], temperature: float, fit: dict[str, Any],
             settings: FitSettings, seed: int) -> TrainedDecisionModel:
    """One model with the given settings on these examples (its own vocabulary), at the given temperature."""
    inputs = [ex.inputs().toDict() for ex in examples]
    features = _Features(inputs, settings)
    classifier = _classifier(point["C"], point["class_weight"], settings, seed).fit(features.matrix(inputs),
                                                                                     _labels(examples))
    return TrainedDecisionModel(_state(classifier, features, temperature, fit))


def selection_split(examples: Sequence[dspy.Example], share: float = 0.2) -> tuple[list[dspy.Example], list[dspy.Example]]:
    """(fit part, selection part) of a train split without a dev split: whole threads, about `share` of the
    examples held out, chosen by a hash of the thread id (deterministic); FitError when too few to split."""
    groups: dict[str, list[dspy.Example]] = {}
    for index, ex in enumerate(examples):
        groups.setdefault(str(ex.get("thread_id") or f"#{index}"), []).append(ex)
    if len(groups) < 2:  # one thread: hold out its last examples instead
        groups = {f"#{index}": [ex] for index, ex in enumerate(examples)}
    order = sorted(groups, key=lambda key: hashlib.sha256(key.encode("utf-8")).hexdigest())
    held: list[dspy.Example] = []
    for key in order:
        if len(held) >= share * len(examples):
            break
        held += groups[key]
    kept = [ex for ex in examples if all(ex is not other for other in held)]
    if len(kept) < 2 or not held:
        raise FitError(f"{len(examples)} labeled train example(s) and no dev split: too few to fit a model and "
                       "choose its settings; import more logs")
    return kept, held


def _dev_scores(classifier: Any, X: sparse.csr_matrix) -> np.ndarray:
    scores = np.asarray(classifier.decision_function(X), dtype=np.float64)
    if scores.ndim == 1:  # two classes: the logit of the second against the first
        scores = np.column_stack([np.zeros_like(scores), scores])
    return scores


# The last fits with default settings by their examples: the trials of a search each fit their cascade's model
# on the same train and dev examples; the fit is deterministic, so a repeat is served from here.
_FITTED: "dict[tuple[Any, ...], FitOutcome]" = {}
_FITTED_KEEP = 4


def _examples_key(examples: Sequence[dspy.Example]) -> tuple[Any, ...]:
    return tuple(ex.get("record_id") or json.dumps(ex.toDict(), sort_keys=True, default=str) for ex in examples)


def fit_model_once(trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example], metric: Metric,
                   settings: FitSettings = FitSettings()) -> FitOutcome:
    """`fit_model`, served from the last fits when the same examples, metric and settings were fit before."""
    key = (_examples_key(trainset), _examples_key(valset), getattr(metric, "__name__", id(metric)), settings)
    if key not in _FITTED:
        while len(_FITTED) >= _FITTED_KEEP:
            _FITTED.pop(next(iter(_FITTED)))
        _FITTED[key] = fit_model(trainset, valset, metric, settings)
    return _FITTED[key]


def fit_program(program: dspy.Module, trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example],
                metric: Metric, settings: FitSettings = FitSettings(), *, seed: int = 0,
                on_candidate: Optional[Callable[[TrainedDecisionModel, float], None]] = None) -> Optional[FitOutcome]:
    """Fit every trained-model parameter of the program in place (one fit serves them all); None if it has none."""
    parameters = trained_parameters(program)
    if not parameters:
        return None
    outcome = fit_model(trainset, valset, metric, settings, seed=seed, on_candidate=on_candidate) \
        if on_candidate is not None else fit_model_once(trainset, valset, metric, settings)
    for _, parameter in parameters:
        parameter.set_model(TrainedDecisionModel(outcome.model.to_state()))
    return outcome


__all__ = ["FitError", "FitOutcome", "FitSettings", "fit_model", "fit_model_once", "fit_program"]
