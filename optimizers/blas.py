"""One BLAS thread for the fits: L-BFGS and the small products of a linear model gain nothing from a second thread.

OpenBLAS starts a thread per core and its threads spin while they wait for work. The fits here (L-BFGS-B steps
over a few thousand coefficients, products with a few dozen columns) hand BLAS many tiny calls, each of which
wakes and syncs the threads: on two cores, and worse on a busy machine, that made one L-BFGS-B step 4 to 40 times
slower than on one thread (`reports/scale.md`). threadpoolctl (a scikit-learn dependency) sets the limit for the
block and restores it after.
"""

from __future__ import annotations

from typing import Any


def one_blas_thread() -> Any:
    """A context manager under which BLAS (OpenBLAS, MKL) runs on one thread."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


__all__ = ["one_blas_thread"]
