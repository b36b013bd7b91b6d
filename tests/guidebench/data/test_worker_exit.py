"""`--num-proc` import workers die with their import: SIGKILL the importing process while its workers are busy, and
none of its children (the workers, the manager `datasets` forks) is left running (`guidebench.data.worker_exit`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guidebench.cli import main
from kill_support import child_temp, guidebench_env

# The import, with every unit held in its worker: each worker says who it is, then waits to be killed.
DRIVER = """
import os, sys, time
from pathlib import Path

from guidebench.data import shards

here = Path(sys.argv[1])

def held(self, unit, folder):
    (here / f"worker-{os.getpid()}").write_text(str(os.getppid()))
    time.sleep(600)

shards.UnitJob.run = held
from guidebench.cli import main
sys.exit(main(["data", "import", sys.argv[2], "--kind", "experiments", "--out", str(here / "data"),
               "--num-proc", "2", "--no-progress"]))
"""


def _children(parent: int) -> list[int]:
    """Every process whose parent is `parent` (its pool's workers, the map's manager)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _alive(pid: int) -> bool:
    """Running, or stopped; a zombie (killed, not yet reaped by whoever adopted it) is dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_of_a_killed_import_exit_with_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    logs = tmp_path / "logs"
    assert main(["data", "simulate", "experiments", "--episodes", "4", "--seed", "1", "--out", str(logs)]) == 0
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    workers: list[int] = []
    with child_temp(guidebench_env(tmp_path / "home")) as env:
        parent = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(tmp_path), str(logs)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while len(workers) < 2:
                assert parent.poll() is None, f"the import ended (exit {parent.returncode}): {parent.stderr.read()}"
                assert time.monotonic() < deadline, "the workers did not start within 180 s"
                workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
                time.sleep(0.1)
            # each worker is the importing process's child, busy with its unit; `datasets` forked a manager too
            assert {int((tmp_path / f"worker-{pid}").read_text()) for pid in workers} == {parent.pid}
            workers = sorted(set(_children(parent.pid)) | set(workers))
            assert len(workers) >= 3, workers
            os.kill(parent.pid, signal.SIGKILL)
            parent.wait(timeout=60)
            deadline = time.monotonic() + 30
            while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not [pid for pid in workers if _alive(pid)], "processes outlived the killed import"
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait(timeout=60)
            parent.stderr.close()
            for pid in workers:  # never leave one behind, whatever failed above
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
