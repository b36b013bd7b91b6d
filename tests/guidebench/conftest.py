"""Fixtures shared by the application's tests: a program fit and exported on logs imported twice (the routes by
which a program could be judged on records it learned from), and the loopback services of the scale-out tests (a
workbench home, a throwaway PostgreSQL cluster, `mlflow server` on it), each once per test module that asks for it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from guidebench.search import services
from kill_support import child_temp, started_with

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "tests" / "setup"


# ----- a fitted program and the splits it learned from ---------------------------------------------

# The fit's smallest grid: the routes need a program that learned from train + dev, not a good one.
FIT_RECIPE = 'optimizer = "fit"\n[settings]\nC = [1.0]\nclass_weight = ["none"]\nfolds = 2\n'


@pytest.fixture(scope="session")
def fitted(tmp_path_factory) -> dict[str, Path | str]:
    """Simulated Full Auto logs imported as `ds` (seed 0) and again as `ds1` (seed 1: other splits, the same
    inputs), `full_auto.learned` fit on `ds` (`fit`: cross-validated over train + dev, refit on both) and exported
    (`ex`, tagged champion: a board would crown it unless it learned from its records), tracked in `uri`.
    Read-only for the tests."""
    from guidebench.cli import main
    from optimizer_support import tracking_uri

    root = tmp_path_factory.mktemp("fitted")
    (root / "fit.toml").write_text(FIT_RECIPE, encoding="utf-8")
    world: dict[str, Path | str] = {name: root / name for name in ("logs", "ds", "ds1", "fit", "ex")}
    world["uri"] = tracking_uri(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(root / "home"))
        steps = [["data", "simulate", "fullauto", "--runs", "12", "--seed", "3", "--out", str(world["logs"])],
                 ["data", "import", str(world["logs"]), "--kind", "fullauto", "--out", str(world["ds"])],
                 ["data", "import", str(world["logs"]), "--kind", "fullauto", "--seed", "1", "--out", str(world["ds1"])],
                 ["compile", "--program", "full_auto.learned", "--optimizer", "fit", "--recipe", str(root / "fit.toml"),
                  "--data", str(world["ds"]), "--out", str(world["fit"]), "--tracking-uri", str(world["uri"]),
                  "--no-progress"],
                 ["export", "--program", "full_auto.learned", "--state", str(root / "fit" / "program.json"),
                  "--name", "learned", "--version", "0.1.0", "--tag", "champion", "--out", str(world["ex"])]]
        for argv in steps:
            assert main(argv) == 0, argv
    return world


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
    # Stopped with SIGTERM (then SIGKILL), its processes may leave temporary folders: in one of the fixture's.
    with child_temp() as env:
        with started_with(env["TMPDIR"]):
            server = services.start_mlflow_server(services.create_database(postgres, "mlflow"), folder / "artifacts",
                                                  log=folder / "server.log")
        yield server
        services.stop_mlflow_server(server)
