"""The identity of an LM in recorded evidence: the spec it was asked for, the model it ran, its model file's hash.

Promotion evidence (and so the promotion ledger), search studies and their trials record it, so a
number is never read as another LM's. Light on purpose: the records that carry it import no DSPy.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from guidebench.lm.engine import LocalGGUFEngine, model_sha256


class LMIdentity(BaseModel):
    """The LM behind a piece of evidence: the spec it was asked for, the model it ran, its model file's hash."""

    model_config = ConfigDict(extra="forbid")

    spec: str
    model: str
    model_sha256: Optional[str] = None  # the embedded model's GGUF file; None for a remote, served or fake model

    def describe(self) -> str:
        """`spec (model, model file sha256 abcdef012345)`, for messages."""
        file = f", model file sha256 {self.model_sha256[:12]}" if self.model_sha256 else ""
        return f"{self.spec} ({self.model}{file})"


def lm_identity(spec: str, lm: Any) -> LMIdentity:
    """The identity of the `dspy.LM` that `make_lm(spec)` built."""
    engine = getattr(lm, "engine", None)
    digest = (engine.sha256 or model_sha256()) if isinstance(engine, LocalGGUFEngine) else None
    return LMIdentity(spec=spec, model=str(getattr(lm, "model", "")), model_sha256=digest)
