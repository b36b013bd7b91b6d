"""Search workers: several processes (and machines) running one Optuna study through a shared database.

Each worker is an ordinary `guidebench search` in its own process: the study, its trials and the
TPE history live in the storage (`--storage postgresql+psycopg2://...`), so a worker needs nothing
from the others. Optuna's trial heartbeat makes a killed worker harmless: its RUNNING trial stops
beating, is marked FAIL, and the failed-trial callback (`RetryHeartbeatStaleTrialCallback`) queues
it again for whoever asks next. The survivors carry on until the study holds `--trials` finished
trials; running the same command again resumes it.

On one machine `guidebench worker --workers N` starts N workers and supervises them: when one dies,
it marks the dead worker's trial failed at once (each trial records its owner process), and a trial
killed before it could record one as soon as the heartbeat proves it stale (one heartbeat interval
plus a margin), instead of leaving that to the other workers' grace period. A worker whose whole
machine is lost is found by the other workers' own stale check.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import sys
import time
import warnings
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from guidebench.errors import GuidebenchError, check_interrupted, remembered_interrupts, run_reporting
from guidebench.home import guidebench_home
from guidebench.tracking.runs import quiet_mlflow

logger = logging.getLogger(__name__)

# Margin added to the heartbeat interval before a silent trial counts as dead.
STALE_MARGIN_S = 5
POLL_S = 0.5
STOP_TIMEOUT_S = 30.0
FIRST_WORKER_TIMEOUT_S = 300.0


def normalize_storage_url(url: str) -> str:
    """`postgresql://...` with the psycopg2 driver when psycopg 3 (SQLAlchemy 2.1's default) is absent."""
    if not url.startswith("postgresql://"):
        return url
    try:
        import psycopg  # noqa: F401
        return url
    except ImportError:
        return "postgresql+psycopg2://" + url[len("postgresql://"):]


def safe_url(url: str) -> str:
    """The URL without its password, for logs and status files."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.split("@", 1)
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in credentials else url
    return url


def heartbeat_interval() -> int:
    """The heartbeat interval the search uses (seconds)."""
    from guidebench.search import engine as search

    return int(getattr(search, "HEARTBEAT_S", 30))


def _storage(url: str, grace_s: Optional[int] = None) -> Any:
    import optuna

    from guidebench.search.engine import GRACE_S, rdb_storage
    from sqlalchemy.exc import SQLAlchemyError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            # The workers' own storage: same failed-trial policy, same guard against two processes
            # creating a new database's schema at once.
            return rdb_storage(url, grace_s or GRACE_S)
        except ImportError as exc:
            raise GuidebenchError(f"--storage {safe_url(url)}: database driver missing ({exc}); for PostgreSQL: "
                                  "pip install 'psycopg2-binary>=2.9,<3'") from exc
        except SQLAlchemyError as exc:
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise GuidebenchError(f"--storage {safe_url(url)}: cannot open the study database: {detail}") from exc


def reap_stale_trials(storage_url: str, grace_s: Optional[int] = None) -> dict[str, list[int]]:
    """Mark FAIL, and queue the retry of, the RUNNING trials of every study in the storage whose owner process
    on this host is gone, whose heartbeat is older than `grace_s`, or that never beat in that time; returns
    the failed trial numbers by study."""
    import optuna

    from guidebench.search.engine import reap_dead_trials

    grace_s = grace_s or heartbeat_interval() + STALE_MARGIN_S
    storage = _storage(normalize_storage_url(storage_url), grace_s)
    failed: dict[str, list[int]] = {}
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        running = {t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))}
        if not running:
            continue
        reap_dead_trials(study, grace_s)
        optuna.storages.fail_stale_trials(study)
        still = {t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))}
        if running - still:
            failed[summary.study_name] = sorted(running - still)
    return failed


def finished_trials(storage_url: str, study_name: str) -> int:
    """COMPLETE + PRUNED trials of a study (0 when the study does not exist yet)."""
    import optuna
    from optuna.trial import TrialState

    storage = _storage(normalize_storage_url(storage_url))
    if study_name not in {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}:
        return 0
    study = optuna.load_study(study_name=study_name, storage=storage)
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def _trials_in(storage_url: str, study_name: str) -> int:
    import optuna

    storage = _storage(normalize_storage_url(storage_url))
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if summary.study_name == study_name:
            return summary.n_trials
    return 0


def study_name_of(args: Namespace) -> str:
    """The study a search request runs: `--study`, else `<family>-<dataset id[:12]>` as `guidebench search`."""
    if args.study:
        return str(args.study)
    from evals.data import dataset_info

    try:
        dataset_id = dataset_info(args.data)["dataset_id"]
    except (OSError, KeyError, ValueError) as exc:
        raise GuidebenchError(f"--data {args.data}: not a dataset folder ({exc})") from exc
    return f"{args.family}-{str(dataset_id)[:12]}"


@dataclass
class Worker:
    """One supervised worker process."""

    index: int
    process: Any
    died_at: Optional[float] = None  # when the supervisor saw it killed by a signal
    settled: bool = False  # its end has been dealt with (nothing to reap, or reaped)

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return int(self.process.pid)


@dataclass
class PoolReport:
    """How a supervised run ended."""

    study: str
    storage: str
    exit_codes: dict[int, Optional[int]]
    reaped: dict[str, list[int]] = field(default_factory=dict)
    finished: int = 0
    target: int = 0

    @property
    def ok(self) -> bool:
        """True when the study holds the requested number of finished trials."""
        return self.finished >= self.target


def worker_main(args: Namespace, index: int, run: Callable[[Namespace], Optional[int]]) -> None:
    """Entry point of one worker process: an ordinary `guidebench search` (`run`, the command's) on the shared study."""
    logging.basicConfig(level=os.environ.get("GUIDEBENCH_LOG_LEVEL", "WARNING"),
                        format=f"%(levelname)s worker {index} %(name)s: %(message)s")
    with remembered_interrupts():  # as the CLI's: a Ctrl-C a library swallows still stops the worker
        try:
            code = _run_worker(args, index, run)
            check_interrupted()
        except KeyboardInterrupt:
            code = 130
    sys.stdout.flush()
    sys.exit(code)


def _run_worker(args: Namespace, index: int, run: Callable[[Namespace], Optional[int]]) -> int:
    def call() -> Optional[int]:
        with quiet_mlflow():
            return run(args)

    # One line for the user, the traceback in the home folder: the CLI's own handling (guidebench.errors).
    return run_reporting(call, prefix=f"guidebench worker {index}",
                         error_log=lambda: guidebench_home() / f"last-error-worker-{index}.log")


def status_file(home: Path) -> Path:
    """Where a supervisor lists its workers (pids) while it runs."""
    return home / "workers" / f"{os.getpid()}.json"


def _write_status(path: Path, study: str, storage: str, workers: list[Worker]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"supervisor": os.getpid(), "study": study, "storage": safe_url(storage),
                                   "workers": [{"index": w.index, "pid": w.pid} for w in workers]}, indent=1))
    os.replace(partial, path)


