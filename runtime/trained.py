"""A trained decision model: what a turn looks like as features, and the action of least expected cost.

A program fit on logged runs (`full_auto.learned`, the sure half of `full_auto.cascade`) is a linear
model over features of exactly what a decision sees: the turn summary fields rendered as text with ids
and hashes stripped, the pending counts, the counters and the run's guardrail config. This module is its
production half: it turns program inputs (`runtime.inputs.summary_inputs` plus `config_inputs`) into
features, scores them with NumPy alone (no scikit-learn; the workbench's `fit` recipe fits the model),
and answers with the action of least expected cost under the cost matrix the state carries, knowing
that the guardrails pause any answer whose confidence is under `min_confidence`.

The text is vectorized by `runtime.frozen.knn.TfidfVectorizer` (scikit-learn's TF-IDF, state as JSON),
the numbers are standardised with the training split's mean and spread, and the class probabilities
are the softmax of the linear scores divided by a temperature fit on dev (calibration).

State JSON (`TrainedDecisionModel.to_state()`; never a pickle):
    {"kind": "linear", "features_version": 1, "classes": ["continue", ...], "vectorizer": {tfidf state},
     "numbers": [name, ...], "mean": [...], "scale": [...], "coef": [[...] per class], "intercept": [...],
     "temperature": T, "cost": {right action: {answered action: cost}}, "fit": {what the fit chose}}
`coef` has one row per class and one column per text feature, then one per number.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .fullauto import ACTIONS, GuardrailConfig, GuidanceDecision, tokens_from_usage
from .frozen.knn import KnnStateError, TfidfVectorizer
from .inputs import count_of, plan_steps, step_done

FEATURES_VERSION = 1
TRAINED_MODEL_KEY = "trained_model"  # program.json entry holding the model state (`TrainedModel` in programs)
CASCADE_KEY = "cascade"  # program.json entry of a cascade: {"threshold", "lm_program"}
DISPATCH: tuple[str, ...] = ("continue", "pause", "stop")
CONFIG_INPUT_NAMES: tuple[str, ...] = tuple(GuardrailConfig.model_fields)
# A field's text is clipped before it is vectorized: a 1 MB error message costs what its first 20,000
# characters cost, and a linear model gains nothing from the rest.
FIELD_CLIP = 20_000
MESSAGE_CHARS = 1_000
_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{7,64}\b"
                  r"|\b(?:fullauto|thread|turn|run)-[0-9a-z-]{6,}\b", re.IGNORECASE)
_DIFF_PATH = re.compile(r"^(?:\+\+\+ b/|diff --git a/)(\S+)", re.MULTILINE)
NUMBER_NAMES: tuple[str, ...] = (
    "failed", "interrupted", "has_error", "approvals", "tool_inputs", "compactions", "turns", "turn_share",
    "no_progress", "no_progress_share", "tokens", "token_share", "plan_steps", "plan_done_share", "plan_done",
    "diff_files", "diff_added", "diff_removed", "recent_pauses", "recent_stops", "min_confidence",
)


# What a turn can give the linear part: every standardised number is clipped to +-NUMBER_BOUND (no training
# record is further out: a z-score over n records is at most sqrt(n - 1)) and a TF-IDF row has norm 1, so no
# logit can exceed |intercept| + NUMBER_BOUND * sum |number coef| + norm of the text coef. A state for which
# that bound over the temperature passes MAX_SCALED_LOGIT (or is not finite) is refused: its scores could
# overflow, and its probabilities would be NaN. Fitted models stay many orders of magnitude below it.
NUMBER_BOUND = 1e4
MAX_SCALED_LOGIT = 1e100


class TrainedModelError(ValueError):
    """A trained-model state that cannot be used; the message is one line saying what is wrong."""


def config_inputs(config: Optional[GuardrailConfig | Mapping[str, Any]]) -> dict[str, str]:
    """The run's guardrail config as program inputs (text, as every input): `min_confidence`, `max_turns`, ..."""
    if config is None:
        config = GuardrailConfig()
    elif not isinstance(config, GuardrailConfig):
        config = GuardrailConfig.model_validate(dict(config))
    return {name: "" if value is None else str(value) for name, value in config.model_dump().items()}


