"""Replay: run a program over recorded inputs, apply guardrails exactly as production, score every record.

`replay(program, records)` accepts a registry name or any program object (a `dspy.Module`, a
loaded frozen module adapted to one, or a plain callable taking the program inputs as keywords)
and the records of one kind (`DecisionRecord` or `PlannerRecord`). Records run in parallel
threads, each with its own LM-usage ledger (`evals.usage.track_calls`). DSPy's cache is left as
configured (on by default), so an unchanged program re-evaluates from the cache.

Nothing a program does to one record can abort the run: an exception at any stage becomes that
record's failure score (the production safe default: `pause` with confidence 0, or the safe
no-change directive), with structured diagnostics (error class, message, truncated stack, stage,
LM id), and the aggregate counts such records. `dspy.Evaluate` is not used: with its default
`max_errors` it cancels the whole evaluation after a few failures.

Full Auto records: the model decision goes through `runtime.apply_guardrails` with
`GuardrailContext.from_summary(record.summary)` and the record's own `config`. A program that
replays the log itself (class attribute `replays_log = True`, the `logged` program) already went
through production's guardrails: its enforced decision and audit are the logged ones, and the
guardrails re-applied today are kept alongside (`replay_enforced_action`) and counted in
`summary["logged_enforcement_mismatches"]` when they disagree (for example a run whose run file
was missing and whose config fell back to the defaults).

Besides the metrics of `evals.metrics_fullauto` / `evals.metrics_planner`, a Full Auto replay
reports `logged_agreement` (share of records whose enforced action equals the logged enforced
action: how often the program would have done what the deployed loop did) and every replay the
cost metrics `lm_calls_per_decision`, `tokens_per_decision`, `latency_s_per_decision`,
`cache_hit_rate` and `lm_share` (the share of decisions that called an LM at all: 1 for an LM program,
0 for a rule policy or a trained model, between for a rule-gated program or a cascade), all with
bootstrap intervals.
"""

from __future__ import annotations

import contextvars
import json
import math
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from runtime import (
    DecisionRecord,
    GuardrailAudit,
    GuardrailContext,
    GuidanceDecision,
    PlannerRecord,
    apply_guardrails,
)


from . import metrics_fullauto, metrics_planner, tasks
from .blas import one_blas_thread
from .cycles import CyclesModel
from .data import group_of
from .offpolicy.bandit import observed_improvement
from .slices import slice_values
from .paired import PairedComparison, mcnemar, paired_many
from .progress import progress_bar
from .stats import MetricValue, Statistic, bootstrap_many, mean_of, ratio_of
from .usage import TOTAL_KEYS, track_calls

STACK_CHARS = 4000
MESSAGE_CHARS = 500
COST_METRICS: tuple[str, ...] = ("lm_calls_per_decision", "tokens_per_decision", "latency_s_per_decision",
                                 "cache_hit_rate", "lm_share")


class ReplayStageError(Exception):
    """Raised inside replay to tag the stage at which a record failed."""

    def __init__(self, stage: str, original: BaseException):
        super().__init__(str(original))
        self.stage = stage
        self.original = original


