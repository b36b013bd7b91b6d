"""Pareto front of quality (higher is better) against cost (lower is better)."""

from __future__ import annotations

import math
from typing import Optional, Sequence


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when point a = (quality, cost) is at least as good as b on both and better on one."""
    return a[0] >= b[0] and a[1] <= b[1] and (a[0] > b[0] or a[1] < b[1])


def pareto_front(points: Sequence[tuple[Optional[float], Optional[float]]]) -> list[int]:
    """Indexes of the points no other point dominates; points without a finite quality or cost are left out."""
    usable = [(i, (float(q), float(c))) for i, (q, c) in enumerate(points)
              if q is not None and c is not None and math.isfinite(q) and math.isfinite(c)]
    return [i for i, p in usable if not any(dominates(o, p) for j, o in usable if j != i)]
