"""The fit's sample (`compile_inputs.Reservoir`, Vitter's Algorithm R): at most its limit, in stream order, the
same for the same seed, and uniform: every item is kept with probability limit / n."""

from __future__ import annotations

import pytest

from guidebench.errors import GuidebenchError
from guidebench.evaluation.compile_inputs import Reservoir


def _sample(n: int, limit: int, seed: int) -> Reservoir:
    reservoir = Reservoir(limit, seed)
    for item in range(n):
        reservoir.append(item)
    return reservoir


def test_a_short_stream_is_kept_whole_and_a_long_one_sampled_in_order() -> None:
    assert _sample(5, 10, 0).kept() == [0, 1, 2, 3, 4]
    assert _sample(5, 10, 0).summary()["sampled"] is False
    kept = _sample(1000, 50, 3).kept()
    assert len(kept) == 50 and kept == sorted(kept) and len(set(kept)) == 50
    assert _sample(1000, 50, 3).kept() == kept and _sample(1000, 50, 4).kept() != kept
    summary = _sample(1000, 50, 3).summary()
    assert (summary["limit"], summary["seen"], summary["kept"], summary["sampled"]) == (50, 1000, 50, True)


def test_every_item_is_kept_with_the_same_probability() -> None:
    n, limit, runs = 40, 10, 4000
    counts = [0] * n
    for seed in range(runs):
        for item in _sample(n, limit, seed).kept():
            counts[item] += 1
    expected = runs * limit / n  # 1,000; binomial sd about 27: five sd either side
    assert all(abs(count - expected) < 5 * (runs * (limit / n) * (1 - limit / n)) ** 0.5 for count in counts)


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(GuidebenchError, match="--fit-limit 0"):
        Reservoir(0)
