"""The Full Auto import labels its threads in shards (`guidebench.data.fullauto_threads`): cut in several shards,
run in two processes, or killed mid-import and run again, it writes the dataset, report and quarantines one shard
writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from guidebench.data import fullauto_threads, import_logs, shards
from guidebench.data.shards import DONE_FILE, shards_folder
from import_support import import_outputs, record_shard_runs
from kill_support import guidebench_env, kill_at

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "datasets" / "sample" / "fullauto"
SMALL = 300  # decisions a shard holds in these tests: the sample's 1,273 in five shards


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """The sample workspace with a broken decision line, a duplicate and a broken event line (a shard's)."""
    root = tmp_path_factory.mktemp("fullauto-shard-logs") / "logs"
    shutil.copytree(SAMPLE, root)
    decisions = root / "fullauto-decisions.jsonl"
    lines = decisions.read_text(encoding="utf-8").splitlines()
    with decisions.open("a", encoding="utf-8") as handle:
        handle.write('{"truncated": \n' + lines[0] + "\n")
    with _late_events(root).open("a", encoding="utf-8") as handle:
        handle.write("not an event\n")
    return root


def _late_events(root: Path) -> Path:
    """The events file of the run of the log's last decision (a late thread's: not in the first shard)."""
    last = (root / "fullauto-decisions.jsonl").read_text(encoding="utf-8").splitlines()[-3]
    return root / "runs" / f"{json.loads(last)['run_id']}_events.jsonl"


@pytest.fixture(scope="module")
def one_shard(logs: Path, tmp_path_factory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("one") / "data"
    report = import_logs(logs, "fullauto", out)
    assert report.quarantined == 1 and report.duplicates == 1 and report.count("events_quarantined") == 1
    assert fullauto_threads.RECORDS_PER_SHARD > report.imported  # the sample fits one shard
    assert not shards_folder(out).exists()  # removed once the dataset is in place
    return import_outputs(out)


def test_several_shards_import_what_one_does(logs: Path, one_shard: dict, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fullauto_threads, "RECORDS_PER_SHARD", SMALL)
    ran = record_shard_runs(monkeypatch)
    import_logs(logs, "fullauto", tmp_path / "data")
    assert ran == [0, 1, 2, 3, 4]
    assert import_outputs(tmp_path / "data") == one_shard


def test_two_processes_import_what_one_does(logs: Path, one_shard: dict, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fullauto_threads, "RECORDS_PER_SHARD", SMALL)
    import_logs(logs, "fullauto", tmp_path / "data", num_proc=2)
    assert import_outputs(tmp_path / "data") == one_shard


def test_an_import_killed_mid_way_resumes_from_its_finished_shards(logs: Path, one_shard: dict, tmp_path: Path,
                                                                   monkeypatch, capsys) -> None:
    out = tmp_path / "data"
    env = guidebench_env(tmp_path / "home", GUIDEBENCH_TEST_SHARD_RECORDS=str(SMALL))
    kill_at("import:2", ["data", "import", logs, "--kind", "fullauto", "--out", out, "--no-progress"], tmp_path, env)
    assert not out.exists()
    done = [folder for folder in shards_folder(out).iterdir() if (folder / DONE_FILE).is_file()]
    assert len(done) == 2
    monkeypatch.setattr(fullauto_threads, "RECORDS_PER_SHARD", SMALL)
    ran = record_shard_runs(monkeypatch)
    import_logs(logs, "fullauto", out)
    assert ran == [2, 3, 4]  # the finished shards are taken as they are
    assert "resuming: 2 of 5 shard(s)" in capsys.readouterr().err
    assert import_outputs(out) == one_shard  # the dataset an uninterrupted import writes
    assert not shards_folder(out).exists()


def test_a_changed_event_file_labels_its_shard_again(logs: Path, tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    monkeypatch.setattr(fullauto_threads, "RECORDS_PER_SHARD", SMALL)
    run = shards.UnitJob.run

    def stop_after_all(self, unit, folder):  # type: ignore[no-untyped-def]
        run(self, unit, folder)
        if unit.index == 4:
            raise KeyboardInterrupt  # every shard finished, the dataset not written

    monkeypatch.setattr(shards.UnitJob, "run", stop_after_all)
    out = tmp_path / "data"
    with pytest.raises(KeyboardInterrupt):
        import_logs(copy, "fullauto", out)
    with _late_events(copy).open("a", encoding="utf-8") as handle:
        handle.write("not an event either\n")
    ran: list[int] = []
    monkeypatch.setattr(shards.UnitJob, "run", lambda self, unit, folder: (ran.append(unit.index),
                                                                           run(self, unit, folder)))
    report = import_logs(copy, "fullauto", out)
    assert len(ran) == 1 and report.count("events_quarantined") == 2  # only the shard holding that run
