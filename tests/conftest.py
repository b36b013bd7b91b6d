"""Shared fixtures: a deterministic fake LM, a scripted LM, and the real embedded model for slow tests.

- `fake_lm`: `make_lm("fake")` (rule-policy answers in the adapter's format), active via
  `dspy.context` for the test; no cache, so every call reaches the engine.
- `scripted_lm(outputs)`: a factory; the LM answers with the given raw completions in order
  (then falls back to the fake answers) and is active for the rest of the test.
- `real_lm`: the embedded Gemma 3 270M, loaded once per session, no DSPy cache. Only for tests
  marked `@pytest.mark.slow`.
- `restore_lm`: the LM a command configured globally is put back after the test.

Fixtures every folder's tests may use live here, not in a folder's conftest.py: a test path given beside
another folder's (`pytest tests/optimizers/... tests/guidebench/...`) sees only the conftest.py files above it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

import dspy
import pytest

# Tests live in folders that mirror the packages (imported with --import-mode=importlib); the shared
# helpers (`*_support.py`) stay here, so this folder is put on the path once for all of them.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evals.usage import instrument
from guidebench.lm.fake import FAKE_MODEL_ID, FakeEngine
from guidebench.lm.factory import make_lm


def _fake(script: list[str] | None = None) -> dspy.LM:
    lm = dspy.LM(FAKE_MODEL_ID, engine=FakeEngine(script), temperature=0.2, max_tokens=512, cache=False,
                 num_retries=0)
    return instrument(lm)


@pytest.fixture
def fake_lm() -> Iterator[dspy.LM]:
    """The deterministic fake LM, active for the test."""
    lm = make_lm("fake", cache=False)
    with dspy.context(lm=lm):
        yield lm


@pytest.fixture
def restore_lm() -> Iterator[None]:
    """The commands configure DSPy's LM globally; put the previous one back after the test (any test folder)."""
    previous = dspy.settings.lm
    yield
    dspy.configure(lm=previous)


@pytest.fixture
def scripted_lm() -> Iterator[Callable[[list[str]], dspy.LM]]:
    """Factory: `scripted_lm(["raw completion", ...])` returns the LM and makes it active for the test."""
    with ExitStack() as stack:

        def factory(outputs: list[str]) -> dspy.LM:
            lm = _fake(list(outputs))
            stack.enter_context(dspy.context(lm=lm))
            return lm

        yield factory


@pytest.fixture(scope="session")
def real_lm() -> dspy.LM:
    """The embedded model (assembled and loaded once per session), DSPy cache off."""
    lm = make_lm("local", cache=False)
    lm.engine.warm_up()
    return lm


@pytest.fixture(autouse=True)
def _no_global_lm_leaks_into_the_next_test() -> Iterator[None]:
    """Commands configure DSPy's LM globally; the next test on this worker starts without it."""
    yield
    if dspy.settings.lm is not None:
        dspy.configure(lm=None)


# ----- the process state a test (or a command it runs in-process) changes, put back after it ---------------

_KEPT_BY_PYTEST = ("PYTEST_CURRENT_TEST",)


def _mlflow_state() -> Optional[tuple[Optional[str], Optional[str], Optional[str]]]:
    """MLflow's process-wide tracking URI, experiment and active run (None before MLflow is imported)."""
    if "mlflow" not in sys.modules:
        return None
    import mlflow
    from mlflow.tracking import fluent
    from mlflow.tracking._tracking_service import utils

    run = mlflow.active_run()
    return utils._tracking_uri, fluent._active_experiment_id, run.info.run_id if run else None


def _restore_mlflow(state: Optional[tuple[Optional[str], Optional[str], Optional[str]]]) -> None:
    if "mlflow" not in sys.modules:
        return
    import mlflow
    from mlflow.tracking import fluent
    from mlflow.tracking._tracking_service import utils

    uri, experiment, run_id = state or (None, None, None)
    while (run := mlflow.active_run()) is not None and run.info.run_id != run_id:
        mlflow.end_run("KILLED")  # a run a failed test left open must not become the next test's parent run
    if utils._tracking_uri != uri:
        mlflow.set_tracking_uri(uri)
    fluent._active_experiment_id = experiment


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """Environment variables, the current folder and MLflow's globals as they were before the block.

    `mlflow.set_tracking_uri` (every tracked command) and `mlflow.set_experiment` also set
    MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_ID in the environment, so a command run in-process would
    send every later test's runs (and their subprocesses') to its store; a test that sets a variable or
    changes folder without monkeypatch would leak the same way.
    """
    environ, cwd, mlflow_state = dict(os.environ), os.getcwd(), _mlflow_state()
    yield
    _restore_mlflow(mlflow_state)
    for name in set(os.environ) - set(environ) - set(_KEPT_BY_PYTEST):
        del os.environ[name]
    for name, value in environ.items():
        if name not in _KEPT_BY_PYTEST and os.environ.get(name) != value:
            os.environ[name] = value
    if os.getcwd() != cwd:
        os.chdir(cwd)


