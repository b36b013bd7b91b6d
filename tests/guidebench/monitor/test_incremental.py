"""The monitor's incremental reads: each record counted once through appends, half-written lines, rotation,
truncation, replacement and a killed run; the anytime-valid statistics it keeps between runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from evals.sequential import RunningSequence, confidence_sequence, exceedance_bound, sequence_bounds
from guidebench.data.fullauto_writer import write_workspace
from guidebench.monitor.fullauto import DECISIONS_FILE, LABELS_FILE, RAW_FILE
from guidebench.monitor.run import run_pass
from guidebench.monitor.support import CHEAP_NUMBERS, turn_vector
from guidebench.simulators.fullauto import FullAutoSimulator

FILES = (DECISIONS_FILE, RAW_FILE, LABELS_FILE)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A simulated workspace of 60 sessions (about 500 decisions, labeled)."""
    folder = tmp_path_factory.mktemp("ws") / "full"
    write_workspace(folder, FullAutoSimulator(3).runs(60), progress=False)
    return folder


def copy_prefix(source: Path, target: Path, share: float, *, cut_last: bool = False) -> None:
    """The first `share` of each log's lines (and every run file): a workspace the runtime is still appending to;
    `cut_last` leaves the next line half written."""
    (target / "runs").mkdir(parents=True, exist_ok=True)
    for name in FILES:
        lines = (source / name).read_bytes().splitlines(keepends=True)
        keep = lines[: int(len(lines) * share)]
        tail = lines[len(keep)][: 40] if cut_last and len(keep) < len(lines) else b""
        (target / name).write_bytes(b"".join(keep) + tail)
    for file in (source / "runs").iterdir():
        (target / "runs" / file.name).write_bytes(file.read_bytes())


def totals(result) -> dict[str, tuple[int, float]]:
    return {name: (m.n + m.reference_n, round(m.total + m.reference_total, 9))
            for name, m in result.state.metrics.items()}


@pytest.fixture(scope="module")
def reference(workspace, tmp_path_factory) -> dict:
    """What one pass over the whole workspace counts."""
    home = tmp_path_factory.mktemp("home")
    return totals(run_pass(workspace, None, reference=100, home=home))


def test_appends_and_half_written_lines_are_counted_once(workspace, reference, tmp_path):
    live = tmp_path / "live"
    for share in (0.3, 0.6):
        copy_prefix(workspace, live, share, cut_last=True)
        first = run_pass(live, None, reference=100, home=tmp_path / "home")
        assert first.records > 0
    copy_prefix(workspace, live, 1.0)
    last = run_pass(live, None, reference=100, home=tmp_path / "home")
    assert totals(last) == reference
    again = run_pass(live, None, reference=100, home=tmp_path / "home")
    assert again.records == 0 and totals(again) == reference and again.state.runs == 4


def test_rotation_truncation_and_replacement_are_reread_never_double_counted(workspace, reference, tmp_path):
    live, home = tmp_path / "live", tmp_path / "home"
    copy_prefix(workspace, live, 0.5)
    run_pass(live, None, reference=100, home=home)
    # rotation: the old file moved away, a new one holds only the lines after it
    decisions = (workspace / DECISIONS_FILE).read_bytes().splitlines(keepends=True)
    half = int(len(decisions) * 0.5)
    os.rename(live / DECISIONS_FILE, live / (DECISIONS_FILE + ".1"))
    (live / DECISIONS_FILE).write_bytes(b"".join(decisions[half:]))
    rotated = run_pass(live, None, reference=100, home=home)
    assert rotated.state.counts["logs_reread"] == 1
    # truncation and replacement: the raw file rewritten whole, the labels file truncated then rewritten whole
    (live / RAW_FILE).write_bytes((workspace / RAW_FILE).read_bytes())
    os.truncate(live / LABELS_FILE, 0)
    run_pass(live, None, reference=100, home=home)
    (live / LABELS_FILE).write_bytes((workspace / LABELS_FILE).read_bytes())
    final = run_pass(live, None, reference=100, home=home)
    assert totals(final) == reference
    assert final.state.counts["duplicates_skipped"] > 0