@dataclass
class ReplayResult:
    """One row per record plus aggregates with bootstrap intervals."""

    kind: str
    program: str
    rows: list[dict[str, Any]]
    metrics: dict[str, MetricValue]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of records replayed."""
        return len(self.rows)

    @property
    def errors(self) -> int:
        """Records whose program (or a later stage) raised."""
        return sum(1 for row in self.rows if row.get("error"))

    def metrics_dict(self) -> dict[str, dict[str, Any]]:
        """`{metric: {"value", "ci_low", "ci_high", "n"}}`, JSON-ready."""
        return {name: value.to_dict() for name, value in self.metrics.items()}

    def to_frame(self):
        """The rows as a flat pandas DataFrame (`score.<metric>`, `usage.<key>`, `slice.<name>`, `error.<key>`
        columns)."""
        import pandas as pd

        flat = []
        for row in self.rows:
            item = {k: v for k, v in row.items() if k not in ("scores", "usage", "error", "slices")}
            item.update({f"score.{k}": v for k, v in row.get("scores", {}).items()})
            item.update({f"slice.{k}": v for k, v in (row.get("slices") or {}).items()})
            item.update({f"usage.{k}": v for k, v in (row.get("usage") or {}).items()})
            error = row.get("error") or {}
            for key in ("class", "message", "stage", "lm", "stack"):
                item[f"error.{key}"] = error.get(key)
            flat.append(item)
        return pd.DataFrame(flat)


# ----- program resolution -----------------------------------------------------------------------

def resolve_program(program: Any) -> tuple[Any, str, Optional[str]]:
    """(program instance, display name, kind or None) for a registry name or a program object."""
    if isinstance(program, str):
        import programs

        spec = programs.spec(program)
        return spec.build(), spec.name, spec.kind
    name = getattr(program, "program_name", None) or getattr(program, "name", None) or type(program).__name__
    return program, str(name), getattr(program, "kind", None)


def _kind_of(records: Sequence[Any], declared: Optional[str]) -> str:
    if records:
        first = records[0]
        kind = "full_auto" if isinstance(first, DecisionRecord) else "planner" if isinstance(first, PlannerRecord) else None
        if kind is None:
            raise TypeError(f"records must be DecisionRecord or PlannerRecord, got {type(first).__name__}")
        if any(not isinstance(r, type(first)) for r in records):
            raise TypeError("records must all be of one kind")
        if declared is not None and declared != kind:
            raise ValueError(f"a {declared} program cannot replay {kind} records")
        return kind
    return declared or "full_auto"


def _lm_id() -> str:
    try:
        import dspy

        lm = dspy.settings.lm
        return str(getattr(lm, "model", "") or "none") if lm is not None else "none"
    except Exception:  # diagnostics must never fail the row
        return "unknown"


def _diagnostics(stage: str, exc: BaseException) -> dict[str, Any]:
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "class": type(exc).__name__,
        "message": str(exc)[:MESSAGE_CHARS],
        "stage": stage,
        "lm": _lm_id(),
        "stack": _shortened(stack),
    }


def _shortened(stack: str) -> str:
    """At most STACK_CHARS of a formatted traceback: its first line, then the frames nearest the fault (a deep
    stack, or long paths of a checkout, would otherwise cut the line that says it is a traceback)."""
    if len(stack) <= STACK_CHARS:
        return stack
    head = stack.split("\n", 1)[0] + "\n  ...\n"
    return head + stack[-(STACK_CHARS - len(head)):]


def _stage(name: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        raise ReplayStageError(name, exc) from exc


def _usage_fields(ledger: Any) -> dict[str, Any]:
    totals = ledger.totals() if ledger is not None else {}
    return {key: totals.get(key, 0) for key in TOTAL_KEYS}


# ----- one record -------------------------------------------------------------------------------

def _safe_decision() -> GuidanceDecision:
    return GuidanceDecision(action="pause", next_input="", reason="program failed; safe default", confidence=0.0)


def _logged_enforcement(record: DecisionRecord) -> Optional[tuple[GuidanceDecision, GuardrailAudit]]:
    logged = record.logged
    if logged is None:
        return None
    confidence = record.logged_enforced_confidence()  # a null one was a NaN or infinite f32
    enforced = GuidanceDecision(action=logged.action, next_input=logged.next_input_preview, reason=logged.reason,
                                confidence=confidence)
    audit = record.guardrail or GuardrailAudit(
        triggered=False, rule=None, original_action=logged.model_action,
        original_confidence=logged.model_confidence, enforced_action=logged.action,
        enforced_confidence=logged.confidence)
    return enforced, audit


def _replay_decision(program: Any, record: DecisionRecord, replays_log: bool,
                     answered: Optional["_Answer"] = None) -> dict[str, Any]:
    import programs

    started = time.perf_counter()
    error: Optional[dict[str, Any]] = None
    ledger = None
    model = _safe_decision()
    pred: Any = None
    try:
        if answered is None:
            inputs = _stage("inputs", lambda: programs.decision_inputs(record))
            with track_calls() as ledger:
                pred = _stage("program", lambda: program(**inputs))
        else:
            pred = answered.prediction
        model = _stage("parse", lambda: metrics_fullauto.model_decision(pred))
    except ReplayStageError as exc:
        error = _diagnostics(exc.stage, exc.original)
        model = _safe_decision()
    latency = time.perf_counter() - started + (answered.latency if answered is not None else 0.0)
    context = GuardrailContext.from_summary(record.summary)
    enforced, audit = apply_guardrails(model, context, record.config)
    replay_enforced = enforced.action
    guardrail_source = "replay"
    if replays_log and error is None:
        logged = _logged_enforcement(record)
        if logged is not None:
            enforced, audit = logged
            guardrail_source = "log"
    outcome = metrics_fullauto.DecisionOutcome(
        model=model, enforced=enforced, audit=audit, label=record.label, config=record.config, context=context,
        error=f"{error['class']}: {error['message']}" if error else None)
    scores = metrics_fullauto.score_outcome(outcome)
    label = record.label
    logged_action = record.logged.action if record.logged else None
    scores["logged_agreement"] = float(enforced.action == logged_action) if logged_action else math.nan
    return {
        "record_id": record.record_id,
        "group_id": group_of(record),  # the dataset's split group (the thread)
        "turn_id": record.turn_id,
        "model_action": model.action,
        "model_confidence": float(model.confidence),
        "model_reason": model.reason,
        "model_next_input": model.next_input,
        "parse_errors": json.dumps(list(model.parse_errors)),
        "enforced_action": enforced.action,
        "enforced_confidence": float(enforced.confidence),
        "enforced_next_input": enforced.next_input,
        "guardrail_triggered": bool(audit.triggered),
        "guardrail_rule": audit.rule,
        "overridden": bool(outcome.overridden),
        "audit": audit.model_dump_json(),
        "guardrail_source": guardrail_source,
        # which path decided, for a program that says so (full_auto.hybrid: a rule's name or "lm")
        "decided_by": _decided_by(pred),
        "replay_enforced_action": replay_enforced,
        "logged_action": logged_action,
        "logged_model_action": record.logged.model_action if record.logged else None,
        "label_action": label.action if label else None,
        "label_source": label.source if label else None,
        "slices": slice_values(record, "full_auto"),  # what a post-mortem slices by (evals.slices)
        "scores": scores,
        "feedback": metrics_fullauto.feedback(outcome),
        "usage": _usage_fields(ledger),
        "latency_s": latency,
        "error": error,
    }


def _decided_by(pred: Any) -> Optional[str]:
    value = getattr(pred, "decided_by", None) if pred is not None else None
    return value if isinstance(value, str) else None


def _replay_planner(program: Any, record: PlannerRecord, rollouts: int, cycles: Optional[CyclesModel],
                    replays_log: bool, answered: Optional["_Answer"] = None) -> dict[str, Any]:
    import programs

    started = time.perf_counter()
    error: Optional[dict[str, Any]] = None
    ledger = None
    pred: Any = None
    try:
        if answered is None:
            inputs = _stage("inputs", lambda: programs.planner_inputs(record))
            with track_calls() as ledger:
                pred = _stage("program", lambda: program(**inputs))
        else:
            pred = answered.prediction
    except ReplayStageError as exc:
        error = _diagnostics(exc.stage, exc.original)
    latency = time.perf_counter() - started + (answered.latency if answered is not None else 0.0)
    outcome = metrics_planner.outcome_of(
        record, pred, error=f"{error['class']}: {error['message']}" if error else None, rollouts=rollouts,
        cycles=cycles, replays_log=replays_log)
    try:
        scores = metrics_planner.score_outcome(outcome)
        note = metrics_planner.feedback(outcome)
    except Exception as exc:  # a packet the cycles model cannot take is a scored failure, not a crash
        error = error or _diagnostics("metrics", exc)
        outcome = metrics_planner.outcome_of(record, None, error=f"{error['class']}: {error['message']}",
                                             rollouts=rollouts, cycles=cycles)
        scores = metrics_planner.score_outcome(outcome)
        note = metrics_planner.feedback(outcome)
    need = metrics_planner.pivot_requirement(record.packet)
    directive = outcome.directive
    return {
        "record_id": record.record_id,
        "group_id": record.episode_id,
        "iteration_id": record.iteration_id,
        "directive": json.dumps(directive, sort_keys=True) if directive is not None else None,
        "strategy_family": (directive or {}).get("strategy_family"),
        "expected_effect_cycles": (directive or {}).get("expected_effect_cycles"),
        "schema_errors": json.dumps(list(outcome.schema_errors)),
        "parse_errors": json.dumps(list(outcome.parse_errors)),
        "pivot_required": need.required,
        "pivot_reasons": json.dumps(list(need.reasons)),
        "current_family": need.current_family,
        "logged_family": record.outcome.family if record.outcome else None,
        "logged_cycles": record.outcome.cycles if record.outcome else None,
        # what the loop runner carries out (None: it rejects the directive), for the off-policy estimates
        "applied_family": metrics_planner.applied_family(outcome, need),
        "allowed_families": json.dumps(list(need.allowed)),
        "compliant_families": json.dumps(list(metrics_planner.compliant_families(record.packet))),
        "best_cycles": record.packet.best_cycles,
        "observed_improvement": observed_improvement(record),
        "cycles_model": outcome.cycles_model.name,
        "unscored": outcome.extra.get("unscored"),
        # why the record has no objective (`metrics_planner.LEFT_OUT`), None when it has one
        "left_out": metrics_planner.left_out_reason(outcome, scores),
        "slices": slice_values(record, "planner"),  # what a post-mortem slices by (evals.slices)
        "scores": scores,
        "feedback": note,
        "usage": _usage_fields(ledger),
        "latency_s": latency,
        "error": error,
    }


@dataclass
class _Answer:
    """A program's prediction for one record, made in a batch, and that record's share of the batch's time."""

    prediction: Any
    latency: float


