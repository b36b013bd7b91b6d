"""Loopback services for scale-out runs, tests and benchmarks: a throwaway PostgreSQL cluster in a folder
and an `mlflow server` with a PostgreSQL backend store and a local artifact root.

Both are the real programs (Debian's PostgreSQL binaries, MLflow's own server), bound to 127.0.0.1
only. On a cluster the same URLs point at shared, long-lived services instead (docs/scaling.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from guidebench.errors import GuidebenchError
from guidebench.lm.loopback import (LOOPBACK, START_TIMEOUT_S, free_port, http_ok, port_in_use, terminate_group,
                                     wait_until)

PG_SUPERUSER = "guidebench"
PG_DATABASE = "guidebench"
# PostgreSQL refuses to run as root: as root, its programs run as the account Debian's package creates.
PG_SYSTEM_USER = "postgres"


# --- PostgreSQL -----------------------------------------------------------------------------------


def postgres_bin_dir() -> Path:
    """The newest `/usr/lib/postgresql/<version>/bin` that has initdb and pg_ctl."""
    found = []
    for candidate in Path("/usr/lib/postgresql").glob("*/bin"):
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            version = candidate.parent.name
            found.append((int(version) if version.isdigit() else 0, candidate))
    if not found:
        raise GuidebenchError("PostgreSQL server binaries not found under /usr/lib/postgresql: "
                              "run tests/setup/ensure_postgres.sh (apt-get install -y postgresql)")
    return max(found)[1]


def _as_service_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    if shutil.which("runuser") is None:
        raise GuidebenchError("running as root needs `runuser` to start PostgreSQL as the postgres account")
    return ["runuser", "-u", PG_SYSTEM_USER, "--", *command]


def _give_to_service_user(path: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd

    try:
        account = pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError as exc:
        raise GuidebenchError(f"the `{PG_SYSTEM_USER}` account is missing: reinstall Debian's postgresql") from exc
    for item in [path, *path.rglob("*")]:
        os.chown(item, account.pw_uid, account.pw_gid)
    # Parent folders must be traversable for the service account. Temp folders (mkdtemp, pytest's
    # tmp_path) are 0700: open those for traversal only; anywhere else, say what to do.
    temp_root = Path(tempfile.gettempdir()).resolve()
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if mode & 0o001:
            continue
        if parent == temp_root or temp_root in parent.parents:
            os.chmod(parent, mode | 0o001)
        else:
            raise GuidebenchError(f"{parent} is not traversable by the {PG_SYSTEM_USER} account: "
                                  f"put the PostgreSQL folder under {temp_root} or `chmod o+x {parent}`")


@dataclass(frozen=True)
class PostgresCluster:
    """A PostgreSQL cluster in a folder, listening on 127.0.0.1:port with trust auth for one superuser."""

    folder: Path
    port: int
    bin_dir: Path
    user: str = PG_SUPERUSER

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory."""
        return self.folder / "data"

    @property
    def log(self) -> Path:
        """The server log."""
        return self.folder / "postgres.log"

    def url(self, database: str = PG_DATABASE) -> str:
        """SQLAlchemy URL of a database; the driver is explicit because SQLAlchemy 2.1 defaults to psycopg 3."""
        return f"postgresql+psycopg2://{self.user}@{LOOPBACK}:{self.port}/{database}"

    def running(self) -> bool:
        """True when the cluster's postmaster answers."""
        result = subprocess.run(_as_service_user([str(self.bin_dir / "pg_ctl"), "status", "-D", str(self.data_dir)]),
                                capture_output=True, text=True)
        return result.returncode == 0


def start_postgres(folder: Path, port: Optional[int] = None, databases: tuple[str, ...] = (PG_DATABASE,)
                   ) -> PostgresCluster:
    """Create (first time) and start a cluster in `folder` on 127.0.0.1, then create the databases."""
    folder = Path(folder).absolute()
    bin_dir = postgres_bin_dir()
    cluster = PostgresCluster(folder=folder, port=port or free_port(), bin_dir=bin_dir)
    folder.mkdir(parents=True, exist_ok=True)
    if not (cluster.data_dir / "PG_VERSION").is_file():
        _give_to_service_user(folder)
        # Trust auth is safe only because the server listens on loopback and no unix socket is shared.
        _run(_as_service_user([str(bin_dir / "initdb"), "-D", str(cluster.data_dir), "-U", cluster.user,
                               "--auth=trust", "-E", "UTF8", "--no-sync"]), "initdb")
    if cluster.running():
        # Already started (an earlier run that did not stop it): keep it, on the port it listens on.
        cluster = PostgresCluster(folder=folder, port=_running_port(cluster.data_dir), bin_dir=bin_dir)
    else:
        options = (f"-c listen_addresses={LOOPBACK} -p {cluster.port} "
                   f"-c unix_socket_directories={folder} -c max_connections=200")
        _run(_as_service_user([str(bin_dir / "pg_ctl"), "start", "-D", str(cluster.data_dir), "-l", str(cluster.log),
                               "-w", "-t", str(int(START_TIMEOUT_S)), "-o", options]), "pg_ctl start", cluster.log)
    for database in databases:
        create_database(cluster, database)
    return cluster


