"""The typed Arrow columns of a dataset split, declared once from the pydantic record models.

`columns_of(model)` reads a pydantic model's fields and maps each type to a column:

    str, Literal of strings      -> string          int, Literal of ints -> int64
    float                        -> float64         bool                 -> bool
    Optional[X]                  -> X's column, null for None
    a pydantic model             -> struct of its fields (+ `_extra`, JSON of undeclared keys, when
                                    the model keeps extra keys)
    list[X]                      -> list of X's column (one JSON string when X itself is JSON)
    dict, Any, other unions      -> string holding JSON (null for None): free-form data stays text

Floats are float64 (never float32: an f32 value the records hold as its shortest decimal, 0.8,
must come back as 0.8). `encode` turns a record's JSON-mode dict into a row of those columns and
`decode` turns a row back into the dict the model validates, so a record round-trips exactly: the
same model, the same `model_dump_json()` text. `features(model)` is the `datasets.Features` of a
split: `record_id`, `group_id`, then the record's other fields in model order.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel

EXTRA = "_extra"  # a pydantic field name never starts with "_", so this cannot clash with a field
LEADING: tuple[str, ...] = ("record_id", "group_id")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Column:
    """One column type: a value (`dtype`), JSON text, a list of `item`, or a struct of `fields`."""

    kind: Literal["value", "json", "list", "struct"]
    dtype: str = ""
    item: Optional["Column"] = None
    fields: tuple[tuple[str, "Column"], ...] = ()
    extras: bool = False


JSON = Column("json")


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def column_of(annotation: Any) -> Column:
    """The column of one field type (see the module docstring for the mapping)."""
    annotation = _unwrap(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        return column_of(rest[0]) if len(rest) == 1 else JSON
    if origin is Literal:
        if all(isinstance(a, str) for a in args):
            return Column("value", "string")
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return Column("value", "int64")
        return JSON
    if origin is list:
        item = column_of(args[0]) if args else JSON
        return JSON if item.kind == "json" else Column("list", item=item)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return columns_of(annotation)
    for python_type, dtype in ((bool, "bool"), (str, "string"), (int, "int64"), (float, "float64")):
        if annotation is python_type:
            return Column("value", dtype)
    return JSON


@lru_cache(maxsize=None)
def columns_of(model: type[BaseModel]) -> Column:
    """The struct column of a pydantic model: its fields in order, plus `_extra` if it keeps extra keys."""
    fields = tuple((name, column_of(info.annotation)) for name, info in model.model_fields.items())
    return Column("struct", fields=fields, extras=model.model_config.get("extra") == "allow")


def _feature(column: Column) -> Any:
    from datasets import List, Value

    if column.kind == "value":
        return Value(column.dtype)
    if column.kind == "json":
        return Value("string")
    if column.kind == "list":
        return List(_feature(column.item))  # type: ignore[arg-type]
    struct = {name: _feature(child) for name, child in column.fields}
    if column.extras:
        struct[EXTRA] = Value("string")
    return struct


def features(model: type[BaseModel]) -> Any:
    """The `datasets.Features` of a split of `model` records: record_id, group_id, then the other fields."""
    from datasets import Features, Value

    top = dict(columns_of(model).fields)
    out: dict[str, Any] = {"record_id": Value("string"), "group_id": Value("string")}
    out.update({name: _feature(column) for name, column in top.items() if name not in LEADING})
    return Features(out)


class ColumnTypeError(ValueError):
    """A record value that does not fit its declared column; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Misfit(Exception):
    """A value that does not fit its column, on its way up to `encode`, which names the whole path."""

    def __init__(self, message: str, parts: Optional[list[str]] = None) -> None:
        super().__init__(message)
        self.message, self.parts = message, parts or []


_Encoder = typing.Callable[[Any], Any]


def _value_encoder(dtype: str) -> _Encoder:
    def misfit(value: Any) -> _Misfit:
        return _Misfit(f"expected {dtype}, got {type(value).__name__} {value!r:.60}")

    if dtype == "float64":  # a JSON integer in a float field is still that number
        def encode_float(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            raise misfit(value)
        return encode_float
    if dtype == "int64":
        def encode_int(value: Any) -> Any:
            if value is None or (isinstance(value, int) and not isinstance(value, bool)
                                 and _INT64[0] <= value <= _INT64[1]):
                return value
            raise misfit(value)
        return encode_int
    python_type = str if dtype == "string" else bool

    def encode_plain(value: Any) -> Any:
        if value is None or isinstance(value, python_type):
            return value
        raise misfit(value)
    return encode_plain


def _list_encoder(item: _Encoder) -> _Encoder:
    def encode_list(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, list):
            raise _Misfit(f"expected a list, got {type(value).__name__}")
        try:
            return [item(element) for element in value]
        except _Misfit:
            for index, element in enumerate(value):  # which item: encode them again up to the first misfit
                try:
                    item(element)
                except _Misfit as exc:
                    exc.parts.insert(0, str(index))
                    raise
            raise
    return encode_list


def _struct_encoder(column: Column) -> _Encoder:
    fields = [(name, _encoder(child)) for name, child in column.fields]
    names = frozenset(name for name, _ in fields)
    extras = column.extras

    def encode_struct(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _Misfit(f"expected an object, got {type(value).__name__}")
        row = {}
        for name, encode_field in fields:
            try:
                row[name] = encode_field(value.get(name))
            except _Misfit as exc:
                exc.parts.insert(0, name)
                raise
        extra = None if names.issuperset(value) else {key: item for key, item in value.items() if key not in names}
        if extra and not extras:
            raise _Misfit("not a declared field", [next(iter(extra))])
        if extras:
            row[EXTRA] = _json_text(extra) if extra else None
        return row
    return encode_struct


def _encoder(column: Column) -> _Encoder:
    """The function that turns a value into its column's form (one closure per column, built once per model)."""
    if column.kind == "json":
        return lambda value: None if value is None else _json_text(value)
    if column.kind == "value":
        return _value_encoder(column.dtype)
    if column.kind == "list":
        return _list_encoder(_encoder(column.item))  # type: ignore[arg-type]
    return _struct_encoder(column)


@lru_cache(maxsize=None)
def _model_encoder(model: type[BaseModel]) -> _Encoder:
    return _encoder(columns_of(model))


def _decode(column: Column, value: Any) -> Any:
    if value is None:
        return None
    kind = column.kind
    if kind == "json":
        return json.loads(value)
    if kind == "value":
        return value
    if kind == "list":
        return [_decode(column.item, item) for item in value]  # type: ignore[arg-type]
    data = {name: _decode(child, value.get(name)) for name, child in column.fields}
    if column.extras and value.get(EXTRA):
        data.update(json.loads(value[EXTRA]))
    return data


def encode(model: type[BaseModel], data: dict[str, Any], group_id: str) -> dict[str, Any]:
    """The split row of a record given as its JSON-mode dict (`json.loads(record.model_dump_json())`)."""
    try:
        row = _model_encoder(model)(data)
    except _Misfit as exc:
        raise ColumnTypeError(".".join(exc.parts), exc.message) from None
    if row is None:
        raise ColumnTypeError("", "expected an object, got NoneType")
    return {"record_id": row.pop("record_id"), "group_id": group_id, **row}


def decode(model: type[BaseModel], row: dict[str, Any]) -> dict[str, Any]:
    """The dict a split row's record validates from (`model.model_validate(decode(model, row))`)."""
    return _decode(columns_of(model), {key: value for key, value in row.items() if key != "group_id"})
