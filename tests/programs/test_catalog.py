"""programs.catalog: every built-in program's state round-trips as JSON."""

from __future__ import annotations

import json

import pytest

import programs
from program_support import REQUIRED


@pytest.mark.parametrize("name", REQUIRED + ("full_auto.zeroshot", "full_auto.compact", "planner.compact",
                                             "full_auto.compact_state", "full_auto.compact_cot", "full_auto.hybrid"))
def test_program_state_round_trips_as_json(tmp_path, name):
    program = programs.get(name)
    path = tmp_path / "program.json"
    program.save(str(path))
    state = json.loads(path.read_text())
    fresh = programs.get(name)
    for predictor in fresh.predictors():
        predictor.demos = []
    fresh.load(str(path))
    assert [len(p.demos) for p in fresh.predictors()] == [len(p.demos) for p in program.predictors()]
    assert fresh.dump_state() == program.dump_state()
    saved_demos = sum(len(entry.get("demos", [])) for entry in state.values() if isinstance(entry, dict))
    assert saved_demos == sum(len(p.demos) for p in program.predictors())
    assert saved_demos > 0 or not programs.spec(name).uses_lm or name == "full_auto.zeroshot"
