"""Programs that learn from the logs: `full_auto.learned` (a trained decision model) and `full_auto.cascade`.

`full_auto.learned` answers every turn with a linear model fit on a dataset's train split by the `fit`
recipe (`guidebench compile --program full_auto.learned --optimizer fit`): features of what the
original signature sees, calibrated class probabilities, the action of least expected cost under the
objective's cost matrix (`runtime.trained`). It makes no LM call.

`full_auto.cascade` lets that model answer when it is sure (the calibrated probability of its answer is at
least the cascade's `threshold`) and hands the other turns to an LM program (`lm_program`, any single-
predictor Full Auto LM program; `full_auto.compact_state` by default). LM optimizers compile the LM
program on the turns it receives (`lm_examples`); a cascade whose model is not fitted yet is fitted
first with the `fit` recipe's defaults. Every prediction says which half decided (`decided_by`: "model"
or "lm"). The threshold and the LM program's name are program state (the `cascade` entry), so a
compiled cascade, its search trial and its export keep them; `guidebench search` tunes both on dev.

An unfitted program does not guess: its forward raises `NotFittedError` (replay scores it as an error),
and commands refuse it up front with the line to run.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import dspy
from dspy.predict.parameter import Parameter

from runtime.trained import CASCADE_KEY, TrainedDecisionModel, TrainedModelError, decision_of

from .results import decision_prediction

MODEL_PATH = "model"
LM_PATH = "lm"
DEFAULT_THRESHOLD = 0.8
DEFAULT_LM_PROGRAM = "full_auto.compact_state"
# LM programs a cascade may hand turns to: one predictor each (a frozen cascade runs it standalone) and
# no decision structure of their own (the hybrid's rule gate, the stack's three calls).
CASCADE_LM_PROGRAMS: tuple[str, ...] = ("full_auto.compact_state", "full_auto.compact", "full_auto.compact_cot",
                                        "full_auto.predict", "full_auto.predict_clear", "full_auto.zeroshot",
                                        "full_auto.cot")


class NotFittedError(RuntimeError):
    """A trained program used before the `fit` recipe fitted it."""


class FittedModel(Parameter):
    """A model fitted on the logs, held by a program as a parameter that is no predictor and saved as JSON in its
    state (`{"model": null}` before fitting). Subclasses name the model class and the error a bad state raises."""

    model_class: Any
    error_class: type[Exception]

    def __init__(self, state: Optional[dict[str, Any]] = None) -> None:
        self.model: Any = None
        if state is not None:
            self.load_state(state)

    @property
    def fitted(self) -> bool:
        """True once a model is loaded or fitted."""
        return self.model is not None

    def set_model(self, model: Any) -> None:
        """Use this fitted model."""
        self.model = model

    def reset(self) -> None:
        """Keep the model: an LM optimizer's student (a reset copy) keeps the half it does not compile."""

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """The model's JSON state (`{"model": null}` before fitting)."""
        return {"model": None if self.model is None else self.model.to_state()}

    def load_state(self, state: dict[str, Any]) -> "FittedModel":
        """Load `dump_state()` data (the subclass's error names what is wrong)."""
        if not isinstance(state, dict) or "model" not in state:
            raise self.error_class(f"a fitted-model entry is {{'model': {{...}}}}, got {str(state)[:80]!r}")
        self.model = None if state["model"] is None else self.model_class.from_state(state["model"])
        return self

    def fitted_model(self, name: str) -> Any:
        """The model; NotFittedError, with the command that fits it, before the fit."""
        if self.model is None:
            raise NotFittedError(f"{name} is not fitted: compile it first, e.g. `guidebench compile --program {name} "
                                 "--optimizer fit --data DATASET`")
        return self.model

    def __repr__(self) -> str:
        return f"{type(self).__name__}({'fitted' if self.fitted else 'not fitted'})"


class TrainedModel(FittedModel):
    """The fitted decision model of a Full Auto program (`runtime.trained`)."""

    model_class = TrainedDecisionModel
    error_class = TrainedModelError


class FullAutoLearned(dspy.Module):
    """A linear decision model fit on the logs: the action of least expected cost, no LM call."""

    def __init__(self) -> None:
        super().__init__()
        self.trained_model = TrainedModel()

    def forward(self, **inputs: Any) -> dspy.Prediction:
        return self.predict_batch([inputs])[0]

    def predict_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[dspy.Prediction]:
        """`forward` of many turns in one pass (replay's path: a model needs no DSPy call, nor a trace, per turn);
        each turn's features and probabilities are computed once."""
        model = self.trained_model.fitted_model("full_auto.learned")
        predictions = []
        for turn in inputs:
            probabilities = model.probabilities(turn)
            decision = decision_of(probabilities, turn, model.cost)
            predictions.append(decision_prediction(decision, decided_by=MODEL_PATH, probabilities=probabilities))
        return predictions


