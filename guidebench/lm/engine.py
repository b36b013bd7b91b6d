"""The embedded LM: Gemma 3 270M (GGUF) run in-process by llama-cpp-python as a DSPy custom engine.

The model file comes from `guidebench.lm.model_file.ensure_model()` (assembled once from its PyPI chunk packages
and checked against their SHA-256).

`LocalGGUFEngine` implements DSPy 3.4's engine contract (`complete(Request) -> Response`), which
replaces the deprecated `BaseLM.forward` subclassing: pass it as `dspy.LM(model, engine=...)`.
The model is a base model with no chat template, so the engine renders the adapter's messages as
one plain-text prompt, ends it with the first output marker (`[[ ## action ## ]]`) and puts that
marker back in front of the completion, because the base model does not start with it by itself.
When the answer still misses the format (measured: sometimes every section written but empty), the
engine decodes once more under a grammar built from the adapter's output fields (`local_grammar`).
Calls are serialised by one lock per loaded model, so the engine is safe under
`dspy.Evaluate(num_threads>1)`.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

if TYPE_CHECKING:  # DSPy is imported where a request is handled: `guidebench --help` stays light
    from dspy.lm15 import Request, Response

from guidebench.home import guidebench_home
from guidebench.lm import lookup
from guidebench.lm.grammar import (OutputField, conforms, decimal_values, declared_outputs, empty_unless,
                                   literal_values, output_grammar, word_cap)
from guidebench.lm.literal import LiteralMask
from guidebench.lm.model_file import ModelFileError, ensure_model, model_identity, model_sha256
from guidebench.lm.prefix_cache import PrefixStateCache, common_prefix
from guidebench.lm.prompt import RenderedPrompt, render_prompt

logger = logging.getLogger(__name__)

LOCAL_MODEL_ID = "local/gemma-3-270m-q4_k_m"
DEFAULT_N_CTX = 8192
DEFAULT_SEED = 0
DEFAULT_MAX_TOKENS = 512
DEFAULT_TEMPERATURE = 0.2
CONSTRAIN_MODES: tuple[str, ...] = ("fallback", "always", "off")
DECODE_MODES: tuple[str, ...] = ("fieldwise", "free")
# Where a field's value ends in field-wise decoding: a blank line (or a new section) follows it.
_VALUE_STOPS: tuple[str, ...] = ("\n\n", "\n[[")



# llama.cpp logs to stderr from C; route it to Python logging instead (kept referenced: a ctypes
# callback that is garbage-collected would crash the process).
_LLAMA_LOG_CALLBACK: Any = None


def _quiet_llama(llama_cpp: Any) -> None:
    global _LLAMA_LOG_CALLBACK
    if _LLAMA_LOG_CALLBACK is not None:
        return
    native = logging.getLogger("llama_cpp.native")

    @llama_cpp.llama_log_callback
    def _forward(level: int, text: bytes, user_data: Any) -> None:
        if level in (2, 3):  # GGML warn / error
            native.debug(text.decode("utf-8", "replace").rstrip())

    llama_cpp.llama_log_set(_forward, ctypes.c_void_p(0))
    _LLAMA_LOG_CALLBACK = _forward


@dataclass
class _LoadedModel:
    llama: Any
    lock: threading.Lock
    prefixes: Optional[PrefixStateCache] = None  # states of constant prompt prefixes on disk


_models: dict[tuple[str, int, int], _LoadedModel] = {}
_models_lock = threading.Lock()
_grammars: dict[str, Any] = {}
_grammars_lock = threading.Lock()


def _busy_cores(window_s: float = 0.2) -> Optional[float]:
    """How many cores other processes keep busy now, from /proc/stat over a short window (None if unknown).

    The load average is a minute-long mean: right after another job ends it still reads as busy.
    """
    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as handle:
            values = [int(x) for x in handle.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        return sum(values), idle

    try:
        total0, idle0 = sample()
        time.sleep(window_s)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total1 - total0
    if elapsed <= 0:
        return None
    return (os.cpu_count() or 1) * (1.0 - (idle1 - idle0) / elapsed)


def _default_threads() -> int:
    """`$GUIDEBENCH_LLAMA_THREADS`, else one per core other processes leave free (at least 1).

    llama.cpp threads spin while they wait: on an oversubscribed machine two threads on two busy
    cores measured 3-5x slower than one, while on an idle machine two threads evaluate prompts
    1.6x faster than one (294 against 185 tokens/s on 2 cores). So the count follows how busy the
    cores are when the engine is made. Test processes under pytest-xdist share the cores: one each.
    """
    configured = os.environ.get("GUIDEBENCH_LLAMA_THREADS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return 1
    cores = os.cpu_count() or 1
    busy = _busy_cores()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:  # neither is known: assume a busy machine
            return max(1, cores // 2)
    return max(1, min(cores, int(cores - busy + 0.5)))


def _prefix_cache_folder() -> Path:
    """`$GUIDEBENCH_PREFIX_CACHE`, else `<GUIDEBENCH_HOME>/prefix-cache`."""
    return Path(os.environ.get("GUIDEBENCH_PREFIX_CACHE") or guidebench_home() / "prefix-cache")


def _load(path: Path, n_ctx: int, n_threads: int) -> _LoadedModel:
    key = (str(path.resolve()), n_ctx, n_threads)
    with _models_lock:
        loaded = _models.get(key)
        if loaded is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise ModelFileError(
                    "llama-cpp-python is not installed: pip install 'llama-cpp-python>=0.3.36,<0.4'") from exc
            _quiet_llama(llama_cpp)
            llama = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                                    n_threads_batch=n_threads, seed=DEFAULT_SEED, verbose=False)
            identity = f"{model_identity(path)}|llama_cpp {llama_cpp.__version__}|n_ctx {n_ctx}"
            # One model per process and file, shared by every engine; calls are serialised by its lock
            # (llama.cpp contexts are not thread-safe, and 2 cores gain nothing from a pool).
            prefixes = PrefixStateCache(_prefix_cache_folder(), identity)
            loaded = _keep(key, _LoadedModel(llama, threading.Lock(), prefixes))
        return loaded


_closing_at_exit = False


def _keep(key: tuple[str, int, int], loaded: _LoadedModel) -> _LoadedModel:
    """Hold a loaded model for the process (under `_models_lock`); the first one registers `close_models` at exit,
    once per process and never unregistered (a caller that swaps `_models` cannot leave a model unclosed)."""
    global _closing_at_exit
    if not _closing_at_exit:
        atexit.register(close_models)
        _closing_at_exit = True
    _models[key] = loaded
    return loaded


def load_vocab(path: Path) -> Any:
    """A vocabulary-only Llama of the model file (its tokenizer, no weights): one per process and file, closed at
    exit with the models (`close_models`)."""
    key = (str(path.resolve()), 0, 0)  # n_ctx 0: the vocabulary alone
    with _models_lock:
        loaded = _models.get(key)
        if loaded is None:
            import llama_cpp

            _quiet_llama(llama_cpp)  # llama.cpp's own stderr lines go to logging
            vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
            loaded = _keep(key, _LoadedModel(vocab, threading.Lock()))
        return loaded.llama


def close_models() -> int:
    """Free every loaded model now; the number closed. Registered at exit with the first model loaded.

    Left to the garbage collector at interpreter exit, `Llama.__del__` runs after the modules it calls
    were torn down and prints `Exception ignored in: <function Llama.__del__ ...> TypeError: 'NoneType'
    object is not callable`. Closed here, while everything is alive, the later `__del__` has nothing to do.
    """
    with _models_lock:
        loaded = list(_models.values())
        _models.clear()
    for model in loaded:
        with model.lock:  # a call still running in another thread finishes first
            model.llama.close()
    with _grammars_lock:
        _grammars.clear()  # grammars hold llama.cpp objects too
    return len(loaded)


def grammar_compiles(llama: Any, text: str) -> bool:
    """True when llama.cpp accepts the grammar for this model's vocabulary (a bad one is logged and skipped)."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, text.encode("utf-8"), b"root")
    if not sampler:
        logger.warning("llama.cpp rejected the output grammar; decoding without it:\n%s", text)
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


