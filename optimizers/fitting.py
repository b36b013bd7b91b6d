"""Fit the trained decision model of a program (`full_auto.learned`, `full_auto.cascade`) on labeled examples.

scikit-learn fits, the runtime scores: features come from `runtime.trained` (the very functions a frozen
module runs) and a multinomial `LogisticRegression` is fit for every point of the grid (regularization x
class weights). The grid point is chosen by grouped k-fold cross-validation over train + dev (`folds`, 5 by
default): each fold holds out whole threads, fits on the rest (its own vocabulary) and scores the held-out
turns; one temperature is fit on all out-of-fold scores (calibration: the number that minimises their log
loss), and the point whose out-of-fold decisions score best by the compile's metric (the objective,
guardrails applied) wins; ties go to the lower log loss. Why not dev alone: a dev split of a few hundred
turns from a few dozen threads ranks close settings by noise, and cross-validation scores every labeled
turn test does not hold. The winner is fit on train + dev (`refit_on_dev`) at that temperature. With
`folds` 0 the fit selects on dev alone (each point fit on train, its temperature fit on dev), and without
a dev split on a held-out fifth of the train threads. Everything is seeded and deterministic (lbfgs,
folds by thread), and no LM is called: selection scores the model alone, also for a cascade, straight
through the runtime scorer and the metric (no DSPy call per example).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import dspy
import numpy as np
from scipy import sparse
from scipy.optimize import minimize_scalar

from evals.metrics_fullauto import COST, example_config
from programs.inputs import example_features
from programs.learned import trained_parameters
from programs.results import decision_prediction
from runtime.fullauto import ACTIONS
from runtime.frozen.knn import TOKEN_PATTERN, TfidfVectorizer, analyze
from runtime.trained import (FEATURES_VERSION, NUMBER_NAMES, TrainedDecisionModel, decision_of, least_cost_actions,
                             min_confidence_of, turn_features)

from .blas import one_blas_thread

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
    folds: int = 5  # grouped cross-validation over train + dev (2 or more folds); 0: select on dev alone
    # Turns the cross-validation chooses on: above it, whole threads in a fixed order (the hash of their ids) up to
    # this many; the winner is still fit on everything. 0: every turn.
    selection_max: int = 4_000


@dataclass
class FitOutcome:
    """The fitted model and what the fit chose."""

    model: TrainedDecisionModel
    chosen: dict[str, Any]
    grid: list[dict[str, Any]]
    # Each held-out example with the calibrated probabilities the chosen settings gave it out of fold (what the
    # selection scored: `benchmarks.fit_errors` reads where the model loses).
    held_out: list[tuple[dspy.Example, dict[str, float]]] = field(default_factory=list)


BLOCK_ROWS = 8192  # rows of a feature matrix made at once (`_Features.matrix`)
Features = list[tuple[str, list[float]]]  # `turn_features` of each example: (text, numbers)


class _Corpus:
    """Every pool text's n-gram counts, read once with the runtime's own `analyze`, as one sparse matrix.

    Each part of the selection (a fold's fit part, the final fit) needs its own TF-IDF vocabulary: reading every
    text again per part cost a pass over the text per fold. Here a part's vocabulary, idf and rows are column sums
    and selections of this matrix, linear in its non-zeros.
    """

    def __init__(self, features: Features, settings: FitSettings) -> None:
        self.settings = settings
        grams = (1, settings.ngram_max)
        vocabulary: dict[str, int] = {}
        indptr, indices, counts = array("q", [0]), array("q"), array("d")
        for text, _ in features:
            for gram, count in Counter(analyze(text, TOKEN_PATTERN, True, grams)).items():
                indices.append(vocabulary.setdefault(gram, len(vocabulary)))
                counts.append(count)
            indptr.append(len(indices))
        self.terms = list(vocabulary)
        self.counts = sparse.csr_matrix((np.frombuffer(counts, dtype=np.float64), np.frombuffer(indices, dtype=np.int64),
                                         np.frombuffer(indptr, dtype=np.int64)), shape=(len(features), len(self.terms)))
        order = sorted(range(len(self.terms)), key=self.terms.__getitem__)
        self.rank = np.empty(len(self.terms), dtype=np.int64)  # each term's place in alphabetical order
        self.rank[order] = np.arange(len(self.terms))
        self.numbers = np.asarray([numbers for _, numbers in features], dtype=np.float64)
        if self.numbers.ndim != 2:
            self.numbers = self.numbers.reshape(len(features), len(NUMBER_NAMES))


class _Features:
    """The fit part's feature space: its TF-IDF vocabulary and the numbers' mean and spread.

    The vocabulary and idf are exactly `runtime.frozen.knn.TfidfVectorizer.fit` on the part's texts (the most
    frequent n-grams, ties alphabetical, in alphabetical order; smoothed idf), so the state the runtime scores is
    the one the part's rows were built with.
    """

    def __init__(self, corpus: _Corpus, rows: Sequence[int], settings: FitSettings) -> None:
        self.corpus = corpus
        part = corpus.counts[np.asarray(rows, dtype=np.int64)]
        total = np.asarray(part.sum(axis=0)).ravel()
        documents = np.bincount(part.indices, minlength=len(corpus.terms))
        present = np.flatnonzero(total)
        if settings.max_features is not None and len(present) > settings.max_features:
            present = present[np.lexsort((corpus.rank[present], -total[present]))[:settings.max_features]]
        self.columns = present[np.argsort(corpus.rank[present])]
        n = len(rows) + 1
        idf = [math.log(n / (float(df) + 1.0)) + 1.0 for df in documents[self.columns].tolist()]
        self.vectorizer = TfidfVectorizer(max_features=settings.max_features, ngram_range=(1, settings.ngram_max))
        self.vectorizer.vocabulary = {corpus.terms[j]: i for i, j in enumerate(self.columns.tolist())}
        self.vectorizer.idf = idf
        self.idf = np.asarray(idf, dtype=np.float64)
        numbers = corpus.numbers[np.asarray(rows, dtype=np.int64)]
        self.mean = numbers.mean(axis=0)
        spread = numbers.std(axis=0)
        self.scale = np.where(spread > 1e-12, spread, 1.0)

    def matrix(self, rows: Sequence[int]) -> sparse.csr_matrix:
        """Rows of TF-IDF text features (sublinear tf times idf, L2-normalised) followed by the standardised numbers.

        Made `BLOCK_ROWS` rows at a time (each row's features are its own), then stacked: made at once, a year of
        turns' intermediate copies were the fit's peak of memory."""
        index = np.asarray(rows, dtype=np.int64)
        blocks = [self._block(index[start:start + BLOCK_ROWS]) for start in range(0, len(index), BLOCK_ROWS)]
        if len(blocks) == 1:
            return blocks[0]
        return sparse.vstack(blocks, format="csr") if blocks else self._block(index)

    def _block(self, index: np.ndarray) -> sparse.csr_matrix:
        text = self.corpus.counts[index][:, self.columns].tocsr()
        text.sort_indices()
        if text.nnz:
            values, inverse = np.unique(text.data, return_inverse=True)  # small integer counts: log them once each
            tf = np.asarray([math.log(v) + 1.0 for v in values.tolist()])[inverse.ravel()]
            del inverse
            tf *= self.idf[text.indices]  # in place: a year of turns' features is hundreds of MB a copy
            text.data = tf
            norms = np.sqrt(np.add.reduceat(np.square(text.data), text.indptr[:-1])
                            if len(index) else np.zeros(0))
            lengths = np.diff(text.indptr)
            norms = np.where(lengths > 0, norms, 1.0)
            text.data /= np.repeat(norms, lengths)
        numbers = (self.corpus.numbers[index] - self.mean) / self.scale
        return _beside(text, numbers)


def _beside(text: sparse.csr_matrix, numbers: np.ndarray) -> sparse.csr_matrix:
    """`sparse.hstack([text, sparse.csr_matrix(numbers)], format="csr")` (the same arrays), written straight into the
    result: the stack went through coordinate copies of the whole matrix, the fit's peak of memory on a year of
    turns. Each row holds its text entries, then its non-zero numbers."""
    n, width = text.shape
    rows, columns = np.nonzero(numbers)
    text_lengths = np.diff(text.indptr).astype(np.int64)
    number_lengths = np.bincount(rows, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(text_lengths + number_lengths, out=indptr[1:])
    index_type = np.int32 if max(int(indptr[-1]), width + numbers.shape[1]) < np.iinfo(np.int32).max else np.int64
    data, indices = np.empty(int(indptr[-1])), np.empty(int(indptr[-1]), dtype=index_type)
    at = np.arange(text.nnz, dtype=np.int64) + np.repeat(indptr[:-1] - text.indptr[:-1], text_lengths)
    data[at], indices[at] = text.data, text.indices
    del at
    before = np.repeat(np.cumsum(number_lengths) - number_lengths, number_lengths)  # each row's first number
    at = indptr[rows] + text_lengths[rows] + np.arange(len(rows), dtype=np.int64) - before
    data[at], indices[at] = numbers[rows, columns], columns + width
    return sparse.csr_matrix((data, indices, indptr.astype(index_type)), shape=(n, width + numbers.shape[1]))


def _features_of(examples: Sequence[dspy.Example]) -> Features:
    # An example read with its features carries them (`programs.example_features`): no inputs rebuilt.
    return [example_features(ex) for ex in examples]


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
    rows, columns = (np.asarray(index, dtype=np.int64) for index in zip(*known))
    probabilities = _softmax(scores / temperature)
    return float(-np.mean(np.log(np.maximum(probabilities[rows, columns], 1e-12))))


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


@dataclass
class _Selection:
    """Where the grid is scored: held-out parts of a pool of labeled examples, and what the winner is fit on."""

    pool: list[dspy.Example]
    splits: list[tuple[list[int], list[int]]]  # (fit part, held-out part) as indices into `pool`
    final: list[int]  # the examples the chosen settings are fit on at last
    selected_on: str
    refit: str


def _selection(trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example], settings: FitSettings) -> _Selection:
    """Cross-validation over train + dev by thread, else dev, else (no dev split) held-out train threads."""
    pool, n_train = [*trainset, *valset], len(trainset)
    train, everything = list(range(n_train)), list(range(len(pool)))
    refit_all = settings.refit_on_dev and bool(valset)
    final, refit = (everything, "train+dev") if refit_all else (train, "train")
    if settings.folds >= 2:
        rows = _thread_sample(pool, settings.selection_max)
        folds = _thread_folds(pool, settings.folds, rows)
        if folds is not None:
            over = "train+dev" if valset else "train"
            sample = f" (a sample of {len(rows)} of {len(pool)} turns, whole threads)" if len(rows) < len(pool) else ""
            return _Selection(pool, folds, final, f"{len(folds)}-fold cross-validation over {over} threads{sample}",
                              refit)
    if valset:
        return _Selection(pool, [(train, everything[n_train:])], final, "dev", refit)
    kept, held = selection_split(trainset)  # small logs may import without a dev split
    pool = [*kept, *held]
    return _Selection(pool, [(list(range(len(kept))), list(range(len(kept), len(pool))))],
                      list(range(len(pool))), "train threads held out", "train")


def _thread_of(ex: dspy.Example, index: int) -> str:
    return str(ex.get("thread_id") or f"#{index}")


def _thread_sample(pool: Sequence[dspy.Example], cap: int) -> list[int]:
    """Indices of the turns the settings are chosen on: all of them up to `cap` (0: no cap), else whole threads in
    the order of the SHA-256 of their ids until `cap` turns (the same logs choose the same threads).

    Why a sample: the grid's points differ by a few thousandths of objective, which a few thousand held-out turns
    already resolve; fitting every point on every fold of 100,000 turns would cost 40 fits of the whole pool.
    """
    if not cap or len(pool) <= cap:
        return list(range(len(pool)))
    threads: dict[str, list[int]] = {}
    for index, ex in enumerate(pool):
        threads.setdefault(_thread_of(ex, index), []).append(index)
    chosen: list[int] = []
    for key in sorted(threads, key=lambda key: hashlib.sha256(key.encode("utf-8")).hexdigest()):
        if len(chosen) >= cap:
            break
        chosen += threads[key]
    return sorted(chosen)


def _thread_folds(pool: Sequence[dspy.Example], folds: int,
                  rows: Optional[Sequence[int]] = None) -> Optional[list[tuple[list[int], list[int]]]]:
    """Grouped folds of the pool's `rows` (all by default; no thread in two parts) whose fit parts all hold two or
    more label classes, as indices into the pool; None if too few."""
    from sklearn.model_selection import GroupKFold

    rows = list(range(len(pool))) if rows is None else list(rows)
    groups = [_thread_of(pool[index], index) for index in rows]
    n_groups = len(set(groups))
    if n_groups < 2:
        return None
    labels = _labels([pool[index] for index in rows])
    splits = [([rows[i] for i in fit.tolist()], [rows[i] for i in held.tolist()]) for fit, held in
              GroupKFold(n_splits=min(folds, n_groups)).split(groups, groups=groups)]
    position = {index: i for i, index in enumerate(rows)}
    if any(len({labels[position[i]] for i in fit}) < 2 for fit, _ in splits):
        return None
    return splits


@dataclass
class _Candidate:
    """One grid point: its held-out scores, calibration and objective."""

    point: dict[str, Any]
    temperature: float
    score: float
    loss: float
    probabilities: np.ndarray  # calibrated, one row per held-out example (in the selection's order)
    fold: tuple[Any, "_Features"]  # the classifier fit on the first fold's fit part, and that part's feature space

    def first_fold(self) -> TrainedDecisionModel:
        """This point's model as fit on the first fold's fit part, at its temperature (its `fit` says so)."""
        classifier, space = self.fold
        return TrainedDecisionModel(_state(classifier, space, self.temperature,
                                           {**self.row(), "fit_on": "the first fold's fit part"}))

    def row(self) -> dict[str, Any]:
        return {**self.point, "temperature": self.temperature, "selection_objective": round(self.score, 6),
                "selection_log_loss": round(self.loss, 6)}


def fit_model(trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example], metric: Metric,
              settings: FitSettings = FitSettings(), *, seed: int = 0,
              on_candidate: Optional[Callable[[TrainedDecisionModel, float], None]] = None) -> FitOutcome:
    """Score the grid on held-out turns, fit the winner; FitError when the data cannot teach a model.

    `on_candidate(model, held-out score)` sees every grid point's model, fit as the winner is (the compile's
    candidate history).
    """
    with one_blas_thread():
        return _fit_model(trainset, valset, metric, settings, seed=seed, on_candidate=on_candidate)


def _fit_model(trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example], metric: Metric,
               settings: FitSettings, *, seed: int,
               on_candidate: Optional[Callable[[TrainedDecisionModel, float], None]]) -> FitOutcome:
    if not trainset:
        raise FitError("the train split has no labeled example to fit on")
    selection = _selection(trainset, valset, settings)
    train_labels = _labels(trainset)
    if len(set(train_labels)) < 2:
        raise FitError(f"every labeled train example is {train_labels[0]!r}: a decision model needs two or "
                       "more label classes (label more of the logs, or use a rule policy)")
    corpus = _Corpus(_features_of(selection.pool), settings)
    grid = _grid(selection, corpus, metric, settings, seed)
    best = max(grid, key=lambda c: (c.score, -c.loss))  # the first of equals: the grid's order
    n_held = sum(len(held) for _, held in selection.splits)
    chosen = {**best.row(), "ngram_max": settings.ngram_max, "max_features": settings.max_features,
              "n_train": len(trainset), "n_dev": len(valset), "n_scored": n_held, "selected_on": selection.selected_on,
              "refit": selection.refit}
    final = _Fitted([selection.pool[i] for i in selection.final], corpus, selection.final, settings)
    for candidate in grid:
        if on_candidate is not None and candidate is not best:
            # The points not chosen keep the model of their first fold: refitting each on everything would cost a
            # whole-pool fit per point for a history entry nobody scores.
            on_candidate(candidate.first_fold(), candidate.score)
    model = final.model(best, chosen, settings, seed)
    if on_candidate is not None:
        on_candidate(model, best.score)
    chosen["vocabulary"] = len(model.vectorizer.idf)
    model.fit_info = dict(chosen)
    classes = sorted(set(_labels(selection.pool)))
    held = [selection.pool[i] for _, part in selection.splits for i in part]
    held_out = [(ex, dict(zip(classes, row.tolist()))) for ex, row in zip(held, best.probabilities)]
    return FitOutcome(model=model, chosen=chosen, grid=[candidate.row() for candidate in grid], held_out=held_out)


def _grid(selection: _Selection, corpus: _Corpus, metric: Metric, settings: FitSettings,
          seed: int) -> list[_Candidate]:
    """Every grid point fit on each split's fit part and scored on its held-out part; one temperature over them."""
    labels = _labels(selection.pool)
    classes = sorted(set(labels))
    held = [i for _, part in selection.splits for i in part]
    held_labels = [labels[i] for i in held]
    parts = []
    for fit, part in selection.splits:
        space = _Features(corpus, fit, settings)
        parts.append((space, space.matrix(fit), [labels[i] for i in fit], space.matrix(part)))
    objective = _Objective([selection.pool[i] for i in held], metric)
    grid = []
    points = [(C, weight) for C in settings.C for weight in settings.class_weight]
    bar = _progress(len(points) * len(parts), "fit: cross-validation")
    every = iter(_fit_all([(C, weight, settings, seed, index) for C, weight in points for index in range(len(parts))],
                          parts, bar))
    for C, weight in points:
        point = {"C": C, "class_weight": weight}
        fitted = [next(every) for _ in parts]
        scores = np.vstack([_held_out_scores(classifier, X_held, classes)
                            for classifier, (_, _, _, X_held) in zip(fitted, parts)])
        temperature = _temperature(scores, classes, held_labels)
        probabilities = _softmax(scores / temperature)
        grid.append(_Candidate(point, temperature, objective.mean(probabilities, classes),
                               _log_loss(scores, classes, held_labels, temperature), probabilities,
                               (fitted[0], parts[0][0])))
    bar.close()
    return grid


