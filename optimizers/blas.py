"""One BLAS thread for the fits (`evals.blas`, which the statistics of a replay share)."""

from __future__ import annotations

from evals.blas import one_blas_thread

__all__ = ["one_blas_thread"]