def _text(inputs: Mapping[str, Any], name: str, clip: int = FIELD_CLIP) -> str:
    value = inputs.get(name)
    if value is None:
        return ""
    return (value if isinstance(value, str) else json.dumps(value, default=str))[:clip]


def _number(inputs: Mapping[str, Any], name: str, default: float) -> float:
    try:
        value = float(str(inputs.get(name, "")).strip())
    except ValueError:
        return default
    return value if math.isfinite(value) else default


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text.strip()[:1] in ("{", "[") else None
    except ValueError:
        return None


def _plan_text(turn_plan: str) -> tuple[str, list[tuple[str, str]]]:
    data = _json(turn_plan)
    steps = plan_steps(turn_plan)
    explanation = data.get("explanation") if isinstance(data, Mapping) else None
    if isinstance(explanation, str):
        lines = [f"explanation: {explanation}"]
    elif data is None and not steps:
        lines = [f"plan: {turn_plan}"]  # free text the parser does not read: kept as it is
    else:
        lines = []
    lines += [f"step {status}: {step}" for step, status in steps]
    return "\n".join(lines), steps


def _diff_of(diff_summary: str) -> str:
    data = _json(diff_summary)
    return data["diff"] if isinstance(data, Mapping) and isinstance(data.get("diff"), str) else diff_summary


def _recent_actions(recent_actions: str) -> list[str]:
    data = _json(recent_actions)
    if not isinstance(data, list):
        return []
    return [str(item.get("action") or "?") if isinstance(item, Mapping) else str(item) for item in data]


class _Turn:
    """The parts of a turn the features read, parsed once."""

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self.inputs = inputs
        self.plan, self.steps = _plan_text(_text(inputs, "turn_plan"))
        self.diff = _diff_of(_text(inputs, "diff_summary"))
        self.paths = list(dict.fromkeys(_DIFF_PATH.findall(self.diff)))
        self.recent = _recent_actions(_text(inputs, "recent_actions"))

    def text(self) -> str:
        inputs, recent = self.inputs, self.recent
        counts = (f"no_progress_{min(int(_number(inputs, 'no_progress_count', 0)), 5)} "
                  f"approvals_{min(count_of(inputs.get('pending_approvals')), 2)} "
                  f"tool_inputs_{min(count_of(inputs.get('pending_tool_inputs')), 2)} "
                  f"last_action_{recent[-1] if recent else 'none'}")
        lines = [
            f"status: {_text(inputs, 'last_turn_status') or 'completed'}",
            f"error: {_text(inputs, 'turn_error')}",
            self.plan,
            "touched: " + " ".join(self.paths),
            f"pending approvals: {_text(inputs, 'pending_approvals')}",
            f"pending tool inputs: {_text(inputs, 'pending_tool_inputs')}",
            f"agent message: {_text(inputs, 'last_agent_message', MESSAGE_CHARS)}",
            f"guidance: {_text(inputs, 'last_guidance_directive', MESSAGE_CHARS)}",
            "recent: " + " ".join(recent),
            counts,
        ]
        return _IDS.sub(" ", "\n".join(line for line in lines if line))

    def numbers(self) -> list[float]:
        inputs, steps, recent = self.inputs, self.steps, self.recent
        status = _text(inputs, "last_turn_status").strip().lower()
        done = sum(1 for _, status_ in steps if step_done(status_))
        changed = [line for line in self.diff.splitlines() if line[:1] in ("+", "-")]
        added = sum(1 for line in changed if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in changed if line.startswith("-") and not line.startswith("---"))
        turns, stalled = _number(inputs, "turn_count", 0.0), _number(inputs, "no_progress_count", 0.0)
        max_turns, limit = _number(inputs, "max_turns", 200.0), _number(inputs, "no_progress_limit", 3.0)
        tokens = float(tokens_from_usage(_text(inputs, "token_usage")) or 0)
        max_tokens = _number(inputs, "max_tokens", 0.0)
        return [
            float(status == "failed"), float(status == "interrupted"), float(bool(_text(inputs, "turn_error").strip())),
            float(count_of(inputs.get("pending_approvals"))), float(count_of(inputs.get("pending_tool_inputs"))),
            math.log1p(count_of(inputs.get("compaction_events"))), math.log1p(max(turns, 0.0)),
            turns / max_turns if max_turns > 0 else 0.0,
            stalled, stalled / limit if limit > 0 else 0.0,
            math.log1p(tokens), tokens / max_tokens if max_tokens > 0 else 0.0,
            float(len(steps)), done / len(steps) if steps else 0.0, float(bool(steps) and done == len(steps)),
            float(len(self.paths)), math.log1p(added), math.log1p(removed),
            float(sum(action in ("pause", "review") for action in recent)),
            float(sum(action == "stop" for action in recent)),
            _number(inputs, "min_confidence", 0.55),
        ]


