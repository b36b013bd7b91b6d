"""The planner's outcome model: what an attempt of each strategy family is expected to bring, scored with NumPy.

Fit on a dataset's train split (the workbench's `fit` recipe, `optimizers/outcome_fitting.py`, with
scikit-learn) and kept as JSON state, the model answers from the packet alone (`runtime.outcome_features`):
for each family, the probability that an attempt is valid and the expected improvement of the best it
brings, as a share of the best (so kernels of any scale share one model) and in cycles (that share times
the packet's best). `planner.learned` chooses with it, and the planner metrics estimate with it where the
logs carry no performance profile (`evals.offpolicy`).

State JSON (`OutcomeModel.to_state()`; never a pickle):
    {"kind": "planner_outcome", "features_version": 2, "row_names": [...], "families": [families seen in train],
     "valid": scorer, "gain": scorer, "family_scale": {family: factor, one for every family},
     "fit": {what the fit chose, on which records}}
The gain scorer's share is multiplied by its family's `family_scale`: the fit's calibration of each family's
mean (its held-out predictions against what the family's attempts brought; 1.0 for a family too rare to calibrate).
A scorer is either gradient-boosted trees
    {"type": "trees", "link": "identity" | "logistic", "bias": b,
     "trees": [{"feature": [...], "threshold": [...], "left": [...], "right": [...], "value": [...]}, ...]}
(a node with left == -1 is a leaf; a row goes left when row[feature] <= threshold; the score is the bias plus
every tree's leaf value, through the link; a constant is one tree of one leaf), or a linear model over the row and
its family interactions
    {"type": "linear", "link": ..., "mean": [...], "scale": [...], "coef": [...], "intercept": c}.

A state that could hang the scorer or make it lie is refused when it is read, in one line (`OutcomeModelError`):
trees deeper than `MAX_TREE_DEPTH` levels (scoring walks one level per step: a chain of 200,000 nodes took
minutes per decision) or of more than `MAX_NODES` nodes in all, an empty tree list, a score the trees can push
past `MAX_REACH` (the bias plus each tree's largest leaf: a share of the best beyond 10 times the best, or
log-odds beyond 1,000, is no fit's answer, and 1e308 overflows to infinity), and a `family_scale` without every
family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .advisor import FAMILIES, AdvisorPacket
from .outcome_features import FEATURES_VERSION, ROW_NAMES, PacketFeatures, packet_features

MODEL_KIND = "planner_outcome"
OUTCOME_MODEL_KEY = "outcome_model"  # program.json entry of `planner.learned` (its parameter's name)
LINKS = ("identity", "logistic")
N_CONTEXT_BLOCK = len(ROW_NAMES) - len(FAMILIES)  # the row without its one-hot family part
# What a state may hold (the fit writes depth 2 or 3, 200 trees, scores within 0.1 (share) and 12 (log-odds)).
MAX_TREE_DEPTH = 32
MAX_NODES = 1_000_000
MAX_REACH = {"identity": 10.0, "logistic": 1_000.0}


class OutcomeModelError(ValueError):
    """An outcome-model state that cannot be used; the message is one line saying what is wrong."""


def linear_expansion(rows: np.ndarray) -> np.ndarray:
    """Rows for a linear model: each row, then its features again once per family (0 outside its own family),
    so that every family gets its own slope on every feature."""
    rows = np.atleast_2d(rows)
    start = ROW_NAMES.index(f"is:{FAMILIES[0]}")
    onehot = rows[:, start:start + len(FAMILIES)]
    rest = np.delete(rows, np.s_[start:start + len(FAMILIES)], axis=1)
    blocks = [rest * onehot[:, [k]] for k in range(len(FAMILIES))]
    return np.hstack([rows, *blocks])


def _array(state: Mapping[str, Any], key: str, dtype: Any, where: str) -> np.ndarray:
    try:
        value = np.asarray(state[key], dtype=dtype)
    except (KeyError, TypeError, ValueError):
        raise OutcomeModelError(f"{where}: `{key}` must be a list of numbers") from None
    if value.ndim != 1 or (value.dtype.kind == "f" and not np.all(np.isfinite(value))):
        raise OutcomeModelError(f"{where}: `{key}` must be a flat list of finite numbers")
    return value


class _Tree:
    """One regression tree as flat arrays."""

    def __init__(self, state: Mapping[str, Any], n_features: int, where: str) -> None:
        if not isinstance(state, Mapping):
            raise OutcomeModelError(f"{where}: a tree is a JSON object")
        self.feature = _array(state, "feature", np.int64, where)
        self.threshold = _array(state, "threshold", np.float64, where)
        self.left = _array(state, "left", np.int64, where)
        self.right = _array(state, "right", np.int64, where)
        self.value = _array(state, "value", np.float64, where)
        n = len(self.value)
        if n == 0 or any(len(a) != n for a in (self.feature, self.threshold, self.left, self.right)):
            raise OutcomeModelError(f"{where}: a tree's arrays must have one equal, non-zero length")
        inner = self.left >= 0
        if np.any(self.left[inner] >= n) or np.any(self.right[inner] >= n) or np.any(self.right[inner] < 0) \
                or np.any(np.minimum(self.left[inner], self.right[inner]) <= np.nonzero(inner)[0]) \
                or np.any((self.feature[inner] < 0) | (self.feature[inner] >= n_features)):
            raise OutcomeModelError(f"{where}: a tree has a child or feature index out of range")

    def to_state(self) -> dict[str, Any]:
        return {"feature": self.feature.tolist(), "threshold": self.threshold.tolist(), "left": self.left.tolist(),
                "right": self.right.tolist(), "value": self.value.tolist()}


class Scorer:
    """A fitted scorer of model rows: trees or linear, through its link (`predict(rows)`)."""

    def __init__(self, state: Any, n_features: int, where: str) -> None:
        if not isinstance(state, Mapping):
            raise OutcomeModelError(f"{where}: a scorer is a JSON object")
        self.type = state.get("type")
        self.link = state.get("link")
        if self.link not in LINKS:
            raise OutcomeModelError(f"{where}: `link` must be one of {list(LINKS)}, got {self.link!r}")
        self.n_features = n_features
        if self.type == "trees":
            bias = state.get("bias")
            if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not math.isfinite(bias):
                raise OutcomeModelError(f"{where}: `bias` must be a finite number")
            self.bias = float(bias)
            trees = state.get("trees")
            if not isinstance(trees, list) or not trees:
                raise OutcomeModelError(f"{where}: `trees` must be a non-empty list (a constant is one tree of one "
                                        "leaf)")
            self.trees = [_Tree(tree, n_features, f"{where} tree {i}") for i, tree in enumerate(trees)]
            self._check_size(where)
            self._pack()
            self._check_depth(where)
        elif self.type == "linear":
            width = linear_expansion(np.zeros((1, n_features))).shape[1]
            self.mean = _array(state, "mean", np.float64, where)
            self.scale = _array(state, "scale", np.float64, where)
            self.coef = _array(state, "coef", np.float64, where)
            if any(len(a) != width for a in (self.mean, self.scale, self.coef)):
                raise OutcomeModelError(f"{where}: `mean`, `scale` and `coef` must have {width} numbers each")
            if np.any(self.scale <= 0):
                raise OutcomeModelError(f"{where}: `scale` must hold positive numbers")
            intercept = state.get("intercept")
            if isinstance(intercept, bool) or not isinstance(intercept, (int, float)) or not math.isfinite(intercept):
                raise OutcomeModelError(f"{where}: `intercept` must be a finite number")
            self.intercept = float(intercept)
        else:
            raise OutcomeModelError(f"{where}: `type` must be 'trees' or 'linear', got {self.type!r}")

    def _check_size(self, where: str) -> None:
        """At most MAX_NODES nodes, and a score the bias and the leaves cannot push past MAX_REACH."""
        nodes = sum(len(t.value) for t in self.trees)
        if nodes > MAX_NODES:
            raise OutcomeModelError(f"{where}: its trees hold {nodes} nodes; a state holds at most {MAX_NODES}")
        reach = abs(self.bias) + sum(float(np.max(np.abs(t.value[t.left < 0]))) for t in self.trees)
        limit = MAX_REACH[self.link]
        if not reach <= limit:
            what = "a share of the best" if self.link == "identity" else "log-odds"
            raise OutcomeModelError(f"{where}: the bias and the trees' largest leaves add up to {reach:.3g}; a scorer "
                                    f"of link {self.link} ({what}) stays within {limit:g}")

    def _check_depth(self, where: str) -> None:
        """No tree deeper than MAX_TREE_DEPTH levels: walked level by level from every root at once, at most that
        many steps (children come after their parent, so the walk ends)."""
        frontier = self._roots
        for _ in range(MAX_TREE_DEPTH + 1):
            inner = frontier[self._left[frontier] >= 0]
            if not len(inner):
                return
            frontier = np.unique(np.concatenate([self._left[inner], self._right[inner]]))
        raise OutcomeModelError(f"{where}: a tree is deeper than {MAX_TREE_DEPTH} levels (scoring walks one level per "
                                "step; the fit writes depth 2 or 3)")

    def _pack(self) -> None:
        """Every tree's nodes in one set of arrays (children as global indices), to walk all trees at once."""
        sizes = [len(t.value) for t in self.trees]
        offsets = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        def joined(name: str, dtype: Any) -> np.ndarray:
            parts = [getattr(t, name) for t in self.trees]
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
        self._roots = offsets
        self._feature, self._threshold, self._value = joined("feature", np.int64), joined("threshold", np.float64), \
            joined("value", np.float64)
        self._left = np.concatenate([np.where(t.left >= 0, t.left + o, -1) for t, o in zip(self.trees, offsets)]) \
            if self.trees else np.zeros(0, dtype=np.int64)
        self._right = np.concatenate([np.where(t.left >= 0, t.right + o, -1) for t, o in zip(self.trees, offsets)]) \
            if self.trees else np.zeros(0, dtype=np.int64)

    def raw(self, rows: np.ndarray) -> np.ndarray:
        """The score before the link."""
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        if self.type == "trees":
            # scikit-learn's trees compare the row's float32 values with their float64 thresholds: so does this
            as_fit = rows.astype(np.float32).astype(np.float64)
            node = np.broadcast_to(self._roots, (len(rows), len(self._roots))).copy()
            row = np.arange(len(rows))[:, None]
            inner = self._left[node] >= 0
            while inner.any():
                go_left = as_fit[np.broadcast_to(row, node.shape), self._feature[node]] <= self._threshold[node]
                step = np.where(go_left, self._left[node], self._right[node])
                node = np.where(inner, step, node)
                inner = self._left[node] >= 0
            return self.bias + self._value[node].sum(axis=1)
        return self.intercept + ((linear_expansion(rows) - self.mean) / self.scale) @ self.coef

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """The score through the link: a probability (logistic) or a value (identity)."""
        raw = self.raw(rows)
        return 1.0 / (1.0 + np.exp(-np.clip(raw, -50, 50))) if self.link == "logistic" else raw

    def to_state(self) -> dict[str, Any]:
        """The scorer as JSON data."""
        if self.type == "trees":
            return {"type": "trees", "link": self.link, "bias": self.bias, "trees": [t.to_state() for t in self.trees]}
        return {"type": "linear", "link": self.link, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "coef": self.coef.tolist(), "intercept": self.intercept}


