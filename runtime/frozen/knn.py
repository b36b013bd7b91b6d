"""Demos chosen per input: the lexical vectorizers and the nearest-demo selection of `knn_fewshot`.

Plain Python (no scikit-learn, no NumPy), so a frozen module can carry them as JSON and the runtime
can run them. The workbench's `optimizers.knn_fewshot.NearestDemos` uses these very classes for its
lexical vectorizers, so a frozen module picks the same demos, in the same order, as the workbench did.

Both vectorizers reproduce scikit-learn's `TfidfVectorizer` / `HashingVectorizer` with the settings
the workbench uses (word unigrams and bigrams, token pattern `(?u)\\b[\\w\\-\\.]+\\b`, lowercase, L2
norm; TF-IDF with sublinear term frequency and smoothed idf `ln((1 + n) / (1 + df)) + 1`; hashing by
signed 32-bit MurmurHash3 of each n-gram's UTF-8 bytes, `abs(h) % n_features`, no alternate sign), in
float64. One difference: when a pool has more distinct n-grams than `max_features`, scikit-learn keeps
the most frequent and breaks ties at the cut with NumPy's unstable quicksort; here ties keep the
alphabetically first n-grams.

State JSON (`to_state()` / `vectorizer_from_state()`):
    {"kind": "tfidf", "ngram_range": [1, 2], "token_pattern": ..., "lowercase": true, "sublinear_tf": true,
     "max_features": 50000, "vocabulary": [n-gram, ...] (index = position), "idf": [float, ...]}
    {"kind": "hashing", "ngram_range": [1, 2], "token_pattern": ..., "lowercase": true, "n_features": 16384}
The selection (`DemoSelector`) adds k, the input fields embedded, `nearest_last`, `demo_order` (see
`DEMO_ORDERS`; absent means "similarity") and the pool (`{"data": {...}, "input_keys": [...]}` per
example, the examples' data as the workbench saved them).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

TOKEN_PATTERN = r"(?u)\b[\w\-\.]+\b"
NGRAM_RANGE: tuple[int, int] = (1, 2)
MAX_FEATURES = 50_000
HASHING_FEATURES = 2**14
LEXICAL: tuple[str, ...] = ("tfidf", "hashing")
SparseRow = dict[int, float]


class KnnStateError(ValueError):
    """A vectorizer or demo-selection state that cannot be loaded; the message says what is wrong."""


def example_text(values: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text a vectorizer sees for one input: `field: value` lines of the chosen fields."""
    return "\n".join(f"{name}: {values.get(name, '')}" for name in fields)