@pytest.fixture(autouse=True, scope="module")
def _module_leaves_the_process_as_it_found_it() -> Iterator[None]:
    """What a module's fixtures changed is put back after its last test (autouse: set up before them)."""
    with _process_state_kept():
        yield


@pytest.fixture(autouse=True)
def _test_leaves_the_process_as_it_found_it() -> Iterator[None]:
    """What a test changed is put back before the next one, which may come from any module in any order."""
    with _process_state_kept():
        yield


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup`, a test sharing a slow fixture must carry its group, or the fixture runs per worker."""
    if not config.getoption("loadgroup", default=False):
        return
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {lost[0]} (and {len(lost) - 1} more): this pytest and "
                                "pytest-xdist do not work together; install the versions pyproject.toml pins")


# ----- a clean footprint: the session's own temp root, empty at the end --------------------------------

_TEMP_KEY = pytest.StashKey[tuple[Path, dict[str, Optional[str]], Optional[str]]]()
_TEMP_VARIABLES = ("TMPDIR", "PYTEST_DEBUG_TEMPROOT")


def pytest_configure(config: pytest.Config) -> None:
    """Give the session a temp root of its own (the controller's; xdist workers and every process the tests start
    inherit it through TMPDIR), so that what other programs leave in the system temp folder is never counted."""
    if hasattr(config, "workerinput"):
        return
    system = tempfile.gettempdir()
    root = Path(tempfile.mkdtemp(prefix="guidebench-tests-", dir=system))
    previous = {name: os.environ.get(name) for name in _TEMP_VARIABLES}
    # pytest's own tmp_path folders stay in the system temp folder, where pytest keeps and prunes them.
    os.environ["PYTEST_DEBUG_TEMPROOT"] = previous["PYTEST_DEBUG_TEMPROOT"] or system
    os.environ["TMPDIR"] = str(root)
    config.stash[_TEMP_KEY] = (root, previous, tempfile.tempdir)
    tempfile.tempdir = str(root)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when tests or the commands they ran left anything in the session's temp root."""
    root, _, _ = session.config.stash.get(_TEMP_KEY, (None, None, None))
    if root is None:
        return
    left = sorted(entry.name for entry in root.iterdir()) if root.is_dir() else []
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"{len(left)} entr{'y' if len(left) == 1 else 'ies'} left in the temp folder by the tests: "
                   f"{', '.join(left[:10])}{' ...' if len(left) > 10 else ''}")
        if reporter is not None:
            reporter.write_line(f"FOOTPRINT: {message}", red=True)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's temp root and put TMPDIR back (pytest may run again in this process)."""
    root, previous, tempdir = config.stash.get(_TEMP_KEY, (None, {}, None))
    if root is None:
        return
    shutil.rmtree(root, ignore_errors=True)
    tempfile.tempdir = tempdir
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# ----- planner logs without a performance profile (the outcome-model tests) -------------------------

@pytest.fixture(scope="session")
def profile_free_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An experiments dataset of runner-shaped logs with no side file: no packet carries a performance profile."""
    from planner_logs_support import imported, logs_without_side_files

    root = tmp_path_factory.mktemp("planner-logs")
    return imported(logs_without_side_files(root / "logs"), root / "dataset")


@pytest.fixture(scope="session")
def outcome_fit(profile_free_dataset: Path):
    """The outcome and propensity models fit on that dataset's train and dev splits (once per session)."""
    from optimizers.outcome_fitting import fit_outcome_models_once
    from planner_logs_support import records_of

    return fit_outcome_models_once(records_of(profile_free_dataset, "train"), records_of(profile_free_dataset, "dev"))
