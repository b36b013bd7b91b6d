"""A real local cluster (`dask scheduler` and two `dask worker` processes on 127.0.0.1): `data import`, `eval`,
`postmortem` and `compile` with `--cluster` give what one process gives, byte for byte but the timings; a worker
killed mid-task has its task run again elsewhere; a cluster that goes away ends the import in one line that names
it, and the import run again resumes from the finished shards."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the cluster extra: pip install -e '.[cluster]'")

from cluster_support import local_cluster  # noqa: E402
from guidebench.cli import main  # noqa: E402
from import_support import import_outputs  # noqa: E402
from kill_support import guidebench_env  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "datasets" / "sample"
# what no two runs share (timings), or what the workbench home's state decides (outcome models read from its cache)
TIMINGS = ("latency_s", "latency_s_per_decision", "wall_s", "started_at", "mlflow_run_id", "data", "threads",
           "from_cache")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Scheduler and two workers for the module."""
    with local_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """Ten sample episodes (three with planner archives), one line broken: quarantined the same way on both."""
    root = tmp_path_factory.mktemp("cluster-logs") / "logs"
    for episode in sorted((SAMPLE / "experiments").iterdir())[:10]:
        shutil.copytree(episode, root / episode.name)
    with (root / "episode-0002" / "log.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"iteration_id": "not a number"}\n')
    return root


def _import(logs: Path, kind: str, out: Path, *extra: str) -> None:
    assert main(["data", "import", str(logs), "--kind", kind, "--out", str(out), "--no-progress", *extra]) == 0


def _without_timings(value):
    if isinstance(value, dict):
        return {key: _without_timings(item) for key, item in value.items() if key not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(item) for item in value]
    return value


def eval_outputs(folder: Path) -> dict[str, object]:
    """An eval folder's metrics, rows and summary, without what timing (or the folder's name) changes."""
    rows = pd.read_parquet(folder / "results.parquet")
    rows = rows.drop(columns=[name for name in rows.columns if "latency" in name])
    return {"metrics": _without_timings(json.loads((folder / "metrics.json").read_text(encoding="utf-8"))),
            "rows": rows.to_json(orient="records"),
            "summary": _without_timings(json.loads((folder / "summary.json").read_text(encoding="utf-8"))),
            # its cost outliers are latencies
            "postmortem": _without_timings({key: value for key, value in json.loads(
                (folder / "postmortem.json").read_text(encoding="utf-8")).items() if key != "cost"})}


def test_import_eval_and_postmortem_on_two_workers_are_one_process(cluster, logs, home, tmp_path, capsys) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _import(logs, "experiments", one)
    _import(logs, "experiments", two, "--cluster", cluster.address)
    assert import_outputs(two) == import_outputs(one)
    imported = cluster.tasks_by_worker()
    assert len(imported) == 2 and all(kinds == ["UnitJob.run_position"] * len(kinds) for kinds in imported.values())
    assert sum(map(len, imported.values())) == 10  # every episode a task, split across both workers

    # a planner's replay (its off-policy bootstrap too) and the post-mortem's resamples, from the same dataset
    evals = {}
    for name, extra in (("local", []), ("cluster", ["--cluster", cluster.address])):
        evals[name] = tmp_path / f"eval-{name}"
        assert main(["eval", "--program", "planner.rules", "--data", str(one), "--split", "all", "--no-track",
                     "--no-progress", "--resamples", "400", "--out", str(evals[name]), *extra]) == 0
    assert eval_outputs(evals["cluster"]) == eval_outputs(evals["local"])
    ran = [kind for kinds in cluster.tasks_by_worker().values() for kind in kinds]
    assert {"ReplayChunk", "_ChunkDraws", "_Draws"} <= set(ran)
    capsys.readouterr()
    printed = {}
    for name, extra in (("local", []), ("cluster", ["--cluster", cluster.address])):
        assert main(["postmortem", str(evals["local"]), "--recompute", "--json", "--no-progress", *extra]) == 0
        printed[name] = capsys.readouterr().out
    assert printed["cluster"] == printed["local"] and json.loads(printed["local"])


def test_fullauto_import_and_a_trained_program_on_the_cluster(cluster, fitted, home, tmp_path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _import(Path(fitted["logs"]), "fullauto", one)
    _import(Path(fitted["logs"]), "fullauto", two, "--cluster", cluster.address)
    assert import_outputs(two) == import_outputs(one)
    outs = {}
    for name, extra in (("local", []), ("cluster", ["--cluster", cluster.address])):
        outs[name] = tmp_path / f"eval-{name}"
        assert main(["eval", "--program", str(fitted["ex"]), "--data", str(fitted["ds"]), "--no-track",
                     "--no-progress", "--out", str(outs[name]), *extra]) == 0
    assert eval_outputs(outs["cluster"]) == eval_outputs(outs["local"])


def _cli(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "guidebench.cli", *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the import ended first (exit {process.returncode}): {process.stderr.read()}")
        assert time.monotonic() < deadline, "no worker reached the pause"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_worker_killed_mid_task_has_its_task_run_elsewhere(logs, home, tmp_path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _import(logs, "experiments", one)
    marker = tmp_path / "paused"
    with local_cluster(tmp_path / "cluster", workers=0) as cluster:
        doomed = cluster.start_worker(GUIDEBENCH_TEST_PAUSE_AFTER="0", GUIDEBENCH_TEST_PAUSE_MARKER=str(marker))
        cluster.start_worker()
        process = _cli(["data", "import", str(logs), "--kind", "experiments", "--out", str(two), "--no-progress",
                        "--cluster", cluster.address], guidebench_env(tmp_path / "home"))
        try:
            _wait_for(marker, process)
            cluster.kill(doomed)  # mid-task: its episode is half read, its shard not written
            _, stderr = process.communicate(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 0, stderr
    assert import_outputs(two) == import_outputs(one)


@pytest.mark.slow
def test_a_cluster_gone_mid_import_is_named_and_the_rerun_resumes(logs, home, tmp_path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _import(logs, "experiments", one)
    marker = tmp_path / "paused"
    with local_cluster(tmp_path / "cluster", workers=0) as cluster:
        cluster.start_worker(GUIDEBENCH_TEST_PAUSE_AFTER="3", GUIDEBENCH_TEST_PAUSE_MARKER=str(marker))
        address = cluster.address
        process = _cli(["data", "import", str(logs), "--kind", "experiments", "--out", str(two), "--no-progress",
                        "--cluster", address], guidebench_env(tmp_path / "home"))
        try:
            _wait_for(marker, process)
            for worker in cluster.workers:
                cluster.kill(worker)
            cluster.kill(cluster.scheduler)
            _, stderr = process.communicate(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 2  # a GuidebenchError: one line, no traceback
    last = stderr.strip().splitlines()[-1]
    assert address in last and "Traceback" not in stderr, stderr
    with local_cluster(tmp_path / "again") as again:
        rerun = subprocess.run([sys.executable, "-m", "guidebench.cli", "data", "import", str(logs), "--kind",
                                "experiments", "--out", str(two), "--no-progress", "--cluster", again.address],
                               env=guidebench_env(tmp_path / "home"), capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr
        assert "resuming: 3 of 10 shard(s)" in rerun.stderr
        assert sum(map(len, again.tasks_by_worker().values())) == 7  # only the unfinished episodes ran again
    assert import_outputs(two) == import_outputs(one)
