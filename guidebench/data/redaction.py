"""Redaction of secrets in free text before anything from a log is stored.

Each match is replaced by `[REDACTED:<kind>]` and counted by kind. Kinds:
- `private_key`: PEM private-key blocks (`-----BEGIN ... PRIVATE KEY-----` to its END line, or
  to the end of the text when the block is cut off);
- `api_key`: `sk-...` keys (OpenAI, Anthropic `sk-ant-...`, project keys), Google `AIza...`,
  Slack `xox?-...`, Hugging Face `hf_...`;
- `github_token`: `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` tokens and `github_pat_...`;
- `aws_access_key`: `AKIA`/`ASIA`/... access key ids;
- `jwt`: three base64url segments starting with `eyJ`;
- `bearer`: `Bearer <token>` (the word `Bearer` is kept) and `Basic <credentials>`;
- `url_credentials`: the `user:password` in `scheme://user:password@host` (the user can be a token too);
- `password`: the value after `password`, `passwd`, `passphrase`, `secret`, `api_key`, `access_token`,
  `aws_secret_access_key`, `client_secret`, ... followed by `=` or `:` (the key is kept), also
  in quoted JSON text such as `"password": "hunter2"`.
Redaction is idempotent: an already redacted value is not matched again.
`PatternRedactor` applies these patterns (importers); `Redactor` adds what an export or a tracked run needs:
keys that name a secret or an endpoint are dropped wherever they appear, and known secret values (the
configured LM's key and endpoint, secret-named environment variables) are replaced before the pattern
pass, since an endpoint or a custom key has no shape to match. One module, one source of truth.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

_NOT_REDACTED = r"(?!\[REDACTED)"
# Key names are matched case-insensitively; token shapes (sk-, ghp_, AKIA...) case-exactly.
_SECRET_KEYS = (
    r"password|passwd|passphrase|secret|secret_key|client_secret|api[_-]?key|apikey|api[_-]?token"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?token|aws_secret_access_key"
    r"|[a-z0-9]+_(?:api_key|apikey|secret|secret_key|password|access_token|auth_token)"
)
_SECRET_KEY_NAME = re.compile(rf"(?i:{_SECRET_KEYS})")
# Words one of which every key name above contains (lower case). "passw"/"passp", not "pass": the kernel loop's
# "PASS correctness; cycles=..." would send every line of its logs through the key pattern for nothing.
_KEY_HINTS = ("passw", "passp", "secret", "api", "access", "auth", "refresh", "private")


@dataclass(frozen=True)
class _Kind:
    """One kind of secret: its pattern, the replacement, and a cheap test that it may be present."""

    name: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...] = ()
    case_hint: Optional[re.Pattern[str]] = None
    keep: Callable[[re.Match[str]], tuple[str, str]] = lambda match: ("", "")  # (text kept before, after)
    near_separator: bool = False

    def may_apply(self, text: str, lowered: str) -> bool:
        """False when the pattern certainly does not match (substring tests only)."""
        if self.case_hint is not None:
            return self.case_hint.search(text) is not None
        for hint in self.hints:
            if self.near_separator:
                start = lowered.find(hint)
                while start != -1:
                    # a key is followed by ":" or "=" within a few characters
                    window = lowered[start + len(hint):start + len(hint) + 48]
                    if ":" in window or "=" in window:
                        return True
                    start = lowered.find(hint, start + 1)
            elif hint in lowered:
                return True
        return False


def _kv_keep(match: re.Match[str]) -> tuple[str, str]:
    quote = match.group("kv_quote") or ""
    return match.group("kv_key") + quote, quote


_KINDS: tuple[_Kind, ...] = (
    _Kind("private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z)", re.S),
        hints=("private key",)),
    # key=value and "key": "value", also escaped inside JSON text (\"key\": \"value\"):
    # the key and the quotes stay, only the value is replaced
    _Kind("password", re.compile(
        rf"(?P<kv_key>(?<![A-Za-z0-9_])(?:\\?[\"'])?(?i:{_SECRET_KEYS})(?:\\?[\"'])?\s*[:=]\s*)"
        rf"(?:(?P<kv_quote>\\?[\"']){_NOT_REDACTED}[^\n]{{1,500}}?(?P=kv_quote)"
        rf"|{_NOT_REDACTED}[^\s\"',;{{}}\]\[\\]+)"),
        hints=_KEY_HINTS, keep=_kv_keep, near_separator=True),
    _Kind("bearer", re.compile(rf"(?P<scheme>\b(?i:bearer|basic)\s+){_NOT_REDACTED}[A-Za-z0-9_.~+/=-]{{8,}}"),
          hints=("bearer", "basic"), keep=lambda match: (match.group("scheme"), "")),
    # user and password both go (old exports scrubbed both); a password redacted earlier is swallowed
    _Kind("url_credentials", re.compile(rf"(?P<scheme>://){_NOT_REDACTED}[^\s:/@\"\\]+:[^\s@/\"\\]+(?=@)"),
          hints=("://",), keep=lambda match: (match.group("scheme"), "")),
    _Kind("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{22,}\b)"),
          hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _Kind("api_key", re.compile(
        r"\b(?:sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{35}|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,})"),
        hints=("sk-", "aiza", "xox", "hf_")),
    _Kind("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),
          case_hint=re.compile(r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA)[0-9A-Z]{16}")),
    _Kind("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), hints=("eyj",)),
)
# The pre-check tests these substrings (every kind's hint contains one of them) and two regexes
# with a literal prefix, which `re` searches fast: GitHub token prefixes and AWS key ids.
_LINE_HINTS: tuple[str, ...] = ("passw", "passp", "secret", "api", "access", "auth", "refresh", "private", "bearer",
                                "basic", "://", "sk-", "aiza", "xox", "hf_", "eyj")
_GITHUB_HINT = re.compile(r"gh[pousr]_|github_pat_")
_AWS_HINT = _KINDS[6].case_hint
# The shortest text any pattern matches: "://u:p@" (7); then "passwd=x", "secret:x", "apikey=x".
MIN_SECRET_CHARS = 7


def is_secret_key_name(name: str) -> bool:
    """True when a key name (`password`, `api_key`, `OPENAI_API_KEY`, ...) labels a secret value."""
    return _SECRET_KEY_NAME.fullmatch(str(name)) is not None


def might_hold_secret(text: str) -> bool:
    """False when the text certainly holds nothing to redact (a fast pre-check: substring tests)."""
    if len(text) < MIN_SECRET_CHARS:
        return False
    lowered = text.lower()
    for hint in _LINE_HINTS:
        if hint in lowered:
            return True
    return _GITHUB_HINT.search(lowered) is not None or (_AWS_HINT is not None and _AWS_HINT.search(text) is not None)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value (not its keys), by an iterative walk."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


# Strings found clean (nothing to replace), remembered: consecutive planner packets repeat most of their strings
# (the log tail shifts by one line, the summary by one attempt). Cleared when they hold 8M characters, so memory
# stays bounded (some 10-30 MB) however many or long the strings.
_CLEAN: set[str] = set()
_CLEAN_MAX_CHARS = 8_000_000
_clean_chars = 0


def _holds_secret(text: str) -> bool:
    """True when `PatternRedactor.text` would change the text: some kind matches it as it is (the first kind that
    changes a text matches the original, since the kinds before it left it unchanged)."""
    if not might_hold_secret(text):
        return False
    lowered = text.lower()
    return any(kind.may_apply(text, lowered) and kind.pattern.search(text) is not None for kind in _KINDS)


def value_holds_secret(value: Any) -> bool:
    """False when no string in a JSON value holds anything `PatternRedactor.value` would replace (exact; strings
    already found clean are looked up, not scanned again)."""
    for text in _strings(value):
        if text in _CLEAN:
            continue
        if _holds_secret(text):
            return True
        _remember_clean(text)
    return False


def _remember_clean(text: str) -> None:
    global _clean_chars
    if _clean_chars + len(text) > _CLEAN_MAX_CHARS:
        _CLEAN.clear()
        _clean_chars = 0
    _CLEAN.add(text)
    _clean_chars += len(text)


class PatternRedactor:
    """Replaces secrets in text and nested JSON values, counting what it replaced by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        """All redactions so far."""
        return sum(self.counts.values())

    def text(self, value: str) -> str:
        """The text with its secrets replaced (kinds in order; an earlier kind's match is not re-matched)."""
        if not value or not might_hold_secret(value):
            return value
        lowered = value.lower()
        for kind in _KINDS:
            if not kind.may_apply(value, lowered):
                continue

            def replace(match: re.Match[str], kind: _Kind = kind) -> str:
                self.counts[kind.name] += 1
                before, after = kind.keep(match)
                return f"{before}[REDACTED:{kind.name}]{after}"

            replaced = kind.pattern.sub(replace, value)
            if replaced != value:
                value, lowered = replaced, replaced.lower()
        return value

    def value(self, value: Any) -> Any:
        """A JSON value (dict, list, str, ...) with every string in it redacted; keys are kept."""
        if isinstance(value, (dict, list)) and not value_holds_secret(value):
            return value  # nothing to replace: the walk below would rebuild the same value
        return self._value(value)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self._value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._value(item) for item in value]
        return value


