"""The LM server: llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`) for the
embedded model on 127.0.0.1, and the DSPy engine that drives it.

How the server is driven: the embedded model is a *base* model with no chat template, so its chat
endpoint would wrap DSPy's messages in a guessed template (llama-2) and answer garbage. The engine
here uses the plain completion endpoint (`/v1/completions`) and builds exactly the prompt of the
in-process engine (`guidebench.lm.prompt.render_prompt`: system + demos + query flattened, ending with
the first output marker, which is put back in front of the answer) with the same stops and sampling
settings, and, like it, decodes once more under the output grammar (`guidebench.lm.grammar`, sent
as the server's `grammar` field) when the answer misses the format. Same prompt, seed, sampler and
thread count: the server answers what the in-process model would.

`make_lm("openai/<alias>", api_base=...)` reaches this engine through `served_engine()` when the model
is the embedded one; any other model behind `--api-base` (vLLM, SGLang...) is a chat model and goes
through DSPy's ordinary OpenAI client.

Each server has a record `<GUIDEBENCH_HOME>/lm-server/<port>.json` (pid, port, model, log) so that
`guidebench lm stop` ends exactly the process `guidebench lm serve` started, never another one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

if TYPE_CHECKING:  # DSPy is imported where a request is handled: `guidebench --help` stays light
    from dspy.lm15 import Request, Response

from guidebench.errors import GuidebenchError
from guidebench.home import guidebench_home
from guidebench.lm.grammar import conforms, output_grammar
from guidebench.lm.engine import (CONSTRAIN_MODES, DEFAULT_MAX_TOKENS, DEFAULT_N_CTX, DEFAULT_SEED, DEFAULT_TEMPERATURE,
                       LOCAL_MODEL_ID, ensure_model)
from guidebench.lm.prompt import render_prompt
from guidebench.lm.loopback import LOOPBACK, http_ok, log_tail, port_in_use, wait_until

DEFAULT_PORT = 8000
# The name the server publishes (`/v1/models`) and clients use: `--lm openai/gemma-3-270m-q4_k_m`.
MODEL_ALIAS = LOCAL_MODEL_ID.split("/", 1)[1]
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 20.0
REQUEST_TIMEOUT_S = 600.0
# Sampling settings of the in-process engine that the server's request defaults would change
# (the server defaults repeat_penalty to 1.1, `Llama.create_completion` to 1.0).
_TOP_P = 0.95
_TOP_K = 40
_MIN_P = 0.05
_REPEAT_PENALTY = 1.0


@dataclass(frozen=True)
class ServerRecord:
    """A started LM server: what `lm stop` and `lm status` need."""

    pid: int
    port: int
    threads: int
    model_path: str
    alias: str
    log: str
    started_at: float

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL (`--api-base`)."""
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def lm_spec(self) -> str:
        """The `--lm` spec that reaches this server."""
        return f"openai/{self.alias}"


def default_threads() -> int:
    """Threads per server: the in-process engine's default (`GUIDEBENCH_LLAMA_THREADS`, else half the cores).

    llama.cpp splits its sums by thread: the same prompt gives the same answer only with the same
    thread count, so the server follows the in-process default unless `--threads` says otherwise.
    """
    from guidebench.lm.engine import _default_threads

    return _default_threads()


def records_dir(home: Optional[Path] = None) -> Path:
    """Where server records and logs live."""
    return (home or guidebench_home()).absolute() / "lm-server"


def _record_path(port: int, home: Optional[Path]) -> Path:
    return records_dir(home) / f"{port}.json"


def _write_record(record: ServerRecord, home: Optional[Path]) -> None:
    path = _record_path(record.port, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".tmp-{os.getpid()}")
    partial.write_text(json.dumps(asdict(record), indent=1))
    os.replace(partial, path)  # atomic: `lm status` never reads half a record


