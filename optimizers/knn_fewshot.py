"""KNNFewShot: for each input, the k most similar training examples become the demos.

The embedded model copies the demonstration nearest to its input, so which demos it sees decides
the score; nearest neighbours make that copy an informed one. DSPy's own `KNNFewShot` replaces
`forward` with a closure, which cannot be saved as state JSON; `NearestDemos` is the same idea as
a module whose state (pool, k, vectorizer, fields) is plain JSON and loads back with
`NearestDemos.wrap(program).load_state(state)` (or `optimizers.load_compiled`).

Texts, scores, the order of the chosen demos and the way they reach the predictors are
`runtime.frozen.knn`'s (`example_text`, `LexicalIndex`, `top_k`, `run_with_demos`): a frozen module
(`frozen_selection`) runs the very same selection in production.
"""

from __future__ import annotations

import threading
from typing import Any, Literal, Optional, Sequence

import dspy
from pydantic import Field

from runtime.frozen.knn import DEMO_ORDERS, LEXICAL, DemoSelector, example_text, run_with_demos, top_k

from .base import CompileContext, Recipe, RecipeSettings
from .estimate import Stage
from .vectorizers import VECTORIZERS, make_vectorizer, index_of

KNN_STATE_KEY = "knn"
DEFAULT_EXCLUDE = ("thread_id", "turn_id")
# The inputs that decide the right answer, per family (those a program does not have are skipped).
# Measured with benchmarks/bench_knn.py on the sample data: on Full Auto the nearest demo's action
# matches the dev label 0.87 of the time with these state fields against 0.44 with every input
# (plans, diffs and recent-action JSON dominate the text but say little about the next action);
# on the planner, the family constraints alone give 0.60 against 0.37. The compact programs' fields
# for the same facts (`runtime.inputs` compact rendering) do the same: on the sample data's dev split,
# 0.89 against 0.64 with every compact input (Full Auto), 0.58 against 0.41 (planner).
DEFAULT_FIELDS: tuple[str, ...] = (
    "last_turn_status", "turn_error", "pending_approvals", "pending_tool_inputs", "compaction_events",
    "token_usage", "strategy_family_constraints", "plateau_valid_iters_since_best",
    "status", "approvals", "tool_inputs", "compactions", "tokens", "families", "plateau",
)


class NotExportable(ValueError):
    """A KNN program whose demo selection a frozen module cannot carry (the message is one line)."""


class NearestDemos(dspy.Module):
    """A program whose predictors get, for each call, the k pool examples nearest to the input."""

    def __init__(self, program: dspy.Module, pool: Sequence[dspy.Example] = (), *, k: int = 3,
                 vectorizer: str = "tfidf", fields: Optional[Sequence[str]] = None, nearest_last: bool = True,
                 demo_order: str = "similarity") -> None:
        super().__init__()
        if demo_order not in DEMO_ORDERS:
            raise ValueError(f"demo_order must be one of {', '.join(DEMO_ORDERS)}, got {demo_order!r}")
        self.program = program
        self.k = k
        self.vectorizer_name = vectorizer
        self.nearest_last = nearest_last
        self.demo_order = demo_order
        self.fields = list(fields) if fields is not None else None
        self._pool: list[dspy.Example] = list(pool)
        self._index: Optional[tuple[Any, Any, list[str]]] = None
        self._lock = threading.Lock()

    @classmethod
    def wrap(cls, program: dspy.Module) -> "NearestDemos":
        """An empty wrapper to `load_state` a saved KNN program into."""
        return cls(program)

    # -- retrieval -----------------------------------------------------------------------------
    def _fields(self) -> list[str]:
        names: list[str] = []
        for predictor in self.program.predictors():
            names += [n for n in predictor.signature.input_fields if n not in names]
        if not names and self._pool:  # a program without predictors: embed the examples' own inputs
            names = sorted(self._pool[0].inputs().keys())
        chosen = [n for n in (self.fields or ()) if n in names]
        # "all" (or nothing the program has) means every input but the ids.
        return chosen or [n for n in names if n not in DEFAULT_EXCLUDE]

    def _ensure_index(self) -> tuple[Any, Any, list[str]]:
        """(fitted vectorizer, pool index, embedded fields), built once."""
        with self._lock:
            if self._index is None:
                fields = self._fields()
                texts = [example_text(dict(ex.inputs()), fields) for ex in self._pool]
                vectorizer = make_vectorizer(self.vectorizer_name).fit(texts)
                self._index = (vectorizer, index_of(vectorizer, texts), fields)
            return self._index

    def nearest(self, inputs: dict[str, Any]) -> list[dspy.Example]:
        """The k pool examples most similar to the inputs, in prompt order: by similarity or in pool order
        (`demo_order`, see `runtime.frozen.knn.DEMO_ORDERS` for the trade-off), most similar last when
        `nearest_last`."""
        if not self._pool or self.k <= 0:
            return []
        _vectorizer, index, fields = self._ensure_index()
        # Stable: equal similarity keeps pool order, so retrieval is deterministic.
        chosen = top_k(index.scores(example_text(inputs, fields)), self.k, self.nearest_last, self.demo_order)
        return [self._pool[i] for i in chosen]

    def forward(self, **inputs: Any) -> Any:
        """Run the wrapped program with the nearest demos (on a copy: calls may run in parallel)."""
        return run_with_demos(self.program, self.nearest(inputs), inputs)

    def frozen_selection(self) -> DemoSelector:
        """The selection as a frozen module carries it: k, fields, fitted lexical vectorizer and pool.

        Raises NotExportable for a vectorizer the runtime does not run (MiniLM: a neural model).
        """
        if self.vectorizer_name not in LEXICAL:
            raise NotExportable(
                f"the {self.vectorizer_name!r} vectorizer cannot be exported: it embeds with a neural model the "
                f"runtime does not carry; compile knn_fewshot with vectorizer {' or '.join(map(repr, LEXICAL))}")
        vectorizer, _index, fields = self._ensure_index()
        return DemoSelector(self._pool_state(), k=self.k, fields=fields, nearest_last=self.nearest_last,
                            vectorizer=vectorizer, demo_order=self.demo_order)

    def _pool_state(self) -> list[dict[str, Any]]:
        return [{"data": dict(ex.toDict()), "input_keys": sorted(ex.inputs().keys())} for ex in self._pool]

    # -- state ---------------------------------------------------------------------------------
    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """DSPy state of the wrapped program plus the KNN settings and pool."""
        state = super().dump_state(json_mode=json_mode)
        state[KNN_STATE_KEY] = {
            "k": self.k, "vectorizer": self.vectorizer_name, "fields": self.fields, "nearest_last": self.nearest_last,
            "demo_order": self.demo_order, "pool": self._pool_state(),
        }
        return state

    def load_state(self, state: dict[str, Any], *, allow_unsafe_lm_state: bool = False) -> "NearestDemos":
        """Load the wrapped program's state and the KNN pool."""
        knn = state.get(KNN_STATE_KEY)
        if not isinstance(knn, dict):
            raise ValueError("not a KNN program state: the 'knn' entry is missing")
        super().load_state({k: v for k, v in state.items() if k != KNN_STATE_KEY},
                           allow_unsafe_lm_state=allow_unsafe_lm_state)
        self.k = int(knn["k"])
        self.vectorizer_name = str(knn["vectorizer"])
        self.fields = knn.get("fields")
        self.nearest_last = bool(knn.get("nearest_last", True))
        self.demo_order = str(knn.get("demo_order", "similarity"))  # saved before the option: by similarity
        self._pool = [dspy.Example(**item["data"]).with_inputs(*item["input_keys"]) for item in knn["pool"]]
        self._index = None
        return self

    def __deepcopy__(self, memo: dict) -> "NearestDemos":
        # The fitted index and lock are per instance; the pool is shared read-only data.
        copy = NearestDemos(self.program.deepcopy(), self._pool, k=self.k, vectorizer=self.vectorizer_name,
                            fields=self.fields, nearest_last=self.nearest_last, demo_order=self.demo_order)
        return copy