def redact_text(text: str) -> tuple[str, int]:
    """Redact one text; returns (redacted text, number of redactions)."""
    redactor = PatternRedactor()
    return redactor.text(text), redactor.total


REDACTED = "[REDACTED]"
# Compared after lower-casing and removing '-' and '_' so `api_key`, `API-Key` and `apiKey` match.
# Endpoints and headers are here because they are not secret-shaped but must not leave either.
SECRET_KEYS: frozenset[str] = frozenset({
    "apikey", "apibase", "baseurl", "apiurl", "endpoint", "endpointurl", "secret", "clientsecret",
    "secretkey", "privatekey", "password", "passwd", "token", "accesstoken", "authtoken", "bearertoken",
    "authorization", "headers", "extraheaders", "modellist", "awsaccesskeyid", "awssecretaccesskey",
})
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|API_BASE|BASE_URL|ENDPOINT)$", re.I)
# Shorter known values would be replaced inside ordinary words.
_MIN_SECRET_CHARS = 8


def is_secret_key(name: str) -> bool:
    """True when a mapping key names a secret or an endpoint."""
    return re.sub(r"[-_\s]", "", str(name)).lower() in SECRET_KEYS or is_secret_key_name(name)


def known_secret_values(lm: Any = None, environ: Optional[dict[str, str]] = None) -> set[str]:
    """Secret values to scrub: the LM's key / endpoint settings and secret-named environment variables."""
    values: set[str] = set()
    kwargs = dict(getattr(lm, "kwargs", {}) or {}) if lm is not None else {}
    for attr in ("api_key", "api_base", "base_url"):
        for value in (getattr(lm, attr, None) if lm is not None else None, kwargs.get(attr)):
            if isinstance(value, str) and len(value) >= _MIN_SECRET_CHARS:
                values.add(value)
    for name, value in (environ if environ is not None else os.environ).items():
        if _SECRET_ENV.search(name) and isinstance(value, str) and len(value) >= _MIN_SECRET_CHARS:
            values.add(value)
    return values