# Tokens of the texts every call of a program repeats (its constant prefix, a field's literal values), per
# model; weakly keyed, so a closed model is not kept alive by its cache.
_TOKENS: "weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Any]]" = weakref.WeakKeyDictionary()
_TOKENS_KEEP = 64


def _tokens_once(llama: Any, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """`make()`, computed once per model and key (a few dozen keys kept per model)."""
    try:
        cache = _TOKENS.setdefault(llama, {})
    except TypeError:  # an object that cannot be weakly referenced: no cache
        return make()
    if key not in cache:
        if len(cache) >= _TOKENS_KEEP:
            cache.pop(next(iter(cache)))
        cache[key] = make()
    return cache[key]


def _prefix_text_tokens(llama: Any, prefix: str) -> list[int]:
    """A constant prompt prefix's tokens (the same text every call of a program: tokenized once)."""
    return _tokens_once(llama, ("prefix", prefix),
                        lambda: llama.tokenize(prefix.encode("utf-8"), add_bos=True, special=False))


@dataclass
class _Decoded:
    """An answer and what it cost: prompt tokens (with the markers the engine wrote), evaluated, generated."""

    text: str
    finish_reason: str
    prompt_tokens: int
    evaluated_tokens: int
    completion_tokens: int
    id: Optional[str] = None

    def after(self, earlier: "_Decoded") -> "_Decoded":
        """This answer, with the cost of an earlier attempt added."""
        return _Decoded(self.text, self.finish_reason, self.prompt_tokens, self.evaluated_tokens + earlier.evaluated_tokens,
                        self.completion_tokens + earlier.completion_tokens, self.id)


def _context_tokens(llama: Any, n: Optional[int] = None) -> list[int]:
    """The first `n` tokens of llama.cpp's context (all of them by default; none for a stand-in without them)."""
    input_ids = getattr(llama, "input_ids", None)
    return [] if input_ids is None else input_ids[: llama.n_tokens if n is None else n].tolist()


def _cached_tokens(llama: Any, tokens: list[int], context: Optional[list[int]] = None) -> int:
    """Prompt tokens llama.cpp will not evaluate: the common prefix with its context (it re-reads at least one)."""
    shared = common_prefix(_context_tokens(llama) if context is None else context, tokens)
    return max(0, min(shared, len(tokens) - 1))


def _generate(llama: Any, prompt: str, sampling: dict[str, Any], **overrides: Any) -> tuple[dict[str, Any], int, int]:
    """One completion; with the prompt's length and how many of its tokens were evaluated.

    llama.cpp tokenizes the prompt itself: its length is in the usage, and the tokens it reused are what the
    context before the call shares with the prompt's tokens it holds after (no second tokenization of the prompt).
    """
    before = _context_tokens(llama)
    output = llama.create_completion(prompt, **{**sampling, **overrides})
    n_prompt = int((output.get("usage") or {}).get("prompt_tokens", 0))
    return output, n_prompt, n_prompt - _cached_tokens(llama, _context_tokens(llama, n_prompt), before)


def _value_tokens(llama: Any, values: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """Each literal value's tokens (tokenized once per model and field: a call would redo it per decision)."""
    return _tokens_once(llama, ("values", values), lambda: tuple(
        tuple(llama.tokenize(value.encode("utf-8"), add_bos=False, special=False)) for value in values))


def _completion_tokens(output: dict[str, Any]) -> int:
    return int((output.get("usage") or {}).get("completion_tokens", 0))


def _decode_free(llama: Any, rendered: RenderedPrompt, sampling: dict[str, Any], grammar: Any) -> _Decoded:
    """The model writes the whole answer after the prefilled first marker."""
    output, n_prompt, evaluated = _generate(llama, rendered.prompt, sampling, grammar=grammar)
    choice = output["choices"][0]
    return _Decoded(rendered.prefill + (choice.get("text") or ""),
                    "length" if choice.get("finish_reason") == "length" else "stop",
                    n_prompt, evaluated, _completion_tokens(output), output.get("id"))


# A word cap ("at most N words") becomes a token cap of this many tokens per word: English words average
# about 1.3 of the embedded model's tokens, and the margin keeps a sentence within its cap whole.
TOKENS_PER_WORD = 2


def _decode_value(llama: Any, prompt: str, field: OutputField, sampling: dict[str, Any],
                  budget: int) -> tuple[dict[str, Any], int, int, bool]:
    """One field's value after its marker: (completion, prompt tokens, evaluated, whether a cap of its own applied).

    A literal field (or a float of "one decimal" in a range) is one of its values, sampled from the model's
    own distribution restricted to them (`LiteralMask`), in at most the longest value's tokens: the last
    token needs no forward pass of its own (a free "0.8" costs one more, for the stop after it). A free
    field stops at a blank line, or at its word cap; what it repeats of the prompt is checked a batch at a
    time (`guidebench.lm.lookup`).
    """
    values = literal_values(field) or decimal_values(field)
    if values:
        from llama_cpp import LogitsProcessorList

        sequences = [list(tokens) for tokens in _value_tokens(llama, tuple(values))]
        limit = min(budget, max(len(seq) for seq in sequences))
        mask = LogitsProcessorList([LiteralMask(sequences, llama.token_eos())])
        output, n_prompt, evaluated = _generate(llama, prompt, sampling, max_tokens=limit, stop=[],
                                                logits_processor=mask)
    else:
        cap = word_cap(field)
        limit = budget if cap is None else min(budget, TOKENS_PER_WORD * cap)
        stops = [*_VALUE_STOPS, *sampling["stop"]]
        if _is_llama(llama):  # prompt-lookup decoding needs llama.cpp's batch API (a test's stand-in has none)
            tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
            reused = _cached_tokens(llama, tokens)
            output = lookup.completion(llama, tokens, reused, sampling, limit, stops)
            n_prompt, evaluated = len(tokens), len(tokens) - reused
        else:
            output, n_prompt, evaluated = _generate(llama, prompt, sampling, max_tokens=limit, stop=stops)
    return output, n_prompt, evaluated, limit < budget


def _is_llama(llama: Any) -> bool:
    from llama_cpp import Llama

    return isinstance(llama, Llama)


def _decode_fieldwise(llama: Any, rendered: RenderedPrompt, fields: list[OutputField],
                      sampling: dict[str, Any]) -> _Decoded:
    """The engine writes every output marker, the model only the values, one completion per field.

    Generating a marker such as `[[ ## confidence ## ]]` costs ~8 tokens at the generation rate
    (35-54 tokens/s here); written by the engine it is read at the prompt rate (185-294 tokens/s),
    from the KV cache the previous field left. The answer has the adapter's format by construction.
    A field "empty unless" an earlier field has a value is left empty, without a call, when that field has
    another (`guidebench.lm.grammar`); every other value is `_decode_value`'s. A value that reaches a cap
    of its own (a literal's length, a word cap) ends only that field.
    """
    base = rendered.prompt[: len(rendered.prompt) - len(rendered.prefill)]
    answer, budget = rendered.prefill, int(sampling["max_tokens"])
    prompt_tokens = evaluated = generated = 0
    finish, output_id, previous = "stop", None, 0
    values: dict[str, str] = {}
    for index, field in enumerate(fields):
        if index:
            answer += f"\n\n[[ ## {field.name} ## ]]\n"
        rule = empty_unless(field)
        if rule is not None and rule[0] in values and values[rule[0]] != rule[1]:
            values[field.name] = ""
            continue  # empty by the signature's own rule: no call
        output, n_prompt, n_evaluated, capped = _decode_value(llama, base + answer, field, sampling, budget)
        # the prompt grows by what was generated and the markers written: count the markers as prompt
        prompt_tokens += n_prompt if not index else max(0, n_prompt - previous)
        previous = n_prompt + _completion_tokens(output)
        evaluated += n_evaluated
        generated += _completion_tokens(output)
        budget -= _completion_tokens(output)
        choice = output["choices"][0]
        values[field.name] = (choice.get("text") or "").strip()
        answer += values[field.name]
        output_id = output_id or output.get("id")
        if (choice.get("finish_reason") == "length" and not capped) or budget <= 0:
            finish = "length"  # the answer's budget ran out
            break
    # no `[[ ## completed ## ]]`: a free answer stops before it too (it is a stop string)
    return _Decoded(answer + "\n\n", finish, prompt_tokens, evaluated, generated, output_id)


class LocalGGUFEngine:
    """DSPy custom engine running a GGUF model in-process with llama-cpp-python (plain completion)."""

    def __init__(self, model_path: Optional[str] = None, *, n_ctx: int = DEFAULT_N_CTX,
                 n_threads: Optional[int] = None, seed: int = DEFAULT_SEED, prefill: bool = True,
                 constrain: str = "fallback", sha256: Optional[str] = None, prefix_cache: bool = True,
                 decode: str = "fieldwise") -> None:
        if constrain not in CONSTRAIN_MODES:
            raise ValueError(f"constrain must be one of {CONSTRAIN_MODES}, got {constrain!r}")
        if decode not in DECODE_MODES:
            raise ValueError(f"decode must be one of {DECODE_MODES}, got {decode!r}")
        # "fieldwise": the engine writes each output marker itself and the model generates only the
        # values (see `_decode_fieldwise`); "free": the model generates the whole answer, markers included.
        self.decode = decode
        self.model_path = model_path
        # Grammar-constrained decoding of ChatAdapter answers (see local_grammar): "fallback" decodes
        # freely and re-decodes with the grammar only when the answer misses the format, because
        # grammar sampling over Gemma's 262k-token vocabulary roughly doubles the time per token.
        self.constrain = constrain
        self.n_ctx = int(n_ctx)
        # None means "decide on the machine that runs it": kept as None in the saved state.
        self.threads_setting = int(n_threads) if n_threads else None
        self.n_threads = self.threads_setting or _default_threads()
        self.seed = int(seed)
        self.prefill = bool(prefill)
        self.sha256 = sha256 or (model_sha256() if model_path is None else None)
        # Restore the llama.cpp state of a prompt's constant prefix from disk (see `prefix_cache`).
        self.prefix_cache = bool(prefix_cache)

    def _model(self) -> _LoadedModel:
        path = Path(self.model_path) if self.model_path else ensure_model()
        return _load(path, self.n_ctx, self.n_threads)

    def warm_up(self) -> None:
        """Assemble and load the model now rather than on the first call."""
        self._model()

    def complete(self, request: Request) -> Response:
        """Run one completion for a DSPy request."""
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import ContextLengthError, Message, Response, TextPart, Usage

        validate_request(request)
        rendered = render_prompt(request, prefill=self.prefill)
        config = request.config
        model = self._model()
        with model.lock:
            tokens = model.llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=True, special=False)
            if len(tokens) >= self.n_ctx:
                raise ContextLengthError(
                    f"prompt has {len(tokens)} tokens; the embedded model's context is {self.n_ctx}",
                    provider="local")
            sampling = {
                "max_tokens": min(config.max_tokens or DEFAULT_MAX_TOKENS, self.n_ctx - len(tokens)),
                "temperature": DEFAULT_TEMPERATURE if config.temperature is None else float(config.temperature),
                "top_p": 0.95 if config.top_p is None else float(config.top_p),
                "top_k": 40 if config.top_k is None else int(config.top_k),
                "stop": list(rendered.stops),
                "seed": self.seed if config.seed is None else int(config.seed),
            }
            prefix = self._prefix_tokens(model, rendered, tokens)
            self._restore_prefix(model, tokens, prefix)
            grammar = self._grammar(rendered, model.llama)
            fields = self._fieldwise_fields(rendered, grammar)
            if fields:
                decoded = _decode_fieldwise(model.llama, rendered, fields, sampling)
            else:
                decoded = _decode_free(model.llama, rendered, sampling,
                                       grammar if self.constrain == "always" else None)
            if grammar is not None and self.constrain == "fallback" and not conforms(rendered.system, decoded.text):
                # The prompt is still in the KV cache: the second pass costs only the generation.
                decoded = _decode_free(model.llama, rendered, sampling, grammar).after(decoded)
            if prefix and model.prefixes.note(prefix):
                model.prefixes.store(model.llama, prefix)
        return Response(
            id=decoded.id,
            model=request.model,
            message=Message.assistant([TextPart(decoded.text)]),
            finish_reason=decoded.finish_reason,
            # cache_read_tokens: prompt tokens whose state was reused, not evaluated (DSPy reports
            # them as `prompt_tokens_details.cached_tokens`).
            usage=Usage(input_tokens=decoded.prompt_tokens, output_tokens=decoded.completion_tokens,
                        cache_read_tokens=max(0, decoded.prompt_tokens - decoded.evaluated_tokens)),
        )

    def _fieldwise_fields(self, rendered: RenderedPrompt, grammar: Any) -> list[OutputField]:
        """The output fields to decode one by one, or [] when the request is decoded freely."""
        if self.decode != "fieldwise" or not rendered.chat_format or not rendered.prefill:
            return []
        if grammar is not None and self.constrain == "always":
            return []  # the grammar writes the markers: nothing to gain
        fields = declared_outputs(rendered.system)
        if not fields or rendered.prefill.strip() != f"[[ ## {fields[0].name} ## ]]":
            return []
        return fields

    def _prefix_tokens(self, model: _LoadedModel, rendered: RenderedPrompt, tokens: list[int]) -> list[int]:
        """The prompt's tokens up to the end of its constant prefix (empty when not cached)."""
        if not (self.prefix_cache and model.prefixes and rendered.prefix):
            return []
        prefix = _prefix_text_tokens(model.llama, rendered.prefix)
        # The boundary token may merge with what follows: keep only what both tokenizations share.
        return tokens[:common_prefix(prefix, tokens)]

    @staticmethod
    def _restore_prefix(model: _LoadedModel, tokens: list[int], prefix: list[int]) -> None:
        """Load the prefix's stored state when the context shares less of the prompt than the prefix."""
        if prefix and model.prefixes and _cached_tokens(model.llama, tokens) < len(prefix) - 1:
            model.prefixes.restore(model.llama, prefix)

    def _grammar(self, rendered: RenderedPrompt, llama: Any) -> Any:
        if self.constrain == "off" or not rendered.chat_format:
            return None
        text = output_grammar(rendered.system, prefilled=bool(rendered.prefill))
        if text is None:
            return None
        with _grammars_lock:
            if text not in _grammars:
                from llama_cpp import LlamaGrammar

                _grammars[text] = LlamaGrammar.from_string(text, verbose=False) \
                    if grammar_compiles(llama, text) else None
            return _grammars[text]

    def stream(self, request: Request) -> Iterator[Any]:
        """Streaming as one final chunk (the local model is fast enough not to stream tokens)."""
        from dspy.lm15 import response_to_events

        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release per engine: the loaded model is shared for the process lifetime."""

    def dump_state(self) -> dict[str, Any]:
        """JSON state to rebuild this engine (no secrets; the model file is found again by hash)."""
        return {"model_path": self.model_path, "n_ctx": self.n_ctx, "n_threads": self.threads_setting,
                "seed": self.seed, "prefill": self.prefill, "constrain": self.constrain, "sha256": self.sha256,
                "prefix_cache": self.prefix_cache, "decode": self.decode}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "LocalGGUFEngine":
        """Rebuild an engine from `dump_state()`; refuses a state made for a different model file."""
        state = dict(state or {})
        sha256 = state.get("sha256")
        if state.get("model_path") is None and sha256 and sha256 != model_sha256():
            raise ModelFileError(f"saved LM state is for model {sha256[:12]}, the installed package ships "
                                 f"{model_sha256()[:12]}")
        return cls(model_path=state.get("model_path"), n_ctx=state.get("n_ctx", DEFAULT_N_CTX),
                   n_threads=state.get("n_threads"), seed=state.get("seed", DEFAULT_SEED),
                   prefill=state.get("prefill", True), constrain=state.get("constrain", "fallback"), sha256=sha256,
                   prefix_cache=state.get("prefix_cache", True), decode=state.get("decode", "fieldwise"))
