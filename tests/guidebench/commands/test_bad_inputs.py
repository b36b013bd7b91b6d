"""Every command that writes a folder, fed its bad inputs: exit 2, one line on stderr, no traceback, nothing
written where it was refused, and nothing left in the system temp directory.

The bad inputs: a missing path, the wrong kind of folder (another command's output), what an interrupted
write left (a staging folder beside a missing target, or an old import's half-written folder), a folder
holding other files, an output inside the command's input (or the input itself), an unknown program and a
program that cannot be exported (a KNN few-shot state whose MiniLM vectorizer the runtime does not carry,
by its MLflow run and by its state file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from guidebench.cli import main
from guidebench.outputs import MARKER_FILE


def _dead_pid() -> int:
    """The pid of a process that has already ended (as a killed command's is)."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _leave_staging(target: Path, role: str, command: str | None, pid: int) -> None:
    """What a command killed while writing `target` leaves: a staging sibling, and no target."""
    from optimizers.liveness import owner_token

    staging = target.with_name(f".{target.name}.{role}-{pid}-0123abcd")
    staging.mkdir(parents=True)
    (staging / "partial.json").write_text("{")
    if command is not None:
        host = owner_token().rsplit(":", 2)[0]
        (staging / MARKER_FILE).write_text(json.dumps({"command": command, "state": "writing",
                                                       "owner": f"{host}:{pid}:-"}))


def _run_with_state(uri: str, state: Path, artifacts: Path) -> str:
    """A finished MLflow run of full_auto.predict with this compiled state, as a compile logs it."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("bad-inputs", artifact_location=artifacts.as_uri())
    run = client.create_run(experiment)
    client.log_param(run.info.run_id, "program", "full_auto.predict")
    client.log_artifact(run.info.run_id, str(state))
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def _ok(argv: list[str]) -> None:
    code = main([str(a) for a in argv])
    assert code == 0, argv


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Simulated logs, their dataset, an export, an eval folder, a KNN compile, and the leftovers of killed writes."""
    root = tmp_path_factory.mktemp("bad-inputs")
    w = root / "world"
    w.mkdir()
    saved = {name: os.environ.get(name) for name in ("GUIDEBENCH_HOME", "MLFLOW_TRACKING_URI")}
    os.environ["GUIDEBENCH_HOME"] = str(root / "home")
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    try:
        _ok(["data", "simulate", "fullauto", "--runs", "6", "--seed", "1", "--out", w / "logs"])
        _ok(["data", "import", w / "logs", "--kind", "fullauto", "--out", w / "data", "--no-progress"])
        _ok(["export", "--program", "full_auto.rules", "--name", "rules", "--version", "0.1.0", "--out", w / "module"])
        _ok(["eval", "--program", "full_auto.rules", "--data", w / "data", "--no-track", "--no-progress",
             "--out", w / "eval"])
        _ok(["compile", "--program", "full_auto.predict", "--optimizer", "knn_fewshot", "--data", w / "data",
             "--lm", "fake", "--eval-limit", "2", "--tracking-uri", uri, "--no-progress", "--out", w / "knn"])
        # Unexportable: a KNN state whose selection needs a neural model (the runtime runs lexical ones only).
        state = json.loads((w / "knn" / "program.json").read_text())
        state["knn"]["vectorizer"] = "minilm"
        (root / "minilm").mkdir()
        (root / "minilm" / "program.json").write_text(json.dumps(state))
        run_id = _run_with_state(uri, root / "minilm" / "program.json", root / "artifacts")
        (w / "notes").mkdir()
        (w / "notes" / "mine.txt").write_text("the user's own file")
        (w / "notes.txt").write_text("not a log\n")
        assert main(["data", "import", str(w / "notes.txt"), "--kind", "fullauto", "--out", str(w / "empty-data")]) == 2
        dead = _dead_pid()
        _leave_staging(w / "lost-data", "import", "data import", dead)
        _leave_staging(w / "lost-logs", "simulate-fullauto", "data simulate fullauto", dead)
        _leave_staging(w / "lost-module", "export", None, dead)
        (w / "half-data" / ".staging-x1y2z3" / "dd").mkdir(parents=True)  # an import killed before outputs.py
        (w / "half-data" / "train").mkdir()
        yield {"w": w, "uri": uri, "run": run_id, "minilm": root / "minilm" / "program.json"}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size if p.is_file() else -1 for p in sorted(folder.rglob("*"))}


