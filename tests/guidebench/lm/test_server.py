"""LM faults: an injected LM that times out, raises provider errors and rate limits, loses its connection,
and returns empty or garbage text.

- `guidebench eval` (the `evaluate` path) completes; every failed record is counted, classified and
  diagnosed (class, stage, message, LM id), and scored as the production safe default (`pause`).
- A compile retries with backoff (the LM's own per-call retries, then the whole optimizer again after
  transient failures, honouring `retry_after`) and keeps its progress: finished LM calls are never made
  again, not by a retry and not by `--resume` after the retries ran out.
- The exported runtime module answers `pause` for every fault and never raises.

The injected LM is a real `dspy.LM` with a custom engine: DSPy's error boundary turns the engine's
provider errors into its public LM errors exactly as it does for a remote provider.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import dspy
import mlflow
import pytest
from dspy import lm15
from dspy.clients.engines.base import validate_request
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

import optimizers
import optimizers.base as optimizers_base
import programs
from evals import metrics_fullauto
from evals.usage import instrument
from frozen_support import export_program, summary
from guidebench.lm.fake import fake_answer, input_sections
from guidebench.lm.engine import message_text
from optimizer_support import decision_examples, decision_records, make_dataset
from optimizers.checkpoint import Checkpoint
from reliability_ledger import record as ledger
from runtime import GuardrailConfig, load_frozen
from runtime.frozen.modules import FrozenPlannerModule

FAULTS = ("timeout", "rate_limit", "server", "auth", "connection", "empty", "garbage")
RAISING = {"timeout": "LMTimeoutError", "rate_limit": "LMRateLimitError", "server": "LMServerError",
           "auth": "LMAuthError", "connection": "LMUnexpectedError"}
GARBAGE = "lorem ipsum ]] ## action ## [[ {\"confidence\": \"very\"} ```json\n{oops``` \x00\x07 \ud7ff end"


def raise_fault(fault: str) -> None:
    """Raise what a provider client raises for each fault."""
    if fault == "timeout":
        raise lm15.TimeoutError("the provider did not answer within 30 s", provider="injected", status=504)
    if fault == "rate_limit":
        raise lm15.RateLimitError("too many requests", provider="injected", status=429, retry_after=0.02)
    if fault == "server":
        raise lm15.ServerError("upstream overloaded", provider="injected", status=503)
    if fault == "auth":
        raise lm15.AuthError("invalid API key", provider="injected", status=401)
    if fault == "connection":
        raise ConnectionResetError("connection reset by peer")


class FaultEngine:
    """A DSPy engine answering like the fake model, except where `plan(call_index, inputs)` names a fault."""

    def __init__(self, plan: Optional[Callable[[int, dict[str, str]], Optional[str]]] = None) -> None:
        self.plan = plan or (lambda index, inputs: None)
        self.calls = 0
        self.faults: Counter[str] = Counter()
        self.answered: list[str] = []  # prompts that got an answer
        self._lock = threading.Lock()

    def complete(self, request: Any) -> Response:
        """Answer, or fail as planned."""
        validate_request(request)
        last_user = next((message_text(m) for m in reversed(request.messages) if m.role == "user"), "")
        with self._lock:
            index = self.calls
            self.calls += 1
        fault = self.plan(index, input_sections(last_user))
        if fault is not None:
            with self._lock:
                self.faults[fault] += 1
        if fault in RAISING:
            raise_fault(fault)
        text = "" if fault == "empty" else GARBAGE if fault == "garbage" else fake_answer(request)
        with self._lock:
            self.answered.append(json.dumps([request.system if isinstance(request.system, str) else None,
                                             [message_text(m) for m in request.messages]]))
        return Response(id=f"fault-{index}", model=request.model, message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=len(last_user.split()),
                                                          output_tokens=len(text.split())))

    def stream(self, request: Any) -> Iterator[Any]:
        """One final chunk."""
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release."""

    def dump_state(self) -> dict[str, Any]:
        """JSON state (the plan is code and is not saved)."""
        return {}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> "FaultEngine":
        """A healthy engine."""
        return cls()


def fault_lm(engine: FaultEngine, *, retries: int = 0, cache: bool = False) -> dspy.LM:
    """The injected LM, instrumented like every LM of the workbench."""
    return instrument(dspy.LM("injected/faulty", engine=engine, temperature=0.2, max_tokens=512, cache=cache,
                              num_retries=retries))


