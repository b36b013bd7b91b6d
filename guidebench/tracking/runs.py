"""MLflow tracking: where runs go, one experiment per dataset, and what every run records.

Store: `--tracking-uri`, else `MLFLOW_TRACKING_URI`, else a local SQLite store
`sqlite:///<GUIDEBENCH_HOME or .guidebench>/mlflow.db` with artifacts under `<home>/mlartifacts`
(`mlflow ui --backend-store-uri sqlite:///.guidebench/mlflow.db` shows it). No server is needed.

Experiments: one per dataset id, named `guidebench-<kind>-<dataset id[:12]>` and tagged with the
full id, so every variant scored on the same frozen data lands side by side.

Every run records params (program, dataset id, split, split hash, LM spec, seed, library versions,
git commit, plus whatever the caller adds), metrics (each aggregate's value and its `_ci_low` /
`_ci_high`) and artifacts. The helpers are small on purpose so compiles and searches reuse them.
"""

from __future__ import annotations

import json
import logging
import os
import time
import platform
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from guidebench.errors import GuidebenchError
from guidebench.home import guidebench_home  # noqa: F401 (re-exported: `guidebench.tracking.guidebench_home`)

logger = logging.getLogger(__name__)

LIBRARIES: tuple[str, ...] = ("dspy", "mlflow", "pydantic", "numpy", "pandas", "scipy", "datasets",
                              "llama-cpp-python", "optuna", "scikit-learn")
# MLflow rejects param values longer than this.
_PARAM_CHARS = 6000
# Which process runs a run (`optimizers.liveness.owner_token`), and why the workbench ended a run it found
# RUNNING after its process had died.
OWNER_TAG = "guidebench.owner"
REAPED_TAG = "guidebench.reaped"
_reaped_stores: set[str] = set()


def default_tracking_uri() -> str:
    """`MLFLOW_TRACKING_URI` when set, else the local SQLite store under the workbench home."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{guidebench_home() / 'mlflow.db'}"


# MLflow reads it when imported; a user who sets it (e.g. to INFO, for the run links of a server) wins.
_MLFLOW_LEVEL_ENV = "MLFLOW_LOGGING_LEVEL"


@contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow's own INFO lines off the console for a command; its warnings still show.

    When imported, MLflow gives its loggers a stderr handler at INFO: a command's first open of a store
    prints "Creating initial MLflow database tables..." before the command's own lines (and before a
    one-line error), and `compile` ends with "Flushing the async trace logging queue..." at exit. An
    import during the command reads the level from MLFLOW_LOGGING_LEVEL (set for the block, restored
    after, since tests call `main()` in-process; spawned workers inherit it); an MLflow loaded already is
    set directly, and so is one loaded in the block once it ends, so the queue flushed at exit is quiet too.
    """
    before = os.environ.get(_MLFLOW_LEVEL_ENV)
    level = (before or "WARNING").upper()
    os.environ[_MLFLOW_LEVEL_ENV] = level
    _set_mlflow_level(level)
    try:
        yield
    finally:
        _set_mlflow_level(level)
        if before is None:
            os.environ.pop(_MLFLOW_LEVEL_ENV, None)
        else:
            os.environ[_MLFLOW_LEVEL_ENV] = before


def _set_mlflow_level(level: str) -> None:
    # The loggers of the libraries below MLflow (alembic, SQLAlchemy) it sets to WARNING itself.
    if "mlflow" in sys.modules and isinstance(logging.getLevelName(level), int):
        logging.getLogger("mlflow").setLevel(level)


def _is_local_default(uri: str) -> bool:
    return uri == f"sqlite:///{guidebench_home() / 'mlflow.db'}"


def configure(tracking_uri: Optional[str] = None) -> str:
    """Point MLflow at the given store (or the default one); returns the URI in use."""
    import mlflow

    uri = tracking_uri or default_tracking_uri()
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise GuidebenchError(f"tracking store {uri}: cannot create {path.parent}: {exc}") from exc
    mlflow.set_tracking_uri(uri)
    if uri not in _reaped_stores:
        if uri.startswith("sqlite:///"):
            _initialise_sqlite_store(uri, path)
        _reaped_stores.add(uri)
        try:
            reap_stale_runs(uri)
        except Exception as exc:  # tidying up must never stop the command itself
            logger.warning("tracking store: could not check for runs of dead processes: %s", exc)
    return uri


