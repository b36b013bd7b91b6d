"""A real Dask distributed cluster on 127.0.0.1, started as its users start one: `dask scheduler` and
`dask worker ADDRESS` processes. Each worker runs one task at a time, without a nanny (its pid is the process a
test kills), with tests/cluster_preload.py loaded. Everything started is stopped, killed or not, on the way out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from kill_support import child_temp, guidebench_env

PRELOAD = Path(__file__).resolve().parent / "cluster_preload.py"
START_TIMEOUT_S = 120
# A test process killed before its fixture stops the cluster leaves none behind for long: an idle scheduler ends
# itself, and a worker whose scheduler is gone for a minute ends too.
IDLE_TIMEOUT = "15 minutes"


def _dask() -> list[str]:
    """The `dask` command of this interpreter's environment (its console script, else `python -m dask`)."""
    script = Path(sys.executable).with_name("dask")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "dask"]


@dataclass
class LocalCluster:
    """A scheduler's address and its processes."""

    folder: Path
    env: dict[str, str]
    address: str = ""
    scheduler: Optional[subprocess.Popen] = None
    workers: list[subprocess.Popen] = field(default_factory=list)

    @property
    def task_log(self) -> Path:
        return self.folder / "tasks"

    def start_scheduler(self) -> None:
        file = self.folder / "scheduler.json"
        self.scheduler = self._spawn("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                                   "--no-dashboard", "--scheduler-file", str(file),
                                                   "--idle-timeout", IDLE_TIMEOUT])
        deadline = time.monotonic() + START_TIMEOUT_S
        while not file.is_file() or not file.read_text(encoding="utf-8").strip():
            self._alive(self.scheduler, "scheduler")
            if time.monotonic() > deadline:
                raise AssertionError(f"dask scheduler did not start in {START_TIMEOUT_S} s: {self._log('scheduler')}")
            time.sleep(0.2)
        self.address = json.loads(file.read_text(encoding="utf-8"))["address"]

    def start_worker(self, **env: str) -> subprocess.Popen:
        """One more `dask worker ADDRESS` (one thread, no nanny), with extra environment `env`; returns once the
        scheduler counts it."""
        name = f"worker{len(self.workers)}"
        worker = self._spawn(name, ["worker", self.address, "--nthreads", "1", "--no-nanny", "--name", name,
                                    "--no-dashboard", "--memory-limit", "0", "--death-timeout", "60", "--local-directory",
                                    str(self.folder / name), "--preload", str(PRELOAD)], env)
        self.workers.append(worker)
        self.wait_for_workers(sum(1 for w in self.workers if w.poll() is None))
        return worker

    def wait_for_workers(self, n: int) -> None:
        import distributed

        with distributed.Client(self.address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
            client.wait_for_workers(n, timeout=START_TIMEOUT_S)

    def tasks_by_worker(self) -> dict[str, list[str]]:
        """{worker pid: the types of the functions its tasks ran, in order} (tests/cluster_preload.py's log)."""
        return {path.stem: path.read_text(encoding="utf-8").split() for path in sorted(self.task_log.glob("*.log"))}

    def _spawn(self, name: str, args: list[str], extra: Optional[dict[str, str]] = None) -> subprocess.Popen:
        log = (self.folder / f"{name}.log").open("w", encoding="utf-8")
        try:
            return subprocess.Popen(_dask() + args, cwd=self.folder, env={**self.env, **(extra or {})},
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def _log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(encoding="utf-8", errors="replace")[-2000:]

    def _alive(self, process: subprocess.Popen, name: str) -> None:
        if process.poll() is not None:
            raise AssertionError(f"dask {name} ended (exit {process.returncode}): {self._log(name)}")

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL one of the cluster's processes (and anything it started) and reap it."""
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(timeout=60)

    def stop(self) -> None:
        for process in [*self.workers, *([self.scheduler] if self.scheduler else [])]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in [*self.workers, *([self.scheduler] if self.scheduler else [])]:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill(process)


@contextmanager
def local_cluster(folder: Path, workers: int = 2, **worker_env: str) -> Iterator[LocalCluster]:
    """`dask scheduler` plus `workers` `dask worker` processes on 127.0.0.1, this checkout on their path; stopped
    (SIGTERM, then SIGKILL) and their temp folder removed on the way out."""
    folder.mkdir(parents=True, exist_ok=True)
    with child_temp() as temp:
        env = guidebench_env(folder / "home", TMPDIR=temp["TMPDIR"], GUIDEBENCH_TEST_TASK_LOG=str(folder / "tasks"))
        cluster = LocalCluster(folder=folder, env=env)
        cluster.task_log.mkdir(exist_ok=True)
        try:
            cluster.start_scheduler()
            for _ in range(workers):
                cluster.start_worker(**worker_env)
            yield cluster
        finally:
            cluster.stop()
