"""guidebench.lm.factory: LM specs (embedded, fake, LiteLLM, an OpenAI-compatible server), the default LM,
one usage recorder per LM, and a disk cache per engine revision."""

from __future__ import annotations

import dspy
import pytest

import guidebench.lm.factory as lm_module
from evals.usage import instrument
from guidebench.errors import GuidebenchError
from guidebench.lm.engine import LOCAL_MODEL_ID
from guidebench.lm.factory import configure_lm, lm_info, make_lm


def test_specs(monkeypatch):
    assert make_lm("gemma", cache=False).model == LOCAL_MODEL_ID
    assert make_lm("fake", cache=False).model == "fake/rules"
    remote = make_lm("openai/gpt-4o-mini", cache=False, temperature=0.0, max_tokens=100)
    assert remote.model == "openai/gpt-4o-mini" and remote.kwargs["max_tokens"] == 100
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    served = make_lm("qwen2.5-7b", api_base="http://localhost:8000/v1", cache=False)
    assert served.model == "openai/qwen2.5-7b" and served.kwargs["api_base"] == "http://localhost:8000/v1"
    assert "api_key" not in lm_info(served) and lm_info(served)["api_base_set"]
    with pytest.raises(GuidebenchError, match="do not apply"):
        make_lm("local", api_base="http://localhost:8000/v1")
    with pytest.raises(GuidebenchError, match="empty LM spec"):
        make_lm("  ")
    with pytest.raises(GuidebenchError, match="cannot use LM spec"):
        make_lm("openai/")


def test_configure_lm_sets_the_default_lm():
    previous = dspy.settings.lm
    try:
        lm = configure_lm("fake", cache=False)
        assert dspy.settings.lm is lm
    finally:
        dspy.configure(lm=previous)


def test_configure_lm_says_in_one_line_why_an_lm_cannot_be_set_up(tmp_path, monkeypatch):
    # The one LM set-up of every command: a fault that is not the user's spec (here the disk cache's folder
    # cannot be made: GUIDEBENCH_HOME is a file) is still the project's one-line error, and no LM is set.
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("GUIDEBENCH_HOME", str(home))
    previous = dspy.settings.lm
    with pytest.raises(GuidebenchError, match=r"^--lm fake: cannot set up the LM: NotADirectoryError: "):
        configure_lm("fake")
    assert dspy.settings.lm is previous


def test_every_lm_gets_exactly_one_recorder():
    lm = make_lm("fake", cache=False)
    instrument(lm)
    assert sum(type(cb).__name__ == "LMCallRecorder" for cb in lm.callbacks) == 1
    assert lm_info(lm)["engine"] == "FakeEngine"


def test_cache_folder_follows_the_engine_revision(tmp_path, monkeypatch):
    # DSPy's cache key holds the messages, not how the engine renders them: a new engine revision
    # must not be answered from an older one's cache.
    previous_cache, previous_dir = dspy.cache, lm_module._cache_dir
    try:
        revision = lm_module.engine_revision()
        assert len(revision) == 12 and revision == lm_module.engine_revision()
        assert lm_module.configure_disk_cache(tmp_path) == (tmp_path / "dspy-cache" / f"engine-{revision}").resolve()
        monkeypatch.setattr(lm_module, "model_sha256", lambda: "another model file")
        changed = lm_module.engine_revision()
        assert changed != revision
        assert lm_module.configure_disk_cache(tmp_path).name == f"engine-{changed}"
    finally:
        dspy.cache, lm_module._cache_dir = previous_cache, previous_dir
