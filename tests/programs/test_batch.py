"""Programs without an LM answer many records in one call, exactly as one call per record does, without DSPy's
warning about reading `forward` outside a call."""

from __future__ import annotations

import logging

import programs
from optimizer_support import decision_records


def test_a_rule_policy_answers_a_batch_as_it_answers_each_record(caplog):
    program = programs.get("full_auto.rules")
    inputs = [programs.decision_inputs(record) for record in decision_records(8)]
    with caplog.at_level(logging.WARNING):
        batch = program.predict_batch(inputs)
    one_by_one = [program(**record) for record in inputs]
    assert [p.toDict() for p in batch] == [p.toDict() for p in one_by_one]
    assert not [r for r in caplog.records if "forward" in r.getMessage()]

