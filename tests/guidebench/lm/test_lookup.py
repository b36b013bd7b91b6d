"""guidebench.lm.lookup: a draft is what followed the context's tail earlier; prompt-lookup decoding writes exactly
what the model samples token by token, in fewer forward passes when the answer repeats the prompt."""

from __future__ import annotations

import pytest

from guidebench.lm.lookup import decode_text, draft

END = 0


class ToyModel:
    """A deterministic model behind the Backend protocol: after the prompt it writes `answer`, one token per
    position, whatever was drafted; it counts its forward passes (evaluations)."""

    def __init__(self, prompt: list[int], answer: list[int]) -> None:
        self.ctx, self.prompt_len, self.answer = list(prompt), len(prompt), answer
        self.batch_start, self.passes = len(prompt) - 1, 0

    def context(self) -> list[int]:
        return list(self.ctx)

    def evaluate(self, tokens: list[int]) -> None:
        self.batch_start, self.passes = len(self.ctx), self.passes + 1
        self.ctx += tokens

    def sample(self, row: int) -> int:
        position = len(self.ctx) - 1 if row == -1 else self.batch_start + row
        assert position < len(self.ctx), "sampled a row the last evaluation has no logits for"
        written = position + 1 - self.prompt_len  # answer tokens before the one sampled here
        assert self.ctx[self.prompt_len: position + 1] == self.answer[:written], "logits of a wrong context"
        return self.answer[written]

    def truncate(self, n: int) -> None:
        del self.ctx[n:]

    def is_end(self, token: int) -> bool:
        return token == END

    def text(self, tokens: list[int]) -> bytes:
        return b"".join(f"<{t}>".encode() for t in tokens)


# A prompt whose demo answer is 5 6 7 8 9 after the marker 3 4 (as "[[ ## reason ## ]]\n" precedes a reason).
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 2, 3, 4]


def test_draft_is_what_followed_the_longest_then_latest_match():
    assert draft([3, 4, 5, 6, 7, 9, 3, 4], size=3) == [5, 6, 7]
    assert draft([3, 4, 8, 1, 3, 4, 9, 2, 3, 4], size=2) == [9, 2]  # the latest of equal matches
    assert draft([1, 3, 4, 8, 2, 3, 4, 9, 1, 3, 4], size=1) == [8]  # the longest match wins
    assert draft([3, 4, 5, 6, 4], size=3) == []  # a one-token match is no evidence
    assert draft([7]) == [] and draft([]) == []


def test_a_copied_answer_is_the_models_own_tokens_in_fewer_passes():
    model = ToyModel(PROMPT, [5, 6, 7, 8, 9, END])
    text, finish, generated = decode_text(model, limit=20, stops=[])
    assert (text, finish, generated) == ("<5><6><7><8><9>", "stop", 5)  # the end token is not counted
    assert model.passes == 1  # the drafted 6 7 8 9 checked in one batch with the sampled 5
    assert model.ctx == PROMPT + [5, 6, 7, 8, 9]  # nothing drafted and unsampled stays in the context


def test_a_draft_that_misses_keeps_what_matched_and_the_models_token():
    answer = [5, 6, 42, 43, 44, END]
    model = ToyModel(PROMPT, answer)
    text, finish, generated = decode_text(model, limit=20, stops=[])
    assert text == "".join(f"<{t}>" for t in answer[:-1]) and generated == 5 and finish == "stop"
    assert model.ctx == PROMPT + answer[:-1]


@pytest.mark.parametrize("answer", [[5, 6, 7, 8, 9, END], [5, 6, 42, 43, 44, END], [50, 51, 52, END], [END]])
def test_stops_and_limits_end_a_value_as_create_completion_does(answer):
    for limit in (1, 2, 3, 20):
        model = ToyModel(PROMPT, answer)
        text, finish, generated = decode_text(model, limit=limit, stops=[])
        written = [t for t in answer if t != END][:limit]
        assert text == "".join(f"<{t}>" for t in written) and generated == len(written)
        assert finish == ("length" if len(written) == limit else "stop")  # the limit ends it before any end token
    model = ToyModel(PROMPT, [5, 6, 7, 8, 9, END])
    text, finish, generated = decode_text(model, limit=20, stops=["<8>"])  # the stop's token is counted
    assert (text, finish, generated) == ("<5><6><7>", "stop", 4)
    assert model.ctx[: len(PROMPT) + 4] == PROMPT + [5, 6, 7, 8] and len(model.ctx) <= len(PROMPT) + 4


@pytest.mark.slow
def test_real_model_decodes_by_prompt_lookup_within_its_limit_and_leaves_a_consistent_context():
    """On the embedded model: the value ends within its limit, without its stop string, and llama.cpp's context
    holds the prompt and at most the tokens generated, so the next completion reuses it."""
    from guidebench.lm.engine import _cached_tokens
    from guidebench.lm.factory import make_lm
    from guidebench.lm.lookup import completion

    model = make_lm("local", cache=False).engine._model()
    prompt = "Reason: A command waits for approval.\n\nReason: Every plan step is done.\n\nReason: A"
    sampling = {"seed": 0, "top_k": 40, "top_p": 0.95, "temperature": 0.2}
    with model.lock:
        llama = model.llama
        tokens = llama.tokenize(prompt.encode(), add_bos=True, special=False)
        out = completion(llama, tokens, _cached_tokens(llama, tokens), sampling, 12, ["\n\n"])
        text, n = out["choices"][0]["text"], out["usage"]["completion_tokens"]
        assert 0 < n <= 12 and "\n\n" not in text and out["choices"][0]["finish_reason"] in ("stop", "length")
        assert llama.input_ids[: len(tokens)].tolist() == tokens and len(tokens) <= llama.n_tokens <= len(tokens) + n
        follow = llama.create_completion(prompt + text, max_tokens=1, temperature=0.2, seed=0)
        assert follow["usage"]["prompt_tokens"] >= len(tokens)
