"""Output folders (`guidebench.outputs`): the rule, atomic writes, what interrupted writes leave and how
readers name them; every command that writes an output, with a file of the user's planted in it (a table:
`--force` never deletes it); and real commands killed with SIGKILL while writing (import, export,
leaderboard), after which no command takes what they left for finished output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from guidebench.cli import main
from guidebench.errors import GuidebenchError
from guidebench.outputs import (MARKER_FILE, check_input, claim_file, claim_output, foreign_files, interrupted,
                                read_marker, recorded, recover_interrupted, written_by)
from kill_support import guidebench_env, kill_at


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


# ----- the rule ------------------------------------------------------------------------------------

def test_a_new_folder_is_written_aside_then_renamed_into_place_with_its_marker(tmp_path: Path):
    out = tmp_path / "deep" / "eval"
    output = claim_output(out, "eval")
    assert not out.exists() and not (tmp_path / "deep").exists()  # the check writes nothing
    with output.writing() as staging:
        assert staging.parent == out.parent and staging.name.startswith(".eval.eval-")
        assert read_marker(staging)["state"] == "writing"
        (staging / "metrics.json").write_text("{}")
    assert (out / "metrics.json").read_text() == "{}"
    assert read_marker(out)["command"] == "eval" and read_marker(out)["state"] == "complete"
    assert written_by(out) == "eval" and interrupted(out) is None and _siblings(out) == []


def test_an_earlier_output_is_replaced_only_with_force_and_other_folders_never(tmp_path: Path):
    out = tmp_path / "board"
    with claim_output(out, "leaderboard").writing() as staging:
        (staging / "leaderboard.json").write_text("1")
    with pytest.raises(GuidebenchError, match="earlier `guidebench leaderboard` already exists; pass --force"):
        claim_output(out, "leaderboard")
    with pytest.raises(GuidebenchError, match=r"is not an evaluation folder \(it holds the output of "
                                              r"`guidebench leaderboard`\)"):
        claim_output(out, "eval", force=True)
    with claim_output(out, "leaderboard", force=True).writing() as staging:
        (staging / "leaderboard.json").write_text("2")
    assert (out / "leaderboard.json").read_text() == "2" and _siblings(out) == []
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(GuidebenchError, match="holds other files .*refusing to replace it"):
        claim_output(mine, "leaderboard", force=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    with claim_output(empty, "leaderboard").writing() as staging:  # an empty folder is used as it is
        (staging / "leaderboard.json").write_text("3")
    assert (empty / "leaderboard.json").read_text() == "3"


def test_force_replaces_only_what_the_marker_lists_and_names_anything_else(tmp_path: Path):
    out = tmp_path / "eval"
    with claim_output(out, "eval").writing() as staging:
        (staging / "metrics.json").write_text("{}")
        (staging / "plots").mkdir()
        (staging / "plots" / "a.png").write_text("png")
    assert read_marker(out)["files"] == ["metrics.json", "plots/", "plots/a.png"]
    (out / "chapter3.tex").write_text("my thesis")
    (out / "plots" / "mine.png").write_text("my plot")
    (out / "drafts").mkdir()
    (out / "drafts" / "one.md").write_text("draft")
    assert foreign_files(out) == ["chapter3.tex", "drafts/", "plots/mine.png"]  # a foreign folder once, whole
    for force in (False, True):  # --force would not help: it is never offered
        with pytest.raises(GuidebenchError) as refused:
            claim_output(out, "eval", force=force)
        assert str(refused.value) == (f"--out {out}: holds chapter3.tex, drafts/, plots/mine.png, which `guidebench "
                                      "eval` did not write; --force replaces only what it wrote: move them out of "
                                      "the folder, or choose a new or empty folder")
    for planted in ("chapter3.tex", "plots/mine.png", "drafts/one.md"):
        (out / planted).unlink()
    with pytest.raises(GuidebenchError, match=r"holds drafts/, which"):  # an empty folder of yours is yours too
        claim_output(out, "eval", force=True)
    (out / "drafts").rmdir()
    with claim_output(out, "eval", force=True).writing() as staging:
        (staging / "metrics.json").write_text("2")
    assert read_marker(out)["files"] == ["metrics.json"] and not (out / "plots").exists()


def test_no_file_name_makes_a_folder_ours(tmp_path: Path):
    """The files a command writes, without its record, are a user's: --force never replaces them."""
    old = tmp_path / "old-eval"
    old.mkdir()
    for name in ("metrics.json", "summary.json", "results.parquet"):
        (old / name).write_text("x")
    board = tmp_path / "board"
    board.mkdir()
    (board / "leaderboard.json").write_text("{}")
    (board / "chapter3.tex").write_text("my thesis")
    web = tmp_path / "web"  # a web project: a manifest.json that is no frozen module's, a sha256sum list
    (web / "src").mkdir(parents=True)
    (web / "manifest.json").write_text(json.dumps({"name": "app", "icons": []}))
    (web / "src" / "app.js").write_text("js")
    (web / "checksums.sha256").write_text(f"{'0' * 64}  manifest.json\n{'1' * 64}  src/app.js\n")
    for folder, command in ((old, "eval"), (board, "leaderboard"), (web, "export")):
        assert written_by(folder) is None and recorded(folder) is None
        with pytest.raises(GuidebenchError, match="holds other files and is not .*refusing to replace it"):
            claim_output(folder, command, force=True)
    assert (board / "chapter3.tex").read_text() == "my thesis" and (web / "src" / "app.js").read_text() == "js"