def turn_features(inputs: Mapping[str, Any]) -> tuple[str, list[float]]:
    """(text, numbers): what the text features read and the numeric features of one turn (see below)."""
    turn = _Turn(inputs)
    return turn.text(), turn.numbers()


def turn_text(inputs: Mapping[str, Any]) -> str:
    """What the text features read: status, error, plan, touched paths, messages, recent actions and a few
    counts as words, ids and hashes stripped (one line per fact)."""
    return _Turn(inputs).text()


def turn_numbers(inputs: Mapping[str, Any]) -> list[float]:
    """The numeric features, in NUMBER_NAMES order (raw: the model standardises them)."""
    return _Turn(inputs).numbers()


def dispatch_probabilities(probabilities: Mapping[str, float]) -> dict[str, float]:
    """Probabilities of what production dispatches: `review` is a pause (the guardrails turn it into one)."""
    return {"continue": probabilities.get("continue", 0.0),
            "pause": probabilities.get("pause", 0.0) + probabilities.get("review", 0.0),
            "stop": probabilities.get("stop", 0.0)}


def least_cost_action(probabilities: Mapping[str, float], cost: Mapping[str, Mapping[str, float]],
                      min_confidence: float) -> tuple[str, float, float]:
    """(answer, its probability, expected cost): the action whose dispatched result costs least in expectation.

    An answer whose probability is under `min_confidence` would be paused by the guardrails, so it costs
    what a pause costs. Ties go to the safer action (pause, then stop, then continue). A pause is answered
    `review` when the model finds a review more likely than a plain pause.
    """
    dispatch = dispatch_probabilities(probabilities)
    best: Optional[tuple[float, int, str]] = None
    for order, action in enumerate(("pause", "stop", "continue")):
        enforced = action if dispatch[action] >= min_confidence else "pause"
        expected = sum(p * cost[right][enforced] for right, p in dispatch.items())
        if best is None or expected < best[0] - 1e-12:
            best = (expected, order, action)
    assert best is not None
    action = best[2]
    if action == "pause" and probabilities.get("review", 0.0) > probabilities.get("pause", 0.0):
        action = "review"
    return action, dispatch["pause" if action == "review" else action], best[0]


def least_cost_actions(probabilities: np.ndarray, classes: Sequence[str], cost: Mapping[str, Mapping[str, float]],
                       min_confidence: np.ndarray) -> tuple[list[str], np.ndarray]:
    """`least_cost_action` of many turns at once: (answers, their probabilities), one per row of `probabilities`
    (columns in `classes` order), each turn with its own `min_confidence`.

    The same sums in the same order and the same ties as the one-turn function, so each answer is the one it gives.
    """
    n = probabilities.shape[0]
    column = {name: probabilities[:, classes.index(name)] if name in classes else np.zeros(n) for name in ACTIONS}
    dispatch = {"continue": column["continue"], "pause": column["pause"] + column["review"], "stop": column["stop"]}
    best_cost = np.full(n, np.inf)
    best = np.zeros(n, dtype=np.int64)
    order = ("pause", "stop", "continue")
    for index, action in enumerate(order):
        sure = dispatch[action] >= min_confidence
        expected = np.zeros(n)
        for right, p in dispatch.items():  # the one-turn sum's order: continue, pause, stop
            expected = expected + p * np.where(sure, cost[right][action], cost[right]["pause"])
        better = expected < best_cost - 1e-12 if index else np.ones(n, dtype=bool)
        best_cost = np.where(better, expected, best_cost)
        best = np.where(better, index, best)
    answers = [order[i] for i in best.tolist()]
    review = column["review"] > column["pause"]
    answers = [("review" if answer == "pause" and review[i] else answer) for i, answer in enumerate(answers)]
    confidence = np.asarray([dispatch["pause" if a == "review" else a][i] for i, a in enumerate(answers)],
                            dtype=np.float64)
    return answers, confidence


