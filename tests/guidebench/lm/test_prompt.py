"""guidebench.lm.prompt: the adapter's request as one completion prompt (prefilled first output marker, stops at
input markers, the closing instruction in the constant prefix)."""

from __future__ import annotations

from guidebench.lm.prompt import first_output_marker, input_markers, render_prompt
from lm_support import adapter_request


def test_render_prompt_prefills_the_first_output_marker_and_stops_at_inputs():
    request = adapter_request(demos=1, stop=("<custom>",))
    rendered = render_prompt(request)
    assert rendered.prefill == "[[ ## action ## ]]\n"
    assert rendered.prompt.endswith("\n\n[[ ## action ## ]]\n")
    assert rendered.prompt.startswith("Your input fields are:")
    # The demo's answer is in the prompt, before the final question.
    assert rendered.prompt.index("[[ ## completed ## ]]") < rendered.prompt.rindex("[[ ## thread_id ## ]]")
    assert "[[ ## completed ## ]]" in rendered.stops and "<custom>" in rendered.stops
    assert "\n[[ ## thread_id ## ]]" in rendered.stops and "\n[[ ## compaction_events ## ]]" in rendered.stops
    assert "\n[[ ## action ## ]]" not in rendered.stops  # an output marker must not stop the answer
    assert render_prompt(request, prefill=False).prefill == ""


def test_markers_are_read_from_the_adapter_text():
    text = "[[ ## goal ## ]]\nx\n\nRespond with the corresponding output fields, starting with the field " \
           "`[[ ## objective ## ]]`, then `[[ ## risk ## ]]`."
    assert first_output_marker(text) == "[[ ## objective ## ]]"
    assert input_markers(text) == ["[[ ## goal ## ]]"]
    assert first_output_marker("no instruction here") is None


def test_the_closing_instruction_joins_the_constant_prefix():
    rendered = render_prompt(adapter_request(demos=1))
    closing = rendered.prompt.index("Respond with the corresponding output fields")
    # right after the system text, before the demos
    assert closing == len(rendered.system.strip()) + 2
    assert rendered.prompt.count("Respond with the corresponding output fields") == 1
    assert rendered.prefix and rendered.prompt.startswith(rendered.prefix) and closing < len(rendered.prefix)
    record = rendered.prompt[len(rendered.prefix):]
    assert record.startswith("[[ ## thread_id ## ]]") and record.endswith("\n\n[[ ## action ## ]]\n")
