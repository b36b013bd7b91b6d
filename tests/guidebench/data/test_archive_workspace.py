"""The planner archive import stays in its workspace, never hangs, never aborts, and counts everything.

Each case plants one hostile or odd archive (links out of the imported folder, FIFOs, sockets, huge or deeply
nested packets, odd names, two logs in one repository, out-of-range profiles, a truncated directive) and checks the
refusal, the counted quarantine with its reason, or the correct result.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from archive_support import make_repo, plans, run
from guidebench.data.shards import shards_folder
from guidebench.data.workspace import MAX_FILE_BYTES
from runtime.advisor import FAMILIES

SECRET = "sk-live-SECRETVALUE-0123456789abcdef"


def _outputs(folder: Path) -> str:
    """Every text file the import wrote, concatenated (to look for what must not be there)."""
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()
                   and p.suffix in (".json", ".jsonl", ".md", ".txt"))


def _replace_with_link(file: Path, target: Path) -> None:
    if file.is_dir() and not file.is_symlink():
        shutil.rmtree(file)
    else:
        file.unlink()
    os.symlink(target, file)


def test_packets_linked_out_of_the_workspace_are_never_read_nor_copied(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    secret = tmp_path / "secrets.env"
    secret.write_text(f"API_TOKEN={SECRET}\n")
    first, second = sorted(plans(root))[:2]
    _replace_with_link(plans(root)[first], secret)
    _replace_with_link(plans(root)[second], Path("/etc/passwd"))
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_outside_workspace"] == 2 and report["archive_packet_unreadable"] == 2
    refused = [s for s in side if "leading out of the imported folder" in s["error"]]
    assert len(refused) == 2 and all(s["raw"] == "" for s in refused)
    assert SECRET not in _outputs(tmp_path / "ds") and "root:x:0:0" not in _outputs(tmp_path / "ds")
    assert all(r.plan is None for r in records if r.iteration_id in (first, second))
    assert report["archive_joined"] == len(plans(root)) - 2


def test_an_advisor_linked_to_etc_is_refused_and_every_packet_rebuilt(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    _replace_with_link(root / ".advisor", Path("/etc"))
    report, records, _ = run(root, tmp_path / "ds")
    assert report["archive_folder_unusable"] == 1 and report["archive_outside_workspace"] == 1
    assert report["archive_plans"] == 0 and report["packets_rebuilt"] == len(records)
    assert any(".advisor: a link leading out of the imported folder" in note for note in report["notes"])


def test_an_iteration_folder_linked_outside_is_refused_one_linked_inside_is_followed(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    n = len(plans(root))
    out_plan, in_plan = sorted(plans(root))[:2]
    outside, inside = tmp_path / "elsewhere" / "iter", root / "shared" / "iter"
    for iteration, place in ((out_plan, outside), (in_plan, inside)):
        folder = plans(root)[iteration].parent
        shutil.move(folder, place.with_name(f"iter_{iteration:04d}"))
        os.symlink(place.with_name(f"iter_{iteration:04d}"), folder)
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_outside_workspace"] == 1 and report["archive_entries_unusable"] == 1
    assert any(s["source"].endswith(f"iter_{out_plan:04d}") and "leading out" in s["error"] for s in side)
    by_iteration = {r.iteration_id: r for r in records}
    assert by_iteration[out_plan].plan is None and by_iteration[in_plan].plan is not None
    assert report["archive_plans"] == report["archive_joined"] == n - 1  # the refused one is not a plan found


def test_special_files_are_never_opened(tmp_path: Path, monkeypatch: Any) -> None:
    root, _ = make_repo(tmp_path / "repo", mode="codex")
    files = plans(root)
    fifo, sock, zero, huge = sorted(files)[:4]
    os.unlink(files[fifo])
    os.mkfifo(files[fifo])  # a reader would wait for a writer forever
    os.unlink(files[sock])
    monkeypatch.chdir(files[sock].parent)  # a socket's path must be short
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(files[sock].name)
        _replace_with_link(files[zero], Path("/dev/zero"))
        with files[huge].open("r+b") as handle:
            handle.truncate(MAX_FILE_BYTES + 1)
        report, records, side = run(root, tmp_path / "ds")
    finally:
        server.close()
    assert report["archive_not_regular_file"] == 2 and report["archive_outside_workspace"] == 1
    assert report["archive_too_large"] == 1 and report["archive_packet_unreadable"] == 4
    assert any("a FIFO, not a regular file" in s["error"] for s in side)
    assert any("a socket, not a regular file" in s["error"] for s in side)
    assert any(f"over the {MAX_FILE_BYTES} bytes" in s["error"] for s in side)
    assert report["archive_joined"] == len(files) - 4


def test_a_device_inside_the_workspace_is_never_opened(tmp_path: Path) -> None:
    import stat

    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[0]
    directive = plans(root)[iteration].with_name("directive.json")
    directive.unlink()
    try:
        os.mknod(directive, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's device: a read never ends
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_not_regular_file"] == 1 and report["archive_directive_unreadable"] == 1
    assert any("a character device, not a regular file" in s["error"] for s in side)
    assert next(r for r in records if r.iteration_id == iteration).plan is not None  # its packet still joins


def test_a_packet_nested_300_levels_is_quarantined_and_the_import_goes_on(tmp_path: Path) -> None:
    from guidebench.cli import main

    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[0]
    packet = json.loads(plans(root)[iteration].read_text())
    deep: Any = "bottom"
    for _ in range(300):
        deep = {"k": deep}
    packet["extra_notes"] = deep
    plans(root)[iteration].write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n")
    out = tmp_path / "ds"
    assert main(["data", "import", str(root), "--kind", "experiments", "--out", str(out), "--no-progress"]) == 0
    report, records, side = run(root, tmp_path / "ds2")
    assert report["archive_packet_unreadable"] == 1 and any("nested deeper than 64" in s["error"] for s in side)
    assert next(r for r in records if r.iteration_id == iteration).plan is None
    assert not shards_folder(out).exists() and not shards_folder(tmp_path / "ds2").exists()


def test_undecodable_packet_bytes_are_counted_with_their_reason(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    file = plans(root)[sorted(plans(root))[0]]
    file.write_bytes(file.read_bytes().replace(b'"goal"', b'"go\xff\xfeal"', 1))
    report, _, side = run(root, tmp_path / "ds")
    assert report["archive_packet_unreadable"] == 1
    assert any("packet not UTF-8 text (byte" in s["error"] for s in side)


def test_odd_iteration_names_never_join_and_are_counted(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    first, second = sorted(plans(root))[:2]
    arabic = "".join(chr(0x0660 + int(d)) for d in f"{first:04d}")  # Arabic-Indic digits: int() reads them
    plans(root)[first].parent.rename(plans(root)[first].parent.with_name(f"iter_{arabic}"))
    plans(root)[second].parent.rename(plans(root)[second].parent.with_name(f"iter_{second:04d}a"))
    (root / ".advisor" / "codex").mkdir()
    fullwidth = "".join(chr(0xFF10 + int(d)) for d in "0077")
    (root / ".advisor" / "codex" / f"iter_{fullwidth}_packet.json").write_text("{}\n")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_entries_unusable"] == 3
    assert sum("ASCII digits" in s["error"] for s in side) == 3
    assert all(r.plan is None for r in records if r.iteration_id in (first, second, 77))


def test_manual_archive_that_is_a_file_is_counted(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    shutil.rmtree(root / ".advisor" / "manual_archive")
    (root / ".advisor" / "manual_archive").write_text("not a folder\n")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_entries_unusable"] == 1 and report["packets_rebuilt"] == len(records)
    assert any("manual_archive/ is a file, not a folder" in s["error"] for s in side)


def test_a_sidecar_that_is_a_folder_is_counted(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    (root / "experiments" / "planner-decisions.jsonl").mkdir()
    report, _, _ = run(root, tmp_path / "ds")
    assert report["planner_sidecar_unusable"] == 1
    assert any("planner-decisions.jsonl: a folder, not a regular file" in note for note in report["notes"])


def test_logs_and_side_files_linked_out_of_the_workspace_are_not_read(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"token": SECRET}) + "\n")
    os.symlink(secret, root / "experiments" / "b.jsonl")
    os.symlink(secret, root / "experiments" / "log.sim.jsonl")
    report, _, _ = run(root, tmp_path / "ds")
    assert report["files_unreadable"] == 1 and report["side_files_unusable"] == 1
    assert SECRET not in _outputs(tmp_path / "ds")


def test_a_second_log_in_the_repository_takes_no_plan(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    _, other = make_repo(tmp_path / "other", index=1)
    (root / "experiments" / "a-other.jsonl").write_text(other.log_text())  # before log.jsonl in file order
    report, records, _ = run(root, tmp_path / "ds")
    assert report["archive_joined"] == len(plans(root)) and report["archive_contradicts_log"] == 0
    assert all(r.plan is None for r in records if r.episode_id == "experiments/a-other.jsonl")
    assert sum(r.plan is not None for r in records if r.episode_id == "experiments/log.jsonl") == len(plans(root))


def test_a_resumed_import_redoes_a_shard_whose_plan_changed_behind_a_link(tmp_path: Path, monkeypatch: Any) -> None:
    from guidebench.data import import_logs, pipeline
    from import_support import import_outputs

    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[0]
    folder = plans(root)[iteration].parent
    shutil.move(folder, root / "kept" / folder.name)
    os.symlink(root / "kept" / folder.name, folder)
    out = tmp_path / "ds"
    monkeypatch.setattr(pipeline, "remove_shards", lambda out: None)  # as if killed before the dataset was in place
    import_logs(root, "experiments", out)
    shutil.rmtree(out)
    packet_file = root / "kept" / folder.name / "packet.json"
    packet = json.loads(packet_file.read_text())
    packet["branch"] = "iter/9999-renamed"  # the plan changed; the link did not
    stat = packet_file.stat()
    packet_file.write_text(json.dumps(packet, indent=2, sort_keys=True) + "\n")
    os.utime(packet_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    import_logs(root, "experiments", out)
    monkeypatch.undo()
    import_logs(root, "experiments", tmp_path / "fresh")
    assert import_outputs(out) == import_outputs(tmp_path / "fresh")
    report = json.loads((out / "import_report.json").read_text())
    assert report["archive_contradicts_log"] == 1


@pytest.mark.parametrize("bound, text", [("nan", "NaN"), ("huge", "1e308")])
def test_an_out_of_range_profile_bound_drops_the_field_and_keeps_the_packet(tmp_path: Path, bound: str,
                                                                            text: str) -> None:
    root, _ = make_repo(tmp_path / "repo")
    iteration = sorted(plans(root))[0]
    file = plans(root)[iteration]
    packet = json.loads(file.read_text())
    packet["performance_profile"]["tight_lb_cycles"] = "BOUND"
    # the runner's json.dumps writes a float NaN as NaN
    file.write_text(json.dumps(packet, indent=2, sort_keys=True).replace('"BOUND"', text) + "\n")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_profiles_unusable"] == 1 and report["archive_packet_unreadable"] == 0
    assert any("performance_profile.tight_lb_cycles" in s["error"] and "dropped" in s["error"] for s in side)
    record = next(r for r in records if r.iteration_id == iteration)
    assert record.plan is not None and record.packet.performance_profile is not None
    assert record.packet.performance_profile.tight_lb_cycles is None
    assert record.packet.performance_profile.cp_lb_cycles == packet["performance_profile"]["cp_lb_cycles"]


def test_a_truncated_directive_keeps_its_packet_so_the_sidecar_line_joins(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    _, records, _ = run(root, tmp_path / "intact")
    record = next(r for r in records if r.plan is not None and r.outcome.family is not None)
    iteration = record.iteration_id
    directive = plans(root)[iteration].with_name("directive.json")
    directive.write_text(directive.read_text()[:40])
    family = record.outcome.family
    line = {"schema_version": 1, "timestamp": "2026-01-01T00:00:00Z", "repository": "repo", "iteration_id": iteration,
            "packet_hash": record.inputs_hash, "module": {"name": "deployed", "version": "1.0.0", "checksum": "a" * 64},
            "exploration": {"policy": "greedy"}, "probabilities": {f: float(f == family) for f in FAMILIES},
            "family": family}
    (root / "experiments" / "planner-decisions.jsonl").write_text(json.dumps(line) + "\n")
    report, records, side = run(root, tmp_path / "ds")
    assert report["archive_directive_unreadable"] == 1 and report["planner_joined"] == 1
    assert any("directive not JSON" in s["error"] and "the packet is kept" in s["error"] for s in side)
    kept = next(r for r in records if r.iteration_id == iteration)
    assert kept.plan is not None and kept.plan.directive is None and kept.planner_log is not None
    assert kept.inputs_hash == record.inputs_hash


REAL = Path(__file__).resolve().parents[2] / "fixtures" / "loop_runner_archive"


def test_the_real_runners_archive_joins_whole_beside_every_hostile_neighbour(tmp_path: Path) -> None:
    """Every plan the real runner archived joins its line, and nothing it wrote is quarantined, while a second log,
    a link out, a FIFO and odd names sit beside it."""
    root = tmp_path / "repo"
    shutil.copytree(REAL, root, ignore=shutil.ignore_patterns("*.py", "*.md"))
    n = len(plans(root))
    _, other = make_repo(tmp_path / "other", index=1)
    (root / "experiments" / "a-other.jsonl").write_text(other.log_text())
    manual = root / ".advisor" / "manual_archive"
    os.symlink(Path("/etc"), manual / "iter_0099")
    os.mkfifo(manual / "iter_0098")
    (manual / "iter_00٩٧").mkdir()
    report, records, side = run(root, tmp_path / "ds")
    assert n == 6 and report["archive_plans"] == report["archive_joined"] == n
    assert report["archive_entries_unusable"] == 3 and report["archive_outside_workspace"] == 1
    assert report["quarantined"] == 0 and all("iter_009" in s["source"] or "iter_00٩" in s["source"] for s in side)
    real = [r for r in records if r.episode_id == "experiments/log.jsonl"]
    assert sum(r.plan is not None for r in real) == n and all(r.plan.directive for r in real if r.plan)
    assert all(row["agree"] == row["compared"] == n for row in report["archive_agreement"].values())