def test_a_marker_that_lists_nothing_is_never_replaced(tmp_path: Path):
    out = tmp_path / "ds"  # written before markers listed files: what is the import's cannot be told
    out.mkdir()
    (out / MARKER_FILE).write_text(json.dumps({"command": "data import", "state": "complete"}))
    (out / "dataset.json").write_text("{}")
    assert written_by(out) == "data import" and recorded(out) is None and foreign_files(out) is None
    with pytest.raises(GuidebenchError, match=r"`guidebench data import` left no readable list of the files it "
                                              r"wrote there .* refusing to replace it"):
        claim_output(out, "data import", force=True)
    assert (out / "dataset.json").exists()


def test_an_export_records_its_files_in_its_checksums(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    module = tmp_path / "module"
    assert main(["export", "--program", "full_auto.rules", "--name", "m", "--version", "0.1.0",
                 "--out", str(module)]) == 0
    assert not (module / MARKER_FILE).exists() and written_by(module) == "export"
    assert {"manifest.json", "program.json", "checksums.sha256", "dsrs/"} <= recorded(module)
    assert foreign_files(module) == []
    (module / "checksums.sha256").write_text((module / "checksums.sha256").read_text() + "edited\n")
    with pytest.raises(GuidebenchError, match="left no readable list of the files it wrote there"):
        claim_output(module, "export", force=True)  # its record unreadable: nothing in it is replaced
    assert (module / "program.json").is_file()


def test_export_force_keeps_a_file_the_user_added_even_with_the_checksums_recomputed(tmp_path: Path, monkeypatch,
                                                                                     capsys):
    from runtime.checksums import write_checksums
    from runtime.frozen import verify_frozen

    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    module = tmp_path / "module"
    argv = ["export", "--program", "full_auto.rules", "--name", "m", "--version", "0.1.0", "--out", str(module)]
    assert main(argv) == 0
    (module / "README.md").write_text("my notes", encoding="utf-8")
    (module / "dsrs" / "optimized" / "mine.json").write_text("{}", encoding="utf-8")
    write_checksums(module)  # the module verifies with the user's files listed
    verify_frozen(module)
    capsys.readouterr()
    assert main([*argv, "--force"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "holds README.md, dsrs/optimized/mine.json, which `guidebench export` " \
        "did not write; --force replaces only what it wrote" in err
    assert (module / "README.md").read_text(encoding="utf-8") == "my notes"
    (module / "README.md").unlink()
    (module / "dsrs" / "optimized" / "mine.json").unlink()
    write_checksums(module)
    assert main([*argv, "--force"]) == 0 and foreign_files(module) == []


def test_a_file_put_in_the_folder_while_the_command_works_stops_the_replacement(tmp_path: Path, monkeypatch):
    from guidebench import outputs

    out = tmp_path / "board"
    with claim_output(out, "leaderboard").writing() as staging:
        (staging / "leaderboard.json").write_text("1")
    output = claim_output(out, "leaderboard", force=True)
    with pytest.raises(GuidebenchError, match="holds notes.txt, which `guidebench leaderboard` did not write"):
        with output.writing() as staging:
            (staging / "leaderboard.json").write_text("2")
            (out / "notes.txt").write_text("mine")  # while the board was being scored
    assert (out / "notes.txt").read_text() == "mine" and (out / "leaderboard.json").read_text() == "1"
    assert _siblings(out) == []
    # and between the last check and the swap: the folder set aside is checked again and put back
    monkeypatch.setattr(outputs.OutputFolder, "check", lambda self: None)
    with pytest.raises(GuidebenchError, match="holds notes.txt"):
        with output.writing() as staging:
            (staging / "leaderboard.json").write_text("3")
    assert (out / "notes.txt").read_text() == "mine" and (out / "leaderboard.json").read_text() == "1"
    assert _siblings(out) == []


def test_a_search_resumes_its_own_study_and_replaces_another_only_with_force(tmp_path: Path):
    out = tmp_path / "search"
    with claim_output(out, "search", resume={"study": "a"}).writing() as staging:
        (staging / "trials.json").write_text("1")
    assert read_marker(out)["study"] == "a"
    with claim_output(out, "search", resume={"study": "a"}).writing() as staging:  # the same study: resumed
        (staging / "trials.json").write_text("2")
    refusal = r"earlier `guidebench search` \(study a\) already exists, not of this one \(study b\); pass --force"
    with pytest.raises(GuidebenchError, match=refusal):
        claim_output(out, "search", resume={"study": "b"})
    claim_output(out, "search", force=True, resume={"study": "b"})


def test_a_demo_lists_its_files_when_it_fails_and_a_killed_one_is_left_to_the_user(tmp_path: Path):
    out = tmp_path / "demo"
    with pytest.raises(KeyboardInterrupt):
        with claim_output(out, "demo").in_place() as folder:
            (folder / "home").mkdir()
            (folder / "home" / "mlflow.db").write_text("db")
            raise KeyboardInterrupt
    marker = read_marker(out)
    assert marker["state"] == "failed" and marker["files"] == ["home/", "home/mlflow.db"]
    with claim_output(out, "demo", force=True).in_place() as folder:
        assert list(folder.iterdir()) == [folder / MARKER_FILE]
    killed = tmp_path / "killed"  # SIGKILL while writing in place: no list
    killed.mkdir()
    (killed / MARKER_FILE).write_text(json.dumps({"command": "demo", "state": "writing",
                                                  "owner": f"h:{_dead_pid()}:-"}))
    (killed / "step.json").write_text("{}")
    assert "which recorded no list of its files; remove the folder and run `guidebench demo` again" in \
        interrupted(killed)
    with pytest.raises(GuidebenchError, match="left no readable list"):
        claim_output(killed, "demo", force=True)
    assert (killed / "step.json").exists()


def test_a_report_file_is_written_new_replaced_with_force_when_ours_and_never_otherwise(tmp_path: Path):
    report = tmp_path / "reports" / "baselines.md"
    assert claim_file(report, "baselines").write("# Baselines\n") == report
    text = report.read_text()
    assert text.splitlines()[0].startswith("<!-- written by `guidebench baselines`") and \
        text.endswith("\n# Baselines\n")
    with pytest.raises(GuidebenchError, match="earlier `guidebench baselines` already exists; pass --force"):
        claim_file(report, "baselines")
    claim_file(report, "baselines", force=True).write("# Again\n")
    assert report.read_text().endswith("\n# Again\n") and sorted(p.name for p in report.parent.iterdir()) == \
        ["baselines.md"]
    mine = tmp_path / "chapter3.md"
    mine.write_text("# My chapter\n")
    with pytest.raises(GuidebenchError, match="was not written by `guidebench baselines`; refusing to overwrite it"):
        claim_file(mine, "baselines", force=True)
    with pytest.raises(GuidebenchError, match="is a folder"):
        claim_file(tmp_path, "baselines", force=True)
    output = claim_file(tmp_path / "late.md", "baselines")
    (tmp_path / "late.md").write_text("written by the user meanwhile\n")
    with pytest.raises(GuidebenchError, match="was not written by"):
        output.write("# Baselines\n")
    assert (tmp_path / "late.md").read_text() == "written by the user meanwhile\n"


@pytest.mark.parametrize("where, message", [
    ("input", "is the input"), ("inside", "is inside the input"), ("holder", "holds the input")])
def test_an_output_never_touches_the_input(tmp_path: Path, where: str, message: str):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "fullauto-decisions.jsonl").write_text("")
    out = {"input": logs, "inside": logs / "ds", "holder": tmp_path}[where]
    with pytest.raises(GuidebenchError, match=message):
        claim_output(out, "data import", force=True, inputs=[logs])


def test_a_failed_write_leaves_the_old_folder_and_no_staging(tmp_path: Path):
    out = tmp_path / "ds"
    with claim_output(out, "data import").writing() as staging:
        (staging / "import_report.json").write_text("old")
    with pytest.raises(OSError):
        with claim_output(out, "data import", force=True).writing() as staging:
            (staging / "import_report.json").write_text("new")
            raise OSError(28, "No space left on device")
    assert (out / "import_report.json").read_text() == "old" and _siblings(out) == []


def test_leftovers_of_dead_writers_are_tidied_and_a_swapped_out_folder_comes_back(tmp_path: Path):
    out = tmp_path / "module"
    dead = _dead_pid()
    staging = tmp_path / f".module.export-{dead}-0123abcd"
    staging.mkdir()
    old = tmp_path / f".module.old-{dead}-89abcdef"
    old.mkdir()
    (old / "manifest.json").write_text("{}")
    assert "an interrupted `guidebench export` was replacing it" in interrupted(out)
    done = recover_interrupted(out)
    assert len(done) == 2 and (out / "manifest.json").is_file() and _siblings(out) == []
    alive = tmp_path / f".busy.import-{os.getpid()}-0123abcd"  # a live writer's staging is left alone
    alive.mkdir()
    assert recover_interrupted(tmp_path / "busy") == [] and alive.is_dir()
    assert "is still writing it" in interrupted(tmp_path / "busy")


def test_readers_name_the_interrupted_command(tmp_path: Path):
    dead = _dead_pid()
    (tmp_path / f".ds.import-{dead}-0123abcd").mkdir()
    assert interrupted(tmp_path / "ds", "--data") == (
        f"--data {tmp_path / 'ds'}: does not exist: an interrupted `guidebench data import` never finished writing "
        f"it (it left .ds.import-{dead}-0123abcd); run `guidebench data import` again")
    staging = tmp_path / f".ds.import-{dead}-0123abcd"
    assert "the staging folder of an interrupted `guidebench data import`" in interrupted(staging)
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / MARKER_FILE).write_text(json.dumps({"command": "demo", "state": "writing", "owner": f"h:{dead}:-"}))
    assert "left unfinished by an interrupted `guidebench demo`" in interrupted(demo)
    legacy = tmp_path / "legacy"
    (legacy / ".staging-abc").mkdir(parents=True)
    assert "interrupted `guidebench data import`" in interrupted(legacy)
    with pytest.raises(GuidebenchError, match="interrupted `guidebench data import`"):
        check_input(tmp_path / "ds", "--data", (None,), "a dataset")
    with pytest.raises(GuidebenchError, match="no such file or folder"):
        check_input(tmp_path / "nowhere", "--data", (None,), "a dataset")


# ----- every command that writes an output, with a file of yours planted in it -----------------------------

@dataclass(frozen=True)
class Writes:
    """A command of the table: its arguments (OUT, the world's paths), the exit code of a run that writes its
    output, where a planted file goes (None: OUT itself), and the file names its output holds."""

    command: str
    argv: tuple[str, ...]
    names: tuple[str, ...]
    code: int = 0
    plant_in: Optional[str] = None  # under GUIDEBENCH_HOME, for the working folders of `baselines`
    file: bool = False  # OUT is a file (the report of `baselines`)


_FAKE_COMPILE = ("--lm", "fake", "--eval-limit", "2", "--tracking-uri", "{uri}", "--no-progress")
TABLE = (
    Writes("data import", ("data", "import", "{logs}", "--kind", "fullauto", "--no-progress", "--out", "{out}"),
           ("import_report.json", "dataset.json")),
    Writes("data simulate fullauto", ("data", "simulate", "fullauto", "--runs", "1", "--out", "{out}"),
           ("fullauto-decisions.jsonl",)),
    Writes("data simulate experiments", ("data", "simulate", "experiments", "--episodes", "1", "--out", "{out}"),
           ("episode-0000/",)),
    Writes("eval", ("eval", "--program", "full_auto.rules", "--data", "{data}", "--no-track", "--no-progress",
                    "--out", "{out}"), ("metrics.json", "summary.json", "results.parquet")),
    Writes("compile", ("compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data",
                       "{data}", *_FAKE_COMPILE, "--out", "{out}"), ("compile.json", "program.json")),
    Writes("leaderboard", ("leaderboard", "--data", "{data}", "--programs", "rule", "--no-track", "--out", "{out}"),
           ("leaderboard.json",)),
    Writes("export", ("export", "--program", "full_auto.rules", "--name", "x", "--version", "0.1.0", "--out",
                      "{out}"), ("manifest.json", "checksums.sha256")),
    Writes("run-loop", ("run-loop", "--module", "{module}", "--runs", "1", "--out", "{out}"),
           ("fullauto-decisions.jsonl",)),
    Writes("shadow report", ("shadow", "report", "--module", "{module}", "--data", "{shadow_data}", "--no-record",
                             "--out", "{out}"), ("shadow_report.json", "shadow_report.png")),
    Writes("plan-loop", ("plan-loop", "--module", "{planner}", "--episodes", "1", "--out", "{out}"),
           ("episode-0000/",)),
    Writes("shadow planner-report", ("shadow", "planner-report", "--module", "{planner_candidate}", "--data",
                                     "{planner_data}", "--no-record", "--out", "{out}"), ("planner_report.json",)),
    Writes("search", ("search", "--program-family", "full_auto", "--data", "{data}", "--trials", "1", "--lm", "fake",
                      "--programs", "full_auto.predict", "--optimizers", "labeled_fewshot", "--demos", "1:1",
                      "--no-test", "--tracking-uri", "{uri}", "--no-progress", "--out", "{out}"),
           ("trials.json", "program.json")),
    # The demo is stopped at its first step (see `world`): the folder it owns then is the one --force replaces.
    Writes("demo", ("demo", "--quick", "--lm", "fake", "--no-progress", "--out", "{out}"),
           ("demo_summary.json", "home/"), code=2),
    Writes("baselines", ("baselines", "--fullauto", "{data}", "--fullauto-programs", "rule", "--planner-programs", "",
                         "--split", "all", "--no-track", "--no-progress", "--out", "{out}"),
           (), plant_in="baselines/runs/full_auto/rule", file=True),
)
THESIS = "chapter3.tex"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """The inputs of the table's commands: simulated logs, a small labeled dataset, an export, an MLflow store."""
    from optimizer_support import make_dataset, tracking_uri

    root = tmp_path_factory.mktemp("table")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(root / "home"))
        assert main(["data", "simulate", "fullauto", "--runs", "3", "--seed", "2", "--out", str(root / "logs")]) == 0
        assert main(["export", "--program", "full_auto.rules", "--name", "m", "--version", "0.1.0",
                     "--out", str(root / "module")]) == 0
        assert main(["run-loop", "--shadow", str(root / "module"), "--runs", "2", "--seed", "2",
                     "--out", str(root / "shadow-logs")]) == 0
        assert main(["data", "import", str(root / "shadow-logs"), "--kind", "fullauto", "--no-progress",
                     "--out", str(root / "shadow-data")]) == 0
        for name, explore in (("planner", ["--explore", "epsilon"]), ("planner-candidate", [])):
            assert main(["export", "--program", "planner.rules", "--name", name, "--version", "0.1.0",
                         "--out", str(root / name), *explore]) == 0
        assert main(["plan-loop", "--module", str(root / "planner"), "--shadow", str(root / "planner-candidate"),
                     "--episodes", "1", "--out", str(root / "planner-logs")]) == 0
        assert main(["data", "import", str(root / "planner-logs"), "--kind", "experiments", "--no-progress",
                     "--out", str(root / "planner-data")]) == 0
    return {"logs": root / "logs", "data": make_dataset(root / "data", train=6, dev=3, test=2),
            "module": root / "module", "uri": tracking_uri(root / "mlflow"), "shadow_data": root / "shadow-data",
            "planner": root / "planner", "planner_candidate": root / "planner-candidate",
            "planner_data": root / "planner-data"}


