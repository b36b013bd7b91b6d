"""Sharded imports: the same dataset, report and quarantines in one process, in two (`datasets`' num_proc), and
after a child killed mid-import is run again (only the unfinished shards are read again)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from guidebench.data import import_logs, shards
from guidebench.data.experiments import episode_units
from guidebench.data.shards import DONE_FILE, shards_folder
from import_support import import_outputs, record_shard_runs
from kill_support import guidebench_env, kill_at

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "datasets" / "sample" / "experiments"
EPISODES = 8


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """Eight sample episodes (three with `.advisor/` archives), one line broken and one archive plan orphaned."""
    root = tmp_path_factory.mktemp("shard-logs") / "logs"
    for episode in sorted(SAMPLE.iterdir())[:EPISODES]:
        shutil.copytree(episode, root / episode.name)
    with (root / "episode-0002" / "log.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"iteration_id": "not a number"}\n{"truncated": \n')
    log = root / "episode-0001" / "log.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    last_plan = max(int(folder.name.removeprefix("iter_"))
                    for folder in (root / "episode-0001" / ".advisor" / "manual_archive").iterdir())
    kept = [line for line in lines if json.loads(line)["iteration_id"] < last_plan]
    log.write_text("".join(kept), encoding="utf-8")  # its last plan has no log line now: quarantined at the end
    return root


@pytest.fixture(scope="module")
def one_process(logs: Path, tmp_path_factory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("one") / "data"
    report = import_logs(logs, "experiments", out)
    assert report.quarantined == 2 and report.count("archive_without_log_line") == 1
    last = (out / "quarantine-side.jsonl").read_text(encoding="utf-8").splitlines()[-1]
    assert "its log has no line for it" in last  # what the import does once every episode is read comes last
    assert not shards_folder(out).exists()  # removed once the dataset is in place
    return import_outputs(out)


def test_logs_sharing_an_archive_stay_in_one_shard_in_file_order(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    (tmp_path / "a" / ".advisor").mkdir()
    files = [tmp_path / "a" / "log.jsonl", tmp_path / "b" / "log.jsonl", tmp_path / "a" / "z.jsonl",
             tmp_path / "c" / "log.jsonl"]
    units = episode_units(files)
    assert [unit.files for unit in units] == [tuple(files[:3]), (files[3],)]  # b sits between a's two logs
    assert tmp_path / "a" / ".advisor" in units[0].reads


def test_two_processes_import_exactly_what_one_does(logs: Path, one_process: dict, tmp_path: Path) -> None:
    out = tmp_path / "data"
    import_logs(logs, "experiments", out, num_proc=2)
    assert import_outputs(out) == one_process


def test_an_import_killed_mid_way_resumes_from_its_finished_shards(logs: Path, one_process: dict, tmp_path: Path,
                                                                   monkeypatch, capsys) -> None:
    out = tmp_path / "data"
    env = guidebench_env(tmp_path / "home")
    argv = ["data", "import", logs, "--kind", "experiments", "--out", out, "--no-progress"]
    kill_at("import:3", argv, tmp_path, env)
    assert not out.exists()
    done = sorted(folder.name for folder in shards_folder(out).iterdir() if (folder / DONE_FILE).is_file())
    assert len(done) == 3
    ran = record_shard_runs(monkeypatch)
    import_logs(logs, "experiments", out)
    assert ran == list(range(3, EPISODES))  # the finished shards are taken as they are
    assert "resuming: 3 of 8 shard(s)" in capsys.readouterr().err
    assert import_outputs(out) == one_process  # the dataset an uninterrupted import writes
    assert not shards_folder(out).exists()


def test_a_changed_log_is_read_again(logs: Path, tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "logs"
    shutil.copytree(logs, copy)
    out = tmp_path / "data"
    ran: list[int] = []
    run = shards.UnitJob.run

    def stop_after_two(self, unit, folder):  # an interruption, in this process
        if len(ran) == 2:
            raise KeyboardInterrupt
        ran.append(unit.index)
        run(self, unit, folder)

    monkeypatch.setattr(shards.UnitJob, "run", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        import_logs(copy, "experiments", out)
    with (copy / "episode-0000" / "log.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("\n")  # a blank line more: the first shard's fingerprint changes
    ran.clear()
    monkeypatch.setattr(shards.UnitJob, "run", lambda self, unit, folder: (ran.append(unit.index),
                                                                           run(self, unit, folder)))
    report = import_logs(copy, "experiments", out)
    assert ran == [0, *range(2, EPISODES)] and report.blank_lines == 1


def test_a_spool_reads_adopted_files_in_place_after_its_own_lines(tmp_path: Path) -> None:
    from guidebench.data.spool import GroupedSpool
    from guidebench.data.shards import KeptSpool

    with KeptSpool(tmp_path / "shard.jsonl") as shard:
        for group, text in (("b", "b1"), ("c", "c1"), ("b", "b2 ünï")):
            shard.append(group, text)
        shard.save_index(tmp_path / "index.json")
    with GroupedSpool(tmp_path / "main.jsonl") as spool:
        spool.append("a", "a1")
        spool.append("b", "b0")
        spool.adopt(tmp_path / "shard.jsonl", json.loads((tmp_path / "index.json").read_text()))
        assert list(spool.read_group("b")) == ["b0", "b1", "b2 ünï"]
        spool.append("c", "c2")  # appending after a read goes to the end of its own file
        assert [list(spool.read_group(g)) for g in spool.groups()] == [["a1"], ["b0", "b1", "b2 ünï"], ["c1", "c2"]]
        assert len(spool) == 6 and spool.size("c") == 2
    assert (tmp_path / "shard.jsonl").is_file() and not (tmp_path / "main.jsonl").exists()
