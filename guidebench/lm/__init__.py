"""Language models: `make_lm` (embedded GGUF, fake, LiteLLM or an OpenAI-compatible server), the in-process
llama.cpp engine and its output grammar, the loopback LM server, and the deterministic fake LM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guidebench.lm.factory import make_lm, configure_lm, lm_info, is_local, engine_revision
    from guidebench.lm.engine import LocalGGUFEngine, ModelFileError, render_prompt, ensure_model
    from guidebench.lm.fake import FakeEngine, FAKE_MODEL_ID
    from guidebench.lm.server import LlamaServerEngine, start, stop, running
    from guidebench.lm.grammar import output_grammar, conforms

_WHERE: dict[str, str] = {
    "make_lm": "factory", "configure_lm": "factory", "lm_info": "factory", "is_local": "factory", "engine_revision": "factory",
    "LocalGGUFEngine": "engine", "ModelFileError": "engine", "render_prompt": "engine", "ensure_model": "engine",
    "FakeEngine": "fake", "FAKE_MODEL_ID": "fake",
    "LlamaServerEngine": "server", "start": "server", "stop": "server", "running": "server",
    "output_grammar": "grammar", "conforms": "grammar",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (keeps `import guidebench.lm` cheap)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