_IMPORT = ["data", "import", "--kind", "fullauto"]
# (id, argv with {w}-relative paths, text the one line must hold)
CASES: list[tuple[str, list[str], str]] = [
    # data import
    ("import/missing", [*_IMPORT, "{w}/nope", "--out", "{w}/o"], "nope: no such file or directory"),
    ("import/wrong kind", [*_IMPORT, "{w}/data", "--out", "{w}/o"],
     "is a dataset folder (written by `guidebench data import`), not a log folder"),
    ("import/interrupted", [*_IMPORT, "{w}/lost-logs", "--out", "{w}/o"],
     "an interrupted `guidebench data simulate fullauto` never finished writing it"),
    ("import/foreign folder", [*_IMPORT, "{w}/logs", "--out", "{w}/notes", "--force"],
     "holds other files and is not a dataset folder; refusing to replace it"),
    ("import/earlier import", [*_IMPORT, "{w}/logs", "--out", "{w}/data"], "already exists; pass --force"),
    ("import/out inside input", [*_IMPORT, "{w}/logs", "--out", "{w}/logs/ds"], "is inside the input"),
    ("import/out is the input", [*_IMPORT, "{w}/logs", "--out", "{w}/logs", "--force"], "is the input"),
    ("import/unknown kind", ["data", "import", "{w}/logs", "--kind", "nonsense", "--out", "{w}/o"],
     "unknown log kind 'nonsense'"),
    ("import/num-proc zero", [*_IMPORT, "{w}/logs", "--out", "{w}/o", "--num-proc", "0"],
     "--num-proc must be at least 1, got 0"),
    # data simulate
    ("simulate/foreign folder", ["data", "simulate", "fullauto", "--runs", "1", "--out", "{w}/notes"],
     "holds other files"),
    ("simulate/earlier output", ["data", "simulate", "fullauto", "--runs", "1", "--out", "{w}/logs"],
     "earlier `guidebench data simulate fullauto` already exists; pass --force"),
    ("simulate/wrong kind", ["data", "simulate", "experiments", "--episodes", "1", "--out", "{w}/notes.txt"],
     "--out must be a directory"),
    # eval
    ("eval/missing", ["eval", "--program", "full_auto.rules", "--data", "{w}/nope", "--out", "{w}/o"],
     "--data {w}/nope: no such file or folder"),
    ("eval/wrong kind", ["eval", "--program", "full_auto.rules", "--data", "{w}/module", "--out", "{w}/o"],
     "is an exported module (written by `guidebench export`), not a dataset folder or a log folder"),
    ("eval/not a log", ["eval", "--program", "full_auto.rules", "--data", "{w}/notes.txt", "--out", "{w}/o"],
     "not a dataset folder, and nothing in it reads as a fullauto log"),
    ("eval/interrupted", ["eval", "--program", "full_auto.rules", "--data", "{w}/lost-data", "--out", "{w}/o"],
     "an interrupted `guidebench data import` never finished writing it"),
    ("eval/interrupted (old)", ["eval", "--program", "full_auto.rules", "--data", "{w}/half-data", "--out", "{w}/o"],
     "left unfinished by an interrupted `guidebench data import`"),
    ("eval/nothing imported", ["eval", "--program", "full_auto.rules", "--data", "{w}/empty-data", "--out", "{w}/o"],
     "the `guidebench data import` that wrote it imported nothing"),
    ("eval/unknown program", ["eval", "--program", "no.such.program", "--data", "{w}/data", "--out", "{w}/o"],
     "unknown program"),
    ("eval/program of the wrong kind", ["eval", "--program", "{w}/eval", "--data", "{w}/data", "--out", "{w}/o"],
     "is an evaluation folder (written by `guidebench eval`), not an exported module folder"),
    ("eval/interrupted program", ["eval", "--program", "{w}/lost-module", "--data", "{w}/data", "--out", "{w}/o"],
     "an interrupted `guidebench export` never finished writing it"),
    ("eval/foreign folder", ["eval", "--program", "full_auto.rules", "--data", "{w}/data", "--out", "{w}/notes"],
     "holds other files"),
    ("eval/earlier eval", ["eval", "--program", "full_auto.rules", "--data", "{w}/data", "--out", "{w}/eval"],
     "already exists; pass --force"),
    ("eval/out inside input", ["eval", "--program", "full_auto.rules", "--data", "{w}/data", "--out",
                               "{w}/data/eval"], "is inside the input"),
    # compile
    ("compile/missing", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data",
                         "{w}/nope", "--lm", "fake"], "no such file or folder"),
    ("compile/wrong kind", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot", "--data",
                            "{w}/logs", "--lm", "fake"],
     "is a simulated Full Auto log folder (written by `guidebench data simulate fullauto`), not a dataset folder"),
    ("compile/not a dataset", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot",
                               "--data", "{w}/notes", "--lm", "fake"], "not a dataset folder (no dataset.json)"),
    ("compile/interrupted", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot",
                             "--data", "{w}/lost-data", "--lm", "fake"], "interrupted `guidebench data import`"),
    ("compile/unknown program", ["compile", "--program", "no.such", "--optimizer", "labeled_fewshot", "--data",
                                 "{w}/data", "--lm", "fake"], "--program 'no.such'"),
    ("compile/foreign folder", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot",
                                "--data", "{w}/data", "--lm", "fake", "--out", "{w}/notes"], "holds other files"),
    ("compile/earlier compile", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot",
                                 "--data", "{w}/data", "--lm", "fake", "--out", "{w}/knn"],
     "pass --force (or --resume) to replace it"),
    ("compile/out inside input", ["compile", "--program", "full_auto.predict", "--optimizer", "labeled_fewshot",
                                  "--data", "{w}/data", "--lm", "fake", "--out", "{w}/data/c"], "is inside the input"),
    # leaderboard
    ("leaderboard/missing", ["leaderboard", "--data", "{w}/nope", "--programs", "logged", "--no-track",
                             "--out", "{w}/o"], "--data {w}/nope: no such file or folder"),
    ("leaderboard/wrong kind", ["leaderboard", "--data", "{w}/eval", "--programs", "logged", "--no-track",
                                "--out", "{w}/o"], "is an evaluation folder (written by `guidebench eval`)"),
    ("leaderboard/wrong kind of results", ["leaderboard", "--data", "{w}/data", "--results", "{w}/data",
                                           "--no-track", "--out", "{w}/o"], "not a `guidebench eval --out` folder"),
    ("leaderboard/interrupted", ["leaderboard", "--data", "{w}/lost-data", "--programs", "logged", "--no-track",
                                 "--out", "{w}/o"], "interrupted `guidebench data import`"),
    ("leaderboard/unknown program", ["leaderboard", "--data", "{w}/data", "--programs", "no.such", "--no-track",
                                     "--out", "{w}/o"], "no.such"),
    ("leaderboard/foreign folder", ["leaderboard", "--data", "{w}/data", "--programs", "logged", "--no-track",
                                    "--out", "{w}/notes"], "holds other files"),
    ("leaderboard/out inside input", ["leaderboard", "--data", "{w}/data", "--programs", "logged", "--no-track",
                                      "--out", "{w}/data/board"], "is inside the input"),
    # export
    ("export/unknown program", ["export", "--program", "no.such", "--name", "x", "--version", "0.1.0",
                                "--out", "{w}/o"], "unknown program 'no.such'"),
    ("export/unexportable run", ["export", "{run}", "--tracking-uri", "{uri}", "--name", "x", "--version", "0.1.0",
                                 "--out", "{w}/o"], "the 'minilm' vectorizer cannot be exported"),
    ("export/unexportable state", ["export", "--program", "full_auto.predict", "--state", "{minilm}",
                                   "--name", "x", "--version", "0.1.0", "--out", "{w}/o"], "cannot be exported"),
    ("export/missing state", ["export", "--program", "full_auto.predict", "--state", "{w}/nope.json",
                              "--name", "x", "--version", "0.1.0", "--out", "{w}/o"], "no such file"),
    ("export/foreign folder", ["export", "--program", "full_auto.rules", "--name", "x", "--version", "0.1.0",
                               "--out", "{w}/notes", "--force"], "is not an exported module; refusing to replace it"),
    ("export/earlier export", ["export", "--program", "full_auto.rules", "--name", "x", "--version", "0.1.0",
                               "--out", "{w}/module"], "already exists; pass --force"),
    ("export/out holds the input", ["export", "--program", "full_auto.rules", "--state", "{w}/module/program.json",
                                    "--name", "x", "--version", "0.1.0", "--out", "{w}/module", "--force"],
     "holds the input"),
    # demo
    ("demo/foreign folder", ["demo", "--quick", "--lm", "fake", "--no-progress", "--out", "{w}/notes", "--force"],
     "holds other files"),
    ("demo/wrong kind", ["demo", "--quick", "--lm", "fake", "--no-progress", "--out", "{w}/data", "--force"],
     "(it holds the output of `guidebench data import`)"),
    ("demo/not a folder", ["demo", "--quick", "--lm", "fake", "--no-progress", "--out", "{w}/notes.txt"],
     "--out must be a directory"),
    # run-loop
    ("run-loop/missing", ["run-loop", "--module", "{w}/nope", "--out", "{w}/o"], "no such file or folder"),
    ("run-loop/wrong kind", ["run-loop", "--module", "{w}/data", "--out", "{w}/o"],
     "is a dataset folder (written by `guidebench data import`), not an exported module folder"),
    ("run-loop/interrupted", ["run-loop", "--module", "{w}/lost-module", "--out", "{w}/o"],
     "an interrupted `guidebench export` never finished writing it"),
    ("run-loop/foreign folder", ["run-loop", "--module", "{w}/module", "--out", "{w}/notes"], "holds other files"),
    ("run-loop/out inside input", ["run-loop", "--module", "{w}/module", "--out", "{w}/module/logs"],
     "is inside the input"),
    # shadow report
    ("shadow report/missing", ["shadow", "report", "--module", "{w}/module", "--data", "{w}/nope"],
     "no such file or folder"),
    ("shadow report/wrong kind", ["shadow", "report", "--module", "{w}/data", "--data", "{w}/data"],
     "is a dataset folder (written by `guidebench data import`), not an exported module folder"),
    ("shadow report/no shadow decisions", ["shadow", "report", "--module", "{w}/module", "--data", "{w}/data"],
     "holds no shadow decision of rules@0.1.0"),
    ("shadow report/foreign folder", ["shadow", "report", "--module", "{w}/module", "--data", "{w}/data",
                                      "--out", "{w}/notes"], "holds other files"),
    ("shadow report/out inside input", ["shadow", "report", "--module", "{w}/module", "--data", "{w}/data",
                                        "--out", "{w}/data/report"], "is inside the input"),
    # plan-loop
    ("plan-loop/missing", ["plan-loop", "--module", "{w}/nope", "--out", "{w}/o"], "no such file or folder"),
    ("plan-loop/wrong kind", ["plan-loop", "--module", "{w}/data", "--out", "{w}/o"],
     "is a dataset folder (written by `guidebench data import`), not an exported module folder"),
    ("plan-loop/a Full Auto module", ["plan-loop", "--module", "{w}/module", "--out", "{w}/o"],
     "is a full_auto module; plan-loop needs a planner"),
    ("plan-loop/interrupted", ["plan-loop", "--module", "{w}/lost-module", "--out", "{w}/o"],
     "an interrupted `guidebench export` never finished writing it"),
    # shadow planner-report
    ("shadow planner-report/missing", ["shadow", "planner-report", "--module", "{w}/module", "--data", "{w}/nope"],
     "no such file or folder"),
    ("shadow planner-report/wrong kind", ["shadow", "planner-report", "--module", "{w}/data", "--data", "{w}/data"],
     "is a dataset folder (written by `guidebench data import`), not an exported module folder"),
    ("shadow planner-report/foreign folder", ["shadow", "planner-report", "--module", "{w}/module", "--data",
                                              "{w}/data", "--out", "{w}/notes"], "holds other files"),
    ("shadow planner-report/out inside input", ["shadow", "planner-report", "--module", "{w}/module", "--data",
                                                "{w}/data", "--out", "{w}/data/report"], "is inside the input"),
    # search
    ("search/foreign folder", ["search", "--program-family", "full_auto", "--data", "{w}/data", "--trials", "1",
                               "--lm", "fake", "--out", "{w}/notes", "--force"], "holds other files"),
    ("search/out inside input", ["search", "--program-family", "full_auto", "--data", "{w}/data", "--trials", "1",
                                 "--lm", "fake", "--out", "{w}/data/search"], "is inside the input"),
    # baselines writes a report file
    ("baselines/foreign file", ["baselines", "--fullauto", "{w}/data", "--fullauto-programs", "logged",
                                "--planner-programs", "", "--out", "{w}/notes.txt", "--force"],
     "--out {w}/notes.txt: exists and was not written by `guidebench baselines`; refusing to overwrite it"),
    # baselines and promote read datasets and exports too
    ("baselines/interrupted", ["baselines", "--fullauto", "{w}/lost-data", "--fullauto-programs", "logged",
                               "--out", "{w}/o.md"], "an interrupted `guidebench data import` never finished writing it"),
    ("promote/interrupted", ["promote", "{w}/lost-module", "--data", "{w}/data"],
     "an interrupted `guidebench export` never finished writing it"),
]


