"""`guidebench predict` (one decision from one turn summary or packet) and `guidebench programs` (the registry)."""

from __future__ import annotations

import argparse
import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pydantic is imported where a file is read: `guidebench --help` stays light
    from pydantic import ValidationError

from guidebench.errors import GuidebenchError, refuse_unfitted

# Text fields of a turn summary that hold JSON: a file may give them as objects; they are stored as
# the pretty JSON text the loop writes.
_JSON_TEXT_FIELDS = ("token_usage", "recent_actions", "turn_plan", "pending_approvals", "pending_tool_inputs",
                     "compaction_events", "diff_summary", "last_guidance_directive")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `predict` and `programs` subcommands."""
    parser = subparsers.add_parser(
        "predict", help="run one decision program on one turn summary (or advisor packet) and print JSON",
        description="Run a registered program on one input and print one JSON object: for a Full Auto program "
                    "the model's decision, the decision enforced by the guardrails and the guardrail audit; for a "
                    "planner program the validated directive.")
    parser.add_argument("--program", default="full_auto.predict", metavar="NAME",
                        help="registered program (default full_auto.predict; see `guidebench programs`)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--summary", type=Path, metavar="FILE.json",
                        help="turn summary JSON (or a decision log line / decision record carrying one)")
    source.add_argument("--packet", type=Path, metavar="FILE.json",
                        help="advisor packet JSON (or a planner record carrying one), for planner programs")
    parser.add_argument("--lm", default="local", metavar="SPEC",
                        help="`local` (embedded Gemma 3 270M, default), `fake`, or a LiteLLM model string")
    parser.add_argument("--api-base", default=None, metavar="URL",
                        help="OpenAI-compatible server for --lm (vLLM, llama.cpp server, Ollama)")
    parser.add_argument("--config", type=Path, default=None, metavar="FILE.json",
                        help="guardrail config JSON (GuardrailConfig fields, or a runs/<run_id>.json run file)")
    parser.add_argument("--no-cache", action="store_true", help="do not answer from DSPy's cache")
    parser.set_defaults(func=run_predict)

    listing = subparsers.add_parser("programs", help="list the registered decision programs",
                                    description="List the programs of the registry with their kind and LM use.")
    listing.add_argument("--kind", choices=("full_auto", "planner"), default=None, help="only programs of this kind")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(func=run_programs)


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GuidebenchError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GuidebenchError(f"cannot read {what} file {path}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GuidebenchError(f"{path}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})") from None


def _first_error(path: Path, exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{path}: field {where}: {err['msg']}{more}"


def _as_summary_text(data: dict[str, Any]) -> dict[str, Any]:
    # Numbers and JSON objects where the loop writes text are accepted and turned into that text.
    fixed = dict(data)
    for name in _JSON_TEXT_FIELDS:
        value = fixed.get(name)
        if isinstance(value, (dict, list)):
            fixed[name] = json.dumps(value, indent=2, ensure_ascii=False)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            fixed[name] = str(value)
    return fixed


def load_summary(path: Path) -> tuple[Any, Optional[Any], Optional[Any]]:
    """(turn summary, guardrail config or None, decision record or None) from a summary/log-line/record file."""
    from pydantic import ValidationError

    from runtime import DecisionRecord, FullAutoTurnSummary

    data = _read_json(path, "summary")
    if not isinstance(data, dict):
        raise GuidebenchError(f"{path}: expected a JSON object (a turn summary), got {type(data).__name__}")
    if "record_id" in data and isinstance(data.get("summary"), dict):
        try:
            record = DecisionRecord.model_validate(data)
        except ValidationError as exc:
            raise GuidebenchError(_first_error(path, exc)) from None
        return record.summary, record.config, record
    if isinstance(data.get("summary"), dict):  # a fullauto-decisions.jsonl line
        data = data["summary"]
    try:
        summary = FullAutoTurnSummary.model_validate(_as_summary_text(data), strict=False)
    except ValidationError as exc:
        raise GuidebenchError(_first_error(path, exc)) from None
    return summary, None, None


def load_config(path: Path) -> Any:
    """A guardrail config from GuardrailConfig JSON or a run file (`runs/<run_id>.json`)."""
    from pydantic import ValidationError

    from runtime import GuardrailConfig, RunFile

    data = _read_json(path, "config")
    if not isinstance(data, dict):
        raise GuidebenchError(f"{path}: expected a JSON object (a guardrail config), got {type(data).__name__}")
    try:
        if "run_id" in data:
            return RunFile.model_validate(data).guardrail_config()
        return GuardrailConfig.model_validate(data)
    except ValidationError as exc:
        raise GuidebenchError(_first_error(path, exc)) from None


def load_packet(path: Path) -> Any:
    """An advisor packet from packet JSON or a planner record carrying one."""
    from pydantic import ValidationError

    from runtime import AdvisorPacket

    data = _read_json(path, "packet")
    if not isinstance(data, dict):
        raise GuidebenchError(f"{path}: expected a JSON object (an advisor packet), got {type(data).__name__}")
    if isinstance(data.get("packet"), dict) and "record_id" in data:
        data = data["packet"]
    try:
        return AdvisorPacket.model_validate(data)
    except ValidationError as exc:
        raise GuidebenchError(_first_error(path, exc)) from None


def _program(name: str) -> tuple[Any, Any]:
    import programs

    try:
        spec = programs.spec(name)
    except programs.UnknownProgramError as exc:
        raise GuidebenchError(str(exc)) from None
    refuse_unfitted(spec.name, "--program")  # the registry's trained programs have no model until a compile fits one
    return spec, spec.build()


def _run(program: Any, inputs: dict[str, Any], lm: Any) -> tuple[Any, dict[str, Any], float]:
    import dspy
    from dspy.utils.exceptions import LMError

    from evals.usage import track_calls

    from guidebench.lm.engine import ModelFileError

    started = time.perf_counter()
    try:
        with dspy.context(lm=lm) if lm is not None else nullcontext(), track_calls() as ledger:
            prediction = program(**inputs)
    except (LMError, ModelFileError) as exc:
        raise GuidebenchError(f"the LM failed: {exc}".split("\n\n")[0]) from None
    except ValueError as exc:
        raise GuidebenchError(f"the program cannot decide on this input: {exc}") from None
    return prediction, ledger.totals(), time.perf_counter() - started


def _make_lm(args: argparse.Namespace, uses_lm: bool) -> Any:
    if not uses_lm:
        return None
    from guidebench.lm.factory import make_lm

    return make_lm(args.lm, api_base=args.api_base, cache=not args.no_cache)


def run_predict(args: argparse.Namespace) -> int:
    """Predict once and print the JSON result."""
    import programs
    from runtime import GuardrailConfig, GuardrailContext, apply_guardrails

    from guidebench.lm.factory import lm_info

    spec, program = _program(args.program)
    if args.summary is not None and spec.kind != "full_auto":
        raise GuidebenchError(f"{spec.name} is a planner program: give it an advisor packet with --packet")
    if args.packet is not None and spec.kind != "planner":
        raise GuidebenchError(f"{spec.name} is a Full Auto program: give it a turn summary with --summary")
    if args.packet is not None:
        packet = load_packet(args.packet)
        lm = _make_lm(args, spec.uses_lm)
        prediction, usage, latency = _run(program, programs.planner_inputs(packet), lm)
        result = {
            "program": spec.name,
            "lm": lm_info(lm) if lm is not None else None,
            "directive": prediction.directive.model_dump(),
            "directive_errors": list(prediction.directive_errors),
            "parse_errors": list(prediction.parse_errors),
            "used_safe_default": bool(prediction.directive_errors or prediction.parse_errors),
            "latency_s": round(latency, 3),
            "usage": usage,
        }
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0

    summary, record_config, record = load_summary(args.summary)
    config = load_config(args.config) if args.config else (record_config or GuardrailConfig())
    lm = _make_lm(args, spec.uses_lm)
    prediction, usage, latency = _run(program, programs.decision_inputs(record or summary), lm)
    decision = prediction.decision
    enforced, audit = apply_guardrails(decision, GuardrailContext.from_summary(summary), config)
    result = {
        "program": spec.name,
        "lm": lm_info(lm) if lm is not None else None,
        "thread_id": summary.thread_id,
        "turn_id": summary.turn_id,
        "model_decision": decision.model_dump(),
        "enforced_decision": enforced.model_dump(exclude={"parse_errors"}),
        "audit": audit.model_dump(),
        "guardrail_config": config.model_dump(),
        "parse_failed": decision.parse_failed,
        "latency_s": round(latency, 3),
        "usage": usage,
    }
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def run_programs(args: argparse.Namespace) -> int:
    """Print the registry."""
    import programs

    specs = programs.specs(args.kind)
    if args.json:
        print(json.dumps([{"name": s.name, "kind": s.kind, "uses_lm": s.uses_lm, "aliases": list(s.aliases),
                           "description": s.description} for s in specs], indent=2))
        return 0
    width = max((len(s.name) for s in specs), default=4)
    print(f"{'NAME':<{width}}  {'KIND':<9}  {'LM':<3}  DESCRIPTION")
    for s in specs:
        aliases = f" (alias: {', '.join(s.aliases)})" if s.aliases else ""
        print(f"{s.name:<{width}}  {s.kind:<9}  {'yes' if s.uses_lm else 'no':<3}  {s.description}{aliases}")
    return 0
