"""guidebench.lm.prefix_cache: the llama.cpp state of a constant prompt prefix, stored on its second
sighting, restored in a new context with the same answers, never loaded when torn or mismatched."""

from __future__ import annotations

import pytest

from guidebench.lm.prefix_cache import PrefixStateCache, _pack_header, common_prefix


def test_common_prefix_counts_shared_leading_tokens():
    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([5, 6], [5, 6]) == 2


def test_a_prefix_is_stored_on_its_second_sighting_only(tmp_path):
    cache = PrefixStateCache(tmp_path, "model-a", min_tokens=4)
    prefix = list(range(10))
    assert cache.note(prefix) is False  # seen once: maybe a per-input KNN prefix
    assert cache.note(prefix) is True
    assert cache.note(prefix) is False  # asked once per process
    assert cache.note([1, 2]) is False  # too short to be worth a file


def test_a_prefix_seen_once_by_an_earlier_process_is_stored_now(tmp_path):
    """A command that decides one record still stores its prefix for the next command."""
    prefix = list(range(10))
    assert PrefixStateCache(tmp_path, "model-a", min_tokens=4).note(prefix) is False
    assert PrefixStateCache(tmp_path, "model-a", min_tokens=4).note(prefix) is True
    assert PrefixStateCache(tmp_path, "model-b", min_tokens=4).note(prefix) is False  # another model


def test_keys_depend_on_the_model_identity_and_the_tokens(tmp_path):
    a, b = PrefixStateCache(tmp_path, "model-a"), PrefixStateCache(tmp_path, "model-b")
    assert a.key([1, 2, 3]) != b.key([1, 2, 3]) and a.key([1, 2, 3]) != a.key([1, 2, 4])
    assert a.key([1, 2, 3]) == PrefixStateCache(tmp_path / "other", "model-a").key([1, 2, 3])


class _NoLlama:
    """Any use of the model fails the test: a bad file must be refused before llama.cpp sees it."""

    def __getattr__(self, name):
        raise AssertionError(f"llama.{name} used for a file that should have been refused")


@pytest.mark.parametrize("content", [
    b"not a state file",
    b"GBPFX1\n",  # torn right after the magic
    _pack_header("model-a", list(range(20)))[:-8],  # torn inside the tokens
    _pack_header("model-a", list(range(1, 21))) + b"state",  # other tokens under this key
])
def test_a_torn_or_mismatched_file_is_never_loaded(tmp_path, content):
    cache = PrefixStateCache(tmp_path, "model-a", min_tokens=4)
    prefix = list(range(20))
    cache.path(cache.key(prefix)).write_bytes(content)
    assert cache.restore(_NoLlama(), prefix) == 0


def test_eviction_keeps_the_folder_under_its_cap(tmp_path):
    cache = PrefixStateCache(tmp_path, "model-a", cap_bytes=250)
    for index in range(5):
        (tmp_path / f"{index}.state").write_bytes(b"x" * 100)
    cache._evict()
    assert sum(p.stat().st_size for p in tmp_path.glob("*.state")) <= 250


@pytest.mark.slow
def test_a_restored_prefix_answers_as_the_evaluated_one(real_lm, tmp_path):
    """Real model: store the prefix state, wipe the context, restore it; greedy answers agree."""
    model = real_lm.engine._model()
    llama = model.llama
    cache = PrefixStateCache(tmp_path, "test-identity", min_tokens=8)
    prefix_text = "Decide the next action of a coding loop. " * 12
    greedy = dict(max_tokens=8, temperature=0.0, seed=0)
    with model.lock:
        first = llama.tokenize((prefix_text + "Turn 1 failed.").encode(), add_bos=True, special=False)
        # as the engine does: the boundary token may merge with what follows
        prefix = first[:common_prefix(llama.tokenize(prefix_text.encode(), add_bos=True, special=False), first)]
        llama.create_completion(prefix_text + "Turn 1 failed.", **greedy)
        assert cache.store(llama, prefix) is not None
        expected = llama.create_completion(prefix_text + "Turn 2 completed.", **greedy)["choices"][0]["text"]
        llama.reset()
        llama.create_completion("Something else entirely.", **greedy)  # the context now holds other tokens
        assert cache.restore(llama, prefix) == len(prefix)
        assert llama.n_tokens == len(prefix)
        again = llama.create_completion(prefix_text + "Turn 2 completed.", **greedy)["choices"][0]["text"]
    assert again == expected


@pytest.mark.slow
def test_the_engine_reports_reused_prompt_tokens(real_lm):
    """Real model: a second decision with the same demos evaluates only its own part of the prompt."""
    import dspy

    import programs
    from evals.usage import track_calls
    from programs.seeds import DECISION_SEEDS

    program = programs.get("full_auto.compact")
    with dspy.context(lm=real_lm), track_calls() as ledger:
        for seed in DECISION_SEEDS[:2]:
            program(**programs.decision_inputs(seed.summary))
    second = ledger.calls[-1]
    # instruction, fields and the three demos are reused; the record's own part is evaluated
    assert second.prompt_tokens_reused > second.prompt_tokens // 2
    assert 0 < second.prompt_tokens_evaluated < second.prompt_tokens // 2
