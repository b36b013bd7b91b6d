"""A DSPy signature described as data: field names, types, constraints and instructions.

A frozen module carries the full definition of every signature it uses, so the runtime can
rebuild a signature without importing `signatures/` (a layer above this one) and can compare an
installed signature with the exported one by hash. Types are written as text in a small,
closed grammar (`str`, `list[str]`, `Optional[int]`, `Literal["a", "b"]`, runtime models by
name) and read back by a parser, never by `eval`: a manifest is data, not code.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from .records import canonical_json, sha256_hex

# Pydantic field constraints a signature field may carry (they change the prompt and validation).
CONSTRAINT_KEYS: tuple[str, ...] = (
    "gt", "ge", "lt", "le", "min_length", "max_length", "multiple_of", "allow_inf_nan", "pattern",
)
_BUILTINS: dict[str, Any] = {
    "str": str, "int": int, "float": float, "bool": bool, "bytes": bytes,
    "list": list, "dict": dict, "tuple": tuple, "set": set, "Any": Any, "None": type(None),
}


class SignatureSpecError(ValueError):
    """A signature definition that cannot be written as text or rebuilt from it."""


class FieldSpec(BaseModel):
    """One input or output field: name, type as text, constraints, and prompt text."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    constraints: dict[str, Any] = Field(default_factory=dict)
    desc: str = ""
    prefix: str = ""


class SignatureSpec(BaseModel):
    """A signature's full definition; `hash()` covers names, types, constraints and instructions."""

    model_config = ConfigDict(extra="forbid")

    name: str
    instructions: str
    inputs: list[FieldSpec]
    outputs: list[FieldSpec]

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of instructions and (name, type, constraints) of each field."""
        def shape(fields: list[FieldSpec]) -> list[dict[str, Any]]:
            return [{"name": f.name, "type": f.type, "constraints": f.constraints} for f in fields]

        return sha256_hex(canonical_json({"instructions": self.instructions,
                                          "inputs": shape(self.inputs), "outputs": shape(self.outputs)}))

    @property
    def input_names(self) -> list[str]:
        """Input field names in order."""
        return [f.name for f in self.inputs]

    @property
    def output_names(self) -> list[str]:
        """Output field names in order."""
        return [f.name for f in self.outputs]


# ----- types as text -------------------------------------------------------------------------

def type_text(annotation: Any) -> str:
    """Write a field annotation in the closed grammar that `parse_type` reads back."""
    if annotation is None or annotation is type(None):
        return "None"
    if annotation is Any:
        return "Any"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "Literal[" + ", ".join(json.dumps(a) for a in args) + "]"
    if origin is Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == len(args) - 1 and len(rest) == 1:
            return f"Optional[{type_text(rest[0])}]"
        return "Union[" + ", ".join(type_text(a) for a in args) + "]"
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", None)
        if name not in ("list", "dict", "tuple", "set"):
            raise SignatureSpecError(f"unsupported generic type {annotation!r}")
        return f"{name}[" + ", ".join("..." if a is Ellipsis else type_text(a) for a in args) + "]"
    if isinstance(annotation, type):
        return annotation.__name__
    raise SignatureSpecError(f"unsupported type annotation {annotation!r}")


_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+(?:\.\d+)?)|(?P<name>[A-Za-z_][A-Za-z_0-9.]*)'
                    r'|(?P<ell>\.\.\.)|(?P<punct>[\[\],]))')


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise SignatureSpecError(f"cannot read type {text!r} at position {pos}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def parse_type(text: str, known: Optional[dict[str, type]] = None) -> Any:
    """Read a type written by `type_text`; `known` resolves class names (e.g. runtime models)."""
    names = {**_BUILTINS, **(known or {})}
    tokens = _tokens(text)
    position = 0

    def peek() -> tuple[str, str]:
        return tokens[position] if position < len(tokens) else ("end", "")

    def take(kind: str, value: Optional[str] = None) -> str:
        nonlocal position
        got = peek()
        if got[0] != kind or (value is not None and got[1] != value):
            raise SignatureSpecError(f"cannot read type {text!r}: expected {value or kind}, got {got[1] or 'end'!r}")
        position += 1
        return got[1]

    def arguments(item) -> list[Any]:
        take("punct", "[")
        items = [item()]
        while peek() == ("punct", ","):
            take("punct", ",")
            items.append(item())
        take("punct", "]")
        return items

    def literal_value() -> Any:
        kind, value = peek()
        if kind in ("str", "num"):
            take(kind)
            return json.loads(value)
        if kind == "name" and value in ("true", "false", "null"):
            take(kind)
            return json.loads(value)
        raise SignatureSpecError(f"cannot read type {text!r}: bad Literal value {value!r}")

    def one() -> Any:
        kind, value = peek()
        if kind == "ell":
            take("ell")
            return Ellipsis
        name = take("name")
        if name == "Literal":
            return Literal[tuple(arguments(literal_value))]
        if name == "Optional":
            (inner,) = arguments(one)
            return Optional[inner]
        if name == "Union":
            return Union[tuple(arguments(one))]
        if name not in names:
            raise SignatureSpecError(f"unknown type {name!r} (the runtime can rebuild builtins and runtime models)")
        base = names[name]
        if peek() == ("punct", "["):
            args = arguments(one)
            return base[tuple(args)] if len(args) > 1 else base[args[0]]
        return base

    result = one()
    if position != len(tokens):
        raise SignatureSpecError(f"cannot read type {text!r}: trailing text")
    return result


# ----- signatures <-> specs --------------------------------------------------------------------

def _constraints(field_info: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for meta in getattr(field_info, "metadata", []) or []:
        attributes = vars(meta) if hasattr(meta, "__dict__") else {}
        for key in CONSTRAINT_KEYS:
            value = getattr(meta, key, attributes.get(key))
            if value is not None:
                found[key] = value
    return found


def _field_spec(name: str, field_info: Any) -> FieldSpec:
    extra = field_info.json_schema_extra or {}
    return FieldSpec(name=name, type=type_text(field_info.annotation), constraints=_constraints(field_info),
                     desc=str(extra.get("desc", "")), prefix=str(extra.get("prefix", "")))


def spec_of(signature: Any, name: Optional[str] = None) -> SignatureSpec:
    """Describe a `dspy.Signature` class as data (`name` overrides its class name)."""
    return SignatureSpec(
        name=name or signature.__name__,
        instructions=signature.instructions or "",
        inputs=[_field_spec(n, f) for n, f in signature.input_fields.items()],
        outputs=[_field_spec(n, f) for n, f in signature.output_fields.items()],
    )


def build_signature(spec: SignatureSpec, known: Optional[dict[str, type]] = None) -> Any:
    """Rebuild a `dspy.Signature` class from its spec (raises SignatureSpecError when impossible)."""
    import dspy  # deferred: importing runtime must stay cheap for code that never loads a module

    fields: dict[str, tuple[Any, Any]] = {}
    for role, specs in (("input", spec.inputs), ("output", spec.outputs)):
        make = dspy.InputField if role == "input" else dspy.OutputField
        for field in specs:
            info = make(desc=field.desc, **field.constraints)
            # Set directly: the `prefix=` argument is deprecated but still drives the prompt.
            info.json_schema_extra["prefix"] = field.prefix
            fields[field.name] = (parse_type(field.type, known), info)
    try:
        return dspy.make_signature(fields, spec.instructions, signature_name=spec.name)
    except Exception as exc:  # pydantic or dspy refusing the definition
        raise SignatureSpecError(f"signature {spec.name} cannot be rebuilt: {exc}") from exc
