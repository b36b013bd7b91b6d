"""benchmarks.bench_monitor, its small version: A/A repetitions of both loops through the real monitor path, and the
planted changes it reports delays for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_small_benchmark_runs_and_reports_rates_and_delays(tmp_path):
    out = tmp_path / "monitor.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_monitor.py"), "--quick", "--reps", "3",
                           "--only", "aa_fullauto", "--only", "aa_planner", "--only", "planted", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [row["loop"] for row in results["aa"]] == ["full_auto", "planner"]
    for row in results["aa"]:
        assert row["reps"] == 3 and 0 <= row["false_alarms"] <= 3 and row["ci95"][0] <= row["rate"] <= row["ci95"][1]
        assert all(n > 0 for name, n in row["mean_watched"].items() if name != "sidecar_calibration" or
                   row["loop"] == "planner")
    assert set(results["planted"]) == {"guardrails_tightened", "label_mix_shifted", "persona_swapped", "sidecar_lies"}
    tightened = results["planted"]["guardrails_tightened"]
    assert tightened["override_rate"]["detected"] == 1 and tightened["override_rate"]["median_delay"] > 0
    assert results["planted"]["persona_swapped"]["pivot_compliance"]["detected"] == 1