@lru_cache(maxsize=8)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def analyze(text: str, token_pattern: str = TOKEN_PATTERN, lowercase: bool = True,
            ngram_range: Sequence[int] = NGRAM_RANGE) -> list[str]:
    """The n-grams of a text, in scikit-learn's order: all unigrams, then the bigrams, and so on."""
    tokens = _pattern(token_pattern).findall(text.lower() if lowercase else text)
    low, high = int(ngram_range[0]), int(ngram_range[1])
    grams = list(tokens) if low == 1 else []
    for n in range(max(low, 2), min(high, len(tokens)) + 1):
        grams += [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return grams


def _l2(row: dict[int, float]) -> SparseRow:
    ordered = sorted(row.items())
    norm = math.sqrt(sum(value * value for _, value in ordered))
    if norm == 0.0:
        return dict(ordered)
    return {index: value / norm for index, value in ordered}


def murmurhash3_32(data: bytes, seed: int = 0) -> int:
    """Signed 32-bit MurmurHash3 (x86) of bytes, as `sklearn.utils.murmurhash3_32(..., positive=False)`."""
    mask = 0xFFFFFFFF
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h1 = seed & mask
    end = len(data) & ~3
    for i in range(0, end, 4):
        k1 = int.from_bytes(data[i:i + 4], "little")
        k1 = (k1 * c1) & mask
        k1 = ((k1 << 15) | (k1 >> 17)) & mask
        h1 ^= (k1 * c2) & mask
        h1 = ((h1 << 13) | (h1 >> 19)) & mask
        h1 = (h1 * 5 + 0xE6546B64) & mask
    tail = data[end:]
    if tail:
        k1 = int.from_bytes(tail, "little")
        k1 = (k1 * c1) & mask
        k1 = ((k1 << 15) | (k1 >> 17)) & mask
        h1 ^= (k1 * c2) & mask
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & mask
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


class TfidfVectorizer:
    """TF-IDF over word n-grams, fitted on the demo pool (scikit-learn's `TfidfVectorizer`, float64)."""

    name = "tfidf"

    def __init__(self, *, max_features: Optional[int] = MAX_FEATURES, ngram_range: Sequence[int] = NGRAM_RANGE,
                 token_pattern: str = TOKEN_PATTERN, lowercase: bool = True, sublinear_tf: bool = True) -> None:
        self.max_features = max_features
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))
        self.token_pattern = token_pattern
        self.lowercase = lowercase
        self.sublinear_tf = sublinear_tf
        self.vocabulary: dict[str, int] = {}
        self.idf: list[float] = []

    def _grams(self, text: str) -> list[str]:
        return analyze(text, self.token_pattern, self.lowercase, self.ngram_range)

    def fit(self, texts: Sequence[str]) -> "TfidfVectorizer":
        """Learn the vocabulary and the smoothed idf of the pool texts."""
        counts: Counter[str] = Counter()
        documents: Counter[str] = Counter()
        for text in texts:
            grams = Counter(self._grams(text))
            counts.update(grams)
            documents.update(grams.keys())
        terms = sorted(counts)
        if self.max_features is not None and len(terms) > self.max_features:
            # The most frequent n-grams over the pool; ties at the cut: alphabetical (see the module docstring).
            kept = sorted(terms, key=lambda term: (-counts[term], term))[: self.max_features]
            terms = sorted(kept)
        n = len(texts) + 1
        self.vocabulary = {term: index for index, term in enumerate(terms)}
        self.idf = [math.log(n / (documents[term] + 1.0)) + 1.0 for term in terms]
        return self

    def transform_one(self, text: str) -> SparseRow:
        """One L2-normalised TF-IDF row as {feature index: weight}."""
        row: dict[int, float] = {}
        for gram, count in Counter(self._grams(text)).items():
            index = self.vocabulary.get(gram)
            if index is not None:
                tf = math.log(count) + 1.0 if self.sublinear_tf else float(count)
                row[index] = tf * self.idf[index]
        return _l2(row)

    def transform(self, texts: Iterable[str]) -> list[SparseRow]:
        """L2-normalised TF-IDF rows."""
        return [self.transform_one(text) for text in texts]

    def to_state(self) -> dict[str, Any]:
        """Parameters, vocabulary (in index order) and idf as JSON data."""
        return {"kind": self.name, "ngram_range": list(self.ngram_range), "token_pattern": self.token_pattern,
                "lowercase": self.lowercase, "sublinear_tf": self.sublinear_tf, "max_features": self.max_features,
                "vocabulary": sorted(self.vocabulary, key=self.vocabulary.__getitem__), "idf": list(self.idf)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "TfidfVectorizer":
        """A fitted vectorizer from `to_state()` data."""
        vectorizer = cls(max_features=state.get("max_features"), ngram_range=state["ngram_range"],
                         token_pattern=state["token_pattern"], lowercase=bool(state["lowercase"]),
                         sublinear_tf=bool(state["sublinear_tf"]))
        terms, idf = state["vocabulary"], state["idf"]
        if not isinstance(terms, list) or not isinstance(idf, list) or len(terms) != len(idf):
            raise KnnStateError("tfidf state needs `vocabulary` and `idf` lists of the same length")
        if not all(isinstance(t, str) for t in terms) or len(set(terms)) != len(terms):
            raise KnnStateError("tfidf `vocabulary` must hold distinct strings")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in idf):
            raise KnnStateError("tfidf `idf` must hold finite numbers")
        vectorizer.vocabulary = {term: index for index, term in enumerate(terms)}
        vectorizer.idf = [float(v) for v in idf]
        return vectorizer


