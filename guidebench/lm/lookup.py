"""Prompt-lookup decoding of a free text value: what repeats the prompt costs one forward pass, not one per token.

The embedded model often writes text the prompt already holds (a demo's reason, the plan's current step as
the next input). After each sampled token, `draft` looks for the latest place the context's last tokens
occur earlier and proposes the tokens that followed there. The sampled token and the draft are evaluated in
one batch, with logits at every position; the model then samples each position in turn with the same sampler
chain and seed as llama-cpp-python's `create_completion`, and keeps a drafted token only when the sample is
that token. So every token is the model's own sample (one draw per token, as without the draft); a draft
only decides how many of them one forward pass checks. Measured on the embedded model (2 cores): a batch of
seven tokens with all logits costs 92 ms, seven single-token passes 229 ms.

`decode_text` runs over a `Backend` (the llama.cpp context, or a toy model in tests).
"""

from __future__ import annotations

import uuid
from typing import Any, Optional, Protocol, Sequence

# Tokens proposed at once, and the shortest match of the context's tail that counts as a repeat.
DRAFT_TOKENS = 8
MIN_MATCH = 2
_MAX_MATCH = 16  # a longer match says nothing more about what follows


class Backend(Protocol):
    """What prompt-lookup decoding needs from a model context."""

    def context(self) -> list[int]:
        """The tokens evaluated so far."""

    def evaluate(self, tokens: list[int]) -> None:
        """Append tokens to the context, with logits at each of them."""

    def sample(self, row: int) -> int:
        """A token sampled from the logits at `row` of the last evaluation (-1: its last)."""

    def truncate(self, n: int) -> None:
        """Keep only the first `n` tokens of the context."""

    def is_end(self, token: int) -> bool:
        """True for an end-of-generation token."""

    def text(self, tokens: list[int]) -> bytes:
        """The bytes of tokens."""


def draft(context: Sequence[int], size: int = DRAFT_TOKENS, min_match: int = MIN_MATCH) -> list[int]:
    """The tokens that followed the longest (then latest) earlier occurrence of the context's tail ([] if none)."""
    last = len(context) - 1
    best, at = 0, -1
    for i in range(last - 1, -1, -1):
        if context[i] != context[last]:
            continue
        n = 1
        while n <= i and n < _MAX_MATCH and context[i - n] == context[last - n]:
            n += 1
        if n > best:
            best, at = n, i
    return list(context[at + 1: min(at + 1 + size, last + 1)]) if best >= min_match else []


def decode_text(backend: Backend, limit: int, stops: Sequence[str]) -> tuple[str, str, int]:
    """Sample up to `limit` tokens after the evaluated prompt: (text, finish reason, tokens generated).

    Ends as `create_completion` ends: at an end-of-generation token (not counted), at a stop string (cut
    from the text, its token counted), or at the limit ("length").
    """
    start = len(backend.context())
    stop_bytes = [s.encode("utf-8") for s in stops]
    generated: list[int] = []
    token = backend.sample(-1)
    text, finish = b"", "length"
    while True:
        done = _append(backend, generated, token, limit, stop_bytes)
        if done is not None:
            text, finish = done
            break
        # the context holds every generated token but this one, sampled and not yet evaluated
        proposal = draft([*backend.context(), token])[: max(0, limit - len(generated))]
        base = len(backend.context())
        backend.evaluate([token, *proposal])
        done = None
        for row in range(len(proposal) + 1):
            token = backend.sample(row)
            if row < len(proposal) and token == proposal[row]:
                done = _append(backend, generated, token, limit, stop_bytes)
                if done is not None:
                    break
                continue
            backend.truncate(base + 1 + row)  # drafted tokens after the first miss were never sampled
            break
        if done is not None:
            text, finish = done
            break
    backend.truncate(min(len(backend.context()), start + len(generated)))
    return text.decode("utf-8", errors="ignore"), finish, len(generated)


def _append(backend: Backend, generated: list[int], token: int, limit: int,
            stops: list[bytes]) -> Optional[tuple[bytes, str]]:
    """Add a sampled token; (text, finish reason) when the value ends with it."""
    if backend.is_end(token):
        return backend.text(generated), "stop"
    generated.append(token)
    text = backend.text(generated)
    hits = [text.index(s) for s in stops if s in text]
    if hits:
        return text[: min(hits)], "stop"
    if len(generated) >= limit:
        return text, "length"
    return None


class LlamaBackend:
    """A llama-cpp-python `Llama` as a `Backend`, with its sampler chain set as `create_completion` sets it."""

    def __init__(self, llama: Any, sampling: dict[str, Any]) -> None:
        self.llama = llama
        llama.set_seed(int(sampling["seed"]))
        self.sampler = llama._init_sampler(top_k=int(sampling["top_k"]), top_p=float(sampling["top_p"]),
                                           temp=float(sampling["temperature"]))

    def prime(self, tokens: list[int], reused: int) -> None:
        """Evaluate the prompt's tokens after the `reused` ones its context already holds."""
        self.llama.n_tokens = reused
        self.llama.eval(tokens[reused:])

    def context(self) -> list[int]:
        return self.llama.input_ids[: self.llama.n_tokens].tolist()

    def evaluate(self, tokens: list[int]) -> None:
        llama, n = self.llama, self.llama.n_tokens
        llama._ctx.kv_cache_seq_rm(-1, n, -1)
        llama._batch.set_batch(batch=tokens, n_past=n, logits_all=True)
        llama._ctx.decode(llama._batch)
        llama.input_ids[n: n + len(tokens)] = tokens
        llama.n_tokens = n + len(tokens)
        llama._requires_eval = True  # its logits are not only the last token's: the next completion re-reads one

    def sample(self, row: int) -> int:
        return int(self.sampler.sample(self.llama._ctx, row))

    def truncate(self, n: int) -> None:
        if n < self.llama.n_tokens:
            self.llama._ctx.kv_cache_seq_rm(-1, n, -1)
            self.llama.n_tokens = n

    def is_end(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self.llama._model.vocab, token))

    def text(self, tokens: list[int]) -> bytes:
        return self.llama.detokenize(tokens)


def completion(llama: Any, tokens: list[int], reused: int, sampling: dict[str, Any], limit: int,
               stops: Sequence[str]) -> dict[str, Any]:
    """A free value decoded by prompt lookup, shaped as `create_completion`'s answer."""
    backend = LlamaBackend(llama, sampling)
    backend.prime(tokens, reused)
    text, finish, generated = decode_text(backend, limit, stops)
    return {"id": f"cmpl-{uuid.uuid4()}", "choices": [{"text": text, "finish_reason": finish}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": generated,
                      "total_tokens": len(tokens) + generated}}