@pytest.fixture
def command_env(tmp_path: Path, monkeypatch, restore_lm) -> Path:
    """A workbench home of the test's own; a demo stops at its first step."""
    from guidebench.demo import steps

    def stop(*_args, **_kwargs):
        raise GuidebenchError("stopped by the test")

    monkeypatch.setattr(steps, "choose_fullauto_subset", stop)
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def _argv(row: Writes, world: dict, out: Path) -> list[str]:
    return [part.format(out=out, **world) for part in row.argv]


def _tree(*folders: Path) -> dict[str, bytes]:
    """Every file's bytes under the folders (markers included: a refused command rewrites nothing)."""
    return {str(p): p.read_bytes() for folder in folders for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(argv: list[str], capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


def test_the_table_covers_every_command_that_writes_an_output():
    from guidebench.outputs import WRITERS

    assert {row.command for row in TABLE} == {*WRITERS, "baselines"}


@pytest.mark.parametrize("row", TABLE, ids=[row.command for row in TABLE])
def test_force_never_deletes_a_file_planted_in_a_commands_output(row: Writes, world: dict, tmp_path: Path,
                                                                  command_env: Path, capsys):
    out = tmp_path / ("report.md" if row.file else "out")
    argv = _argv(row, world, out)
    code, err = _run(argv, capsys)
    assert code == row.code, err
    folder = command_env / row.plant_in if row.plant_in else out
    planted = folder / THESIS
    planted.write_text("the user's own chapter")
    before = _tree(tmp_path)
    code, err = _run([*argv, "--force"], capsys)
    assert code == 2 and len(err) == 1 and THESIS in err[0] and "did not write" in err[0], err
    assert _tree(tmp_path) == before  # refused before any work: nothing deleted, nothing rewritten
    planted.unlink()
    code, err = _run([*argv, "--force"], capsys)  # with only its own files there, --force replaces them
    assert code == row.code, err
    if row.file:
        assert out.read_text().startswith("<!-- written by `guidebench baselines`")
    else:
        assert written_by(out) == row.command and foreign_files(out) == []


@pytest.mark.parametrize("row", TABLE, ids=[row.command for row in TABLE])
def test_force_never_takes_a_folder_for_a_commands_by_its_file_names(row: Writes, world: dict, tmp_path: Path,
                                                                     command_env: Path, capsys):
    out = tmp_path / ("report.md" if row.file else "out")
    if row.file:  # the path of a file of yours
        out.write_text("# My notes\n")
    else:  # the names the command's output holds, beside a file of yours, and no record of the command's
        out.mkdir()
        for name in row.names:
            if name.endswith("/"):
                (out / name).mkdir()
            else:
                (out / name).write_text("{}")
        (out / THESIS).write_text("the user's own chapter")
    before = _tree(tmp_path)
    code, err = _run([*_argv(row, world, out), "--force"], capsys)
    assert code == 2 and len(err) == 1, err
    assert "refusing to replace it" in err[0] or "refusing to overwrite it" in err[0], err
    assert _tree(tmp_path) == before


# ----- commands killed while writing -----------------------------------------------------------------

@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict:
    """Simulated Full Auto logs and a workbench home shared by the kill tests."""
    root = tmp_path_factory.mktemp("kills")
    home = root / "home"
    env = guidebench_env(home)  # each killed command gets a temp folder of its own (kill_support.kill_at)
    env.pop("MLFLOW_TRACKING_URI", None)
    assert main(["data", "simulate", "fullauto", "--runs", "6", "--seed", "3", "--out", str(root / "logs")]) == 0
    return {"root": root, "logs": root / "logs", "env": env}


def _kill_while_writing(role: str, argv: list[str], where: Path, env: dict) -> None:
    """Run the command until its output is written aside but not marked finished, then SIGKILL it."""
    kill_at(f"output:{role}", argv, where, env)


def _refused(capsys, argv: list, expected: str) -> None:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expected in err[0], err


def test_a_killed_import_leaves_no_dataset_and_readers_say_so(logs: dict, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", logs["env"]["GUIDEBENCH_HOME"])
    data = tmp_path / "data"
    argv = ["data", "import", logs["logs"], "--kind", "fullauto", "--out", data, "--no-progress"]
    _kill_while_writing("import", argv, tmp_path, logs["env"])
    assert not data.exists()  # never half a dataset in place
    left, shards = _siblings(data)  # and the finished shards a resumed import takes (guidebench.data.shards)
    assert shards == ".data.import-shards"
    marker = read_marker(data.parent / left)
    assert (marker["command"], marker["state"]) == ("data import", "writing")
    expected = "an interrupted `guidebench data import` never finished writing it"
    _refused(capsys, ["eval", "--program", "full_auto.rules", "--data", data, "--no-track", "--out", tmp_path / "e"],
             expected)
    _refused(capsys, ["leaderboard", "--data", data, "--programs", "logged", "--no-track", "--out", tmp_path / "b"],
             expected)
    _refused(capsys, ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data", data,
                      "--lm", "fake"], expected)
    assert not (tmp_path / "e").exists() and not (tmp_path / "b").exists()
    assert main([str(a) for a in argv]) == 0  # the import again: it tidies what the killed one left
    assert (data / "dataset.json").is_file() and _siblings(data) == []


def test_a_killed_export_leaves_no_module_and_readers_say_so(logs: dict, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", logs["env"]["GUIDEBENCH_HOME"])
    module = tmp_path / "module"
    argv = ["export", "--program", "full_auto.rules", "--name", "killed", "--version", "0.1.0", "--out", module]
    _kill_while_writing("export", argv, tmp_path, logs["env"])
    assert not module.exists() and len(_siblings(module)) == 1
    expected = "an interrupted `guidebench export` never finished writing it"
    _refused(capsys, ["run-loop", "--module", module, "--out", tmp_path / "loop"], expected)
    _refused(capsys, ["eval", "--program", module, "--data", logs["logs"], "--no-track", "--out", tmp_path / "e"],
             expected)
    _refused(capsys, ["leaderboard", "--data", logs["logs"], "--packages", module, "--no-track",
                      "--out", tmp_path / "b"], expected)
    assert main([str(a) for a in argv]) == 0
    assert (module / "manifest.json").is_file() and _siblings(module) == []


def test_a_killed_leaderboard_keeps_the_earlier_board_whole(logs: dict, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", logs["env"]["GUIDEBENCH_HOME"])
    board = tmp_path / "board"
    argv = ["leaderboard", "--data", logs["logs"], "--programs", "logged,full_auto.rules", "--no-track",
            "--out", board]
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    before = (board / "leaderboard.json").read_bytes()
    _kill_while_writing("leaderboard", [*argv, "--force", "--seed", "5"], tmp_path, logs["env"])
    assert (board / "leaderboard.json").read_bytes() == before  # the earlier board, whole
    assert read_marker(board)["state"] == "complete" and len(_siblings(board)) == 1
    fresh = tmp_path / "fresh"
    _kill_while_writing("leaderboard", [*argv[:-1], fresh], tmp_path, logs["env"])
    assert not fresh.exists()
    _refused(capsys, ["leaderboard", "--data", logs["logs"], "--results", fresh, "--no-track",
                      "--out", tmp_path / "b2"], "an interrupted `guidebench leaderboard` never finished writing it")
    assert main([str(a) for a in [*argv, "--force"]]) == 0
    assert _siblings(board) == [] and read_marker(board)["state"] == "complete"
