"""Choosing among a field's literal values while decoding: a logits processor over the values' own tokens."""

from __future__ import annotations

from typing import Any, Optional


class LiteralMask:
    """A llama.cpp logits processor that lets the model write only one of a field's literal values.

    An exact constraint over the values' own tokens (a trie): at each step only the next token of a value
    that the tokens so far begin is allowed, and end-of-text once a whole value is written. A GBNF grammar
    checks every token of the 262k vocabulary at each step (measured: ~10x the time of a free token);
    this costs one masked copy of the logits.
    """

    def __init__(self, sequences: list[list[int]], eos: int) -> None:
        self.sequences, self.eos = sequences, eos
        self.start: Optional[int] = None  # the prompt's length, seen at the first call

    def allowed(self, written: list[int]) -> list[int]:
        """The tokens that may follow `written`."""
        n = len(written)
        ids = {seq[n] for seq in self.sequences if len(seq) > n and seq[:n] == written}
        if any(seq == written for seq in self.sequences) or not ids:
            ids.add(self.eos)
        return sorted(ids)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np

        if self.start is None:
            self.start = len(input_ids)
        ids = self.allowed([int(token) for token in input_ids[self.start:]])
        masked = np.full_like(scores, -np.inf)
        masked[ids] = scores[ids]
        return masked


__all__ = ["LiteralMask"]
