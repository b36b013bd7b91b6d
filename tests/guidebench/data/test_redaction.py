"""Secrets are replaced and counted by kind; ordinary log text is left alone."""

from __future__ import annotations

import json

import pytest

from guidebench.data.redaction import PatternRedactor as Redactor, might_hold_secret, redact_text

FAKE_SK = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
FAKE_GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7Vx\nq1w2e3r4\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(("text", "kind", "secret"), [
    (f"export OPENAI_API_KEY={FAKE_SK}", "password", FAKE_SK),
    (f"the key is {FAKE_SK} in the env", "api_key", FAKE_SK),
    ("key sk-ant-api03-abcdefghijklmnopqrstuv used", "api_key", "sk-ant-api03-abcdefghijklmnopqrstuv"),
    ('curl -H "Authorization: Bearer eyabc.DEF123456789xyz" https://api', "bearer", "eyabc.DEF123456789xyz"),
    ('{"password": "correct horse battery staple"}', "password", "correct horse battery staple"),
    ("db password=hunter2!x then", "password", "hunter2!x"),
    ("client_secret: 8f7e6d5c4b3a", "password", "8f7e6d5c4b3a"),
    (f"here {PEM} done", "private_key", "MIIEowIBAAKCAQEA7Vx"),
    ("truncated -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0", "private_key", "MIIEvQIBADANBgkqhkiG9w0"),
    ("aws AKIAIOSFODNN7EXAMPLE key", "aws_access_key", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "password",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    (f"token {FAKE_GH} pushed", "github_token", FAKE_GH),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_token",
     "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
    ("clone https://bob:s3cr3tpass@git.example.com/repo.git", "url_credentials", "s3cr3tpass"),
    ("clone https://bob:s3cr3tpass@git.example.com/repo.git", "url_credentials", "bob:"),
    ("hub hf_" + "AbCdEfGhIjKlMnOpQrStUv12 set", "api_key", "hf_AbCdEfGhIjKlMnOpQrStUv12"),
    ("old token ghp_a1B2c3D4e5F6g7H8i9J0k1 here", "github_token", "ghp_a1B2c3D4e5F6g7H8i9J0k1"),
    ("Authorization: Bearer abcdefgh_ijklmnop_qrst", "bearer", "ijklmnop_qrst"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36P", "jwt",
     "SflKxwRJSMeKKF2QT4fwpMeJf36P"),
])
def test_each_secret_kind_is_replaced_and_counted(text: str, kind: str, secret: str) -> None:
    redactor = Redactor()
    out = redactor.text(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert redactor.counts[kind] == 1 and redactor.total == 1


@pytest.mark.parametrize("text", [
    '{\n  "totalTokens": 51234,\n  "total_tokens": 3,\n  "inputTokens": 40000\n}',
    "Fixed tests/test_client.py::test_retry_on_503. 2 test(s) still failing.",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
    "thread 04cc3a55-907d-416f-87a7-9fb995dacb62 turn 521aa955-2b11-4b9f-a04a-e2cee2d55d76",
    "We shipped the password reset flow and the Asia Pacific region.",
    "run pwd to see /work/main; max_token=500 is a setting",
    " src/http/client.py | 12 +++++---\n 2 files changed, 14 insertions(+), 3 deletions(-)",
    "see https://docs.example.com/guide#basic-usage for details",
])
def test_ordinary_log_text_is_untouched(text: str) -> None:
    out, count = redact_text(text)
    assert (out, count) == (text, 0)


def test_redaction_is_idempotent() -> None:
    redactor = Redactor()
    once = redactor.text(f"API_KEY={FAKE_SK} and Bearer abcdefgh12345678 and {PEM}")
    assert redactor.total == 3
    assert redactor.text(once) == once
    assert redactor.total == 3


def test_nested_values_keep_keys_and_structure() -> None:
    redactor = Redactor()
    value = {"summary": {"last_agent_message": f"used {FAKE_SK}", "turn_count": 3},
             "raw_prediction": ["ok", {"password": "x"}, None, 0.5], "api_key": "kept-as-a-key"}
    out = redactor.value(value)
    assert out["summary"]["last_agent_message"] == "used [REDACTED:api_key]"
    assert out["summary"]["turn_count"] == 3
    assert out["raw_prediction"] == ["ok", {"password": "x"}, None, 0.5]  # a key is not a secret; "x" is its value
    assert out["api_key"] == "kept-as-a-key"
    assert redactor.total == 1


def test_raw_json_text_stays_valid_json_after_redaction() -> None:
    # Quarantined lines are stored as raw text: redacting them must not break their JSON.
    line = json.dumps({"m": json.dumps({"password": "a b c", "api_key": "zz"}), "auth": "Bearer abcdefgh123456",
                       "note": f"{FAKE_SK}"})
    redactor = Redactor()
    out = redactor.text(line)
    decoded = json.loads(out)
    assert json.loads(decoded["m"]) == {"password": "[REDACTED:password]", "api_key": "[REDACTED:password]"}
    assert decoded["auth"] == "Bearer [REDACTED:bearer]"
    assert decoded["note"] == "[REDACTED:api_key]"
    assert redactor.total == 4


def test_pre_check_never_skips_a_text_the_pattern_would_change() -> None:
    texts = [f"x {FAKE_SK}", "PASSWORD: abc", "Bearer abcdefghijk", PEM, "AKIAIOSFODNN7EXAMPLE", FAKE_GH,
             "https://u:p4ss@h/x", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw"]
    for text in texts:
        assert might_hold_secret(text), text
        assert redact_text(text)[1] == 1, text


def test_pre_check_covers_every_hint_of_every_kind() -> None:
    from guidebench.data.redaction import _KINDS

    for kind in _KINDS:
        for hint in kind.hints:
            assert might_hold_secret(f"{hint}{'x' * 8}"), (kind.name, hint)


def test_the_kernel_loops_pass_wording_is_not_a_password_key() -> None:
    # "pass" alone is no key name: the loop runner's result_summary must not go through the key pattern
    assert not might_hold_secret("PASS correctness; cycles=1412 (above target 1363)")
    assert might_hold_secret("PASSWD=x1234567") and might_hold_secret("passphrase: abcdefgh")


SECRETS_AT_EDGES = [FAKE_SK, f"{FAKE_SK} tail", f"head {FAKE_GH}", "password=hunter2", "Bearer abcdefgh12345678",
                    "https://bob:pw@host/x", "AKIAIOSFODNN7EXAMPLE", PEM, "-----BEGIN PRIVATE KEY-----\nMIIE",
                    '{"api_key": "zz"}', "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw"]


@pytest.mark.parametrize("secret", SECRETS_AT_EDGES)
def test_a_value_with_a_secret_anywhere_is_walked_and_redacted(secret: str) -> None:
    from guidebench.data.redaction import value_holds_secret

    # next to the repository URLs and "PASS" wording every archived packet holds, at a string's start or end
    value = {"repo": {"origin_url": "https://github.com/example/sim.git"}, "tail": ["PASS correctness; cycles=9",
             {"deep": [1, 2.5, None, True, secret]}], "k": "v"}
    assert value_holds_secret(value)
    redactor = Redactor()
    out = redactor.value(value)
    assert redactor.total >= 1 and out["tail"][1]["deep"][4] != secret


def test_a_clean_value_is_returned_as_it_is_with_nothing_counted() -> None:
    from guidebench.data.redaction import value_holds_secret

    value = {"repo": {"origin_url": "https://github.com/example/sim.git", "github_web_url": "https://github.com/x"},
             "summary": "PASS correctness; cycles=1412", "password": "", "n": [1, {"api": "k"}],
             "ends": ["ab", "cd"]}  # keys are not redacted; "ab"+"cd" joined could not form a hint across strings
    assert not value_holds_secret(value)
    redactor = Redactor()
    assert redactor.value(value) == value and redactor.total == 0


def test_export_layer_adds_known_secrets_and_secret_keys_to_the_shared_patterns() -> None:
    from guidebench.data.redaction import Redactor as ExportRedactor, is_secret_key, redactor_for

    redactor = redactor_for(extra=["http://10.1.2.3:8000/v1"])
    payload = {"demo": f"call http://10.1.2.3:8000/v1 with {FAKE_SK} via https://u:p4ssw0rd@h/x",
               "nested": [{"OPENAI_API_KEY": "x", "api_base": "y", "refresh_token": "z"}]}
    out = redactor.clean(payload)
    assert out["demo"] == ("call [REDACTED] with [REDACTED:api_key] via https://[REDACTED:url_credentials]@h/x")
    assert out["nested"] == [{}]
    assert sorted(redactor.dropped_keys) == ["nested[0].OPENAI_API_KEY", "nested[0].api_base",
                                             "nested[0].refresh_token"]
    assert redactor.scrubbed_values == 1
    assert ExportRedactor(secrets=set(redactor.secrets)).clean(out) == out  # a cleaned payload passes the check
    assert not is_secret_key("demos") and is_secret_key("apiKey")
