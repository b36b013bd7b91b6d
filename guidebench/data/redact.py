"""Redaction of secrets in free text before anything from a log is stored.

Each match is replaced by `[REDACTED:<kind>]` and counted by kind. Kinds:
- `private_key`: PEM private-key blocks (`-----BEGIN ... PRIVATE KEY-----` to its END line, or
  to the end of the text when the block is cut off);
- `api_key`: `sk-...` keys (OpenAI, Anthropic `sk-ant-...`, project keys), Google `AIza...`,
  Slack `xox?-...`;
- `github_token`: `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` tokens and `github_pat_...`;
- `aws_access_key`: `AKIA`/`ASIA`/... access key ids;
- `jwt`: three base64url segments starting with `eyJ`;
- `bearer`: `Bearer <token>` (the word `Bearer` is kept) and `Basic <credentials>`;
- `url_credentials`: the password in `scheme://user:password@host`;
- `password`: the value after `password`, `passwd`, `pwd`, `secret`, `api_key`, `access_token`,
  `aws_secret_access_key`, `client_secret`, ... followed by `=` or `:` (the key is kept), also
  in quoted JSON text such as `"password": "hunter2"`.
Redaction is idempotent: an already redacted value is not matched again.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_NOT_REDACTED = r"(?!\[REDACTED)"
# Key names are matched case-insensitively; token shapes (sk-, ghp_, AKIA...) case-exactly.
_SECRET_KEYS = (
    r"password|passwd|passphrase|secret|secret_key|client_secret|api[_-]?key|apikey|api[_-]?token"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?token|aws_secret_access_key"
    r"|[a-z0-9]+_(?:api_key|apikey|secret|secret_key|password|access_token|auth_token)"
)

_PATTERN = re.compile(
    "|".join([
        r"(?P<private_key>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z))",
        # key=value and "key": "value", also escaped inside JSON text (\"key\": \"value\"):
        # the key (kv_key) and the quotes stay, only the value is replaced
        rf"(?P<password>(?P<kv_key>(?<![A-Za-z0-9_])(?:\\?[\"'])?(?i:{_SECRET_KEYS})(?:\\?[\"'])?\s*[:=]\s*)"
        rf"(?:(?P<kv_quote>\\?[\"']){_NOT_REDACTED}[^\n]{{1,500}}?(?P=kv_quote)"
        rf"|{_NOT_REDACTED}[^\s\"',;{{}}\]\[\\]+))",
        rf"(?P<bearer>(?P<auth_scheme>\b(?i:bearer|basic)\s+){_NOT_REDACTED}[A-Za-z0-9._~+/=-]{{8,}})",
        r"(?P<url_credentials>(?P<url_user>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)(?!\[REDACTED)[^\s@/]+(?=@))",
        r"(?P<github_token>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})\b)",
        r"(?P<api_key>\b(?:sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{35}|xox[abposr]-[A-Za-z0-9-]{10,}))",
        r"(?P<aws_access_key>\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b)",
        r"(?P<jwt>\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    ]),
    re.S,
)
# Cheap pre-check: a text holding none of these fragments cannot match the pattern above
# (every key name contains one of the words; every token shape has one of the prefixes).
# Substring tests on the lower-cased text run at C speed; a regex alternation does not.
_HINTS: tuple[str, ...] = ("pass", "secret", "api", "access", "auth", "refresh", "private", "bearer", "basic",
                           "://", "sk-", "aiza", "xox", "eyj", "github_pat_")
_GITHUB_HINT = re.compile(r"gh[pousr]_")
_AWS_HINT = re.compile(r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA)[0-9A-Z]{16}")


def might_hold_secret(text: str) -> bool:
    """False when the text certainly holds nothing to redact (a fast pre-check)."""
    lowered = text.lower()
    for hint in _HINTS:
        if hint in lowered:
            return True
    return _GITHUB_HINT.search(lowered) is not None or _AWS_HINT.search(text) is not None


class Redactor:
    """Replaces secrets in text and nested JSON values, counting what it replaced by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        """All redactions so far."""
        return sum(self.counts.values())

    def _replace(self, match: re.Match[str]) -> str:
        # lastgroup is the outermost named group that matched: always one of the kinds
        kind = match.lastgroup or "secret"
        self.counts[kind] += 1
        if kind == "password":
            quote = match.group("kv_quote") or ""
            return f"{match.group('kv_key')}{quote}[REDACTED:password]{quote}"
        if kind == "bearer":
            return f"{match.group('auth_scheme')}[REDACTED:bearer]"
        if kind == "url_credentials":
            return f"{match.group('url_user')}[REDACTED:url_credentials]"
        return f"[REDACTED:{kind}]"

    def text(self, value: str) -> str:
        """The text with its secrets replaced."""
        if not value or not might_hold_secret(value):
            return value
        return _PATTERN.sub(self._replace, value)

    def value(self, value: Any) -> Any:
        """A JSON value (dict, list, str, ...) with every string in it redacted; keys are kept."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value


def redact_text(text: str) -> tuple[str, int]:
    """Redact one text; returns (redacted text, number of redactions)."""
    redactor = Redactor()
    return redactor.text(text), redactor.total
