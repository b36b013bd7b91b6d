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
