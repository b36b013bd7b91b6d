"""Language models: `make_lm` (embedded GGUF, fake, LiteLLM or an OpenAI-compatible server), the in-process
llama.cpp engine, the prompt it completes and its output grammar, the loopback LM server, and the deterministic fake LM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.lm.factory import make_lm, configure_lm, lm_info, is_local, engine_revision
    from guidebench.lm.identity import LMIdentity, lm_identity
    from guidebench.lm.engine import LocalGGUFEngine
    from guidebench.lm.model_file import ModelFileError, ensure_model
    from guidebench.lm.prompt import render_prompt
    from guidebench.lm.fake import FakeEngine, FAKE_MODEL_ID
    from guidebench.lm.server import LlamaServerEngine, start, stop, running
    from guidebench.lm.grammar import output_grammar, conforms

_WHERE: dict[str, str] = {
    "make_lm": "factory", "configure_lm": "factory", "lm_info": "factory", "is_local": "factory", "engine_revision": "factory",
    "LMIdentity": "identity", "lm_identity": "identity",
    "LocalGGUFEngine": "engine", "ModelFileError": "model_file", "ensure_model": "model_file",
    "render_prompt": "prompt",
    "FakeEngine": "fake", "FAKE_MODEL_ID": "fake",
    "LlamaServerEngine": "server", "start": "server", "stop": "server", "running": "server",
    "output_grammar": "grammar", "conforms": "grammar",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