def test_a_killed_run_loses_nothing(workspace, reference, tmp_path):
    live, home = tmp_path / "live", tmp_path / "home"
    copy_prefix(workspace, live, 1.0)
    code = ("import sys; from pathlib import Path; from guidebench.monitor.run import run_pass; "
            "from guidebench.monitor import state; import time\n"
            "real = state.save_state\n"
            "def slow(path, s):\n    print('saving', flush=True); time.sleep(60); real(path, s)\n"
            "import guidebench.monitor.run as r; r.save_state = slow\n"
            f"run_pass(Path({str(live)!r}), None, reference=100, home=Path({str(home)!r}))")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "saving"  # everything read and counted, nothing saved yet
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    after = run_pass(live, None, reference=100, home=home)
    assert totals(after) == reference and after.state.runs == 1


def test_bad_lines_are_quarantined_with_file_line_and_field(workspace, tmp_path):
    live = tmp_path / "live"
    copy_prefix(workspace, live, 0.2)
    with open(live / DECISIONS_FILE, "ab") as out:
        out.write(b"{not json\n[1, 2]\n" + json.dumps({"action": "fly"}).encode() + b"\n")
    result = run_pass(live, None, reference=100, home=tmp_path / "home")
    lines = len((live / DECISIONS_FILE).read_bytes().splitlines())
    bad = [(q.line, q.field) for q in result.state.quarantine if q.file.endswith(DECISIONS_FILE)]
    assert bad == [(lines - 2, "line"), (lines - 1, "line"), (lines, "action")]
    assert result.state.counts["quarantined"] == 3


def test_running_sequence_matches_the_batch_sequence_and_the_bounds_hold():
    rng = np.random.default_rng(0)
    d = rng.uniform(-1, 1, 400)
    batch = confidence_sequence(d, alpha=0.05, bound=1.0)
    running = RunningSequence()
    parts = [running.extend(chunk) for chunk in np.split(d, [7, 150, 151])]
    mean, v = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    low, high = sequence_bounds(mean, v, np.arange(1, 401), alpha=0.05, scale=2.0, low=-1.0)
    assert np.allclose(low, batch.low) and np.allclose(high, batch.high)
    # the exceedance bound: a new draw beats the max of n with chance above the bound in at most alpha of samples
    n, alpha = 50, 0.1
    chances = 1.0 - rng.beta(n, 1, 20_000)  # the chance above the max of n uniform draws is Beta(1, n)
    assert np.mean(chances > exceedance_bound(n, alpha)) <= alpha + 0.01


def test_cheap_features_are_the_trained_models_own_numbers(workspace):
    from runtime.inputs import input_text
    from runtime.trained import config_inputs, turn_numbers

    config = {"min_confidence": 0.6, "max_turns": 40, "no_progress_limit": 3, "max_tokens": 2_000_000}
    lines = (workspace / DECISIONS_FILE).read_text().splitlines()[:150]
    for line in lines:
        summary = json.loads(line)["summary"]
        full = turn_numbers({**{k: input_text(v) for k, v in summary.items()}, **config_inputs(config)})
        assert turn_vector(summary, config) == pytest.approx([full[i] for i in CHEAP_NUMBERS])


def test_a_lone_surrogate_in_a_logged_id_is_read_and_the_state_reads_back(workspace, tmp_path):
    """JSON lets a writer escape half of a surrogate pair (`"\\ud800"`): the pass counts the line, and the state
    file it leaves is read by the next pass."""
    live = tmp_path / "live"
    copy_prefix(workspace, live, 0.2)
    last = json.loads((live / DECISIONS_FILE).read_bytes().splitlines()[-1])
    last["run_id"], last["turn_id"] = "fullauto-\ud800", "turn-\ud800"
    with open(live / DECISIONS_FILE, "ab") as out:
        out.write(json.dumps(last).encode() + b"\n")
    first = run_pass(live, None, reference=100, home=tmp_path / "home")
    again = run_pass(live, None, reference=100, home=tmp_path / "home")
    assert again.state.counts == first.state.counts and first.state.counts.get("quarantined", 0) == 0
