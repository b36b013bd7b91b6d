"""programs.lm_call: unparseable model output never raises: one call, a safe pause, or a lenient parse of what the adapter rejects."""

from __future__ import annotations

import pytest

import programs
from programs.seeds import DECISION_SEEDS


def test_unparseable_output_is_a_safe_pause_after_one_call(scripted_lm):
    lm = scripted_lm(["I think we should probably keep going, the tests look fine."])
    out = programs.get("full_auto.predict")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    assert (out.action, out.confidence, out.next_input) == ("pause", 0.0, "")
    assert out.decision.parse_failed and any("ChatAdapter" in error for error in out.parse_errors)
    assert out.raw_output.startswith("I think")
    assert lm.engine.calls == 1  # no JSON-adapter retry


@pytest.mark.parametrize("raw, expected", [
    ("[[ ## action ## ]]\nContinue\n\n[[ ## next_input ## ]]\nRun the tests\n\n[[ ## reason ## ]]\nok\n\n"
     "[[ ## confidence ## ]]\n0.9\n\n[[ ## completed ## ]]", ("continue", 0.9, [])),
    ("[[ ## action ## ]]\nstop\n\n[[ ## confidence ## ]]\n0.7", ("stop", 0.7, [])),
    ("[[ ## action ## ]]\nrestart\n\n[[ ## next_input ## ]]\n\n[[ ## reason ## ]]\nx\n\n[[ ## confidence ## ]]\n0.9",
     ("pause", 0.9, ["unknown action"])),  # as the original: pause, the model's confidence kept
    ("[[ ## action ## ]]\ncontinue\n\n[[ ## next_input ## ]]\n\n[[ ## reason ## ]]\nx\n\n[[ ## confidence ## ]]\nhigh",
     ("continue", 0.0, ["confidence not parseable"])),  # as the original: 0.0, the action kept
])
def test_lenient_parse_of_what_the_adapter_rejects(scripted_lm, raw, expected):
    scripted_lm([raw])
    out = programs.get("full_auto.predict")(**programs.decision_inputs(DECISION_SEEDS[0].summary))
    action, confidence, errors = expected
    assert (out.action, out.confidence) == (action, confidence)
    for fragment in errors:
        assert any(fragment in error for error in out.parse_errors)
    assert bool(out.parse_errors) == bool(errors)
