"""guidebench.lm.fake: the fake engine reads the output fields from the adapter's prompt and answers in format;
scripted answers come first, and its state round-trips."""

from __future__ import annotations

from guidebench.lm.fake import FakeEngine, fake_answer, output_fields
from lm_support import adapter_request


def test_fake_engine_reads_output_fields_and_answers_in_format():
    request = adapter_request(demos=0)
    fields = output_fields(request.system)
    assert [name for name, _ in fields] == ["action", "next_input", "reason", "confidence"]
    answer = fake_answer(request)
    assert answer.startswith("[[ ## action ## ]]\nstop") and answer.endswith("[[ ## completed ## ]]")


def test_fake_engine_scripts_and_state():
    engine = FakeEngine(["first", "second"])
    texts = [engine.complete(adapter_request(demos=0)).text for _ in range(3)]
    assert texts[:2] == ["first", "second"] and texts[2].startswith("[[ ## action ## ]]")
    assert FakeEngine.load_state(engine.dump_state()).script == ["first", "second"]


def test_the_fake_lm_reads_the_compact_rendering_like_the_original():
    """full_auto.compact gets the rule policy's action for the same summary, as full_auto.predict does."""
    import json

    import dspy

    import programs
    from guidebench.lm.factory import make_lm
    from runtime.fullauto import FullAutoTurnSummary

    plan_open = json.dumps([{"step": "write the parser", "status": "completed"},
                            {"step": "add tests", "status": "in_progress"}])
    plan_done = json.dumps([{"step": "write the parser", "status": "completed"}])
    cases = {
        "stop": dict(last_turn_status="failed", turn_error="sandbox crashed", turn_plan=plan_open),
        "pause": dict(last_turn_status="completed", turn_plan=plan_open, pending_approvals='[{"command": "rm -rf x"}]'),
        "continue": dict(last_turn_status="completed", turn_plan=plan_open),
    }
    cases["stop (plan done)"] = dict(last_turn_status="completed", turn_plan=plan_done)
    with dspy.context(lm=make_lm("fake", cache=False)):
        for expected, fields in cases.items():
            summary = FullAutoTurnSummary.model_validate({"thread_id": "t", "turn_id": "u", **fields}, strict=False)
            inputs = programs.decision_inputs(summary)
            original = programs.get("full_auto.predict")(**inputs)
            compact = programs.get("full_auto.compact")(**inputs)
            assert original.action == expected.split()[0], expected
            assert compact.action == original.action, expected