def _matrix(state: Mapping[str, Any], key: str, rows: int, cols: Optional[int] = None) -> np.ndarray:
    try:
        value = np.asarray(state[key], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        raise TrainedModelError(f"`{key}` must be a list of numbers") from None
    shape = (rows,) if cols is None else (rows, cols)
    if value.shape != shape:
        raise TrainedModelError(f"`{key}` has shape {list(value.shape)}, expected {list(shape)}")
    if not np.all(np.isfinite(value)):
        raise TrainedModelError(f"`{key}` holds a number that is not finite")
    return value


def _cost(state: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    cost = state.get("cost")
    try:
        table = {right: {answer: float(cost[right][answer]) for answer in DISPATCH} for right in DISPATCH}
    except (KeyError, TypeError, ValueError):
        raise TrainedModelError("`cost` must give a cost for every (right action, answered action) pair of "
                                f"{list(DISPATCH)}") from None
    if any(not math.isfinite(v) or v < 0 for row in table.values() for v in row.values()):
        raise TrainedModelError("`cost` must hold finite, non-negative numbers")
    return table


class TrainedDecisionModel:
    """A fitted linear decision model: `probabilities(inputs)` and `decide(inputs)`, NumPy only."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise TrainedModelError("a trained-model state is a JSON object")
        if state.get("kind") != "linear":
            raise TrainedModelError(f"`kind` is {state.get('kind')!r}; this runtime scores 'linear' models")
        if state.get("features_version") != FEATURES_VERSION:
            raise TrainedModelError(f"`features_version` is {state.get('features_version')!r}; this runtime "
                                    f"computes features version {FEATURES_VERSION}: fit the model again")
        classes = state.get("classes")
        if not isinstance(classes, list) or len(classes) < 2 or len(set(classes)) != len(classes) \
                or any(c not in ACTIONS for c in classes):
            raise TrainedModelError(f"`classes` must list two or more distinct actions of {list(ACTIONS)}, "
                                    f"got {classes!r}")
        if list(state.get("numbers") or []) != list(NUMBER_NAMES):
            raise TrainedModelError(f"`numbers` must be {list(NUMBER_NAMES)} (features version {FEATURES_VERSION})")
        try:
            self.vectorizer = TfidfVectorizer.from_state(state.get("vectorizer") or {})
        except (KnnStateError, KeyError, TypeError, ValueError) as exc:
            raise TrainedModelError(f"`vectorizer` is not a TF-IDF state: {exc}") from None
        n_text, n_numbers = len(self.vectorizer.idf), len(NUMBER_NAMES)
        self.classes: list[str] = list(classes)
        self.mean = _matrix(state, "mean", n_numbers)
        self.scale = _matrix(state, "scale", n_numbers)
        if np.any(self.scale <= 0):
            raise TrainedModelError("`scale` must hold positive numbers")
        self.coef = _matrix(state, "coef", len(classes), n_text + n_numbers)
        self.intercept = _matrix(state, "intercept", len(classes))
        temperature = state.get("temperature")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                or not math.isfinite(temperature) or temperature <= 0:
            raise TrainedModelError(f"`temperature` must be a positive number, got {temperature!r}")
        self.temperature = float(temperature)
        self.cost = _cost(state)
        self.fit_info = dict(state.get("fit") or {})
        self._check_bounded(n_text)

    def _check_bounded(self, n_text: int) -> None:
        with np.errstate(over="ignore", invalid="ignore"):
            bound = float(np.max(np.abs(self.intercept) + NUMBER_BOUND * np.abs(self.coef[:, n_text:]).sum(axis=1)
                                 + np.sqrt(np.square(self.coef[:, :n_text]).sum(axis=1))) / self.temperature)
        if not bound <= MAX_SCALED_LOGIT:
            raise TrainedModelError(f"`coef`, `intercept` and `temperature` could give a turn a scaled score of "
                                    f"{bound:.3g} (at most {MAX_SCALED_LOGIT:g} is scored, or probabilities are "
                                    "not finite): fit the model again")

    @classmethod
    def from_state(cls, state: Any) -> "TrainedDecisionModel":
        """A model from `to_state()` data (TrainedModelError names what is wrong)."""
        return cls(state)

    def to_state(self) -> dict[str, Any]:
        """The model as JSON data."""
        return {"kind": "linear", "features_version": FEATURES_VERSION, "classes": list(self.classes),
                "vectorizer": self.vectorizer.to_state(), "numbers": list(NUMBER_NAMES),
                "mean": self.mean.tolist(), "scale": self.scale.tolist(), "coef": self.coef.tolist(),
                "intercept": self.intercept.tolist(), "temperature": self.temperature, "cost": self.cost,
                "fit": dict(self.fit_info)}

    def scores(self, inputs: Mapping[str, Any]) -> np.ndarray:
        """The linear scores (logits) of each class, before calibration."""
        text, raw_numbers = turn_features(inputs)
        row = self.vectorizer.transform_one(text)
        n_text = len(self.vectorizer.idf)
        numbers = np.clip((np.asarray(raw_numbers, dtype=np.float64) - self.mean) / self.scale, -NUMBER_BOUND,
                          NUMBER_BOUND)
        logits = self.intercept + self.coef[:, n_text:] @ numbers
        if row:
            index = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
            weight = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            logits = logits + self.coef[:, index] @ weight
        return logits

    def probabilities(self, inputs: Mapping[str, Any]) -> dict[str, float]:
        """Calibrated probability of each class (softmax of the scores over the temperature)."""
        z = self.scores(inputs) / self.temperature
        z = np.exp(z - z.max())
        z = z / z.sum()
        if not np.all(np.isfinite(z)):  # the loader's bound rules it out; a decision from NaN would be a silent pause
            raise TrainedModelError("the model's probabilities for this turn are not finite")
        return {name: float(p) for name, p in zip(self.classes, z)}

    def decide(self, inputs: Mapping[str, Any]) -> GuidanceDecision:
        """The action of least expected cost, with its probability as the confidence."""
        return decision_of(self.probabilities(inputs), inputs, self.cost)


def min_confidence_of(inputs: Mapping[str, Any]) -> float:
    """The turn's `min_confidence` as the decision reads it (the guardrail config's default when absent)."""
    return _number(inputs, "min_confidence", GuardrailConfig().min_confidence)


def decision_of(probabilities: Mapping[str, float], inputs: Mapping[str, Any],
                cost: Mapping[str, Mapping[str, float]]) -> GuidanceDecision:
    """The decision a model with these class probabilities answers for this turn (`least_cost_action`)."""
    min_confidence = min_confidence_of(inputs)
    action, confidence, expected = least_cost_action(probabilities, cost, min_confidence)
    shown = ", ".join(f"{name} {probabilities[name]:.2f}" for name in sorted(probabilities, key=ACTIONS.index))
    return GuidanceDecision(action=action, confidence=round(confidence, 6),
                            next_input=next_input(inputs) if action == "continue" else "",
                            reason=f"trained model: {shown}; expected cost {expected:.2f}")


def next_input(inputs: Mapping[str, Any]) -> str:
    """What a continue sends: the plan's current open step (empty, the loop's fallback prompt, without a plan)."""
    steps = plan_steps(_text(inputs, "turn_plan"))
    open_steps = [(step, status) for step, status in steps if not step_done(status)]
    if not open_steps:
        return ""
    current = next((step for step, status in open_steps if status in ("in_progress", "inprogress")), open_steps[0][0])
    return f"Continue with the next plan step: {current}"[:500]


__all__ = ["CASCADE_KEY", "CONFIG_INPUT_NAMES", "FEATURES_VERSION", "NUMBER_NAMES", "TRAINED_MODEL_KEY",
           "TrainedDecisionModel", "TrainedModelError", "config_inputs", "decision_of", "dispatch_probabilities",
           "least_cost_action", "least_cost_actions", "min_confidence_of", "next_input", "turn_features", "turn_numbers", "turn_text"]