class CascadeSettings(Parameter):
    """The cascade's own parameters: the model's confidence threshold and the name of its LM program."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, lm_program: str = DEFAULT_LM_PROGRAM) -> None:
        self.threshold = check_threshold(threshold)
        self.lm_program = check_lm_program(lm_program)

    def reset(self) -> None:
        """Keep them: they are the program's structure, set by the search, not what an optimizer learns."""

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """Threshold and LM program name."""
        return {"threshold": self.threshold, "lm_program": self.lm_program}

    def load_state(self, state: dict[str, Any]) -> "CascadeSettings":
        """Load `dump_state()` data (ValueError on a bad threshold or an LM program a cascade cannot use)."""
        if not isinstance(state, dict):
            raise ValueError(f"a cascade entry is {{'threshold': ..., 'lm_program': ...}}, got {state!r}")
        self.threshold = check_threshold(state.get("threshold"))
        self.lm_program = check_lm_program(state.get("lm_program"))
        return self

    def __repr__(self) -> str:
        return f"CascadeSettings(threshold={self.threshold}, lm_program={self.lm_program})"


def check_threshold(value: Any) -> float:
    """A cascade threshold: a probability in [0, 1] (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"a cascade threshold is a probability between 0 and 1, got {value!r}")
    return float(value)


def check_lm_program(name: Any) -> str:
    """The registered name of an LM program a cascade can hand turns to (ValueError otherwise)."""
    from . import registry

    try:
        canonical = registry.resolve(str(name))
    except LookupError:
        canonical = None
    if canonical not in CASCADE_LM_PROGRAMS:
        raise ValueError(f"a cascade's LM program is one of {', '.join(CASCADE_LM_PROGRAMS)}; got {name!r}")
    return canonical


class FullAutoCascade(dspy.Module):
    """The trained model answers when sure (probability >= threshold), an LM program answers the rest."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, lm_program: Optional[str] = None) -> None:
        super().__init__()
        self.trained_model = TrainedModel()
        self.cascade = CascadeSettings(threshold, lm_program or DEFAULT_LM_PROGRAM)
        self.lm_program = _build(self.cascade.lm_program)

    @property
    def threshold(self) -> float:
        """The model's confidence at or above which it answers without the LM."""
        return self.cascade.threshold

    def configure(self, *, threshold: Optional[float] = None, lm_program: Optional[str] = None) -> None:
        """Change the threshold and/or the LM program (a new LM program starts uncompiled)."""
        if threshold is not None:
            self.cascade.threshold = check_threshold(threshold)
        if lm_program is not None and check_lm_program(lm_program) != self.cascade.lm_program:
            self.cascade.lm_program = check_lm_program(lm_program)
            self.lm_program = _build(self.cascade.lm_program)

    def model_decision(self, inputs: dict[str, Any]) -> Optional[Any]:
        """The model's decision when it is sure enough to answer, else None (the LM's turn)."""
        decision = self.trained_model.fitted_model("full_auto.cascade").decide(inputs)
        return decision if decision.confidence >= self.cascade.threshold else None

    def answer_without_lm(self, inputs: dict[str, Any]) -> Optional[dspy.Prediction]:
        """The model's prediction when it is sure of the turn, else None; the model runs once."""
        decision = self.model_decision(inputs)
        return decision_prediction(decision, decided_by=MODEL_PATH) if decision is not None else None

    def forward(self, **inputs: Any) -> dspy.Prediction:
        answered = self.answer_without_lm(inputs)
        if answered is not None:
            return answered
        prediction = self.lm_program(**inputs)
        prediction.decided_by = LM_PATH
        return prediction

    def lm_examples(self, examples: Sequence[dspy.Example]) -> list[dspy.Example]:
        """The examples the LM program answers (the model is unsure of them); all of them if none is left."""
        chosen = [ex for ex in examples if self.model_decision(ex.inputs()) is None]
        return chosen or list(examples)

    def load_state(self, state: dict[str, Any]) -> "FullAutoCascade":
        """Load a saved cascade: its LM program is rebuilt from the state's name before its predictors load."""
        settings = state.get(CASCADE_KEY) if isinstance(state, dict) else None
        if isinstance(settings, dict):
            self.configure(lm_program=settings.get("lm_program", DEFAULT_LM_PROGRAM))
        return super().load_state(state)


def _build(name: str) -> dspy.Module:
    from . import registry

    return registry.get(name)


def trained_parameters(program: dspy.Module) -> list[tuple[str, TrainedModel]]:
    """The program's trained-model parameters by path (empty for a program that learns nothing from data)."""
    return [(name, p) for name, p in program.named_parameters() if isinstance(p, TrainedModel)]


def needs_fitting(program: dspy.Module) -> bool:
    """True when the program has a trained part that is not fitted yet."""
    return any(not parameter.fitted for _, parameter in trained_parameters(program))


__all__ = ["CASCADE_KEY", "CASCADE_LM_PROGRAMS", "DEFAULT_LM_PROGRAM", "DEFAULT_THRESHOLD", "FullAutoCascade",
           "FullAutoLearned", "NotFittedError", "TrainedModel", "check_lm_program", "check_threshold",
           "needs_fitting", "trained_parameters"]
