"""guidebench.errors.run_reporting: the one handling of a command's failure, shared by the CLI and each search
worker: one line on stderr, rc 2 for the user's mistake or a refused write, rc 1 and the traceback kept for a bug."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from guidebench.errors import GuidebenchError, run_reporting


def _report(call, tmp_path: Path, capsys, **kwargs) -> tuple[int, list[str], Path]:
    log = tmp_path / "logs" / "last-error.log"
    code = run_reporting(call, prefix="guidebench worker 3", error_log=lambda: log, **kwargs)
    return code, capsys.readouterr().err.splitlines(), log


def test_the_command_s_own_code_comes_back(tmp_path, capsys):
    assert _report(lambda: 7, tmp_path, capsys)[:2] == (7, [])
    assert _report(lambda: None, tmp_path, capsys)[:2] == (0, [])


def test_a_users_mistake_is_one_line_and_rc_2_with_no_traceback_kept(tmp_path, capsys):
    def refuse():
        raise GuidebenchError("--data x: no such folder")

    code, err, log = _report(refuse, tmp_path, capsys)
    assert (code, err) == (2, ["guidebench worker 3: error: --data x: no such folder"]) and not log.exists()


def test_a_full_disk_is_the_machines_one_line_and_rc_2(tmp_path, capsys):
    def full():
        raise OSError(errno.ENOSPC, "No space left on device", "/out/metrics.json")

    code, err, log = _report(full, tmp_path, capsys)
    assert code == 2 and len(err) == 1 and "cannot write /out/metrics.json: the disk is full" in err[0]
    assert not log.exists()


def test_a_bug_is_one_line_naming_the_file_that_keeps_its_traceback(tmp_path, capsys):
    def bug():
        return {}["missing"]

    code, err, log = _report(bug, tmp_path, capsys)
    assert code == 1 and err == [f"guidebench worker 3: error: KeyError: 'missing' (traceback in {log})"]
    assert "Traceback" in log.read_text() and "bug" in log.read_text()
    with pytest.raises(KeyError):
        _report(bug, tmp_path, capsys, debug=True)


def test_a_traceback_that_cannot_be_kept_still_gives_the_line(tmp_path, capsys):
    def unwritable() -> Path:
        raise PermissionError(errno.EACCES, "Permission denied")

    code = run_reporting(lambda: 1 / 0, prefix="guidebench", error_log=unwritable)
    assert code == 1 and capsys.readouterr().err.splitlines() == ["guidebench: error: ZeroDivisionError: division by zero"]


def test_the_cli_and_the_search_worker_share_it():
    # The handling exists once: both callers go through it (tests/test_layers.py keeps errors below both).
    import inspect

    from guidebench import cli
    from guidebench.search import workers

    for module in (cli, workers):
        source = inspect.getsource(module)
        assert "run_reporting(" in source and "except GuidebenchError" not in source, module.__name__