BATCH = 512  # records a batch-answering program answers per call (the progress bar moves between batches)


def _batch_answers(instance: Any, kind: str, records: Sequence[Any]) -> Optional[list[Optional[_Answer]]]:
    """Every record's prediction from a program that answers many at once (`predict_batch`: a trained model, which
    calls no LM), so replay makes no DSPy call, and writes no trace, per record; None for any other program.

    A record whose inputs cannot be built, or a batch that raises, is left to the one-record path (None in its
    place), which scores it as that record's failure with its diagnostics, as for any program.
    """
    predict = getattr(instance, "predict_batch", None)
    if not callable(predict):
        return None
    import programs

    inputs_of = programs.decision_inputs if kind == "full_auto" else programs.planner_inputs
    answers: list[Optional[_Answer]] = [None] * len(records)
    for start in range(0, len(records), BATCH):
        began = time.perf_counter()
        chunk: list[tuple[int, dict[str, Any]]] = []
        for index in range(start, min(start + BATCH, len(records))):
            try:
                chunk.append((index, inputs_of(records[index])))
            except Exception:  # noqa: BLE001 - the one-record path reports it with its stage
                continue
        try:
            predictions = predict([inputs for _, inputs in chunk])
        except Exception:  # noqa: BLE001 - e.g. an unfitted model: each record fails on its own path
            predictions = [None] * len(chunk)
        share = (time.perf_counter() - began) / max(1, len(chunk))
        for (index, _), prediction in zip(chunk, predictions):
            if prediction is not None:
                answers[index] = _Answer(prediction, share)
    return answers