def _read_record(path: Path) -> Optional[ServerRecord]:
    try:
        return ServerRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def is_alive(record: ServerRecord) -> bool:
    """True when the recorded pid is still our llama_cpp.server on the recorded port (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{record.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"llama_cpp.server" in cmdline and str(record.port).encode() in cmdline


def running(home: Optional[Path] = None) -> list[ServerRecord]:
    """Servers recorded and alive; records of dead servers are removed."""
    alive = []
    for path in sorted(records_dir(home).glob("*.json")):
        record = _read_record(path)
        if record is not None and is_alive(record):
            alive.append(record)
        else:
            path.unlink(missing_ok=True)
    return alive


def server_command(model_path: Path, port: int, threads: int, n_ctx: int = DEFAULT_N_CTX) -> list[str]:
    """The `python -m llama_cpp.server` command line, with the in-process engine's model settings."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", MODEL_ALIAS,
            "--host", LOOPBACK, "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--seed", str(DEFAULT_SEED),
            # The server keeps every token's logits by default; the in-process engine does not need them.
            "--logits_all", "false", "--verbose", "false"]


def _check_server_extra() -> None:
    try:
        import llama_cpp.server.app  # noqa: F401  (fastapi, uvicorn, sse-starlette...)
    except ImportError as exc:
        raise GuidebenchError(f"llama-cpp-python's server extra is missing ({exc}): "
                              "pip install 'llama-cpp-python[server]>=0.3.36,<0.4'") from exc


def start(port: int = DEFAULT_PORT, threads: Optional[int] = None, *, home: Optional[Path] = None,
          detach: bool = True, timeout: float = START_TIMEOUT_S) -> tuple[ServerRecord, subprocess.Popen]:
    """Start a server on 127.0.0.1:port, record it and wait until it answers `/v1/models`."""
    if not 0 < port < 65536:
        raise GuidebenchError(f"--port {port}: not a TCP port")
    threads = threads or default_threads()
    if threads < 1:
        raise GuidebenchError(f"--threads {threads}: must be at least 1")
    _check_server_extra()
    if port_in_use(port):
        raise GuidebenchError(f"port {port} on {LOOPBACK} is already in use: pick another with --port")
    model_path = ensure_model(home).absolute()
    folder = records_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{port}.log"
    with log.open("ab") as handle:
        # A detached server gets its own session: it outlives the CLI and the terminal's Ctrl-C.
        process = subprocess.Popen(server_command(model_path, port, threads), stdout=handle,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detach)
    record = ServerRecord(pid=process.pid, port=port, threads=threads, model_path=str(model_path), alias=MODEL_ALIAS,
                          log=str(log), started_at=time.time())
    _write_record(record, home)
    try:
        wait_until(lambda: http_ok(f"{record.api_base}/models"), what="LM server", timeout=timeout,
                   process=process, log=log)
    except BaseException:
        _terminate(record)
        _record_path(port, home).unlink(missing_ok=True)
        raise
    return record, process


def serve(port: int = DEFAULT_PORT, threads: Optional[int] = None, *, home: Optional[Path] = None,
          background: bool = False) -> ServerRecord:
    """`lm serve`: start the server; in the foreground, stay until it stops (Ctrl-C or `lm stop`)."""
    for record in running(home):
        if record.port == port:
            if background:
                return record  # idempotent: a set-up script may ask twice
            raise GuidebenchError(f"an LM server already runs on port {port} (pid {record.pid}): "
                                  f"guidebench lm stop --port {port}")
    record, process = start(port, threads, home=home, detach=background)
    if background:
        return record
    print(f"LM server on {record.api_base} (pid {record.pid}); use --lm {record.lm_spec} --api-base "
          f"{record.api_base}; Ctrl-C stops it", flush=True)
    try:
        process.wait()
    except KeyboardInterrupt:
        _terminate(record)
    finally:
        if process.poll() is None:
            _terminate(record)
        process.wait()
        _record_path(port, home).unlink(missing_ok=True)
    return record


