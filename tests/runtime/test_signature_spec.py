"""runtime.signature_spec: a signature described as data rebuilds to the same definition; type text
round-trips and is parsed, never evaluated."""

from __future__ import annotations

import pytest

from runtime.signature_spec import build_signature, parse_type, spec_of, type_text
from signatures import FullAutoDecisionSignature, OptimizationDirectiveSignature


@pytest.mark.parametrize("signature", [FullAutoDecisionSignature, OptimizationDirectiveSignature])
def test_signatures_rebuild_from_their_definition(signature):
    from runtime.frozen.loader import RUNTIME_TYPES

    spec = spec_of(signature)
    rebuilt = build_signature(spec, RUNTIME_TYPES)
    assert spec_of(rebuilt).model_dump() == spec.model_dump()
    assert rebuilt.instructions == signature.instructions


@pytest.mark.parametrize("text", ["str", "list[str]", "dict[str, list[int]]", "Optional[float]",
                                  'Literal["continue", "pause"]', "Union[int, str]", "tuple[int, ...]"])
def test_type_text_round_trips(text: str):
    assert type_text(parse_type(text)) == text


@pytest.mark.parametrize("text", ["__import__('os')", "os.system", "list[", "Literal[x]"])
def test_type_text_never_evaluates_code(text: str):
    from runtime.signature_spec import SignatureSpecError

    with pytest.raises(SignatureSpecError):
        parse_type(text)
