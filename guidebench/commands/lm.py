"""`guidebench lm serve|stop|status`: the embedded model behind llama-cpp-python's OpenAI-compatible server."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `lm` subcommand; its actions are added when it is used (they read the server's defaults)."""
    parser = subparsers.add_parser("lm", help="serve the embedded model over an OpenAI-compatible API on 127.0.0.1")
    parser.defer(_add_actions)


def _add_actions(parser: argparse.ArgumentParser) -> None:
    """The description and the `serve`, `stop` and `status` actions."""
    from guidebench.lm.server import DEFAULT_PORT, MODEL_ALIAS

    parser.description = ("Start or stop `python -m llama_cpp.server` with the embedded Gemma 3 270M model on "
                          f"127.0.0.1. Then use `--lm openai/{MODEL_ALIAS} --api-base http://127.0.0.1:PORT/v1` "
                          "with eval, compile or search: the same prompts as the in-process model, over HTTP.")
    actions = parser.add_subparsers(dest="lm_action", metavar="ACTION")
    actions.required = True

    serve = actions.add_parser("serve", help="start the LM server",
                               description="Start the LM server and wait until it answers. In the foreground it "
                                           "runs until Ctrl-C or `guidebench lm stop`.")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    serve.add_argument("--threads", type=int, default=None, metavar="N",
                       help="CPU threads for generation (default GUIDEBENCH_LLAMA_THREADS, else up to 4 cores)")
    serve.add_argument("--background", action="store_true",
                       help="return once the server answers and leave it running (idempotent)")
    serve.set_defaults(func=run_serve)

    stop = actions.add_parser("stop", help="stop LM servers started by `lm serve`")
    stop.add_argument("--port", type=int, default=None, help="only the server on this port (default: all)")
    stop.set_defaults(func=run_stop)

    status = actions.add_parser("status", help="list running LM servers")
    status.set_defaults(func=run_status)


def run_serve(args: argparse.Namespace) -> int:
    """Start the server (foreground or background)."""
    from guidebench.lm.server import serve

    record = serve(args.port, args.threads, background=args.background)
    if args.background:
        print(f"LM server on {record.api_base} (pid {record.pid}, {record.threads} threads); "
              f"use --lm {record.lm_spec} --api-base {record.api_base}")
    return 0


def run_stop(args: argparse.Namespace) -> int:
    """Stop recorded servers."""
    from guidebench.lm.server import stop

    stopped = stop(args.port)
    if not stopped:
        print("no LM server was running")
    for record in stopped:
        print(f"stopped the LM server on port {record.port} (pid {record.pid})")
    return 0


def run_status(args: argparse.Namespace) -> int:
    """List running servers."""
    from guidebench.lm.server import describe, running

    records = running()
    if not records:
        print("no LM server is running")
    for record in records:
        print(describe(record))
    return 0
