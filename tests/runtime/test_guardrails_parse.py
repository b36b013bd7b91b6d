"""parse_decision: every output shape a model produces, and the safe default (never raises)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import GuidanceDecision, parse_decision

SAFE = ("pause", 0.0, "")

# (id, raw, expected (action, confidence, next_input) or SAFE, parse error expected)
CASES = [
    ("json", '{"action": "continue", "next_input": "run tests", "reason": "plan ok", "confidence": 0.8}',
     ("continue", 0.8, "run tests"), False),
    ("json-upper-keys", '{"Action": "STOP", "Confidence": 0.9}', ("stop", 0.9, ""), False),
    ("json-int-confidence", '{"action": "pause", "confidence": 1}', ("pause", 1.0, ""), False),
    ("fenced-json", 'Here you go:\n```json\n{"action": "review", "confidence": 0.7}\n```\nThanks',
     ("review", 0.7, ""), False),
    ("fenced-no-lang", '```\n{"action": "stop", "confidence": 0.66}\n```', ("stop", 0.66, ""), False),
    ("json-in-prose", 'Decision: {"action": "continue", "confidence": 0.9, "next_input": "go"} end',
     ("continue", 0.9, "go"), False),
    ("sections", "[[ ## action ## ]]\ncontinue\n\n[[ ## next_input ## ]]\nFix the failing test\n\n"
                 "[[ ## reason ## ]]\nTests fail\n\n[[ ## confidence ## ]]\n0.85\n\n[[ ## completed ## ]]",
     ("continue", 0.85, "Fix the failing test"), False),
    ("sections-with-json-next-input", "[[ ## action ## ]]\ncontinue\n[[ ## next_input ## ]]\n{\"a\": 1}\n"
                                      "[[ ## confidence ## ]]\n0.9", ("continue", 0.9, '{"a": 1}'), False),
    ("sections-prefilled-marker", "[[ ## action ## ]]\nstop\n[[ ## confidence ## ]]\n0.95\n",
     ("stop", 0.95, ""), False),
    ("key-value", "action: continue\nnext_input: keep going\nreason: fine\nconfidence: 0.75",
     ("continue", 0.75, "keep going"), False),
    ("key-value-quoted", '"action": "pause",\n"confidence": "0.6",', ("pause", 0.6, ""), False),
    ("key-value-markdown", "- **action**: review\n- **confidence**: 0.9", ("review", 0.9, ""), False),
    ("action-case", '{"action": " Continue ", "confidence": 0.9}', ("continue", 0.9, ""), False),
    # read as the original reads them (formats.md §1.4.1): unknown action -> pause, confidence kept
    ("action-punctuation", '{"action": "continue.", "confidence": 0.9}', ("pause", 0.9, ""), True),
    ("numeric-string-confidence", '{"action": "continue", "confidence": "0.8"}', ("continue", 0.8, ""), False),
    # Rust's parse::<f32> takes no surrounding whitespace: 0.0, action kept
    ("numeric-string-padded", '{"action": "continue", "confidence": " 0.70 "}', ("continue", 0.0, ""), True),
    ("confidence-above-1-kept", '{"action": "continue", "confidence": 1.5}', ("continue", 1.5, ""), False),
    ("confidence-negative-kept", '{"action": "continue", "confidence": -0.2}', ("continue", -0.2, ""), False),
    ("unknown-action", '{"action": "proceed", "confidence": 0.9, "next_input": "x"}', ("pause", 0.9, "x"), True),
    ("empty-action", '{"action": "", "confidence": 0.9}', ("pause", 0.9, ""), True),
    ("missing-action", '{"confidence": 0.9}', ("pause", 0.9, ""), True),
    # missing or unparseable confidence -> 0.0, action kept (the low-confidence guardrail then pauses)
    ("missing-confidence", '{"action": "continue"}', ("continue", 0.0, ""), True),
    ("null-confidence", '{"action": "continue", "confidence": null}', ("continue", 0.0, ""), True),
    ("non-numeric-confidence", '{"action": "continue", "confidence": "high"}', ("continue", 0.0, ""), True),
    ("percent-confidence", '{"action": "continue", "confidence": "80%"}', ("continue", 0.0, ""), True),
    ("bool-confidence", '{"action": "continue", "confidence": true}', ("continue", 0.0, ""), True),
    ("inf-confidence-text", '{"action": "continue", "confidence": "inf"}', ("continue", float("inf"), ""), False),
    ("list-confidence", '{"action": "continue", "confidence": [0.9]}', ("continue", 0.0, ""), True),
    ("placeholder", "[[ ## action ## ]]\ncontinue\n[[ ## confidence ## ]]\n"
                    "Not supplied for this particular example.", ("continue", 0.0, ""), True),
    # safe default: nothing readable
    ("garbage", "lorem ipsum dolor sit amet", SAFE, True),
    ("empty", "", SAFE, True),
    ("whitespace", "   \n\t", SAFE, True),
    ("json-array-one-object", '[{"action": "continue", "confidence": 0.9}]', ("continue", 0.9, ""), False),
    ("json-array-two-objects", '[{"action": "continue", "confidence": 0.9}, {"action": "stop", "confidence": 1}]',
     SAFE, True),
    ("broken-json", '{"action": "continue", "confidence": ', SAFE, True),
    ("none", None, SAFE, True),
    ("int", 42, SAFE, True),
    ("list", ["continue", 0.9], SAFE, True),
    # bytes and dicts
    ("bytes", b'{"action": "stop", "confidence": 0.9}', ("stop", 0.9, ""), False),
    ("bytes-invalid-utf8", b"\xff\xfe\x00garbage", SAFE, True),
    ("dict", {"action": "continue", "next_input": "go on", "reason": "r", "confidence": 0.7},
     ("continue", 0.7, "go on"), False),
    ("dict-string-confidence", {"action": "review", "confidence": "0.65"}, ("review", 0.65, ""), False),
    ("dict-unknown-action", {"action": "abort", "confidence": 0.9}, ("pause", 0.9, ""), True),
    ("dict-non-string-action", {"action": 3, "confidence": 0.9}, ("pause", 0.9, ""), True),
    ("dict-missing-everything", {}, SAFE, True),
    ("dict-non-string-next-input", {"action": "continue", "confidence": 0.9, "next_input": {"cmd": "x"}},
     ("continue", 0.9, '{"cmd": "x"}'), False),
    ("dict-null-next-input", {"action": "continue", "confidence": 0.9, "next_input": None},
     ("continue", 0.9, ""), False),
]


@pytest.mark.parametrize("raw,expected,has_error", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_decision(raw, expected, has_error):
    decision = parse_decision(raw)
    assert isinstance(decision, GuidanceDecision)
    assert (decision.action, decision.confidence, decision.next_input) == (
        expected[0], pytest.approx(expected[1]), expected[2])
    assert bool(decision.parse_errors) is has_error
    assert decision.parse_failed is has_error


def test_parse_errors_name_the_problem():
    assert any("unknown action" in e for e in parse_decision('{"action": "go", "confidence": 1}').parse_errors)
    assert any("confidence" in e for e in parse_decision('{"action": "stop"}').parse_errors)
    errors = parse_decision('{"action": "go", "confidence": "x"}').parse_errors
    assert len(errors) == 2


def test_unknown_action_keeps_reason_and_confidence_as_the_original():
    decision = parse_decision({"action": "maybe", "reason": "unsure", "confidence": 0.9})
    assert decision.reason == "unsure"
    assert (decision.action, decision.confidence) == ("pause", 0.9)


def test_nan_confidence_is_kept_and_goes_through_the_guardrail():
    import math

    from runtime import GuardrailContext, apply_guardrails

    decision = parse_decision('{"action": "continue", "confidence": NaN}')
    assert decision.action == "continue" and math.isnan(decision.confidence)
    enforced, audit = apply_guardrails(decision, GuardrailContext(), None)
    # NaN < min_confidence is false in the original: the decision goes through, logged as null
    assert enforced.action == "continue" and not audit.triggered
    assert audit.original_confidence is None and audit.enforced_confidence is None


def test_low_confidence_reason_prints_the_f32():
    from runtime import GuardrailContext, apply_guardrails

    enforced, audit = apply_guardrails(parse_decision({"action": "stop", "confidence": 0.515}), GuardrailContext())
    assert enforced.reason == "Low confidence (0.51) decision; pausing Full Auto."
    assert audit.rule == "low_confidence" and audit.enforced_confidence == 0.515


def test_reason_is_kept_on_success():
    assert parse_decision('{"action": "stop", "reason": "done", "confidence": 0.9}').reason == "done"


def test_prediction_like_objects():
    class Prediction:  # like dspy.Prediction
        def __init__(self, **kw):
            self._store = kw

        def toDict(self):
            return dict(self._store)

    class Attrs:
        action = "continue"
        confidence = "0.9"
        next_input = "n"

    assert parse_decision(Prediction(action="stop", confidence=0.8)).action == "stop"
    assert parse_decision(Attrs()).next_input == "n"
    decision = GuidanceDecision(action="review", confidence=0.5)
    assert parse_decision(decision) is decision


def test_object_that_explodes_is_still_safe():
    class Evil:
        def toDict(self):
            raise RuntimeError("boom")

    decision = parse_decision(Evil())
    assert (decision.action, decision.confidence) == ("pause", 0.0)
    assert decision.parse_errors


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.dictionaries(st.text(max_size=12), st.text(max_size=12)),
                 st.integers(), st.floats(), st.none(), st.lists(st.text(max_size=5))))
def test_never_raises(raw):
    decision = parse_decision(raw)
    assert decision.action in ("continue", "pause", "stop", "review")
    assert 0.0 <= decision.confidence <= 1.0