def _progress(total: int, desc: str) -> Any:
    """A progress bar with its ETA on a terminal (tqdm; none when stderr is not one, as in logs and tests)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="fit", disable=None, leave=False)


# Threads the grid's fits run in at once: its points and folds are independent fits of one BLAS thread each.
# Threads, not forked processes: a fork's pages count again in every child's resident size, so a process tree
# measured by its summed RSS looked twice its real size; the fits release the GIL in their loss and gradient.
FIT_WORKERS = 2


def _fit_all(jobs: list[tuple[float, str, FitSettings, int, int]], parts: list[Any], bar: Any) -> list[Any]:
    """Every job's classifier, in the jobs' order: on up to `FIT_WORKERS` threads where the machine has the cores
    (the same fits, so the same coefficients), else one after the other. A job is (C, class weight, settings, seed,
    index of the fold part it fits on). BLAS keeps one thread throughout, set once here: threadpoolctl's limits
    are process-wide, so threads entering and leaving it would undo each other's."""
    def fit(job: tuple[float, str, FitSettings, int, int]) -> Any:
        C, weight, settings, seed, index = job
        _, X_fit, y_fit, _ = parts[index]
        return _classifier(C, weight, settings, seed).fit(X_fit, y_fit)

    workers = min(FIT_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1, len(jobs))
    with one_blas_thread():
        if workers < 2:
            return [_counted(fit(job), bar) for job in jobs]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            return [_counted(classifier, bar) for classifier in pool.map(fit, jobs)]


