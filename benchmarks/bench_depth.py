"""Prompt-evaluation rate of the embedded model by context depth: what a token costs deep in a prompt.

`bench_lm`'s efficiency ratio divides by the rate of 512 tokens evaluated at the start of the
context. A compiled program's prompt is 4-5k tokens, and its record's tokens are evaluated after
all of them: attention makes each of those tokens dearer. This measures 256 new tokens evaluated
after 0, 1k, 2k, 3k and 4k tokens already in the context, at the engine's thread count.

    .venv/bin/python -m benchmarks.bench_depth

Writes the `<!-- bench:depth -->` section of `reports/bench.md`.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import time
from typing import Any, Optional

from benchmarks.report import REPORT, write_section

DEPTHS = (0, 1024, 2048, 3072, 4096)
NEW_TOKENS = 256
REPEATS = 3


def _tokens(llama: Any, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    words = "plan step test diff file error continue pause review token budget loop turn agent".split()
    text = " ".join(rng.choice(words) for _ in range(2 * n))
    return llama.tokenize(text.encode(), add_bos=False, special=False)[:n]


def rate_at(llama: Any, depth: int) -> float:
    """Tokens/s of NEW_TOKENS evaluated after `depth` tokens (median of REPEATS)."""
    prefix, rates = _tokens(llama, depth, 1), []
    for repeat in range(REPEATS):
        llama.reset()
        if prefix:
            llama.eval(prefix)
        new = _tokens(llama, NEW_TOKENS, 100 + repeat)
        started = time.perf_counter()
        llama.eval(new)
        rates.append(len(new) / (time.perf_counter() - started))
    return statistics.median(rates)


def main(argv: Optional[list[str]] = None) -> int:
    """Measure and write the section."""
    from guidebench.lm.factory import make_lm

    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lm = make_lm("local", cache=False)
    model = lm.engine._model()
    with model.lock:
        rates = {depth: rate_at(model.llama, depth) for depth in DEPTHS}
        model.llama.reset()
    base = rates[0]
    lines = [
        "## Embedded LM: prompt rate by context depth (`benchmarks/bench_depth.py`)", "",
        f"`python -m benchmarks.bench_depth` on {platform.machine()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {lm.engine.n_threads} llama.cpp thread(s); load average {load_start} "
        f"at the start, {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. {NEW_TOKENS} new tokens "
        f"evaluated after the given number already in the context (median of {REPEATS}).", "",
        "| tokens already in the context | prompt tokens/s | relative to depth 0 |", "|---:|---:|---:|",
        *(f"| {depth:,} | {rate:.1f} | {rate / base:.2f} |" for depth, rate in rates.items()), "",
        "A record evaluated after a 4k-token demo prefix costs more per token than `bench_lm`'s raw rate "
        "(measured at depth 0) says: that is most of the efficiency ratio above 1 of the long-prompt programs.",
    ]
    write_section("\n".join(lines), REPORT, "bench:depth")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
