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

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Iterator

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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup`, a test sharing a slow fixture must carry its group, or the fixture runs per worker."""
    if not config.getoption("loadgroup", default=False):
        return
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {lost[0]} (and {len(lost) - 1} more): this pytest and "
                                "pytest-xdist do not work together; install the versions pyproject.toml pins")


# ----- a clean footprint: nothing left in the system temp directory ---------------------------------

def _temp_entries() -> set[str]:
    import tempfile

    root = Path(tempfile.gettempdir())
    # pytest's own base temp folders (pytest-of-<user>) are pytest's to keep and prune
    return {entry.name for entry in root.iterdir() if not entry.name.startswith("pytest-of-")}


def pytest_sessionstart(session: pytest.Session) -> None:
    """Remember what the system temp directory held before the tests (the controller process only)."""
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_TEMP_KEY] = _temp_entries()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when tests or commands left anything in the system temp directory."""
    before = session.config.stash.get(_TEMP_KEY, None)
    if before is None:
        return
    left = sorted(_temp_entries() - before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"{len(left)} entr{'y' if len(left) == 1 else 'ies'} left in the system temp directory by the "
                   f"tests: {', '.join(left[:10])}{' ...' if len(left) > 10 else ''}")
        if reporter is not None:
            reporter.write_line(f"FOOTPRINT: {message}", red=True)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


_TEMP_KEY = pytest.StashKey[set]()


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