def _counted(classifier: Any, bar: Any) -> Any:
    bar.update(1)
    return classifier


class _Objective:
    """The metric's mean over held-out examples of the decisions class probabilities answer (model alone).

    The answers of a whole grid point come at once (`runtime.trained.least_cost_actions`). The compile's metric
    (`evals.metrics_fullauto.metric`, or `metric_for` with the records' own configs) reads a decision's action and,
    through the guardrails, whether its f32 confidence is under a `min_confidence`: the turn's (what the decision
    weighed) or the one the metric scores the example under. So each example's metric is computed once per action
    and side of those thresholds, on the first decision that has them, and looked up for the grid's other points.
    """

    def __init__(self, examples: Sequence[dspy.Example], metric: Metric) -> None:
        self.examples, self.metric = list(examples), metric
        self.inputs = [ex.inputs().toDict() for ex in self.examples]
        self.min_confidence = np.asarray([min_confidence_of(inputs) for inputs in self.inputs], dtype=np.float64)
        self.floors = [sorted({np.float32(floor), np.float32(example_config(ex).min_confidence)})
                       for floor, ex in zip(self.min_confidence.tolist(), self.examples)]
        self.memo: dict[tuple[int, str, tuple[bool, ...]], float] = {}

    def mean(self, probabilities: np.ndarray, classes: list[str]) -> float:
        """The metric's mean over the examples (rows of `probabilities`, columns in `classes` order)."""
        answers, confidence = least_cost_actions(probabilities, classes, COST, self.min_confidence)
        values = []
        for i, (answer, p) in enumerate(zip(answers, confidence.tolist())):
            shown = np.float32(round(p, 6))  # the decision's confidence, as the guardrails compare it
            key = (i, answer, tuple(bool(shown < floor) for floor in self.floors[i]))
            if key not in self.memo:
                decision = decision_of(dict(zip(classes, probabilities[i].tolist())), self.inputs[i], COST)
                self.memo[key] = float(self.metric(self.examples[i], decision_prediction(decision)))
            values.append(self.memo[key])
        return sum(values) / len(values)


