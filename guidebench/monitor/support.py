"""The out-of-support test: the share of turns whose features fall outside what the champion was trained on.

A turn's features are the trained decision model's numbers (`runtime.trained.turn_numbers`) that need no parse of
the plan, diff or recent actions: status flags, pending counts, compactions, turns, no-progress, tokens and their
shares of the run's limits, and the run's min_confidence (`CHEAP_NUMBERS`). Its score is the largest standardised
distance of any of them, s(x) = max_j |x_j - mean_j| / scale_j, and the support is {s <= the largest score among n
reference turns}.

Where the numbers' mean and scale come from: the champion's trained model when it has one (they are its training
split's, recorded in program.json); the export records no feature ranges, and an LM or rule program records no
features at all, so otherwise they are fit on the first half of the reference window (the first live turns) and the
threshold is taken on its second half: either way the threshold comes from turns the mean and scale were not fit on.

The stated test: with no change, a new turn is exchangeable with the n threshold turns, so the chance that it scores
above their maximum is Beta(1, n) distributed; with probability 1 - alpha/2 it is at most
`evals.sequential.exceedance_bound(n, alpha/2)`. That bound is the baseline; the alarm is one-sided (the confidence
sequence of the live share above it).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Mapping, Optional

import numpy as np
import orjson

from evals.sequential import exceedance_bound
from runtime.fullauto import tokens_from_usage
from runtime.inputs import count_of, input_text

from guidebench.monitor._base import Baseline

SCALE_FLOOR = 1e-9
NESTING = 256  # brackets in a token usage text past which the standard library reads it (its recursion limit)


# The numbers of `runtime.trained.NUMBER_NAMES` that need no parse of the plan, the diff or the recent actions (those
# cost most of a turn's features; 10,000 turns must be read in seconds): their indices, in that order.
CHEAP_NUMBERS: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20)


def _number(value: Any, default: float) -> float:
    """A logged number as the trained model reads it (`float` of its text; not finite: the default)."""
    if type(value) is int or type(value) is float:  # its text reads back as the same float, without making the text
        try:
            number = float(value)
        except OverflowError:  # an integer past the floats: its text would read as inf
            return default
    else:
        try:
            number = float(str("" if value is None else value).strip())
        except ValueError:
            return default
    return number if math.isfinite(number) else default


@lru_cache(maxsize=1024)
def _count_text(text: str) -> int:
    return count_of(text)


def _count(value: Any) -> int:
    """`count_of` of a logged count; its few texts ("0", "1", "[]") repeat on almost every turn, so they are kept."""
    return _count_text(value) if type(value) is str else count_of(input_text(value))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else input_text(value)  # most logged fields are text already


def _tokens(usage: Any) -> float:
    """`runtime.fullauto.tokens_from_usage` of a summary's token usage, 0 when it has none. Its JSON text is read
    by orjson (the standard library's reader, which that function uses, is most of a turn's cost): what orjson
    reads, the standard library reads alike, but for integers beyond 64 bits, which neither side counts as tokens,
    and deep nesting (many brackets go to the function itself); what orjson refuses goes to the function itself."""
    if isinstance(usage, str) and usage.count("{") + usage.count("[") <= NESTING:
        try:
            data = orjson.loads(usage)
        except orjson.JSONDecodeError:
            pass
        else:
            return float(tokens_from_usage(data) or 0) if isinstance(data, dict) else 0.0
    return float(tokens_from_usage(input_text(usage)) or 0)


def turn_vector(summary: Mapping[str, Any], config: Mapping[str, Any]) -> list[float]:
    """The trained model's numbers CHEAP_NUMBERS of one logged turn (summary object plus the run's guardrail config),
    computed as `runtime.trained.turn_numbers` computes them (tests/guidebench/monitor checks they agree)."""
    status = _text(summary.get("last_turn_status")).strip().lower()
    turns, stalled = _number(summary.get("turn_count"), 0.0), _number(summary.get("no_progress_count"), 0.0)
    max_turns, limit = _number(config.get("max_turns"), 200.0), _number(config.get("no_progress_limit"), 3.0)
    tokens = _tokens(summary.get("token_usage"))
    max_tokens = _number(config.get("max_tokens"), 0.0)
    return [
        float(status == "failed"), float(status == "interrupted"),
        float(bool(_text(summary.get("turn_error")).strip())),
        float(_count(summary.get("pending_approvals"))), float(_count(summary.get("pending_tool_inputs"))),
        math.log1p(_count(summary.get("compaction_events"))), math.log1p(max(turns, 0.0)),
        turns / max_turns if max_turns > 0 else 0.0, stalled, stalled / limit if limit > 0 else 0.0,
        math.log1p(tokens), tokens / max_tokens if max_tokens > 0 else 0.0,
        _number(config.get("min_confidence"), 0.55),
    ]


def trained_scaling(program_state: Mapping[str, Any]) -> Optional[tuple[list[float], list[float]]]:
    """The champion's training mean and scale of the numbers, when it is a trained model (else None)."""
    entry = program_state.get("trained_model")
    model = entry.get("model") if isinstance(entry, Mapping) else None
    if not isinstance(model, Mapping) or not model.get("mean") or not model.get("scale"):
        return None
    mean, scale = list(model["mean"]), list(model["scale"])
    if len(mean) <= max(CHEAP_NUMBERS) or len(scale) != len(mean):
        return None
    return [float(mean[i]) for i in CHEAP_NUMBERS], [float(scale[i]) for i in CHEAP_NUMBERS]


def scores(rows: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """s(x) of each row."""
    return np.max(np.abs(rows - mean) / np.maximum(scale, SCALE_FLOOR), axis=1)


def fit_support(rows: list[list[float]], trained: Optional[tuple[list[float], list[float]]], alpha_k: float,
                champion: str) -> dict[str, Any]:
    """The support and its baseline from the reference rows (see the module)."""
    data = np.asarray(rows, dtype=float)
    if trained is not None:
        mean, scale = np.asarray(trained[0]), np.asarray(trained[1])
        held, source = data, f"{champion}'s trained model (its training split's mean and scale)"
    else:
        half = len(data) // 2
        mean, scale = data[:half].mean(axis=0), data[:half].std(axis=0)
        held = data[half:]
        source = (f"the first {half} reference turns (the export records no training feature ranges; "
                  f"{champion} has no trained model)")
    threshold = float(scores(held, mean, scale).max()) if len(held) else float("inf")
    bound = exceedance_bound(len(held), alpha_k / 2)
    return {"mean": mean.tolist(), "scale": scale.tolist(), "threshold": threshold, "n": len(held),
            "bound": bound, "source": f"scaled by {source}; threshold the largest score of {len(held)} later "
                                     "reference turns"}


def support_baseline(support: Mapping[str, Any]) -> Baseline:
    """The one-sided baseline: the exceedance bound."""
    return Baseline(value=support["bound"], low=0.0, high=support["bound"], n=support["n"],
                    source=f"the exchangeability bound on {support['n']} turns ({support['source']})")


def outside(rows: list[list[float]], support: Mapping[str, Any]) -> np.ndarray:
    """1.0 for each row outside the support, else 0.0."""
    if not rows:
        return np.zeros(0)
    s = scores(np.asarray(rows, dtype=float), np.asarray(support["mean"]), np.asarray(support["scale"]))
    return (s > support["threshold"]).astype(float)