@dataclass
class Redactor:
    """Scrubs objects; counts what it removed so an export can report it."""

    secrets: set[str] = field(default_factory=set)
    dropped_keys: list[str] = field(default_factory=list)
    scrubbed_values: int = 0
    patterns: PatternRedactor = field(default_factory=PatternRedactor, repr=False, compare=False)

    def text(self, value: str) -> str:
        """A string with known secrets and secret-shaped text replaced."""
        original = value
        # Longest first so a secret that contains another is replaced whole.
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret in value:
                value = value.replace(secret, REDACTED)
        value = self.patterns.text(value)
        if value != original:
            self.scrubbed_values += 1
        return value

    def clean(self, obj: Any, path: str = "") -> Any:
        """A deep copy of JSON-like data without secret keys or secret-looking values."""
        if isinstance(obj, dict):
            out = {}
            for key, value in obj.items():
                where = f"{path}.{key}" if path else str(key)
                if is_secret_key(key):
                    self.dropped_keys.append(where)
                    continue
                out[key] = self.clean(value, where)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.clean(item, f"{path}[{index}]") for index, item in enumerate(obj)]
        if isinstance(obj, str):
            return self.text(obj)
        return obj


def redactor_for(lm: Any = None, extra: Iterable[str] = ()) -> Redactor:
    """A redactor that knows the configured LM's secrets and the environment's."""
    return Redactor(secrets=known_secret_values(lm) | {s for s in extra if len(s) >= _MIN_SECRET_CHARS})
