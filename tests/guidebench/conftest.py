"""Fixtures shared by the application's tests: the previous LM put back, and the loopback services of the
scale-out tests (a workbench home, a throwaway PostgreSQL cluster, `mlflow server` on it), each once per
test module that asks for it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import dspy
import pytest

from guidebench.search import services

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "tests" / "setup"


@pytest.fixture
def restore_lm() -> Iterator[None]:
    """The commands configure DSPy's LM globally; put the previous one back after the test."""
    previous = dspy.settings.lm
    yield
    dspy.configure(lm=previous)


# ----- scale-out: the real engines on 127.0.0.1 ----------------------------------------------------

def _setup_script(name: str, *args: str) -> str:
    result = subprocess.run(["bash", str(SETUP / name), *args], capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"{name} failed:\n{result.stderr[-2000:]}"
    return result.stdout.strip()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One workbench home for the module: the model is assembled once and shared by every process."""
    folder = tmp_path_factory.mktemp("scale-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(folder))
        yield folder


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster on 127.0.0.1 (installed from Debian's packages when missing)."""
    _setup_script("ensure_postgres.sh")
    _setup_script("ensure_python_extras.sh", sys.executable)
    # In the session's temp folder, which the service account may be let through (pytest's own is elsewhere).
    folder = Path(tempfile.mkdtemp(prefix="postgres-"))
    cluster = services.start_postgres(folder)
    yield cluster
    services.stop_postgres(cluster)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def mlflow_server(postgres, tmp_path_factory):
    """`mlflow server` on 127.0.0.1 with the PostgreSQL backend store and a local artifact root."""
    folder = tmp_path_factory.mktemp("mlflow")
    server = services.start_mlflow_server(services.create_database(postgres, "mlflow"), folder / "artifacts",
                                          log=folder / "server.log")
    yield server
    services.stop_mlflow_server(server)