class KNNFewShotSettings(RecipeSettings):
    """Settings of KNNFewShot."""

    k: int = Field(3, ge=1, description="Nearest training examples used as demos for each input.")
    vectorizer: str = Field("tfidf", description=f"Text embedder: one of {', '.join(VECTORIZERS)}. 'tfidf' and "
                                                 "'hashing' are lexical (plain Python, as scikit-learn computes "
                                                 "them; they export with the program); 'minilm' needs the "
                                                 "optional extra guidebench[minilm] and does not export.")
    fields: list[str] = Field(default_factory=lambda: list(DEFAULT_FIELDS), description=(
        "Input fields to embed (those the program lacks are skipped; if none is left, or the list is "
        "empty, every input but thread_id and turn_id). Default: the state fields that decide the "
        "action, which retrieve demos with the right label twice as often as the whole input "
        "(benchmarks/bench_knn.py)."))
    nearest_last: bool = Field(True, description="Put the most similar demo last, next to the input (the "
                                                 "small model copies the demo it saw last most often).")
    demo_order: Literal["similarity", "pool"] = Field("similarity", description=(
        "Order of the chosen demos in the prompt: 'similarity' (least to most similar when nearest_last) or "
        "'pool' (the training set's fixed order, the most similar still last when nearest_last), so that "
        "inputs sharing demos share the prompt prefix through them and the model's state of it is reused. "
        "The default stays 'similarity' until the embedded model's accuracy is measured with 'pool'."))


class KNNFewShotRecipe(Recipe):
    """Nearest-neighbour demos per input; no LM call while compiling."""

    name = "knn_fewshot"
    dspy_name = "KNNFewShot"
    summary = "the k most similar training examples as demos, per input (no LM call)"
    Settings = KNNFewShotSettings
    selects_on_dev = False

    def _optimize(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example],
                  ctx: CompileContext) -> dspy.Module:
        s: KNNFewShotSettings = ctx.settings  # type: ignore[assignment]
        if s.vectorizer not in VECTORIZERS:
            raise ValueError(f"unknown vectorizer {s.vectorizer!r}; expected one of {VECTORIZERS}")
        wrapped = NearestDemos(program, trainset, k=s.k, vectorizer=s.vectorizer, fields=s.fields,
                               nearest_last=s.nearest_last, demo_order=s.demo_order)
        wrapped._ensure_index()  # fit now: a missing optional vectorizer fails the compile, not the first call
        return wrapped

    @classmethod
    def search_overrides(cls, demos: int, candidates: int) -> dict[str, int]:
        """Demos map to k."""
        return {"k": demos}

    def _plan(self, n_train: int, n_val: int, n_predictors: int) -> list[Stage]:
        return [Stage("index training examples", 0, note=f"no LM call; {self.settings.k} demos per call later")]  # type: ignore[attr-defined]


def is_knn_state(state: dict[str, Any]) -> bool:
    """True when a saved program state came from KNNFewShot."""
    return isinstance(state, dict) and isinstance(state.get(KNN_STATE_KEY), dict)