def _terminate(record: ServerRecord, timeout: float = STOP_TIMEOUT_S) -> None:
    if not is_alive(record):
        return
    os.kill(record.pid, signal.SIGTERM)  # uvicorn shuts down cleanly on SIGTERM
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(record) or _reaped(record.pid):
            return
        time.sleep(0.1)
    if is_alive(record):
        os.kill(record.pid, signal.SIGKILL)


def _reaped(pid: int) -> bool:
    # A child of this process stays a zombie (cmdline empty, so not alive) until it is waited for.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False


def stop(port: Optional[int] = None, *, home: Optional[Path] = None) -> list[ServerRecord]:
    """`lm stop`: end the recorded server on a port (all recorded servers without a port)."""
    alive = running(home)
    chosen = [record for record in alive if port is None or record.port == port]
    if port is not None and not chosen:
        raise GuidebenchError(f"no LM server started by guidebench runs on port {port} "
                              f"(records in {records_dir(home)})")
    for record in chosen:
        _terminate(record)
        _record_path(record.port, home).unlink(missing_ok=True)
    return chosen


# --- the DSPy engine ---------------------------------------------------------------------------------


def served_engine(model: str, api_base: Optional[str]) -> Optional["LlamaServerEngine"]:
    """The completion engine when `model` (e.g. `openai/gemma-3-270m-q4_k_m`) is the embedded model behind
    `api_base` (default: OPENAI_API_BASE, as LiteLLM reads it); None for any other model (a chat model,
    served by DSPy's ordinary client)."""
    api_base = api_base or os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    if not api_base:
        return None
    name = model.split("/", 1)[1] if model.startswith("openai/") else model
    return LlamaServerEngine(api_base, name) if name == MODEL_ALIAS else None