def _initialise_sqlite_store(uri: str, path: Path) -> None:
    """Create or upgrade the SQLite store's schema in one process at a time.

    MLflow creates and migrates its tables when a process first opens the store; two commands
    starting together on a new store would both run the migrations and the slower one fails
    midway ("table _alembic_tmp_tags already exists"), which can leave the schema half-migrated.
    An exclusive lock on `<db>.lock` around the first open makes the second process wait and then
    find the schema ready.
    """
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform: open as MLflow would
        fcntl = None  # type: ignore[assignment]
    with open(path.with_name(path.name + ".lock"), "a", encoding="utf-8") as lock:
        if fcntl is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        except MlflowException as exc:
            raise GuidebenchError(f"tracking store {uri}: {exc.message}") from exc
        finally:
            if fcntl is not None:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def owner_tags() -> dict[str, str]:
    """Tags naming the process that runs a run, so that a later command can tell when it died."""
    from optimizers.liveness import owner_token

    return {OWNER_TAG: owner_token()}


def reap_stale_runs(tracking_uri: Optional[str] = None) -> list[str]:
    """End as KILLED every RUNNING run whose process is gone; returns their run ids.

    MLflow has no hook for a process killed with `kill -9` (or a lost machine): its runs stay
    RUNNING. Every run the workbench starts carries `guidebench.owner` (host, pid, process start
    time); the first tracking call of each later command ends the runs whose owner on this host is
    certainly dead, with a `guidebench.reaped` tag saying so, and their nested runs with them. Runs of
    live processes, of other hosts and of other tools are left alone. `compile --resume` reopens a
    reaped compile run.
    """
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from optimizers.liveness import owner_alive

    client = MlflowClient(tracking_uri=tracking_uri or default_tracking_uri())
    experiment_ids = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY,
                                                                         max_results=50000)]
    running: dict[str, Any] = {}
    for start in range(0, len(experiment_ids), 100):
        token = None
        while True:
            page = client.search_runs(experiment_ids[start:start + 100], "attributes.status = 'RUNNING'",
                                      max_results=1000, page_token=token)
            running.update((run.info.run_id, run) for run in page)
            token = page.token
            if not token:
                break
    reaped: list[str] = []

    def end(run: Any, why: str) -> None:
        client.set_tag(run.info.run_id, REAPED_TAG, f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {why}")
        client.set_terminated(run.info.run_id, status="KILLED")
        reaped.append(run.info.run_id)

    for run in running.values():
        owner = run.data.tags.get(OWNER_TAG)
        if owner_alive(owner) is False:
            end(run, f"process {owner} died without ending the run")
    for run in running.values():  # nested runs started without an owner tag follow their parent
        parent = run.data.tags.get("mlflow.parentRunId")
        if run.info.run_id not in reaped and OWNER_TAG not in run.data.tags and parent \
                and (parent in reaped or parent not in running):
            end(run, f"its parent run {parent} is no longer running")
    if reaped:
        logger.warning("tracking store: ended %d run(s) of processes that died: %s", len(reaped), ", ".join(reaped))
    return reaped


def experiment_name(dataset_id: str, kind: str) -> str:
    """The experiment of a dataset: `guidebench-<kind>-<dataset id[:12]>`."""
    return f"guidebench-{kind}-{(dataset_id or 'unknown')[:12]}"


def ensure_experiment(dataset_id: str, kind: str, tracking_uri: Optional[str] = None) -> str:
    """Create (once) and select the dataset's experiment; returns its id."""
    import mlflow
    from mlflow.exceptions import MlflowException

    uri = configure(tracking_uri)
    name = experiment_name(dataset_id, kind)
    try:
        found = mlflow.get_experiment_by_name(name)
        if found is None:
            location = None
            if _is_local_default(uri):
                location = (guidebench_home() / "mlartifacts" / name).as_uri()
            try:
                experiment_id = mlflow.create_experiment(
                    name, artifact_location=location,
                    tags={"guidebench.dataset_id": dataset_id or "", "guidebench.kind": kind})
            except MlflowException as exc:
                # Another command created it between our look-up and our create: use theirs.
                found = mlflow.get_experiment_by_name(name)
                if found is None or exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment_id = found.experiment_id
        else:
            experiment_id = found.experiment_id
        mlflow.set_experiment(experiment_id=experiment_id)
    except MlflowException as exc:
        raise GuidebenchError(f"tracking store {uri}: {exc.message}") from exc
    return experiment_id


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a result depends on (`-` when absent), plus Python."""
    from importlib import metadata  # here, not at the top: `guidebench --help` needs no package metadata

    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "-"
    try:
        from guidebench import __version__

        versions["guidebench"] = __version__
    except ImportError:
        versions["guidebench"] = "-"
    return versions


def git_commit(path: Optional[Path] = None) -> str:
    """The commit of the working tree (suffix `+dirty` when files changed), or `unknown`."""
    where = str(path or Path(__file__).resolve().parent.parent)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head or "unknown"


def run_params(*, program: str, dataset_id: str, split: str, split_hash: str, lm: str, seed: int,
               **extra: Any) -> dict[str, str]:
    """The params every run records, flat and stringified (`lib.<name>` for library versions)."""
    params: dict[str, Any] = {"program": program, "dataset_id": dataset_id, "split": split,
                              "split_hash": split_hash, "lm": lm, "seed": seed, "git_commit": git_commit(),
                              "platform": f"{platform.system()}-{platform.machine()}"}
    params.update({f"lib.{name}": version for name, version in library_versions().items()})
    params.update(extra)
    return {key: _param_text(value) for key, value in params.items()}


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _PARAM_CHARS else text[: _PARAM_CHARS - 3] + "..."


def metric_items(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Flat MLflow metrics: `<name>`, `<name>_ci_low`, `<name>_ci_high` (missing values left out)."""
    flat: dict[str, float] = {}
    for name, value in metrics.items():
        data = value.to_dict() if hasattr(value, "to_dict") else dict(value)
        for suffix, key in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            number = data.get(key)
            if isinstance(number, (int, float)) and not isinstance(number, bool) and number == number:
                flat[f"{prefix}{name}{suffix}"] = float(number)
    return flat


def log_metrics(metrics: Mapping[str, Any], prefix: str = "", step: Optional[int] = None) -> None:
    """Log every metric value with its interval bounds to the active run."""
    import mlflow

    items = metric_items(metrics, prefix)
    if items:
        mlflow.log_metrics(items, step=step)


@contextmanager
def tracked_run(*, dataset_id: str, kind: str, run_name: str, params: Mapping[str, str],
                tracking_uri: Optional[str] = None, tags: Optional[Mapping[str, str]] = None,
                nested: bool = False) -> Iterator[Any]:
    """Start a run in the dataset's experiment with params and tags; yields the active MLflow run.

    A nested run joins the active parent run instead of selecting the experiment again.
    """
    import mlflow

    if not nested:
        ensure_experiment(dataset_id, kind, tracking_uri)
    all_tags = {"guidebench.kind": kind, "guidebench.dataset_id": dataset_id, "guidebench.command": command_line()}
    all_tags.update(tags or {})
    all_tags.update(owner_tags())
    with mlflow.start_run(run_name=run_name, nested=nested, tags=all_tags) as run:
        mlflow.log_params(dict(params))
        yield run


def command_line() -> str:
    """The command that started this process, for a run's tags, without secrets.

    Arguments can carry credentials (`--tracking-uri https://user:pass@host`, `--storage postgresql://...`,
    an API key pasted on the command line): they are scrubbed like an export (known secret values of the
    environment, token shapes, passwords in URLs).
    """
    from guidebench.data.redaction import redactor_for

    return redactor_for().text(" ".join(sys.argv))[:500]


def log_artifacts(paths: Mapping[str, Path], artifact_path: Optional[str] = None) -> None:
    """Log files (that exist) as artifacts of the active run."""
    import mlflow

    for path in paths.values():
        if path is not None and Path(path).is_file():
            mlflow.log_artifact(str(path), artifact_path=artifact_path)


def download_artifact(client: Any, run_id: str, artifact: str, target: str | Path) -> str:
    """Download one artifact of a run into `target`; returns the local path.

    MLflow's download progress bar stays off (unless the user turned it on): the artifacts fetched
    here are small state and result files, and its lines would bury a command's own output and errors.
    """
    name = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(name)
    if before is None:
        os.environ[name] = "false"
    try:
        return client.download_artifacts(run_id, artifact, str(target))
    finally:
        if before is None:
            os.environ.pop(name, None)
