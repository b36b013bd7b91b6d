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
    ("action-case-and-punctuation", '{"action": " Continue. ", "confidence": 0.9}', ("continue", 0.9, ""), False),
    ("numeric-string-confidence", '{"action": "continue", "confidence": "0.8"}', ("continue", 0.8, ""), False),
    ("numeric-string-padded", '{"action": "continue", "confidence": " 0.70 "}', ("continue", 0.7, ""), False),
    ("confidence-above-1-clamped", '{"action": "continue", "confidence": 1.5}', ("continue", 1.0, ""), False),
    ("confidence-negative-clamped", '{"action": "continue", "confidence": -0.2}', ("continue", 0.0, ""), False),
    # safe default
    ("unknown-action", '{"action": "proceed", "confidence": 0.9, "next_input": "x"}', SAFE, True),
    ("empty-action", '{"action": "", "confidence": 0.9}', SAFE, True),
    ("missing-action", '{"confidence": 0.9}', SAFE, True),
    ("missing-confidence", '{"action": "continue"}', SAFE, True),
    ("null-confidence", '{"action": "continue", "confidence": null}', SAFE, True),
    ("non-numeric-confidence", '{"action": "continue", "confidence": "high"}', SAFE, True),
    ("percent-confidence", '{"action": "continue", "confidence": "80%"}', SAFE, True),
    ("bool-confidence", '{"action": "continue", "confidence": true}', SAFE, True),
    ("nan-confidence", '{"action": "continue", "confidence": NaN}', SAFE, True),
    ("inf-confidence-text", '{"action": "continue", "confidence": "inf"}', SAFE, True),
    ("list-confidence", '{"action": "continue", "confidence": [0.9]}', SAFE, True),
    ("placeholder", "[[ ## action ## ]]\ncontinue\n[[ ## confidence ## ]]\n"
                    "Not supplied for this particular example.", SAFE, True),
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
    ("dict-unknown-action", {"action": "abort", "confidence": 0.9}, SAFE, True),
    ("dict-non-string-action", {"action": 3, "confidence": 0.9}, SAFE, True),
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


def test_safe_default_keeps_the_reason_for_diagnostics():
    decision = parse_decision({"action": "maybe", "reason": "unsure", "confidence": 0.9})
    assert decision.reason == "unsure"
    assert (decision.action, decision.confidence) == ("pause", 0.0)


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