class LlamaServerEngine:
    """DSPy custom engine: the in-process engine's completion prompt, sent to an LM server over HTTP."""

    def __init__(self, api_base: str, model: str = MODEL_ALIAS, *, seed: int = DEFAULT_SEED, prefill: bool = True,
                 constrain: str = "fallback", timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        if constrain not in CONSTRAIN_MODES:
            raise ValueError(f"constrain must be one of {CONSTRAIN_MODES}, got {constrain!r}")
        self.api_base = api_base.rstrip("/")
        self.model = model
        self.seed = int(seed)
        self.prefill = bool(prefill)
        self.constrain = constrain  # as LocalGGUFEngine: "fallback", "always" or "off"
        self.timeout_s = float(timeout_s)
        self._client: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Copies (dspy.LM.copy, deepcopy of a program) get their own HTTP client, not a shared socket pool.
        state = dict(self.__dict__)
        state["_client"], state["_lock"] = None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                # One connection per replay thread is plenty; the server serialises generation anyway.
                self._client = httpx.Client(timeout=self.timeout_s,
                                            limits=httpx.Limits(max_connections=16, max_keepalive_connections=16))
            return self._client

    def request_body(self, request: Request) -> tuple[dict[str, Any], str]:
        """The `/v1/completions` body for a DSPy request (without grammar), and the prefill to put back."""
        body, rendered = self._body(request)
        return body, rendered.prefill

    def _body(self, request: Request) -> tuple[dict[str, Any], Any]:
        rendered = render_prompt(request, prefill=self.prefill)
        config = request.config
        body = {
            "model": self.model,
            "prompt": rendered.prompt,
            "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS,
            "temperature": DEFAULT_TEMPERATURE if config.temperature is None else float(config.temperature),
            "top_p": _TOP_P if config.top_p is None else float(config.top_p),
            "top_k": _TOP_K if config.top_k is None else int(config.top_k),
            "min_p": _MIN_P,
            "repeat_penalty": _REPEAT_PENALTY,
            "stop": list(rendered.stops),
            "seed": self.seed if config.seed is None else int(config.seed),
        }
        return body, rendered

    def complete(self, request: Request) -> Response:
        """Run one completion on the server for a DSPy request (a second, grammar-bound one when needed)."""
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import InvalidRequestError, Message, Response, ServerError, TextPart, Usage

        validate_request(request)
        body, rendered = self._body(request)
        grammar = None
        if self.constrain != "off" and rendered.chat_format:
            grammar = output_grammar(rendered.system, prefilled=bool(rendered.prefill))
        output = self._post("/completions", {**body, "grammar": grammar} if grammar and self.constrain == "always"
                            else body)
        completion_tokens = int((output.get("usage") or {}).get("completion_tokens", 0))
        text = rendered.prefill + ((output.get("choices") or [{}])[0].get("text") or "")
        if grammar and self.constrain == "fallback" and not conforms(rendered.system, text):
            try:
                # The prompt is still in the server's KV cache: the second pass costs only the generation.
                output = self._post("/completions", {**body, "grammar": grammar})
                completion_tokens += int((output.get("usage") or {}).get("completion_tokens", 0))
            except (InvalidRequestError, ServerError):
                pass  # a grammar llama.cpp rejects: keep the free answer, as the in-process engine does
        choice = (output.get("choices") or [{}])[0]
        usage = output.get("usage") or {}
        return Response(
            id=output.get("id"),
            model=request.model,
            message=Message.assistant([TextPart(rendered.prefill + (choice.get("text") or ""))]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=Usage(input_tokens=int(usage.get("prompt_tokens", 0)), output_tokens=completion_tokens),
        )

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx
        from dspy.lm15 import ContextLengthError, InvalidRequestError, ServerError, TransportError
        from dspy.lm15 import TimeoutError as LMTimeoutError

        url = f"{self.api_base}{path}"
        try:
            reply = self._http().post(url, json=body)
        except httpx.TimeoutException as exc:
            raise LMTimeoutError(f"LM server {url}: no answer within {self.timeout_s:.0f} s", provider="llama_cpp") from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"LM server {url}: {exc}", provider="llama_cpp") from exc
        if reply.status_code == 200:
            return reply.json()
        detail = reply.text[:500]
        if reply.status_code == 400 and "context length" in detail:
            raise ContextLengthError(f"LM server {url}: {detail}", provider="llama_cpp", status=400)
        if reply.status_code < 500:
            raise InvalidRequestError(f"LM server {url}: HTTP {reply.status_code}: {detail}", provider="llama_cpp",
                                      status=reply.status_code)
        raise ServerError(f"LM server {url}: HTTP {reply.status_code}: {detail}", provider="llama_cpp",
                          status=reply.status_code)

    def stream(self, request: Request) -> Iterator[Any]:
        """Streaming as one final chunk, like the in-process engine."""
        from dspy.lm15 import response_to_events

        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Close the HTTP connection pool."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def dump_state(self) -> dict[str, Any]:
        """JSON state to rebuild this engine (no secrets: the server needs no key on loopback)."""
        return {"api_base": self.api_base, "model": self.model, "seed": self.seed, "prefill": self.prefill,
                "constrain": self.constrain, "timeout_s": self.timeout_s}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "LlamaServerEngine":
        """Rebuild an engine from `dump_state()`."""
        state = dict(state or {})
        if not state.get("api_base"):
            raise ValueError("LlamaServerEngine state needs an api_base")
        return cls(state["api_base"], state.get("model", MODEL_ALIAS), seed=state.get("seed", DEFAULT_SEED),
                   prefill=state.get("prefill", True), constrain=state.get("constrain", "fallback"),
                   timeout_s=state.get("timeout_s", REQUEST_TIMEOUT_S))


def describe(record: ServerRecord) -> str:
    """One line per server for `lm status`."""
    return (f"port {record.port}  pid {record.pid}  threads {record.threads}  {record.api_base}  "
            f"--lm {record.lm_spec}  log {record.log}")


def last_log_lines(record: ServerRecord, lines: int = 20) -> str:
    """The end of a server's log."""
    return log_tail(Path(record.log), lines)
