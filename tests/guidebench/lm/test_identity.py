"""guidebench.lm.identity: what evidence records about the LM behind it."""

from __future__ import annotations

from guidebench.lm.engine import LOCAL_MODEL_ID, model_sha256
from guidebench.lm.factory import make_lm
from guidebench.lm.fake import FAKE_MODEL_ID
from guidebench.lm.identity import LMIdentity, lm_identity


def test_the_embedded_model_is_named_with_its_model_files_hash_and_others_without(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path))
    local = lm_identity("gemma", make_lm("gemma", cache=False))  # building it loads no model
    assert local == LMIdentity(spec="gemma", model=LOCAL_MODEL_ID, model_sha256=model_sha256())
    assert local.describe() == f"gemma ({LOCAL_MODEL_ID}, model file sha256 {model_sha256()[:12]})"
    assert lm_identity("fake", make_lm("fake", cache=False)) == LMIdentity(spec="fake", model=FAKE_MODEL_ID)
    remote = lm_identity("openai/gpt-4o-mini", make_lm("openai/gpt-4o-mini", api_key="k", cache=False))
    assert remote.model_dump() == {"spec": "openai/gpt-4o-mini", "model": "openai/gpt-4o-mini", "model_sha256": None}