class HashingVectorizer:
    """Hashed word n-gram counts, no fitting (scikit-learn's `HashingVectorizer`, float64, no alternate sign)."""

    name = "hashing"

    def __init__(self, *, n_features: int = HASHING_FEATURES, ngram_range: Sequence[int] = NGRAM_RANGE,
                 token_pattern: str = TOKEN_PATTERN, lowercase: bool = True) -> None:
        if int(n_features) < 1:
            raise KnnStateError(f"hashing `n_features` must be positive, got {n_features}")
        self.n_features = int(n_features)
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))
        self.token_pattern = token_pattern
        self.lowercase = lowercase

    def index_of(self, gram: str) -> int:
        """The feature index of one n-gram."""
        h = murmurhash3_32(gram.encode("utf-8"))
        if h == -(2**31):  # as scikit-learn: abs(-2**31) overflows an int32
            return (2**31 - 1 - (self.n_features - 1)) % self.n_features
        return abs(h) % self.n_features

    def fit(self, texts: Sequence[str]) -> "HashingVectorizer":
        """Nothing to learn."""
        return self

    def transform_one(self, text: str) -> SparseRow:
        """One L2-normalised row of hashed n-gram counts."""
        row: dict[int, float] = {}
        for gram in analyze(text, self.token_pattern, self.lowercase, self.ngram_range):
            index = self.index_of(gram)
            row[index] = row.get(index, 0.0) + 1.0
        return _l2(row)

    def transform(self, texts: Iterable[str]) -> list[SparseRow]:
        """L2-normalised hashed rows."""
        return [self.transform_one(text) for text in texts]

    def to_state(self) -> dict[str, Any]:
        """Parameters as JSON data (nothing is fitted)."""
        return {"kind": self.name, "ngram_range": list(self.ngram_range), "token_pattern": self.token_pattern,
                "lowercase": self.lowercase, "n_features": self.n_features}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "HashingVectorizer":
        """A vectorizer from `to_state()` data."""
        return cls(n_features=state["n_features"], ngram_range=state["ngram_range"],
                   token_pattern=state["token_pattern"], lowercase=bool(state["lowercase"]))


LexicalVectorizer = Union[TfidfVectorizer, HashingVectorizer]


def make_lexical(name: str) -> LexicalVectorizer:
    """A fresh lexical vectorizer with the workbench's settings: "tfidf" or "hashing"."""
    if name == "tfidf":
        return TfidfVectorizer()
    if name == "hashing":
        return HashingVectorizer()
    raise KnnStateError(f"unknown lexical vectorizer {name!r}; expected one of {LEXICAL}")


def vectorizer_from_state(state: Mapping[str, Any]) -> LexicalVectorizer:
    """A vectorizer from its state JSON; raises KnnStateError naming what is wrong."""
    if not isinstance(state, Mapping):
        raise KnnStateError("the vectorizer state must be a JSON object")
    kind = state.get("kind")
    try:
        if kind == "tfidf":
            vectorizer: LexicalVectorizer = TfidfVectorizer.from_state(state)
        elif kind == "hashing":
            vectorizer = HashingVectorizer.from_state(state)
        else:
            raise KnnStateError(f"unknown vectorizer kind {kind!r}; this runtime runs {', '.join(LEXICAL)}")
        _pattern(vectorizer.token_pattern)
    except KeyError as exc:
        raise KnnStateError(f"{kind} vectorizer state lacks {exc.args[0]!r}") from None
    except (TypeError, ValueError, re.error) as exc:
        if isinstance(exc, KnnStateError):
            raise
        raise KnnStateError(f"{kind} vectorizer state is invalid: {exc}") from None
    return vectorizer


class LexicalIndex:
    """The pool's rows under one vectorizer; `scores(text)` is the cosine similarity of each row with the text."""

    def __init__(self, vectorizer: LexicalVectorizer, texts: Sequence[str]) -> None:
        self.vectorizer = vectorizer
        self.size = len(texts)
        # An inverted index: only the pool rows that share a feature with the query are touched.
        self._postings: dict[int, list[tuple[int, float]]] = {}
        for row_index, row in enumerate(vectorizer.transform(texts)):
            for feature, weight in row.items():
                self._postings.setdefault(feature, []).append((row_index, weight))

    def scores(self, text: str) -> list[float]:
        """Cosine similarity of every pool row with the text (rows and query are L2-normalised)."""
        scores = [0.0] * self.size
        for feature, weight in sorted(self.vectorizer.transform_one(text).items()):
            for row_index, pool_weight in self._postings.get(feature, ()):
                scores[row_index] += weight * pool_weight
        return scores


# The order of the chosen demos in the prompt. Demos come before the input, so a prompt's prefix is
# shared with the previous one (and its model state reused) only up to the first demo that differs
# in content or position.
#   "similarity": by similarity (the most similar last when nearest_last, next to the input, since the
#                 small model copies the demo it saw last most often). Two inputs with the same demos in
#                 a different rank order share nothing after the instructions.
#   "pool":       in the pool's fixed order (with the most similar still last when nearest_last), so two
#                 inputs whose chosen demos overlap share the prompt up to their first difference in that
#                 order, and each shared demo is evaluated once. The cost: the demos other than the last
#                 no longer run from least to most similar, which the model may notice less.
DEMO_ORDERS: tuple[str, ...] = ("similarity", "pool")


