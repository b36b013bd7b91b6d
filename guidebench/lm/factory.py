"""LM set-up: one function turns an LM spec into a configured `dspy.LM`.

Specs:
- `local` (default; also `gemma` or the model id `local/gemma-3-270m-q4_k_m`): the embedded
  Gemma 3 270M GGUF, run in-process by llama-cpp-python (see `guidebench.lm.engine`).
- `fake`: a deterministic rule-following engine for tests and dry runs (`guidebench.lm.fake`).
- anything else: a LiteLLM model string passed to `dspy.LM` unchanged, e.g. `openai/gpt-4o-mini`;
  with `api_base` a bare model name is served by an OpenAI-compatible server (vLLM, llama.cpp
  server, Ollama) as `openai/<name>`.

Every LM gets the usage recorder of `evals.usage`, and DSPy's disk cache lives in
`<GUIDEBENCH_HOME>/dspy-cache/engine-<revision>` instead of the user's home.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Optional

import dspy

from evals.usage import instrument

from guidebench.errors import GuidebenchError
from guidebench.lm.fake import FAKE_MODEL_ID, FakeEngine
from guidebench.home import guidebench_home
from guidebench.lm.engine import LOCAL_MODEL_ID, LocalGGUFEngine, ModelFileError, model_sha256
from guidebench.lm.server import served_engine

DEFAULT_SPEC = "local"
LOCAL_SPECS: tuple[str, ...] = ("local", "gemma", LOCAL_MODEL_ID)
FAKE_SPECS: tuple[str, ...] = ("fake", FAKE_MODEL_ID)
# A key is required by the OpenAI client even when a local server ignores it.
_PLACEHOLDER_KEY = "not-needed"

_cache_lock = threading.Lock()
_cache_dir: Optional[Path] = None


# The in-process engines render the prompt, stops and grammar themselves, and none of that is in DSPy's
# cache key (model, messages, settings): after a change to that code the cache would serve answers the
# engine no longer gives. So each revision of the engine code and model file gets its own cache folder.
_ENGINE_MODULES = ("engine.py", "grammar.py", "fake.py", "server.py")


def engine_revision() -> str:
    """A short hash of the engine code and model file that turn a DSPy request into an answer."""
    try:
        digest = hashlib.sha256(model_sha256().encode())
    except ModelFileError:
        digest = hashlib.sha256(b"no-model-package")
    for name in _ENGINE_MODULES:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:12]


def configure_disk_cache(home: Optional[Path] = None) -> Path:
    """Point DSPy's disk + memory cache at `<GUIDEBENCH_HOME>/dspy-cache/engine-<revision>`; returns it."""
    global _cache_dir
    folder = ((home or guidebench_home()) / "dspy-cache" / f"engine-{engine_revision()}").resolve()
    with _cache_lock:
        if _cache_dir != folder:
            folder.mkdir(parents=True, exist_ok=True)
            dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(folder))
            _cache_dir = folder
    return folder


def make_lm(
    spec: str = DEFAULT_SPEC,
    *,
    api_base: Optional[str] = None,
    api_key: Optional[str] = None,
    temperature: float = 0.2,
    max_tokens: int = 512,
    cache: bool = True,
) -> dspy.LM:
    """Build the `dspy.LM` for a spec (`local`, `fake` or a LiteLLM model string), with usage recording."""
    spec = (spec or "").strip()
    if not spec:
        raise GuidebenchError("empty LM spec: use `local`, `fake` or a LiteLLM model string such as openai/gpt-4o-mini")
    if max_tokens is not None and max_tokens <= 0:
        raise GuidebenchError(f"max_tokens must be positive, got {max_tokens}")
    if cache:
        configure_disk_cache()
    if spec in LOCAL_SPECS or spec in FAKE_SPECS:
        if api_base or api_key:
            raise GuidebenchError(f"--api-base/--api-key do not apply to the in-process LM {spec!r}")
        local = spec in LOCAL_SPECS
        engine = LocalGGUFEngine() if local else FakeEngine()
        lm = dspy.LM(LOCAL_MODEL_ID if local else FAKE_MODEL_ID, engine=engine, temperature=temperature,
                     max_tokens=max_tokens, cache=cache, num_retries=0)
    else:
        model, key = spec, api_key
        if api_base:
            if "/" not in model:
                model = f"openai/{model}"
            key = key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
        client = {name: value for name, value in (("api_base", api_base), ("api_key", key)) if value}
        # The embedded model behind `guidebench lm serve` is a base model: it gets the in-process
        # completion prompt over /v1/completions, not a chat template.
        served = served_engine(model, api_base)
        try:
            if served is not None:
                lm = dspy.LM(model, engine=served, temperature=temperature, max_tokens=max_tokens, cache=cache,
                             num_retries=0)
            else:
                lm = dspy.LM(model, temperature=temperature, max_tokens=max_tokens, cache=cache, **client)
        except (ValueError, TypeError) as exc:
            raise GuidebenchError(f"cannot use LM spec {spec!r}: {exc}") from exc
    return instrument(lm)


def configure_lm(
    spec: str = DEFAULT_SPEC,
    *,
    api_base: Optional[str] = None,
    api_key: Optional[str] = None,
    temperature: float = 0.2,
    max_tokens: int = 512,
    cache: bool = True,
) -> dspy.LM:
    """`make_lm(...)` made DSPy's default LM; the one LM set-up of commands: any failure is a `GuidebenchError`."""
    try:
        lm = make_lm(spec, api_base=api_base, api_key=api_key, temperature=temperature, max_tokens=max_tokens,
                     cache=cache)
    except GuidebenchError:
        raise
    except Exception as exc:  # e.g. an unwritable cache folder: one line naming the LM, not a traceback
        raise GuidebenchError(f"--lm {spec}: cannot set up the LM: {type(exc).__name__}: {exc}") from exc
    dspy.configure(lm=lm)
    return lm


def is_local(lm: Any) -> bool:
    """True when the LM runs the embedded model in-process."""
    return isinstance(getattr(lm, "engine", None), LocalGGUFEngine)


def lm_info(lm: Any) -> dict[str, Any]:
    """What identifies an LM in a tracked run: model id, engine, sampling settings (no secrets)."""
    kwargs = dict(getattr(lm, "kwargs", {}) or {})
    engine = getattr(lm, "engine", None)
    info: dict[str, Any] = {
        "model": str(getattr(lm, "model", "")),
        "engine": engine if isinstance(engine, str) or engine is None else type(engine).__name__,
        "temperature": kwargs.get("temperature"),
        "max_tokens": kwargs.get("max_tokens", kwargs.get("max_completion_tokens")),
        "cache": bool(getattr(lm, "cache", False)),
    }
    if not isinstance(engine, str) and engine is not None:
        info["engine_revision"] = engine_revision()
    if isinstance(engine, LocalGGUFEngine):
        info["model_sha256"] = engine.sha256 or model_sha256()
        info["engine_state"] = engine.dump_state()
    if kwargs.get("api_base"):
        info["api_base_set"] = True
    return info