def by_turn(faults: dict[str, str]) -> Callable[[int, dict[str, str]], Optional[str]]:
    """A plan failing every call about a given turn id the same way (independent of call order and threads)."""
    return lambda index, inputs: faults.get(inputs.get("turn_id", ""))


# ----- evaluation ------------------------------------------------------------------------------------

@pytest.fixture
def restore_lm() -> Iterator[None]:
    """The commands configure DSPy's LM globally; put the previous one back after the test."""
    previous = dspy.settings.lm
    yield
    dspy.configure(lm=previous)


@pytest.fixture
def eval_data(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A dataset whose test split has one record per fault and a few healthy ones; the plan by turn id."""
    records = decision_records(len(FAULTS) + 3, offset=300)
    data = tmp_path / "data"
    from evals.data import save_dataset

    save_dataset(data, "fullauto", {"train": records[:2], "dev": records[:2], "test": records})
    plan = {record.turn_id: fault for record, fault in zip(records, FAULTS)}
    return data, plan


def test_eval_completes_with_every_fault_counted_and_diagnosed(eval_data, tmp_path, monkeypatch, restore_lm):
    from guidebench.lm import factory as lm_module
    from guidebench.evaluation import evaluate

    data, plan = eval_data
    engine = FaultEngine(by_turn(plan))
    injected = fault_lm(engine)
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(lm_module, "configure_lm", lambda spec, **kw: dspy.configure(lm=injected) or injected)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    output = evaluate("full_auto.predict", data, split="test", lm="injected", threads=4, out_dir=tmp_path / "out",
                      tracking_uri=uri, progress=False, n_resamples=50)
    result = output.result
    assert result.n == len(FAULTS) + 3 and set(engine.faults) == set(FAULTS)
    rows = {row["turn_id"]: row for row in result.rows}
    for turn_id, fault in plan.items():
        row = rows[turn_id]
        # Whatever went wrong, the model's decision is the safe default and nothing continues.
        assert (row["model_action"], row["model_confidence"]) == ("pause", 0.0), (fault, row)
        assert row["enforced_action"] != "continue"
        if fault in RAISING:
            error = row["error"]
            assert error["class"] == RAISING[fault] and error["stage"] == "program", (fault, error)
            assert error["lm"] == "injected/faulty" and error["message"] and "Traceback" in error["stack"]
        else:  # empty or garbage text: no exception, a parse failure with its reason
            assert row["error"] is None and json.loads(row["parse_errors"]), (fault, row)
    healthy = [row for turn_id, row in rows.items() if turn_id not in plan]
    assert healthy and all(row["error"] is None and json.loads(row["parse_errors"]) == [] for row in healthy)
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["n_errors"] == len(RAISING) and s["errors_by_stage"] == {"program": len(RAISING)}
    assert s["errors_by_class"] == dict(Counter(RAISING.values()))
    assert s["n_parse_failures"] >= 2  # the empty and the garbage answers at least
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(output.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["n_errors"] == len(RAISING)
    frame = result.to_frame()
    assert int(frame["error.class"].notna().sum()) == len(RAISING)
    ledger("faults", scenario="eval", injected=dict(engine.faults), records=result.n,
           failed_records=len(plan), diagnosed=len(plan), undiagnosed=0, lost_records=len(FAULTS) + 3 - result.n,
           continued_on_fault=sum(rows[t]["enforced_action"] == "continue" for t in plan))


def test_eval_rides_out_transient_faults_with_the_lms_own_retries(eval_data, monkeypatch):
    """With per-call retries (as a remote LM has), a rate limit or timeout that clears costs a retry, not a record."""
    from evals.replay import replay
    from evals.data import load_records

    data, _ = eval_data
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def once(index: int, inputs: dict[str, str]) -> Optional[str]:
        with lock:
            seen[inputs.get("turn_id", "")] += 1
            first = seen[inputs.get("turn_id", "")] == 1
            fault = "rate_limit" if len(seen) % 2 else "timeout"
        return fault if first else None

    engine = FaultEngine(once)
    sleeps: list[float] = []
    monkeypatch.setattr("dspy.clients.execution.time.sleep", lambda s: sleeps.append(s))
    records = load_records(data, "test")
    with dspy.context(lm=fault_lm(engine, retries=2)):
        result = replay("full_auto.predict", records, progress=False, n_resamples=20)
    assert result.summary["n_errors"] == 0 and result.summary["n_parse_failures"] == 0
    assert sum(engine.faults.values()) == len(records) and engine.calls == 2 * len(records)
    # DSPy waits between attempts: the provider's retry_after for a rate limit, exponential backoff otherwise.
    assert sorted(set(sleeps)) == [0.02, 1] and len(sleeps) == len(records)
    ledger("faults", scenario="eval, per-call retries", injected=dict(engine.faults), records=result.n,
           failed_records=result.summary["n_errors"], lost_records=0)


# ----- compile ---------------------------------------------------------------------------------------

TRAIN = decision_examples(8)
DEV = decision_examples(4, offset=100)


def _bootstrap() -> optimizers.Recipe:
    return optimizers.get("bootstrap_fewshot")().with_overrides(max_bootstrapped_demos=3, max_labeled_demos=3)


def test_compile_retries_transient_failures_with_backoff_and_repeats_no_finished_call(tmp_path, monkeypatch):
    clean_engine = FaultEngine()
    with dspy.context(lm=fault_lm(clean_engine, cache=True)):
        clean = _bootstrap().compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=0,
                                     checkpoint=Checkpoint(tmp_path / "clean"))
    # The same compile while the provider rate-limits, times out and drops the connection for a while.
    outage = {2: "rate_limit", 3: "timeout", 5: "connection", 6: "server"}
    engine = FaultEngine(lambda index, inputs: outage.get(index))
    sleeps: list[float] = []
    monkeypatch.setattr(optimizers_base.time, "sleep", lambda s: sleeps.append(s))
    with dspy.context(lm=fault_lm(engine, cache=True)):
        result = _bootstrap().compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=0,
                                      checkpoint=Checkpoint(tmp_path / "faulty"), backoff_s=0.5)
    # Swallowed by DSPy's bootstrap, the failures would have cost demos: the retries make the result whole.
    # The outage outlasts the first retry (calls 5 and 6 fail during it): backoff doubles each time.
    assert result.retries == 2 and result.transient_lm_errors == len(outage)
    assert sleeps == [0.5, 1.0]
    assert result.program.dump_state() == clean.program.dump_state()
    assert result.summary()["retries"] == 2 and result.summary()["transient_lm_errors"] == len(outage)
    # Progress kept: no answered request reached the LM twice (the cache answered it); only failed ones ran again.
    assert len(engine.answered) == len(set(engine.answered))
    assert engine.calls == len(engine.answered) + len(outage)
    ledger("faults", scenario="compile, transient outage", injected=dict(engine.faults), retries=result.retries,
           backoff_s=sleeps, repeated_lm_calls=len(engine.answered) - len(set(engine.answered)),
           differs_from_fault_free=int(result.program.dump_state() != clean.program.dump_state()))


def test_backoff_grows_and_honours_retry_after(tmp_path, monkeypatch):
    engine = FaultEngine(lambda index, inputs: "rate_limit" if index < 30 else None)
    sleeps: list[float] = []
    monkeypatch.setattr(optimizers_base.time, "sleep", lambda s: sleeps.append(s))
    with dspy.context(lm=fault_lm(engine, cache=True)):
        result = _bootstrap().compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=0,
                                      checkpoint=Checkpoint(tmp_path / "ckpt"), backoff_s=0.01, retries=5)
    assert result.retries >= 3 and sleeps[:3] == [0.02, 0.02, 0.04] and sleeps == sorted(sleeps)
    assert result.transient_lm_errors == 30 and len(engine.answered) == len(set(engine.answered))
    ledger("faults", scenario="compile, rate limited", injected=dict(engine.faults), retries=result.retries,
           backoff_s=sleeps, repeated_lm_calls=len(engine.answered) - len(set(engine.answered)))


def test_a_non_transient_failure_is_not_retried(tmp_path, monkeypatch):
    engine = FaultEngine(lambda index, inputs: "auth")
    sleeps: list[float] = []
    monkeypatch.setattr(optimizers_base.time, "sleep", lambda s: sleeps.append(s))
    with dspy.context(lm=fault_lm(engine, cache=True)), pytest.raises(Exception) as info:
        _bootstrap().compile(programs.get("full_auto.predict"), TRAIN, DEV, metrics_fullauto.metric, seed=0,
                             checkpoint=Checkpoint(tmp_path / "ckpt"))
    assert "invalid API key" in str(info.value) and sleeps == []
    ledger("faults", scenario="compile, bad API key", injected=dict(engine.faults), retries=0,
           failed_loudly=1, silently_degraded=0)


def test_an_outage_longer_than_the_retries_fails_the_run_and_resume_finishes_without_repeating(tmp_path, monkeypatch,
                                                                                                restore_lm):
    from guidebench.lm import factory as lm_module
    from guidebench.compile import CompileRequest, run_compile
    from guidebench.lm.factory import configure_disk_cache

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    configure_disk_cache()
    monkeypatch.setattr(optimizers_base, "RETRY_BACKOFF_S", 0.01)
    data = make_dataset(tmp_path / "data", train=8, dev=4, test=4)
    down = {"on": True}
    engine = FaultEngine(lambda index, inputs: "server" if down["on"] and index >= 1 else None)
    injected = fault_lm(engine, cache=True)
    monkeypatch.setattr(lm_module, "configure_lm", lambda spec, **kw: dspy.configure(lm=injected) or injected)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    request = CompileRequest(program="full_auto.predict", optimizer="bootstrap_fewshot", data=str(data), lm="fake",
                             tracking_uri=uri, recipe_settings={"max_bootstrapped_demos": 2, "max_errors": 3})
    with pytest.raises(Exception, match="upstream overloaded"):
        run_compile(request, progress=False)
    client = mlflow.MlflowClient(tracking_uri=uri)
    failed = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(failed) == 1 and failed[0].info.status == "FAILED"
    run_id = failed[0].info.run_id
    before = list(engine.answered)
    # The compile retried (with backoff) before giving up: each attempt met max_errors server errors.
    assert len(before) == 1 and engine.faults["server"] == 3 * (1 + optimizers_base.COMPILE_RETRIES)
    # The provider is back: --resume finishes the run, and no call answered before is made again.
    down["on"] = False
    outcome = run_compile(request, resume_run_id=run_id, progress=False)
    resumed = engine.answered[len(before):]
    assert not set(before) & set(resumed)
    run = client.get_run(run_id)
    assert outcome.run_id == run_id and run.info.status == "FINISHED"
    assert outcome.summary["compile"]["usage"]["cache_hits"] >= 1
    ledger("faults", scenario="compile, outage beyond retries, then --resume", injected=dict(engine.faults),
           run_marked_failed=1, resumed_to_finished=1, repeated_lm_calls=len(set(before) & set(resumed)))


# ----- the runtime module ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return export_program("full_auto.predict", tmp_path_factory.mktemp("export") / "X").path


@pytest.mark.parametrize("fault", FAULTS)
def test_the_runtime_module_answers_pause_for_every_fault(exported: Path, fault: str):
    engine = FaultEngine(lambda index, inputs: fault)
    module = load_frozen(exported, lm=fault_lm(engine))
    decision, audit, record = module(summary(), GuardrailConfig(), run_id="fullauto-faults", sequence_id=1)
    assert engine.faults[fault] >= 1
    assert (decision.action, audit.original_action, audit.original_confidence) == ("pause", "pause", 0.0)
    assert audit.rule == "low_confidence" and decision.next_input == ""
    assert record.parse_diagnostics and record.parse_diagnostics["parse_errors"]
    if fault in RAISING:
        assert any(RAISING[fault] in error for error in record.parse_diagnostics["parse_errors"])
    ledger("faults", scenario="runtime module", injected={fault: engine.faults[fault]}, answered_pause=1,
           raised=0)


def test_the_runtime_planner_answers_its_safe_directive_for_every_fault(tmp_path: Path):
    from runtime.advisor import AdvisorPacket, FamilyConstraints

    folder = export_program("planner.predict", tmp_path / "planner", name="plan").path
    packet = AdvisorPacket(goal="best", best_cycles=1500, strategy_family_constraints=FamilyConstraints(
        allowed_families=["family:schedule", "family:reduce_loads", "family:break_deps"],
        blocked_families=["family:schedule"], current_family="family:schedule", current_family_streak_len=2,
        max_consecutive=2))
    for fault in FAULTS:
        module = load_frozen(folder, lm=fault_lm(FaultEngine(lambda index, inputs, f=fault: f)))
        assert isinstance(module, FrozenPlannerModule)
        directive, errors, used_default = module(packet)
        assert used_default and errors, fault
        assert directive.strategy_family != "family:schedule" and directive.risk == "Low"
    ledger("faults", scenario="runtime planner", injected={fault: 1 for fault in FAULTS}, safe_directive=len(FAULTS),
           raised=0)