def _running_port(data_dir: Path) -> int:
    # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, ...
    lines = (data_dir / "postmaster.pid").read_text().splitlines()
    return int(lines[3])


def create_database(cluster: PostgresCluster, name: str) -> str:
    """Create a database if missing; returns its URL."""
    command = [str(cluster.bin_dir / "createdb"), "-h", LOOPBACK, "-p", str(cluster.port), "-U", cluster.user, name]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 and "already exists" not in result.stderr:
        raise GuidebenchError(f"createdb {name} failed: {result.stderr.strip()}")
    return cluster.url(name)


def drop_database(cluster: PostgresCluster, name: str) -> None:
    """Drop a database if it exists (its connections are closed first)."""
    command = [str(cluster.bin_dir / "dropdb"), "-h", LOOPBACK, "-p", str(cluster.port), "-U", cluster.user,
               "--if-exists", "--force", name]
    _run(command, f"dropdb {name}")


def stop_postgres(cluster: PostgresCluster) -> None:
    """Stop the cluster (fast shutdown: open sessions are rolled back, the data stays consistent)."""
    if cluster.running():
        _run(_as_service_user([str(cluster.bin_dir / "pg_ctl"), "stop", "-D", str(cluster.data_dir), "-m", "fast",
                               "-w", "-t", "60"]), "pg_ctl stop", cluster.log)


@contextmanager
def postgres_cluster(folder: Path, port: Optional[int] = None) -> Iterator[PostgresCluster]:
    """A started cluster for the duration of the block; stopped afterwards."""
    cluster = start_postgres(folder, port)
    try:
        yield cluster
    finally:
        stop_postgres(cluster)


def _run(command: list[str], what: str, log: Optional[Path] = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise GuidebenchError(f"{what} failed ({result.returncode}): {detail}{_tail_note(log)}")


# --- MLflow tracking server -------------------------------------------------------------------------


@dataclass
class MlflowServer:
    """A running `mlflow server` process on 127.0.0.1."""

    process: subprocess.Popen
    port: int
    backend_store_uri: str
    artifact_root: Path
    log: Path

    @property
    def url(self) -> str:
        """The tracking URI clients use (`--tracking-uri` or MLFLOW_TRACKING_URI)."""
        return f"http://{LOOPBACK}:{self.port}"


def mlflow_server_command(backend_store_uri: str, artifact_root: Path, port: int, workers: int = 1) -> list[str]:
    """The `mlflow server` command line (loopback, SQL backend store, local artifact root)."""
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri,
            "--default-artifact-root", str(Path(artifact_root).absolute()), "--host", LOOPBACK,
            "--port", str(port), "--workers", str(workers)]


def start_mlflow_server(backend_store_uri: str, artifact_root: Path, *, port: Optional[int] = None,
                        workers: int = 1, log: Optional[Path] = None,
                        timeout: float = START_TIMEOUT_S) -> MlflowServer:
    """Start `mlflow server` in its own process group and wait until /health answers."""
    port = port or free_port()
    if port_in_use(port):
        raise GuidebenchError(f"port {port} on {LOOPBACK} is already in use")
    artifact_root = Path(artifact_root).absolute()
    artifact_root.mkdir(parents=True, exist_ok=True)
    log = Path(log or artifact_root.parent / f"mlflow-server-{port}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    # Offline, LiteLLM's background fetch of its price list fails and its retry thread logs while
    # MLflow's start-up holds an import hook lock: the server deadlocks. The bundled list is enough.
    # MLflow's job executor only runs GenAI scorer jobs, which guidebench never submits; without it
    # the server starts in about half the time.
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with log.open("ab") as handle:
        process = subprocess.Popen(mlflow_server_command(backend_store_uri, artifact_root, port, workers),
                                   stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env)
    server = MlflowServer(process=process, port=port, backend_store_uri=backend_store_uri,
                          artifact_root=artifact_root, log=log)
    try:
        # The first start on an empty database runs MLflow's schema migrations: allow for it.
        wait_until(lambda: http_ok(f"{server.url}/health"), what="mlflow server", timeout=timeout,
                   process=process, log=log)
    except BaseException:
        terminate_group(process)
        raise
    return server


def stop_mlflow_server(server: MlflowServer) -> None:
    """Stop the server and its worker processes."""
    terminate_group(server.process)


@contextmanager
def mlflow_server(backend_store_uri: str, artifact_root: Path, **kwargs: object) -> Iterator[MlflowServer]:
    """A running tracking server for the duration of the block."""
    server = start_mlflow_server(backend_store_uri, artifact_root, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        stop_mlflow_server(server)