class _Fitted:
    """The examples the chosen settings are fit on, vectorized once for every grid point fit on them."""

    def __init__(self, examples: Sequence[dspy.Example], corpus: _Corpus, rows: Sequence[int],
                 settings: FitSettings) -> None:
        self.space = _Features(corpus, rows, settings)
        self.X, self.labels = self.space.matrix(rows), _labels(examples)

    def model(self, candidate: _Candidate, fit: dict[str, Any], settings: FitSettings,
              seed: int) -> TrainedDecisionModel:
        """The candidate's settings fit on these examples (their own vocabulary), at the candidate's temperature."""
        classifier = _classifier(candidate.point["C"], candidate.point["class_weight"], settings, seed)
        classifier.fit(self.X, self.labels)
        return TrainedDecisionModel(_state(classifier, self.space, candidate.temperature, fit))


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
                       "choose its settings (it takes three or more: two to fit on, one to choose with); import "
                       "more logs")
    if len(set(_labels(kept))) < 2:
        raise FitError(f"{len(examples)} labeled train example(s) and no dev split: with {len(held)} held out to "
                       f"choose its settings, the {len(kept)} left to fit the model on are all {_labels(kept)[0]!r}; a "
                       "decision model needs two or more label classes (import more logs)")
    return kept, held


# A class a fold's fit part never saw gets this score: no probability, whatever the temperature.
_UNSEEN = -1e6


def _held_out_scores(classifier: Any, X: sparse.csr_matrix, classes: list[str]) -> np.ndarray:
    """The classifier's linear scores of the held-out rows, one column per class of the pool."""
    scores = np.asarray(classifier.decision_function(X), dtype=np.float64)
    if scores.ndim == 1:  # two classes: the logit of the second against the first
        scores = np.column_stack([np.zeros_like(scores), scores])
    known = [str(c) for c in classifier.classes_]
    full = np.full((scores.shape[0], len(classes)), _UNSEEN)
    for column, name in enumerate(known):
        full[:, classes.index(name)] = scores[:, column]
    return full


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
