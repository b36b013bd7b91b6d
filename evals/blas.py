"""One BLAS thread for the statistics and the fits: their products are many and small, and gain nothing from a
second thread.

OpenBLAS starts a thread per core and its threads spin while they wait for work. Model fits (L-BFGS-B steps over
a few thousand coefficients) and the statistics of a replay (a post-mortem's point value per slice, a bootstrap's
products of a few hundred draws) hand BLAS many tiny calls, each of which wakes and syncs the threads: on two
cores, and worse on a busy machine, that made one L-BFGS-B step 4 to 40 times slower than on one thread, and a
post-mortem's values of 2,500 slices over 20,000 records 25 times costlier in CPU (`reports/scale.md`).
threadpoolctl (a scikit-learn dependency) sets the limit for the block and restores it after.
"""

from __future__ import annotations

from typing import Any


def one_blas_thread() -> Any:
    """A context manager under which BLAS (OpenBLAS, MKL) runs on one thread."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


__all__ = ["one_blas_thread"]
