"""optimizers.labeled_fewshot: labeled demos for any program, the compact ones included: the labeled examples
carry the compact rendering too, so the compact predictors' demos show their own fields with every output; the
program learned from the demos drawn, and from nothing else."""

from __future__ import annotations

import json

import pytest

import optimizers
import programs
from evals import metrics_fullauto, metrics_planner
from optimizer_support import decision_examples
from programs.seeds import _planner_seed_packets
from runtime import PlannerRecord
from runtime.advisor import ExperimentLogEntry

FULL_AUTO_TRAIN = decision_examples(8)


def _planner_examples() -> list:
    outcome = ExperimentLogEntry.model_validate({
        "iteration_id": 4, "timestamp_utc": "2025-01-01T00:00:00Z", "branch": "b4", "base_branch": "main",
        "base_sha": "a" * 7, "head_sha": "b" * 7, "files_changed": ["kernel.py"], "tests_diff_empty": True,
        "valid": True, "cycles": 1780, "delta_vs_best": -22, "strategy_tags": ["family:break_deps", "unroll"],
        "hypothesis": "interleave", "change_summary": ["edit kernel"], "result_summary": "measured",
        "best_before": 1802})
    return [programs.planner_example(PlannerRecord(record_id=f"r{i}", episode_id="e1", iteration_id=4 + i,
                                                   packet=packet, outcome=outcome))
            for i, (packet, _) in enumerate(_planner_seed_packets() * 2)]


@pytest.mark.parametrize("name", ["full_auto.compact", "planner.compact"])
def test_labeled_fewshot_compiles_the_compact_programs(fake_lm, name):
    kind = programs.spec(name).kind
    train = FULL_AUTO_TRAIN if kind == "full_auto" else _planner_examples()
    metric = metrics_fullauto.metric if kind == "full_auto" else metrics_planner.metric
    result = optimizers.get("labeled_fewshot")().compile(programs.get(name), train, train, metric, seed=2)
    assert result.kept == "optimizer" and result.usage["lm_calls"] == 0
    [predictor] = result.program.predictors()
    assert len(predictor.demos) == 3
    fields = list(predictor.signature.input_fields) + list(predictor.signature.output_fields)
    for demo in predictor.demos:  # a full demo of the compact signature: no "Not supplied" in the prompt
        assert all(demo.get(field) not in (None, "") or field == "next_input" for field in fields)
    inputs = dict(train[0].inputs())
    prediction = result.program(**inputs)
    assert prediction.parse_errors == []
    state = json.loads(json.dumps(result.program.dump_state()))
    reloaded = optimizers.load_compiled(programs.get(name), state)
    assert [dict(d) for d in reloaded.predictors()[0].demos] == [dict(d) for d in predictor.demos]


def test_the_program_learned_from_the_demos_drawn_and_nothing_else(fake_lm):
    dev = decision_examples(4, offset=100)
    result = optimizers.get("labeled_fewshot")().compile(programs.get("full_auto.predict"), FULL_AUTO_TRAIN, dev,
                                                         metrics_fullauto.metric, seed=2)
    [predictor] = result.program.predictors()
    assert len(result.learned_from) == 3 and result.learned_from == sorted(d.record_id for d in predictor.demos)
    assert set(result.learned_from) < {ex.record_id for ex in FULL_AUTO_TRAIN}  # none of dev, not all of train
