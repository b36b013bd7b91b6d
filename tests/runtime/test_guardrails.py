"""Guardrails of formats.md §1.3: every rule at and around its threshold, plus property tests."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import (
    ACTIONS,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    GuardrailContext,
    GuidanceDecision,
    apply_guardrails,
    parse_decision,
    tokens_from_usage,
)
from runtime.fullauto import guardrail_tokens

HARD_RULES = {"turn_failed", "turn_interrupted", "max_turns", "no_progress", "max_tokens"}


def ctx(status="completed", turns=1, stalls=0, tokens=None):
    return GuardrailContext(last_turn_status=status, turn_count=turns, no_progress_count=stalls, tokens_used=tokens)


def dec(action="continue", confidence=0.9, next_input="keep going", reason="model says so"):
    return GuidanceDecision(action=action, next_input=next_input, reason=reason, confidence=confidence)


D = GuardrailConfig()
# (id, context, config, decision, expected action, expected rule, expected confidence)
CASES = [
    # nothing fires
    ("clean-continue", ctx(), D, dec(), "continue", None, 0.9),
    ("clean-stop", ctx(), D, dec("stop", 0.8), "stop", None, 0.8),
    ("clean-pause", ctx(), D, dec("pause", 0.6), "pause", None, 0.6),
    ("other-status-is-not-a-rule", ctx("inProgress"), D, dec(), "continue", None, 0.9),
    # rule 1 / 2: status
    ("failed", ctx("failed"), D, dec(), "stop", "turn_failed", 1.0),
    ("failed-beats-interrupt-rules", ctx("failed", turns=500, stalls=9, tokens=10**9),
     GuardrailConfig(max_tokens=1), dec("review", 0.1), "stop", "turn_failed", 1.0),
    ("interrupted", ctx("interrupted"), D, dec(), "pause", "turn_interrupted", 1.0),
    ("interrupted-beats-max-turns", ctx("interrupted", turns=200), D, dec(), "pause", "turn_interrupted", 1.0),
    ("interrupted-low-conf", ctx("interrupted"), D, dec("continue", 0.0), "pause", "turn_interrupted", 1.0),
    # rule 3: max_turns at and around 200
    ("turns-199", ctx(turns=199), D, dec(), "continue", None, 0.9),
    ("turns-200", ctx(turns=200), D, dec(), "stop", "max_turns", 1.0),
    ("turns-201", ctx(turns=201), D, dec(), "stop", "max_turns", 1.0),
    ("turns-custom-5-at-4", ctx(turns=4), GuardrailConfig(max_turns=5), dec(), "continue", None, 0.9),
    ("turns-custom-5-at-5", ctx(turns=5), GuardrailConfig(max_turns=5), dec(), "stop", "max_turns", 1.0),
    ("turns-0-disables", ctx(turns=10**6), GuardrailConfig(max_turns=0), dec(), "continue", None, 0.9),
    ("turns-0-disables-at-0", ctx(turns=0), GuardrailConfig(max_turns=0), dec(), "continue", None, 0.9),
    ("turns-beats-no-progress", ctx(turns=200, stalls=3), D, dec(), "stop", "max_turns", 1.0),
    # rule 4: no_progress at and around 3
    ("stalls-2", ctx(stalls=2), D, dec(), "continue", None, 0.9),
    ("stalls-3", ctx(stalls=3), D, dec(), "stop", "no_progress", 1.0),
    ("stalls-4", ctx(stalls=4), D, dec(), "stop", "no_progress", 1.0),
    ("stalls-limit-1-at-0", ctx(stalls=0), GuardrailConfig(no_progress_limit=1), dec(), "continue", None, 0.9),
    ("stalls-limit-1-at-1", ctx(stalls=1), GuardrailConfig(no_progress_limit=1), dec(), "stop", "no_progress", 1.0),
    ("stalls-0-disables", ctx(stalls=99), GuardrailConfig(no_progress_limit=0), dec(), "continue", None, 0.9),
    ("stalls-beats-tokens", ctx(stalls=3, tokens=100), GuardrailConfig(max_tokens=100), dec(),
     "stop", "no_progress", 1.0),
    # rule 5: max_tokens
    ("tokens-none-config", ctx(tokens=10**12), D, dec(), "continue", None, 0.9),
    ("tokens-unknown", ctx(tokens=None), GuardrailConfig(max_tokens=100), dec(), "continue", None, 0.9),
    ("tokens-below", ctx(tokens=99), GuardrailConfig(max_tokens=100), dec(), "continue", None, 0.9),
    ("tokens-at", ctx(tokens=100), GuardrailConfig(max_tokens=100), dec(), "stop", "max_tokens", 1.0),
    ("tokens-above", ctx(tokens=101), GuardrailConfig(max_tokens=100), dec(), "stop", "max_tokens", 1.0),
    ("tokens-max-0-is-set", ctx(tokens=0), GuardrailConfig(max_tokens=0), dec(), "stop", "max_tokens", 1.0),
    ("tokens-beat-low-conf", ctx(tokens=100), GuardrailConfig(max_tokens=100), dec("continue", 0.1),
     "stop", "max_tokens", 1.0),
    # rule 6: low confidence (strictly below min_confidence), any action, confidence kept
    ("conf-0.549", ctx(), D, dec("continue", 0.549), "pause", "low_confidence", 0.549),
    ("conf-0.55", ctx(), D, dec("continue", 0.55), "continue", None, 0.55),
    ("conf-0.551", ctx(), D, dec("continue", 0.551), "continue", None, 0.551),
    ("conf-0", ctx(), D, dec("continue", 0.0), "pause", "low_confidence", 0.0),
    ("low-conf-on-stop", ctx(), D, dec("stop", 0.3), "pause", "low_confidence", 0.3),
    ("low-conf-on-pause", ctx(), D, dec("pause", 0.3), "pause", "low_confidence", 0.3),
    ("low-conf-on-review", ctx(), D, dec("review", 0.2), "pause", "low_confidence", 0.2),
    ("min-conf-0-never-low", ctx(), GuardrailConfig(min_confidence=0.0), dec("continue", 0.0), "continue", None, 0.0),
    ("min-conf-1", ctx(), GuardrailConfig(min_confidence=1.0), dec("continue", 0.99), "pause", "low_confidence", 0.99),
    ("min-conf-1-at-1", ctx(), GuardrailConfig(min_confidence=1.0), dec("continue", 1.0), "continue", None, 1.0),
    # rule 7: review, confidence kept
    ("review", ctx(), D, dec("review", 0.9), "pause", "review_requested", 0.9),
    ("review-at-min", ctx(), D, dec("review", 0.55), "pause", "review_requested", 0.55),
    ("review-under-hard-rule", ctx(turns=200), D, dec("review", 0.9), "stop", "max_turns", 1.0),
]


@pytest.mark.parametrize("context,config,decision,action,rule,confidence",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_guardrail_table(context, config, decision, action, rule, confidence):
    enforced, audit = apply_guardrails(decision, context, config)
    assert enforced.action == action
    assert audit.rule == rule
    assert audit.triggered is (rule is not None)
    assert enforced.confidence == pytest.approx(confidence)
    assert audit.original_action == decision.action
    assert audit.original_confidence == decision.confidence
    assert audit.enforced_action == enforced.action
    assert audit.enforced_confidence == enforced.confidence
    if rule in HARD_RULES:
        assert enforced.next_input == ""
        assert enforced.confidence == 1.0
    else:
        assert enforced.next_input == decision.next_input
    if rule is None:
        assert enforced == decision


def test_untriggered_audit_is_always_attached():
    decision = dec("continue", 0.8)
    enforced, audit = apply_guardrails(decision, ctx(), GuardrailConfig())
    assert isinstance(audit, GuardrailAudit)
    assert audit.model_dump() == {
        "triggered": False, "rule": None, "original_action": "continue", "original_confidence": 0.8,
        "enforced_action": "continue", "enforced_confidence": 0.8,
    }
    assert enforced == decision


def test_default_config_and_dict_arguments():
    enforced, audit = apply_guardrails({"action": "continue", "confidence": 0.9},
                                       {"last_turn_status": "completed", "turn_count": 200})
    assert (enforced.action, audit.rule) == ("stop", "max_turns")
    enforced, audit = apply_guardrails(dec(), ctx(), {"max_turns": 0})
    assert audit.triggered is False


def test_defaults_match_the_original():
    assert GuardrailConfig().model_dump() == {
        "min_confidence": 0.55, "max_turns": 200, "no_progress_limit": 3, "max_tokens": None}


def test_input_decision_is_not_mutated():
    decision = dec("review", 0.9)
    before = decision.model_dump()
    apply_guardrails(decision, ctx("failed"), GuardrailConfig())
    apply_guardrails(decision, ctx(), GuardrailConfig())
    assert decision.model_dump() == before


def test_hard_rules_use_the_originals_reasons():
    enforced, _ = apply_guardrails(dec(), ctx("failed"), GuardrailConfig())
    assert enforced.reason == "Turn failed; stopping Full Auto."
    enforced, _ = apply_guardrails(dec("continue", 0.42), ctx(), GuardrailConfig())
    assert enforced.reason == "Low confidence (0.42) decision; pausing Full Auto."


# --------------------------------------------------------------------------- tokens

def summary(**fields):
    return FullAutoTurnSummary(thread_id="t", turn_id="u", **fields)


@pytest.mark.parametrize("usage,expected", [
    ('{"totalTokens": 51234, "inputTokens": 50000}', 51234),
    ('{"total_tokens": 777}', 777),
    ('{\n  "totalTokens": 10,\n  "total_tokens": 99\n}', 10),
    ('{"totalTokens": null, "total_tokens": 99}', 99),
    ('{"totalTokens": 12.0}', None),  # the original's as_u64 counts no float, whole or not
    ('{"totalTokens": "51234"}', None),
    ('{"totalTokens": -5}', None),
    ('{"totalTokens": true}', None),
    ('{"tokenUsage": {"total": {"totalTokens": 5}}}', 5),  # the app server nests the total
    ('{"threadId": "t", "tokenUsage": {"total": 7}}', 7),
    ('[1, 2]', None),
    ("not json", None),
    ("", None),
    ({"total_tokens": 3}, 3),
], ids=lambda v: str(v)[:30])
def test_tokens_from_usage(usage, expected):
    assert tokens_from_usage(usage) == expected


def test_the_guardrail_reads_tokens_as_the_original_does():
    # parse_total_tokens in the original reads the top level only: a nested total never trips max_tokens
    nested = json.dumps({"tokenUsage": {"total": {"totalTokens": 5000}}})
    context = GuardrailContext.from_summary(summary(token_usage=nested))
    assert context.tokens_used is None
    enforced, audit = apply_guardrails(dec(), context, GuardrailConfig(max_tokens=1000))
    assert audit.rule is None and enforced.action == "continue"
    assert guardrail_tokens(nested) is None and tokens_from_usage(nested) == 5000


@pytest.mark.parametrize("key", ["totalTokens", "total_tokens"])
def test_max_tokens_from_summary(key):
    config = GuardrailConfig(max_tokens=1000)
    for used, fires in ((999, False), (1000, True), (1001, True)):
        context = GuardrailContext.from_summary(summary(token_usage=json.dumps({key: used})))
        assert context.tokens_used == used
        enforced, audit = apply_guardrails(dec(), context, config)
        assert (audit.rule == "max_tokens") is fires
        assert enforced.action == ("stop" if fires else "continue")


def test_context_from_summary_reads_status_and_counters():
    context = GuardrailContext.from_summary(summary(last_turn_status="interrupted", turn_count=7,
                                                    no_progress_count=2))
    assert context.model_dump() == {"last_turn_status": "interrupted", "turn_count": 7,
                                    "no_progress_count": 2, "tokens_used": None}
    context = GuardrailContext.from_summary({"thread_id": "t", "turn_id": "u", "token_usage": '{"total_tokens": 5}'})
    assert context.tokens_used == 5


# --------------------------------------------------------------------------- properties

def _f32(value: float) -> float:
    import math
    import struct

    if not math.isfinite(value) or abs(value) > 3.4e38:
        return value
    return struct.unpack("<f", struct.pack("<f", value))[0]


def expected_rule(context: GuardrailContext, config: GuardrailConfig, decision: GuidanceDecision):
    """An independent restatement of formats.md §1.3 (first match wins)."""
    table = [
        (context.last_turn_status == "failed", "stop", "turn_failed"),
        (context.last_turn_status == "interrupted", "pause", "turn_interrupted"),
        (config.max_turns > 0 and context.turn_count >= config.max_turns, "stop", "max_turns"),
        (config.no_progress_limit > 0 and context.no_progress_count >= config.no_progress_limit, "stop", "no_progress"),
        (config.max_tokens is not None and context.tokens_used is not None
         and context.tokens_used >= config.max_tokens, "stop", "max_tokens"),
        # the original compares two f32s (NaN compares false)
        (_f32(decision.confidence) < _f32(config.min_confidence), "pause", "low_confidence"),
        (decision.action == "review", "pause", "review_requested"),
    ]
    for fired, action, rule in table:
        if fired:
            return action, rule
    return decision.action, None


statuses = st.sampled_from(["completed", "interrupted", "failed"])
contexts = st.builds(GuardrailContext, last_turn_status=statuses, turn_count=st.integers(0, 260),
                     no_progress_count=st.integers(0, 6), tokens_used=st.none() | st.integers(0, 5000))
configs = st.builds(GuardrailConfig, min_confidence=st.floats(0, 1), max_turns=st.integers(0, 250),
                    no_progress_limit=st.integers(0, 5), max_tokens=st.none() | st.integers(0, 5000))
decisions = st.builds(GuidanceDecision, action=st.sampled_from(ACTIONS), next_input=st.text(max_size=20),
                      reason=st.text(max_size=20), confidence=st.floats(0, 1))

field_values = st.one_of(st.sampled_from(list(ACTIONS) + ["Continue", "proceed", "", "STOP."]),
                         st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=12),
                         st.none(), st.booleans())
model_dicts = st.dictionaries(st.sampled_from(["action", "next_input", "reason", "confidence", "other"]),
                              field_values, max_size=5)


def _render(fields: dict, style: int) -> str:
    if style == 0:
        return json.dumps(fields, default=str)
    if style == 1:
        return "```json\n" + json.dumps(fields, default=str) + "\n```"
    if style == 2:
        return "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + "[[ ## completed ## ]]"
    return "\n".join(f"{k}: {v}" for k, v in fields.items())


raw_outputs = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=60),
    st.none(),
    model_dicts,
    st.builds(_render, model_dicts, st.integers(0, 3)),
)

hard_contexts = st.one_of(
    st.builds(ctx, status=st.sampled_from(["failed", "interrupted"]), turns=st.integers(0, 300),
              stalls=st.integers(0, 9), tokens=st.none() | st.integers(0, 10**6)),
    st.builds(ctx, turns=st.integers(200, 10**6), stalls=st.integers(0, 9)),
    st.builds(ctx, turns=st.integers(0, 199), stalls=st.integers(3, 50)),
    st.builds(ctx, turns=st.integers(0, 199), stalls=st.integers(0, 2), tokens=st.integers(10**5, 10**9)),
)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(raw=raw_outputs, context=hard_contexts)
def test_rules_1_to_5_win_over_any_model_output(raw, context):
    config = GuardrailConfig(max_tokens=10**5)
    decision = parse_decision(raw)
    enforced, audit = apply_guardrails(decision, context, config)
    action, rule = expected_rule(context, config, decision)
    assert rule in HARD_RULES
    assert (enforced.action, audit.rule) == (action, rule)
    assert enforced.confidence == 1.0 and audit.enforced_confidence == 1.0
    assert enforced.next_input == ""
    assert audit.triggered


@FAST
@given(raw=raw_outputs, context=contexts, config=configs)
def test_any_raw_output_gives_an_allowed_enforced_action(raw, context, config):
    decision = parse_decision(raw)
    assert decision.action in ACTIONS
    if decision.parse_errors and decision.action != "pause":
        # read as the original: only a missing/unparseable confidence leaves the action, at 0.0
        assert decision.confidence == 0.0
    enforced, audit = apply_guardrails(decision, context, config)
    assert enforced.action in ACTIONS
    assert enforced.action != "review"  # review always ends as a pause
    assert (enforced.action, audit.rule) == expected_rule(context, config, decision)


@FAST
@given(decision=decisions, context=contexts, config=configs)
def test_audit_is_consistent_with_the_change(decision, context, config):
    enforced, audit = apply_guardrails(decision, context, config)
    assert audit.triggered is (audit.rule is not None)
    assert audit.enforced_action == enforced.action
    assert audit.enforced_confidence == enforced.confidence
    assert audit.original_action == decision.action
    assert audit.original_confidence == decision.confidence
    if not audit.triggered:
        assert enforced == decision
    if enforced.action != decision.action or enforced.confidence != decision.confidence:
        assert audit.triggered
    if audit.rule in HARD_RULES:
        assert enforced.confidence == 1.0 and enforced.next_input == ""
    elif audit.triggered:  # rules 6-7 keep the model's confidence
        assert enforced.action == "pause" and enforced.confidence == decision.confidence
    # the audit itself validates as a log object
    assert GuardrailAudit.model_validate(audit.model_dump()) == audit