# ----- aggregates -------------------------------------------------------------------------------

def cost_statistics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Statistic]:
    """LM cost per decision as resamplable statistics: calls, tokens, seconds, cache-hit rate, share sent to an LM."""
    usage = [row.get("usage") or {} for row in rows]
    return {
        "lm_calls_per_decision": mean_of([float(u.get("lm_calls", 0)) for u in usage]),
        "tokens_per_decision": mean_of([float(u.get("total_tokens", 0)) for u in usage]),
        "latency_s_per_decision": mean_of([float(row.get("latency_s", math.nan)) for row in rows]),
        "cache_hit_rate": ratio_of([float(u.get("cache_hits", 0)) for u in usage],
                                   [float(u.get("lm_calls", 0)) for u in usage]),
        "lm_share": mean_of([float(u.get("lm_calls", 0) > 0) for u in usage]),
    }


def statistics(kind: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Statistic]:
    """Every aggregate of a replay (quality metrics of the kind, then cost) as resamplable statistics."""
    if kind == "full_auto":
        quality = metrics_fullauto.statistics(rows)
        quality["logged_agreement"] = mean_of([float(r["scores"].get("logged_agreement", math.nan)) for r in rows])
    else:
        quality = metrics_planner.statistics(rows)
    return {**quality, **cost_statistics(rows)}


