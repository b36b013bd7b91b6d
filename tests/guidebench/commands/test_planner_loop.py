"""`guidebench plan-loop`: bad arguments are one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

from frozen_support import export_program
from guidebench.cli import main


def test_bad_arguments_are_one_line(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    fullauto = export_program("full_auto.rules", tmp_path / "fa").path
    planner = export_program("planner.rules", tmp_path / "pl").path
    cases = [(["--module", str(fullauto)], "run-loop"),
             (["--module", str(planner), "--episodes", "0"],
              "argument --episodes: 0: expected a whole number at least 1"),
             (["--module", str(tmp_path / "missing")], "no such file or folder"),
             (["--module", str(planner), "--shadow-deadline", "0"], "argument --shadow-deadline: 0: expected a number "
                                                                     "above 0"),
             # refused while parsing, as run-loop refuses it: a NaN deadline is never exceeded (no timeout ever)
             (["--module", str(planner), "--shadow-deadline", "nan"], "argument --shadow-deadline: nan: expected a "
                                                                       "number above 0"),
             (["--module", str(planner), "--shadow-deadline", "inf"], "argument --shadow-deadline: inf: expected a "
                                                                       "number above 0")]
    for extra, why in cases:
        capsys.readouterr()
        assert main(["plan-loop", *extra, "--out", str(tmp_path / "logs")]) == 2
        err = capsys.readouterr().err.strip()
        assert why in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "logs").exists()
