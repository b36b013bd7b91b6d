"""guidebench.lm.grammar: every predictor of every LM program gets an output grammar that llama.cpp accepts."""

from __future__ import annotations

from dspy.lm15 import Message, Request

import guidebench.lm.engine as local_lm
import programs
from guidebench.lm.engine import LOCAL_MODEL_ID, ensure_model
from guidebench.lm.prompt import render_prompt
from programs.seeds import DECISION_SEEDS


def _lm_program_requests() -> list[tuple[str, Request]]:
    """One adapter request per predictor of every LM program, as the engine receives it."""
    from dspy.adapters.chat_adapter import ChatAdapter

    requests = []
    seed = DECISION_SEEDS[0].summary
    for name in programs.names():
        if not programs.spec(name).uses_lm:
            continue
        for path, predictor in programs.get(name).named_predictors():
            inputs = {field: "x" for field in predictor.signature.input_fields}
            if programs.spec(name).kind == "full_auto" and set(inputs) <= set(programs.decision_inputs(seed)):
                inputs = {field: programs.decision_inputs(seed)[field] for field in inputs}
            messages = ChatAdapter().format(predictor.signature, predictor.demos, inputs)
            turns = [Message.user(m["content"]) if m["role"] == "user" else Message.assistant(m["content"])
                     for m in messages[1:]]
            requests.append((f"{name}:{path}", Request(model=LOCAL_MODEL_ID, messages=tuple(turns),
                                                        system=messages[0]["content"])))
    return requests


def test_every_lm_program_gets_a_grammar_llama_cpp_accepts():
    from guidebench.lm.engine import load_vocab
    from guidebench.lm.grammar import output_grammar

    vocab = load_vocab(ensure_model())  # the process's own, closed at exit (a Llama of its own would not be)
    requests = _lm_program_requests()
    assert len(requests) >= 8
    for where, request in requests:
        rendered = render_prompt(request)
        assert rendered.chat_format and rendered.prefill, where
        text = output_grammar(rendered.system, prefilled=True)
        assert text and local_lm.grammar_compiles(vocab, text), where


def test_a_float_of_one_decimal_in_a_range_has_the_decimals_as_its_values():
    from guidebench.lm.grammar import OutputField, decimal_values

    assert decimal_values(OutputField("confidence", "float", "0.0 to 1.0, one decimal")) == [
        "0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
    assert decimal_values(OutputField("score", "float", "1.0 to 2.0, one decimal"))[::10] == ["1.0", "2.0"]
    assert decimal_values(OutputField("confidence", "float", "between 0 and 1")) == []  # no stated range
    assert decimal_values(OutputField("note", "str", "0.0 to 1.0, one decimal")) == []  # only floats
