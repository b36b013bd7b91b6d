"""Structured decoding for the embedded model: a GBNF grammar built from the adapter's output fields.

ChatAdapter's system message lists the output fields with their types (`1. `action`
(Literal['continue', ...]): ...`). The grammar lets the model write exactly those sections, in that
order, each with a value of its type, and then the `[[ ## completed ## ]]` marker. The model still
chooses every value; it only cannot leave the format (measured: with demos and the marker prefill
alone, the base model sometimes wrote every section empty).

A `str` output may be empty only when its description says what empty means (e.g. `next_input`:
"empty means the fallback prompt"); other text outputs need at least one character. Values are
single lines. Types the grammar does not know (e.g. `Optional[...]`) accept any single line and
are left to the adapter's parser.

Three phrases of a field's description also shape field-wise decoding (`guidebench.lm.engine`), and
the model reads them as the rule they state: "at most N words" caps the tokens the field may use
(`word_cap`), a float "A.0 to B.0, one decimal" is one of those values (`decimal_values`), chosen
like a literal, and "empty unless FIELD is VALUE" leaves the field empty, undecoded, when an earlier
field's value says so (`empty_unless`), so the answer ends as soon as the rest is known to be empty.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

_OUTPUTS = re.compile(r"Your output fields are:\n(.*?)(?:\nAll interactions|\Z)", re.S)
_FIELD = re.compile(r"^\d+\. `(\w+)` \((.*)\):(.*)$", re.M)
_LITERAL = re.compile(r"^Literal\[(.*)\]$")
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_WORD_CAP = re.compile(r"\bat most (\d+) words\b", re.I)
_DECIMALS = re.compile(r"\b(\d+)\.0 to (\d+)\.0, one decimal\b", re.I)
_EMPTY_UNLESS = re.compile(r"\bempty unless `?(\w+)`? is `?([\w.-]+?)`?(?=[\s;,.)]|$)", re.I)

COMMON_RULES = r'''
line ::= [^\n]*
text ::= [^\n\t \[] [^\n]*
number ::= "-"? [0-9]+ ("." [0-9]+)?
integer ::= "-"? [0-9]+
boolean ::= "True" | "False" | "true" | "false"
sp ::= " "?
jstring ::= "\"" ( [^"\\\n] | "\\" ["\\/bfnrt] )* "\""
strlist ::= "[" sp ( jstring ( sp "," sp jstring )* )? sp "]"
jvalue ::= jobject | jarray | jstring | number | "true" | "false" | "null"
jarray ::= "[" sp ( jvalue ( sp "," sp jvalue )* )? sp "]"
jobject ::= "{" sp ( jstring sp ":" sp jvalue ( sp "," sp jstring sp ":" sp jvalue )* )? sp "}"
'''


@dataclass(frozen=True)
class OutputField:
    """One output field as the adapter declares it."""

    name: str
    type_text: str
    description: str


def declared_outputs(system: str) -> list[OutputField]:
    """The output fields listed in a ChatAdapter system message, in order."""
    match = _OUTPUTS.search(system or "")
    if not match:
        return []
    return [OutputField(name, type_text.strip(), description.strip())
            for name, type_text, description in _FIELD.findall(match.group(1))]


def _literal(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal_values(field: OutputField) -> list[str]:
    """The allowed values of a `Literal[...]` field (empty for other types)."""
    literal = _LITERAL.match(field.type_text)
    if not literal:
        return []
    return [single or double for single, double in _QUOTED.findall(literal.group(1))]


def decimal_values(field: OutputField) -> list[str]:
    """The values of a float field described as "A.0 to B.0, one decimal" ("0.0", "0.1", ... "1.0"), else []."""
    match = _DECIMALS.search(field.description) if field.type_text == "float" else None
    if not match:
        return []
    low, high = int(match.group(1)), int(match.group(2))
    return [f"{tenths // 10}.{tenths % 10}" for tenths in range(10 * low, 10 * high + 1)]


def word_cap(field: OutputField) -> Optional[int]:
    """N when the description says "at most N words" (None otherwise)."""
    match = _WORD_CAP.search(field.description)
    return int(match.group(1)) if match else None


def empty_unless(field: OutputField) -> Optional[tuple[str, str]]:
    """(field, value) when the description says "empty unless FIELD is VALUE" (None otherwise)."""
    match = _EMPTY_UNLESS.search(field.description)
    return (match.group(1), match.group(2)) if match else None


def value_rule(field: OutputField) -> str:
    """The GBNF expression of one field's value."""
    type_text = field.type_text
    values = literal_values(field)
    if values:
        return "(" + " | ".join(_literal(value) for value in values) + ")"
    if _LITERAL.match(type_text):
        return "line"
    if type_text == "str":
        return "line" if "empty" in field.description.lower() else "text"
    if type_text == "float":
        return "number"
    if type_text == "int":
        return "integer"
    if type_text == "bool":
        return "boolean"
    if type_text in ("list[str]", "List[str]"):
        return "strlist"
    if type_text.startswith(("list[", "List[")):
        return "jarray"
    if type_text.startswith(("dict[", "Dict[")) or (type_text[:1].isupper() and type_text.isidentifier()):
        return "jobject"  # dicts and pydantic models: any JSON object, the adapter validates the schema
    return "line"


def output_grammar(system: str, *, prefilled: bool) -> Optional[str]:
    """GBNF for the answer to a ChatAdapter request (after the prefilled first marker when `prefilled`)."""
    fields = declared_outputs(system)
    if not fields:
        return None
    parts: list[str] = []
    for index, field in enumerate(fields):
        marker = f"[[ ## {field.name} ## ]]\\n"
        if index == 0:
            if not prefilled:
                parts.append(f'"{marker}"')
        else:
            parts.append(f'"\\n\\n{marker}"')
        parts.append(value_rule(field))
    parts.append('"\\n\\n[[ ## completed ## ]]"')
    return "root ::= " + " ".join(parts) + "\n" + COMMON_RULES


_PATTERNS = {
    "line": r"[^\n]*",
    "text": r"[^\n\t \[][^\n]*",
    "number": r"-?[0-9]+(?:\.[0-9]+)?",
    "integer": r"-?[0-9]+",
    "boolean": r"True|False|true|false",
}
_JSON_RULES = {"strlist": list, "jarray": list, "jobject": dict}


def _value_conforms(field: OutputField, rule: str, value: str) -> bool:
    values = literal_values(field)
    if values:
        return value.strip("'\"") in values
    if rule in _JSON_RULES:
        try:
            data = json.loads(value)
        except ValueError:
            return False
        if not isinstance(data, _JSON_RULES[rule]):
            return False
        return rule != "strlist" or all(isinstance(item, str) for item in data)
    return re.fullmatch(_PATTERNS[rule], value) is not None


def conforms(system: str, answer: str) -> bool:
    """True when a complete answer (markers included) already has every section the grammar requires.

    Text values may span lines here (the adapter accepts that); the grammar only writes single lines.
    """
    fields = declared_outputs(system)
    if not fields:
        return True
    markers = list(re.finditer(r"^\[\[ ## (\w+) ## \]\]$", answer, re.M))
    if [m.group(1) for m in markers] != [f.name for f in fields]:
        return False
    for index, (field, marker) in enumerate(zip(fields, markers)):
        end = markers[index + 1].start() if index + 1 < len(markers) else len(answer)
        value = answer[marker.end():end].strip()
        rule = value_rule(field)
        if rule == "line":
            continue
        if rule == "text":
            if not value:
                return False
            continue
        if not _value_conforms(field, rule, value):
            return False
    return True