@pytest.fixture
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system temp directory of the test's own, so that anything a command leaves there is seen."""
    folder = tmp_path / "system-temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


@pytest.mark.parametrize("case", [case[0] for case in CASES])
def test_bad_input_gives_one_line_and_exit_2(case: str, world: dict, private_temp: Path, capsys):
    _, template, expected = next(c for c in CASES if c[0] == case)
    values = {"w": str(world["w"]), "uri": world["uri"], "run": world["run"], "minilm": str(world["minilm"])}
    argv = [part.format(**values) for part in template]
    before = _tree(world["w"])
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, err + out
    assert len(lines) == 1 and lines[0].startswith("guidebench: error: "), err
    assert expected.format(**values) in lines[0], lines[0]
    assert "Traceback" not in err + out
    assert _tree(world["w"]) == before  # refused: nothing written, nothing replaced, nothing tidied away
    assert list(private_temp.iterdir()) == []


def test_the_table_covers_every_command_that_writes_a_folder():
    from guidebench.outputs import WRITERS

    commands = {case[0].split("/")[0] for case in CASES}
    expected = {"import" if c == "data import" else "simulate" if c.startswith("data simulate") else c
                for c in WRITERS}
    assert expected <= commands


def test_a_subprocess_error_is_one_line_without_traceback(world: dict, tmp_path: Path):
    """The same through the console script, as a user types it (one case per kind of check)."""
    private = tmp_path / "system-temp"
    private.mkdir()
    env = {**os.environ, "GUIDEBENCH_HOME": str(tmp_path / "home"), "TMPDIR": str(private),
           "PYTHONWARNINGS": "ignore"}
    w = world["w"]
    done = subprocess.run([sys.executable, "-m", "guidebench.cli", "eval", "--program", "full_auto.rules",
                           "--data", str(w / "lost-data"), "--out", str(tmp_path / "o")],
                          env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "interrupted `guidebench data import`" in lines[0] and "Traceback" not in done.stdout
    assert list(private.iterdir()) == [] and not (tmp_path / "o").exists()
