"""Fuzzing both importers: whatever bytes a log holds, the import never raises a traceback and every
physical line is accounted for.

The invariant checked on every generated file (line policy of `guidebench.data.ingest`):
- `read` is the number of non-blank physical lines and `blank_lines` the number of blank ones;
- `read == imported + quarantined + duplicates`;
- every quarantined line is one entry of `quarantine.jsonl` naming the file, the line and a one-line
  error; every imported line is one dataset record whose `source.line` is that line; the two sets of
  line numbers are disjoint, and the lines in neither are exactly the `duplicates`;
- a line known to be broken (truncated, NaN, wrong type, invalid UTF-8, ...) is quarantined, a line
  known to be good is imported or a duplicate.
Unusable paths (missing, empty, a folder where a file is expected, a device) give one clear line, also
through the CLI in a subprocess.
"""

from __future__ import annotations

import codecs
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.data import load_records
from reliability_ledger import record
from guidebench.simulators.experiments import SIDE_FILE_FORMAT
from guidebench.cli import main
from guidebench.data import NothingImportedError, import_logs
from guidebench.data.ingest import MAX_JSON_DEPTH

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_FULLAUTO = ROOT / "datasets" / "sample" / "fullauto" / "fullauto-decisions.jsonl"
SAMPLE_EXPERIMENTS = ROOT / "datasets" / "sample" / "experiments" / "episode-0000" / "log.jsonl"
FULLAUTO_LINES = SAMPLE_FULLAUTO.read_text(encoding="utf-8").splitlines()[:6]
EXPERIMENT_LINES = SAMPLE_EXPERIMENTS.read_text(encoding="utf-8").splitlines()[:6]

