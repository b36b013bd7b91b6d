"""Fixtures shared by the application's tests: the loopback services of the scale-out tests (a workbench home, a
throwaway PostgreSQL cluster, `mlflow server` on it), each once per test module that asks for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from guidebench.search import services

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "tests" / "setup"


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
def postgres(tmp_path_factory):
    """A throwaway PostgreSQL cluster on 127.0.0.1 (installed from Debian's packages when missing)."""
    _setup_script("ensure_postgres.sh")
    _setup_script("ensure_python_extras.sh", sys.executable)
    cluster = services.start_postgres(tmp_path_factory.mktemp("postgres"))
    yield cluster
    services.stop_postgres(cluster)


@pytest.fixture(scope="module")
def mlflow_server(postgres, tmp_path_factory):
    """`mlflow server` on 127.0.0.1 with the PostgreSQL backend store and a local artifact root."""
    folder = tmp_path_factory.mktemp("mlflow")
    server = services.start_mlflow_server(services.create_database(postgres, "mlflow"), folder / "artifacts",
                                          log=folder / "server.log")
    yield server
    services.stop_mlflow_server(server)