def run_pool(args: Namespace, count: int, *, home: Path, run: Callable[[Namespace], Optional[int]]) -> PoolReport:
    """Start `count` workers on the study of `args` (a parsed search request), supervise them, reap the trials
    of workers that die, and report how the study ended.

    Each worker calls `run(args)`, the `search` command's own function, passed in by the `worker` command (a
    module-level function, so the spawned process imports it by name), so this package imports no command.
    """
    if count < 1:
        raise GuidebenchError(f"--workers {count}: must be at least 1")
    storage = normalize_storage_url(args.storage)
    args.storage = storage
    study = study_name_of(args)
    _storage(storage)  # a bad URL fails here, once; and the schema exists before the workers start
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited locks, LM or sockets
    workers: list[Worker] = []
    status = status_file(home)
    report = PoolReport(study=study, storage=storage, exit_codes={}, target=int(args.trials))

    def start(index: int) -> Worker:
        process = context.Process(target=worker_main, args=(args, index, run), name=f"guidebench-worker-{index}")
        process.start()
        worker = Worker(index=index, process=process)
        workers.append(worker)
        _write_status(status, study, storage, workers)
        print(f"worker {index} started (pid {worker.pid}) on study {study} in {safe_url(storage)}", flush=True)
        return worker

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        first = start(0)
        if count > 1:
            # The first worker creates the study and the search's parent MLflow run; the others join them
            # instead of racing to create their own.
            before = _trials_in(storage, study)
            deadline = time.monotonic() + FIRST_WORKER_TIMEOUT_S
            while first.process.is_alive() and time.monotonic() < deadline and _trials_in(storage, study) <= before:
                time.sleep(POLL_S)
            for index in range(1, count):
                start(index)
        _supervise(workers, storage, report)
    except KeyboardInterrupt:
        _interrupt(workers)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        for worker in workers:
            report.exit_codes[worker.index] = worker.process.exitcode
        status.unlink(missing_ok=True)
    report.finished = finished_trials(storage, study)
    return report


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _supervise(workers: list[Worker], storage: str, report: PoolReport) -> None:
    stale_after = heartbeat_interval() + STALE_MARGIN_S
    while True:
        now = time.monotonic()
        for worker in workers:
            code = worker.process.exitcode
            if worker.settled or worker.died_at is not None or code is None:
                continue
            if code >= 0:  # Python ended it: Optuna has already marked a trial in progress failed
                worker.settled = True
                if code:
                    print(f"worker {worker.index} (pid {worker.pid}) ended with code {code}", flush=True)
                continue
            worker.died_at = now
            print(f"worker {worker.index} (pid {worker.pid}) ended with code {code}; its trial is marked "
                  f"failed now if it recorded its owner, else once its heartbeat is {stale_after} s old", flush=True)
            # The process is gone and collected: a trial that names it as owner fails at once.
            _merge(report.reaped, reap_stale_trials(storage, stale_after))
        due = [w for w in workers if not w.settled and w.died_at is not None and now - w.died_at >= stale_after]
        if due:
            _merge(report.reaped, reap_stale_trials(storage, stale_after))
            for worker in due:
                worker.settled = True
        if all(w.settled for w in workers):
            break
        time.sleep(POLL_S)
    for name, numbers in report.reaped.items():
        print(f"study {name}: trial(s) {', '.join(map(str, numbers))} of dead workers marked failed", flush=True)


def _merge(into: dict[str, list[int]], new: dict[str, list[int]]) -> None:
    for name, numbers in new.items():
        into[name] = sorted(set(into.get(name, [])) | set(numbers))


def _interrupt(workers: list[Worker]) -> None:
    # SIGINT, not SIGTERM: the search turns KeyboardInterrupt into a FAIL trial and a KILLED MLflow run.
    for worker in workers:
        if worker.process.is_alive():
            os.kill(worker.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
