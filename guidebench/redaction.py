"""Strip LM endpoints, API keys and other secrets from anything written into an export or a tracked run.

A thin layer over `guidebench.data.redact`, which owns the secret patterns (one source of truth for
importers and exports). Added here: keys that name a secret or an endpoint are dropped wherever they
appear, and known secret values (the configured LM's key and endpoint, secret-named environment
variables) are replaced before the pattern pass, since an endpoint or a custom key has no shape to match.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from .data.redact import Redactor as PatternRedactor
from .data.redact import is_secret_key_name

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