def _summary(kind: str, rows: Sequence[Mapping[str, Any]], wall_s: float, threads: int) -> dict[str, Any]:
    errors: dict[str, int] = {}
    stages: dict[str, int] = {}
    for row in rows:
        if row.get("error"):
            errors[row["error"]["class"]] = errors.get(row["error"]["class"], 0) + 1
            stages[row["error"]["stage"]] = stages.get(row["error"]["stage"], 0) + 1
    usage = {key: sum((row.get("usage") or {}).get(key, 0) for row in rows) for key in TOTAL_KEYS}
    summary: dict[str, Any] = {
        "n_records": len(rows),
        "n_errors": sum(errors.values()),
        "errors_by_class": errors,
        "errors_by_stage": stages,
        "n_parse_failures": sum(1 for row in rows if row["scores"].get("parse_failure_rate") == 1.0),
        "n_labeled": sum(1 for row in rows if not math.isnan(row["scores"].get("objective", math.nan))),
        "usage": usage,
        "wall_s": round(wall_s, 4),
        "threads": threads,
        "lm": _lm_id(),
    }
    if kind == "full_auto":
        summary["n_overridden"] = sum(1 for row in rows if row["overridden"])
        summary["overrides_by_rule"] = {}
        for row in rows:
            if row["overridden"]:
                rule = row["guardrail_rule"] or "unknown"
                summary["overrides_by_rule"][rule] = summary["overrides_by_rule"].get(rule, 0) + 1
        decided = [row["decided_by"] for row in rows if row.get("decided_by")]
        if decided:  # a program that routes turns (full_auto.hybrid): how many each rule and the LM decided
            summary["decided_by"] = {path: decided.count(path) for path in sorted(set(decided))}
        summary["logged_enforcement_mismatches"] = sum(
            1 for row in rows if row["guardrail_source"] == "log" and row["replay_enforced_action"] != row["enforced_action"])
    return summary


# ----- the harness ------------------------------------------------------------------------------

TASK_RECORDS = 4 * BATCH  # records per cluster task: whole batches, so a batch-answering program sees the batches
# one process gives it (its answers, and so its rows, are the same)


class ReplayChunk:
    """One cluster task of a replay (`evals.tasks`): a chunk of records, replayed and scored as one process does."""

    def __init__(self, instance: Any, kind: str, replays_log: bool, rollouts: int,
                 cycles_model: Optional[CyclesModel]) -> None:
        self.instance, self.kind, self.replays_log = instance, kind, replays_log
        self.rollouts, self.cycles_model = rollouts, cycles_model

    def __call__(self, records: Sequence[Any]) -> list[dict[str, Any]]:
        with one_blas_thread():
            answers = _batch_answers(self.instance, self.kind, records) or [None] * len(records)
        if self.kind == "full_auto":
            return [_replay_decision(self.instance, record, self.replays_log, answer)
                    for record, answer in zip(records, answers)]
        return [_replay_planner(self.instance, record, self.rollouts, self.cycles_model, self.replays_log, answer)
                for record, answer in zip(records, answers)]


def replay(program: Any, records: Iterable[Any], *, threads: int = 1, progress: bool = True,
           n_resamples: int = 1000, seed: int = 0, rollouts: int = metrics_planner.ROLLOUTS,
           name: Optional[str] = None, cycles_model: Optional[CyclesModel] = None) -> ReplayResult:
    """Run a program over records (in parallel threads), apply guardrails as production, score each record.

    `cycles_model` estimates a planner's improvement of the best (`evals.cycles`; None: the simulator, which
    applies only to packets with a performance profile)."""
    records = list(records)
    instance, program_name, declared = resolve_program(program)
    kind = _kind_of(records, declared)
    replays_log = bool(getattr(instance, "replays_log", False))
    if kind == "full_auto":
        run_one = lambda record, answer: _replay_decision(instance, record, replays_log, answer)  # noqa: E731
    else:
        run_one = lambda record, answer: _replay_planner(instance, record, rollouts, cycles_model,  # noqa: E731
                                                         replays_log, answer)

    rows: list[Optional[dict[str, Any]]] = [None] * len(records)
    started = time.perf_counter()
    if tasks.distributed() and len(records) > 1:  # a cluster's tasks: chunks of records, rows back in order
        work = ReplayChunk(instance, kind, replays_log, rollouts, cycles_model)
        parts = tasks.task_map(work, [records[a:b] for a, b in tasks.chunks(len(records), TASK_RECORDS)])
        rows = [row for part in parts for row in part]
        return _result(kind, rows, program_name, name, time.perf_counter() - started, threads,
                       n_resamples, seed, replays_log, cycles_model)
    bar = progress_bar(len(records), f"replay {name or program_name}", progress)
    lock = threading.Lock()
    with one_blas_thread():  # a trained model's scores: small products (evals.blas)
        answers = _batch_answers(instance, kind, records) or [None] * len(records)

    def task(index: int) -> None:
        rows[index] = run_one(records[index], answers[index])
        with lock:
            bar.update(1)

    threads = max(1, int(threads))
    try:
        if threads == 1 or len(records) <= 1:
            for index in range(len(records)):
                task(index)
        else:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="replay") as pool:
                # Each task runs in a copy of this context, so DSPy settings made with dspy.context()
                # and the active usage ledgers reach the worker threads.
                futures = [pool.submit(contextvars.copy_context().run, task, index) for index in range(len(records))]
                for future in futures:
                    future.result()
    finally:
        bar.close()
    return _result(kind, rows, program_name, name, time.perf_counter() - started, threads, n_resamples,
                   seed, replays_log, cycles_model)