FUZZ = settings(max_examples=30, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# Fields whose wrong type the strict contracts must refuse: (path, wrong value).
FULLAUTO_WRONG = [(("sequence_id",), "3"), (("confidence",), "0.8"), (("turn_id",), 17), (("summary",), []),
                  (("summary", "turn_count"), "3"), (("summary", "turn_plan"), 123), (("guardrail",), "none"),
                  (("action",), "launch"), (("timestamp",), "yesterday"), (("run_id",), None),
                  (("summary", "no_progress_count"), -1), (("confidence",), True)]
EXPERIMENT_WRONG = [(("iteration_id",), "1"), (("cycles",), "1479"), (("valid",), "true"), (("files_changed",), "a.py"),
                    (("strategy_tags",), [1, 2]), (("timestamp_utc",), 12345), (("hypothesis",), 42),
                    (("timestamp_utc",), "2025-13-40T99:00:00Z"), (("change_summary",), None), (("iteration_id",), 1.5)]
NUMERIC = {"fullauto": [("confidence",), ("sequence_id",), ("summary", "turn_count")],
           "experiments": [("cycles",), ("iteration_id",), ("delta_vs_best",)]}
TEXT = {"fullauto": ("summary", "last_agent_message"), "experiments": ("hypothesis",)}


@dataclass(frozen=True)
class Line:
    """One generated line and what the importer must do with it."""

    data: bytes
    expect: str  # "good" (imported or duplicate), "bad" (quarantined), "blank"
    mode: str = ""  # how it was made (good, truncated, nan, deep, ...)


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(obj))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def _drop(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    copy = json.loads(json.dumps(obj))
    node = copy
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return copy


def _raw_number(obj: dict[str, Any], path: tuple[str, ...], literal: str) -> bytes:
    """The object as JSON with one number replaced by a literal (NaN, Infinity, 1e999, ...)."""
    marker = "__NUMBER_MARKER__"
    return json.dumps(_set(obj, path, marker)).replace(f'"{marker}"', literal).encode()


def _made(mode: str, data: bytes, expect: str) -> Line:
    return Line(data, expect, mode)


@st.composite
def lines(draw: st.DrawFn, kind: str) -> Line:
    """A line: good, broken in one of many ways, or blank."""
    pool = FULLAUTO_LINES if kind == "fullauto" else EXPERIMENT_LINES
    base_text = draw(st.sampled_from(pool))
    base = json.loads(base_text)
    mode = draw(st.sampled_from(["good", "good", "good", "truncated", "bytes", "bad_utf8", "wrong_type", "missing",
                                 "nan", "not_object", "whitespace", "blank", "deep", "surrogate", "garbage_text",
                                 "huge_number", "crlf_good"]))
    if mode == "good":
        return _made(mode, base_text.encode(), "good")
    if mode == "crlf_good":
        return _made(mode, base_text.encode() + b"\r", "good")
    if mode == "truncated":
        cut = draw(st.integers(1, len(base_text) - 1))
        return _made(mode, base_text[:cut].encode(), "bad")
    if mode == "bytes":
        data = draw(st.binary(min_size=1, max_size=200).filter(
            lambda b: b"\n" not in b and not b.startswith(codecs.BOM_UTF8)))
        data = data.rstrip(b"\r") or b"\x00"
        return _made(mode, data, "bad")
    if mode == "bad_utf8":
        encoded = base_text.encode()
        at = draw(st.integers(0, len(encoded)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c\x28", b"\x80"]))
        return _made(mode, encoded[:at] + junk + encoded[at:], "bad")
    if mode == "wrong_type":
        path, value = draw(st.sampled_from(FULLAUTO_WRONG if kind == "fullauto" else EXPERIMENT_WRONG))
        return _made(mode, json.dumps(_set(base, path, value)).encode(), "bad")
    if mode == "missing":
        required = ["sequence_id", "run_id", "summary", "action", "confidence", "timestamp"] if kind == "fullauto" \
            else ["iteration_id", "timestamp_utc", "valid", "strategy_tags", "hypothesis"]
        return _made(mode, json.dumps(_drop(base, (draw(st.sampled_from(required)),))).encode(), "bad")
    if mode == "nan":
        path = draw(st.sampled_from(NUMERIC[kind]))
        literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400"]))
        return _made(mode, _raw_number(base, path, literal), "bad")
    if mode == "huge_number":
        # An integer too large for any producer's type still parses; a float that overflows never does.
        return _made(mode, _raw_number(base, NUMERIC[kind][0], "1" + "0" * 400 + ".5"), "bad")
    if mode == "not_object":
        return _made(mode, draw(st.sampled_from([b"[]", b'"text"', b"42", b"null", b"true", b"[1, {\"a\": 2}]"])), "bad")
    if mode == "whitespace":
        return _made(mode, draw(st.sampled_from([b" ", b"\t", b"  \t ", b"\x0b"])), "bad")
    if mode == "blank":
        return _made(mode, b"", "blank")
    if mode == "deep":
        depth = draw(st.sampled_from([MAX_JSON_DEPTH + 1, 500, 990, 5000, 100_000]))
        nested = "[" * depth + '"password=hunter2"' + "]" * depth
        return _made(mode, (base_text[:-1] + f', "extra": {nested}}}').encode(), "bad")
    if mode == "surrogate":
        path = TEXT[kind]
        marker = "__TEXT_MARKER__"
        return _made(mode, json.dumps(_set(base, path, marker)).replace(marker, "half \\ud83d emoji").encode(), "bad")
    text = draw(st.text(min_size=1, max_size=80).filter(lambda t: "\n" not in t and "\r" not in t and t.strip()))
    try:
        json.loads(text)
        return _made(mode, b"not json " + text.encode("utf-8", "surrogatepass"), "bad")
    except ValueError:
        return _made(mode, text.encode("utf-8", "surrogatepass"), "bad")


def physical_lines(data: bytes) -> list[tuple[int, bool]]:
    """(line number, blank?) of every physical line, by the documented policy (independent of the importer)."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    out = []
    for number, part in enumerate(parts, start=1):
        if part.endswith(b"\r"):
            part = part[:-1]
        if number == 1 and part.startswith(codecs.BOM_UTF8):
            part = part[len(codecs.BOM_UTF8):]
        out.append((number, part == b""))
    return out


def assemble(items: list[Line], crlf: bool, trailing_newline: bool, bom: bool) -> bytes:
    """The file bytes of generated lines."""
    end = b"\r\n" if crlf else b"\n"
    body = end.join(item.data for item in items)
    if items and trailing_newline:
        body += end
    return (codecs.BOM_UTF8 if bom and items else b"") + body


@dataclass
class Accounting:
    """Where every line of one import went."""

    report: Any
    quarantined: dict[int, dict[str, Any]]
    imported: dict[int, Any]
    nothing_imported: bool


def run_import(kind: str, log: Path, out: Path, source: Optional[Path] = None) -> Accounting:
    """Import and collect where each line went (never lets any exception but the documented ones through)."""
    nothing = False
    try:
        report = import_logs(source or log, kind, out)
    except NothingImportedError as exc:
        report, nothing = exc.report, True
    quarantine_file = out / "quarantine.jsonl"
    entries = [json.loads(line) for line in quarantine_file.read_text(encoding="utf-8").splitlines()] \
        if quarantine_file.exists() else []
    quarantined: dict[int, dict[str, Any]] = {}
    for entry in entries:
        assert set(entry) == {"source", "line", "error", "raw"}
        assert entry["source"] == str(log)
        assert entry["error"] and "\n" not in entry["error"]
        assert entry["line"] not in quarantined, f"line {entry['line']} quarantined twice"
        quarantined[entry["line"]] = entry
    imported: dict[int, Any] = {}
    if not nothing:
        for record in load_records(out, "all"):
            assert record.source is not None and record.source.line not in imported
            imported[record.source.line] = record
    return Accounting(report, quarantined, imported, nothing)


def check_accounting(result: Accounting, data: bytes, items: Optional[list[Line]] = None) -> None:
    """The invariant of the module docstring."""
    report = result.report
    physical = physical_lines(data)
    nonblank = {number for number, blank in physical if not blank}
    assert report.read == len(nonblank)
    assert report.blank_lines == len(physical) - len(nonblank)
    assert report.read == report.imported + report.quarantined + report.duplicates
    assert len(result.quarantined) == report.quarantined
    assert set(result.quarantined) <= nonblank
    if result.nothing_imported:
        assert report.imported == 0
    else:
        assert len(result.imported) == report.imported and set(result.imported) <= nonblank
        assert not set(result.imported) & set(result.quarantined)
        assert len(nonblank - set(result.imported) - set(result.quarantined)) == report.duplicates
    if items is not None:  # one generated item per physical line: check each line's fate
        assert len(physical) == len(items)
        for number, item in enumerate(items, start=1):
            if item.expect == "bad":
                assert number in result.quarantined, f"line {number} ({item.data[:60]!r}) was not quarantined"
            elif item.expect == "good":
                assert number not in result.quarantined, (number, result.quarantined.get(number))
    accounted = len(result.imported) + len(result.quarantined) + report.duplicates
    record("fuzz", kind=report.kind, files=1, bytes=len(data), lines=len(physical), read=report.read,
           blank=report.blank_lines, imported=report.imported, quarantined=report.quarantined,
           duplicates=report.duplicates, lost=report.read - accounted,
           damage=dict(Counter(item.mode for item in items if item.expect == "bad")) if items else {})


def _layout(kind: str, folder: Path) -> tuple[Path, Path]:
    """(log file to write, path to import) in a fresh folder: a decisions file, or a folder of episodes."""
    logs = folder / "logs"
    if kind == "fullauto":
        logs.mkdir()
        return logs / "fullauto-decisions.jsonl", logs / "fullauto-decisions.jsonl"
    (logs / "episode-0000").mkdir(parents=True)
    return logs / "episode-0000" / "log.jsonl", logs


@pytest.mark.parametrize("kind", ["fullauto", "experiments"])
@FUZZ
@given(data=st.data())
def test_every_line_of_a_fuzzed_log_is_accounted_for(kind: str, data: st.DataObject) -> None:
    items = data.draw(st.lists(lines(kind), min_size=0, max_size=24), label="lines")
    crlf, bom = data.draw(st.booleans(), label="crlf"), data.draw(st.booleans(), label="bom")
    trailing = data.draw(st.booleans(), label="trailing newline")
    raw = assemble(items, crlf, trailing, bom)
    with tempfile.TemporaryDirectory() as tmp:
        log, source = _layout(kind, Path(tmp))
        log.write_bytes(raw)
        result = run_import(kind, log, Path(tmp) / "out", source=source)
    # A last empty item with no line end after it is no line at all: leave it out of the per-line check.
    count = len(physical_lines(raw))
    per_line = items if count == len(items) else items[:-1]
    assert len(per_line) == count
    check_accounting(result, raw, per_line)


@pytest.mark.parametrize("kind", ["fullauto", "experiments"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=st.binary(max_size=3000))
def test_arbitrary_bytes_never_raise_and_balance(kind: str, blob: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log, source = _layout(kind, Path(tmp))
        log.write_bytes(blob)
        result = run_import(kind, log, Path(tmp) / "out", source=source)
    check_accounting(result, blob)
    assert result.nothing_imported


@FUZZ
@given(data=st.data())
def test_fuzzed_side_files_of_a_workspace_are_counted_not_fatal(data: st.DataObject) -> None:
    """Raw, labels, run and events files full of junk: the decisions still import; junk lands in the side quarantine."""
    junk = st.lists(lines("fullauto").map(lambda line: line.data), max_size=8)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "runs").mkdir(parents=True)
        decisions = FULLAUTO_LINES[:3]
        (ws / "fullauto-decisions.jsonl").write_text("\n".join(decisions) + "\n", encoding="utf-8")
        run_id = json.loads(decisions[0])["run_id"]
        for name in ("fullauto-decisions-raw.jsonl", "labels.jsonl", f"runs/{run_id}_events.jsonl", f"runs/{run_id}.json"):
            (ws / name).write_bytes(b"\n".join(data.draw(junk, label=name)))
        result = run_import("fullauto", ws / "fullauto-decisions.jsonl", Path(tmp) / "out", source=ws)
        check_accounting(result, (ws / "fullauto-decisions.jsonl").read_bytes())
        assert result.report.imported == 3
        side = Path(tmp) / "out" / "quarantine-side.jsonl"
        side_entries = side.read_text(encoding="utf-8").splitlines() if side.exists() else []
        assert len(side_entries) == result.report.side_quarantined


@FUZZ
@given(data=st.data())
def test_fuzzed_experiment_side_file_is_counted_not_fatal(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "logs" / "episode-0000"  # the dataset goes beside the logs, never among them
        folder.mkdir(parents=True)
        (folder / "log.jsonl").write_text("\n".join(EXPERIMENT_LINES) + "\n", encoding="utf-8")
        header = json.dumps({"format": SIDE_FILE_FORMAT, "episode_id": "ep-0"}).encode()
        body = data.draw(st.lists(lines("experiments").map(lambda line: line.data), max_size=8), label="side")
        first = data.draw(st.sampled_from([header, b"garbage", b""]), label="header")
        (folder / "log.sim.jsonl").write_bytes(b"\n".join([first, *body]))
        result = run_import("experiments", folder / "log.jsonl", Path(tmp) / "out", source=folder.parent)
        check_accounting(result, (folder / "log.jsonl").read_bytes())
        assert result.report.imported == len(EXPERIMENT_LINES)
        side = Path(tmp) / "out" / "quarantine-side.jsonl"
        side_entries = side.read_text(encoding="utf-8").splitlines() if side.exists() else []
        assert len(side_entries) == result.report.side_quarantined


# ----- huge and over-long lines -------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fullauto", "experiments"])
def test_fields_of_several_megabytes_import_and_are_redacted(kind: str, tmp_path: Path) -> None:
    base = json.loads((FULLAUTO_LINES if kind == "fullauto" else EXPERIMENT_LINES)[0])
    secret = "sk-proj-" + "A1b2C3d4" * 4
    huge = "x" * (3 * 1024 * 1024) + f" key {secret} " + "y" * (3 * 1024 * 1024)
    good = json.dumps(_set(base, TEXT[kind], huge))
    log, source = _layout(kind, tmp_path)
    raw = (good + "\n" + good + "\n").encode()
    log.write_bytes(raw)
    result = run_import(kind, log, tmp_path / "out", source=source)
    check_accounting(result, raw)
    # a repeated decision line is a duplicate; the loop runner reads a repeated experiment line as an entry
    assert (result.report.imported, result.report.duplicates) == ((1, 1) if kind == "fullauto" else (2, 0))
    record_text = next(iter(result.imported.values())).model_dump_json()
    assert len(record_text) > 6 * 1024 * 1024 and secret not in record_text and "[REDACTED:api_key]" in record_text


@pytest.mark.parametrize("kind", ["fullauto", "experiments"])
def test_a_line_over_the_limit_is_quarantined_with_a_short_preview(kind: str, tmp_path: Path) -> None:
    base = (FULLAUTO_LINES if kind == "fullauto" else EXPERIMENT_LINES)
    over = json.dumps(_set(json.loads(base[1]), TEXT[kind], "z" * (2 * 1024 * 1024)))
    log, source = _layout(kind, tmp_path)
    raw = "\n".join([base[0], over, base[2]]).encode()  # no newline at the end either
    log.write_bytes(raw)
    report = import_logs(source, kind, tmp_path / "out", max_line_bytes=1024 * 1024)
    assert (report.read, report.imported, report.quarantined) == (3, 2, 1)
    entry = json.loads((tmp_path / "out" / "quarantine.jsonl").read_text(encoding="utf-8"))
    assert entry["line"] == 2 and entry["error"].startswith("line too long")
    assert len(entry["raw"]) < 4300 and entry["raw"].endswith("bytes in all]")


# ----- unusable paths -----------------------------------------------------------------------------

def _make_unusable_inputs(folder: Path) -> None:
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "blank.jsonl").write_bytes(b"\n\n\r\n")
    (folder / "emptydir").mkdir()
    (folder / "ws" / "fullauto-decisions.jsonl").mkdir(parents=True)
    (folder / "exp" / "episode-0" / "log.jsonl").mkdir(parents=True)
    (folder / "a-file").write_text("x")


_SAMPLE = str(SAMPLE_FULLAUTO.parent)
# name -> (argv relative to a folder made by _make_unusable_inputs, text the one-line error must hold)
UNUSABLE: dict[str, tuple[list[str], str]] = {
    "missing file": (["missing.jsonl", "--kind", "fullauto"], "missing.jsonl: no such file or directory"),
    "missing folder": (["nope/", "--kind", "experiments"], "nope: no such file or directory"),
    "empty file": (["empty.jsonl", "--kind", "fullauto"], "empty.jsonl: nothing could be imported"),
    "empty file (experiments)": (["empty.jsonl", "--kind", "experiments"], "nothing could be imported"),
    "only blank lines": (["blank.jsonl", "--kind", "experiments"], "nothing could be imported (0 line(s) read"),
    "empty folder": (["emptydir", "--kind", "fullauto"], "emptydir: no fullauto-decisions.jsonl found"),
    "empty folder (experiments)": (["emptydir", "--kind", "experiments"], "no *.jsonl experiment logs found"),
    "folder where the decisions file is expected": (
        ["ws", "--kind", "fullauto"], "fullauto-decisions.jsonl: is a directory; expected the decisions JSONL file"),
    "folder named like a log": (["exp", "--kind", "experiments"], "exp: no *.jsonl experiment logs found"),
    "device instead of a file": (["/dev/null", "--kind", "fullauto"], "/dev/null: not a regular file or folder"),
    "device (experiments)": (["/dev/null", "--kind", "experiments"], "/dev/null: not a regular file or folder"),
    "out is a file": ([_SAMPLE, "--kind", "fullauto", "--out", "a-file"], "a-file: --out must be a directory"),
    "out below a file": ([_SAMPLE, "--kind", "fullauto", "--out", "a-file/sub"], "cannot create the --out folder"),
    "unknown kind": ([_SAMPLE, "--kind", "nonsense"], "unknown log kind 'nonsense'"),
}


@pytest.mark.parametrize("case", list(UNUSABLE))
def test_unusable_paths_give_one_clear_line(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _make_unusable_inputs(tmp_path)
    argv, expected = UNUSABLE[case]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    if "--out" not in argv:
        argv = [*argv, "--out", "out"]
    code = main(["data", "import", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("guidebench: error: ") and "\n" not in err and expected in err, err
    assert not (tmp_path / "home" / "last-error.log").exists()
    record("paths", case=case, via="cli in process", clear_one_line_errors=1, tracebacks=0)


@pytest.mark.parametrize("case", ["missing file", "folder where the decisions file is expected", "device (experiments)"])
def test_unusable_paths_through_the_cli_in_a_subprocess(case: str, tmp_path: Path) -> None:
    _make_unusable_inputs(tmp_path)
    argv, expected = UNUSABLE[case]
    env = {**os.environ, "GUIDEBENCH_HOME": str(tmp_path / "home"), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", "guidebench.cli", "data", "import", *argv, "--out", "out"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines_out = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert len(lines_out) == 1 and lines_out[0].startswith("guidebench: error: ") and expected in lines_out[0]
    record("paths", case=case, via="cli subprocess", clear_one_line_errors=1, tracebacks=0)


def test_a_fuzzed_file_through_the_cli_in_a_subprocess(tmp_path: Path) -> None:
    """A file mixing every kind of damage imports from the command line with its counts printed."""
    rng = random.Random(11)
    base = [json.loads(line) for line in FULLAUTO_LINES]
    parts = [FULLAUTO_LINES[0].encode(), FULLAUTO_LINES[0].encode(), FULLAUTO_LINES[1][:50].encode(), b"\xff\xfe",
             _raw_number(base[2], ("confidence",), "NaN"), json.dumps(_set(base[3], ("sequence_id",), "x")).encode(),
             b"", b"[]", b"   ", ("[" * 3000 + "]" * 3000).encode(), FULLAUTO_LINES[4].encode(),
             bytes(rng.getrandbits(8) for _ in range(300)).replace(b"\n", b"")]
    raw = b"\n".join(parts) + b"\n"
    (tmp_path / "fullauto-decisions.jsonl").write_bytes(raw)
    env = {**os.environ, "GUIDEBENCH_HOME": str(tmp_path / "home"), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", "guidebench.cli", "data", "import", "fullauto-decisions.jsonl",
                           "--kind", "fullauto", "--out", "out"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "read 11 lines" in done.stdout and "imported 2, quarantined 8, duplicates 1 (blank lines 1" in done.stdout
    saved = json.loads((tmp_path / "out" / "import_report.json").read_text())
    assert saved["read"] == saved["imported"] + saved["quarantined"] + saved["duplicates"] == 11


def test_an_integer_beyond_int64_is_refused_at_parse_time_with_its_field():
    from guidebench.data.ingest import parse_json_object

    fits = {"a": [2 ** 63 - 1, -(2 ** 63)], "text": "build 123456789012345678901234567890", "x": 1e300}
    assert parse_json_object(json.dumps(fits)) == (fits, None)
    for value, shown in ((2 ** 63, "9223372036854775808"), (-(2 ** 63) - 1, "-9223372036854775809")):
        obj, error = parse_json_object(json.dumps({"summary": {"plan": [1, {"n": value}]}}))
        assert obj is None and error == f"summary.plan.1.n: integer {shown} does not fit 64 bits (the dataset " \
                                         "stores int64)"