def top_k(scores: Sequence[float], k: int, nearest_last: bool = True, order: str = "similarity") -> list[int]:
    """Indices of the k highest scores (equal scores keep pool order) in prompt order: by similarity, or in
    pool order (`order="pool"`); the most similar last when `nearest_last`."""
    if order not in DEMO_ORDERS:
        raise KnnStateError(f"demo order must be one of {', '.join(DEMO_ORDERS)}, got {order!r}")
    chosen = sorted(range(len(scores)), key=lambda index: -scores[index])[: max(0, k)]
    if order == "pool":
        if nearest_last and chosen:
            return [*sorted(chosen[1:]), chosen[0]]
        return sorted(chosen)
    return list(reversed(chosen)) if nearest_last else chosen


class DemoSelector:
    """The k pool examples nearest to an input, as `knn_fewshot` chose them in the workbench."""

    def __init__(self, pool: Sequence[Mapping[str, Any]], *, k: int, fields: Sequence[str], nearest_last: bool,
                 vectorizer: LexicalVectorizer, demo_order: str = "similarity") -> None:
        if demo_order not in DEMO_ORDERS:
            raise KnnStateError(f"`demo_order` must be one of {', '.join(DEMO_ORDERS)}, got {demo_order!r}")
        self.pool = [{"data": dict(item["data"]), "input_keys": list(item["input_keys"])} for item in pool]
        self.k = k
        self.fields = list(fields)
        self.nearest_last = nearest_last
        self.demo_order = demo_order
        self.vectorizer = vectorizer
        self.index = LexicalIndex(vectorizer, [self.pool_text(i) for i in range(len(self.pool))])

    def pool_text(self, position: int) -> str:
        """The embedded text of one pool example (its inputs only)."""
        item = self.pool[position]
        data = item["data"]
        return example_text({key: data[key] for key in item["input_keys"] if key in data}, self.fields)

    def nearest_positions(self, inputs: Mapping[str, Any]) -> list[int]:
        """Pool positions of the chosen demos, in prompt order."""
        if not self.pool or self.k <= 0:
            return []
        return top_k(self.index.scores(example_text(inputs, self.fields)), self.k, self.nearest_last,
                     self.demo_order)

    def nearest(self, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The chosen demos' data, in prompt order."""
        return [self.pool[i]["data"] for i in self.nearest_positions(inputs)]

    def to_state(self) -> dict[str, Any]:
        """The selection as JSON data: settings, fitted vectorizer and pool."""
        return {"k": self.k, "fields": self.fields, "nearest_last": self.nearest_last, "demo_order": self.demo_order,
                "vectorizer": self.vectorizer.to_state(), "pool": self.pool}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "DemoSelector":
        """A selector from `to_state()` data; raises KnnStateError naming what is wrong."""
        if not isinstance(state, Mapping):
            raise KnnStateError("the demo selection must be a JSON object")
        k, fields, pool = state.get("k"), state.get("fields"), state.get("pool")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise KnnStateError(f"`k` must be a positive integer, got {k!r}")
        if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
            raise KnnStateError("`fields` must be a non-empty list of input field names")
        if not isinstance(pool, list):
            raise KnnStateError("`pool` must be a list of examples")
        for position, item in enumerate(pool):
            if not isinstance(item, Mapping) or not isinstance(item.get("data"), Mapping) \
                    or not isinstance(item.get("input_keys"), list):
                raise KnnStateError(f"pool example {position} needs `data` (object) and `input_keys` (list)")
        # A selection saved before `demo_order` existed ordered by similarity.
        return cls(pool, k=k, fields=fields, nearest_last=bool(state.get("nearest_last", True)),
                   vectorizer=vectorizer_from_state(state.get("vectorizer")),
                   demo_order=state.get("demo_order", "similarity"))


def run_with_demos(program: Any, demos: Sequence[Mapping[str, Any]], inputs: Mapping[str, Any]) -> Any:
    """Run a dspy program with these demos on each of its predictors (on a copy: calls may run in parallel)."""
    import dspy

    copy = program.deepcopy()
    for predictor in copy.predictors():
        keys = set(predictor.signature.input_fields) | set(predictor.signature.output_fields)
        predictor.demos = [dspy.Example(**{k: v for k, v in demo.items() if k in keys}) for demo in demos]
    return copy(**inputs)