def _family_scale(value: Any, families: Sequence[str]) -> dict[str, float]:
    """The `family_scale` entry checked: a positive finite factor for every family of the model, no other."""
    if not isinstance(value, Mapping) or any(f not in families for f in value) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0
            for v in value.values()):
        raise OutcomeModelError(f"`family_scale` must map families of {list(families)} to positive numbers, "
                                f"got {str(value)[:80]!r}")
    missing = [f for f in families if f not in value]
    if missing:
        raise OutcomeModelError(f"`family_scale` has no factor for {', '.join(missing)}: every family of `families` "
                                "needs one (1.0: not scaled)")
    return {f: float(value[f]) for f in families}


@dataclass(frozen=True)
class FamilyEstimate:
    """What the model expects of one family's attempt from one packet."""

    family: str
    p_valid: float
    gain_share: float  # expected improvement of the best, as a share of the best (>= 0)
    cycles: Optional[float]  # the same in cycles (None without a best to scale it by)


class OutcomeModel:
    """A fitted outcome model: `estimates(packet)` per family, NumPy only."""

    def __init__(self, state: Any) -> None:
        if not isinstance(state, Mapping):
            raise OutcomeModelError("an outcome-model state is a JSON object")
        if state.get("kind") != MODEL_KIND:
            raise OutcomeModelError(f"`kind` is {state.get('kind')!r}; this runtime scores {MODEL_KIND!r} models")
        if state.get("features_version") != FEATURES_VERSION:
            raise OutcomeModelError(f"`features_version` is {state.get('features_version')!r}; this runtime computes "
                                    f"features version {FEATURES_VERSION}: fit the model again")
        if list(state.get("row_names") or []) != list(ROW_NAMES):
            raise OutcomeModelError(f"`row_names` must be the {len(ROW_NAMES)} features of version {FEATURES_VERSION}")
        families = state.get("families")
        if not isinstance(families, list) or not families or any(f not in FAMILIES for f in families) \
                or len(set(families)) != len(families):
            raise OutcomeModelError(f"`families` must list distinct families of {list(FAMILIES)}, got {families!r}")
        self.families: list[str] = [f for f in FAMILIES if f in families]
        self.valid = Scorer(state.get("valid"), len(ROW_NAMES), "valid")
        self.gain = Scorer(state.get("gain"), len(ROW_NAMES), "gain")
        self.family_scale = _family_scale(state.get("family_scale"), self.families)
        self.fit_info: dict[str, Any] = dict(state.get("fit") or {})

    @classmethod
    def from_state(cls, state: Any) -> "OutcomeModel":
        """A model from `to_state()` data (OutcomeModelError names what is wrong)."""
        return cls(state)

    def to_state(self) -> dict[str, Any]:
        """The model as JSON data."""
        return {"kind": MODEL_KIND, "features_version": FEATURES_VERSION, "row_names": list(ROW_NAMES),
                "families": list(self.families), "valid": self.valid.to_state(), "gain": self.gain.to_state(),
                "family_scale": dict(self.family_scale), "fit": dict(self.fit_info)}

    def predict_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P(valid), expected gain share >= 0) of model rows (`runtime.outcome_features.candidate_row`)."""
        return self.valid.predict(rows), np.maximum(self.gain.predict(rows), 0.0)

    def estimates_of(self, features: PacketFeatures,
                     families: Sequence[str] = FAMILIES) -> dict[str, Optional[FamilyEstimate]]:
        """Each family's estimate from computed features (None for a family the model never saw in train)."""
        known = [f for f in families if f in self.families]
        found: dict[str, Optional[FamilyEstimate]] = {f: None for f in families}
        if not known:
            return found
        p_valid, share = self.predict_rows(np.vstack([features.row(f) for f in known]))
        share = share * np.asarray([self.family_scale[f] for f in known])
        for family, p, g in zip(known, p_valid, share):
            cycles = float(g) * features.best if features.best is not None else None
            found[family] = FamilyEstimate(family=family, p_valid=float(p), gain_share=float(g), cycles=cycles)
        return found

    def estimates(self, packet: AdvisorPacket,
                  families: Sequence[str] = FAMILIES) -> dict[str, Optional[FamilyEstimate]]:
        """Each family's estimate from a packet (None for a family the model never saw in train)."""
        return self.estimates_of(packet_features(packet), families)


__all__ = ["FamilyEstimate", "LINKS", "MAX_NODES", "MAX_REACH", "MAX_TREE_DEPTH", "MODEL_KIND", "OUTCOME_MODEL_KEY",
           "OutcomeModel", "OutcomeModelError",
           "Scorer", "linear_expansion"]
