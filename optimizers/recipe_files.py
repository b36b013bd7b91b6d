"""Recipe files: reading a TOML or YAML recipe, writing one's values, and the error a recipe file or setting
raises (naming the file and the field).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError


class RecipeError(ValueError):
    """A recipe file or setting that cannot be used (names the file and the field)."""


def read_recipe_file(path: str | Path) -> dict[str, Any]:
    """Parse a TOML (.toml) or YAML (.yaml/.yml) recipe file."""
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: recipe file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in {".yaml", ".yml"}:
            data = yaml.safe_load(text) or {}
        else:
            raise RecipeError(f"{path}: a recipe file must end in .toml, .yaml or .yml")
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe file must hold a table/mapping")
    return data


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


def wrap_words(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


def explain_errors(exc: ValidationError) -> str:
    """Each error as `field 'name' = value: what is wrong` (the value as given, when there is one)."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "settings"
        given = "" if error.get("type") == "missing" else f" = {error.get('input')!r}"
        parts.append(f"field {where!r}{given}: {str(error.get('msg')).removeprefix('Value error, ')}")
    return "; ".join(parts)