def _result(kind: str, rows: Sequence[Optional[dict[str, Any]]], program_name: str,
            name: Optional[str], wall: float, threads: int, n_resamples: int, seed: int, replays_log: bool,
            cycles_model: Optional[CyclesModel]) -> ReplayResult:
    """The replay's metrics (bootstrap intervals) and summary from its rows."""
    done = [row for row in rows if row is not None]
    with one_blas_thread():
        metrics = bootstrap_many(statistics(kind, done), len(done), n_resamples=n_resamples, seed=seed,
                                 groups=resampling_groups(kind, done))
    summary = _summary(kind, done, wall, threads)
    summary.update(program=name or program_name, kind=kind, n_resamples=n_resamples, seed=seed,
                   replays_log=replays_log)
    if kind == "planner":
        summary["cycles_model"] = cycles_summary(cycles_model or metrics_planner.SimulatorCycles(), done)
    return ReplayResult(kind=kind, program=name or program_name, rows=done, metrics=metrics, summary=summary)


def cycles_summary(model: CyclesModel, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What estimated a planner replay's improvement, how many records it estimated, and how many records have
    no objective (`unscored`), by reason (`left_out`) and in words (`left_out_notes`)."""
    reasons: dict[str, int] = {}
    for row in rows:
        if row.get("left_out"):
            reasons[row["left_out"]] = reasons.get(row["left_out"], 0) + 1
    return {"name": model.name, "estimator": model.estimator, "fit_key": getattr(model, "fit_key", None),
            "estimated": sum(1 for r in rows if not math.isnan(r["scores"].get("cycles_improvement", math.nan))),
            "unscored": sum(reasons.values()), "left_out": reasons,
            "left_out_notes": metrics_planner.left_out_notes(rows, model.name)}


def resampling_groups(kind: str, rows: Sequence[Mapping[str, Any]]) -> Optional[list[str]]:
    """The unit of resampling and of the paired test: a planner record's episode (its attempts share a kernel and
    a history, so they are not independent), None for Full Auto (records one by one)."""
    if kind != "planner":
        return None
    return [str(row.get("group_id") or row["record_id"]) for row in rows]


# ----- paired comparison ------------------------------------------------------------------------

def compare(a: ReplayResult, b: ReplayResult, *, n_resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Paired comparison a - b on the same records: every metric's difference, interval and p-value,
    plus McNemar's test on action accuracy (Full Auto) or schema validity (planner).

    A planner's comparison takes whole episodes as its unit (the sign-flip test swaps an episode's outcomes
    together, the interval is a cluster bootstrap: `evals.stats`), compares means on the records both programs
    score, and with fewer than `evals.stats.MIN_GROUPS` episodes gives "too few episodes" (no p, no interval)."""
    if a.kind != b.kind:
        raise ValueError(f"cannot compare a {a.kind} replay with a {b.kind} replay")
    ids_a = [row["record_id"] for row in a.rows]
    by_id_b = {row["record_id"]: row for row in b.rows}
    if set(ids_a) != set(by_id_b) or len(ids_a) != len(by_id_b):
        raise ValueError("paired comparison needs the same records in both replays "
                         f"({len(ids_a)} vs {len(by_id_b)} records, {len(set(ids_a) ^ set(by_id_b))} differ)")
    rows_b = [by_id_b[record_id] for record_id in ids_a]
    # a planner's episodes are the unit of both the test and the interval; its means compare the records both score
    with one_blas_thread():
        diffs: dict[str, PairedComparison] = paired_many(statistics(a.kind, a.rows), statistics(b.kind, rows_b),
                                                         len(ids_a), n_resamples=n_resamples, seed=seed,
                                                         groups=resampling_groups(a.kind, a.rows),
                                                         common=a.kind == "planner")
    binary = "action_accuracy" if a.kind == "full_auto" else "schema_validity"
    pairs = [(ra["scores"].get(binary), rb["scores"].get(binary)) for ra, rb in zip(a.rows, rows_b)]
    pairs = [(x, y) for x, y in pairs if x is not None and y is not None and not math.isnan(x) and not math.isnan(y)]
    test = mcnemar([x == 1.0 for x, _ in pairs], [y == 1.0 for _, y in pairs])
    return {"metrics": diffs, "mcnemar": {"metric": binary, **test.model_dump()}}
