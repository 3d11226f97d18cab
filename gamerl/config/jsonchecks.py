"""Reading the run's JSON files strictly: errors name the file and the key, list the known keys,
and say what a value should have been (the types come from TrainConfig's annotations). Shared by
gamerl/config/jsonconfig.py (train_config.json) and gamerl/config/envconfig.py (env_config.json).

JSON has no comments, so every object may hold a ``"_comment"`` (a string or a list of strings),
which is ignored.
"""

from __future__ import annotations

import ast
import json
import math
import os
from pathlib import Path
from typing import Any, Union

from .train_config import setting_fields

PathLike = Union[str, "os.PathLike[str]"]
COMMENT = "_comment"

__all__ = ["COMMENT", "PathLike", "check_keys", "coerce", "field_value", "read_json",
           "without_comment"]


def _json_hint(text: str, pos: int) -> str:
    """What the usual mistake at ``pos`` is, when it is one: a comment or a trailing comma."""
    rest = text[pos:].lstrip()
    before = text[:pos].rstrip()
    if rest.startswith(("//", "/*", "#")):
        return " (JSON has no comments: use a \"_comment\" key)"
    if before.endswith(",") and rest[:1] in ("}", "]"):
        return " (a comma before a closing bracket: JSON allows no trailing comma)"
    return ""


def read_json(path: PathLike) -> dict:
    """A JSON object from ``path``; errors name the file (and the line of a syntax error)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
                         + _json_hint(text, e.pos)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level, got "
                         f"{type(data).__name__}")
    return data


FIELD_TYPES = {name: str(f.type) for name, f in setting_fields().items()}


def describe(kind: str) -> str:
    if kind.startswith("Optional["):
        return describe(kind[len("Optional["):-1]) + " or null"
    if kind.startswith("Literal["):
        return "one of " + ", ".join(repr(c) for c in _literal_choices(kind))
    return {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
            "list": "a list of strings", "dict": "an object", "object": "a value"}.get(kind, kind)


def _literal_choices(kind: str) -> tuple:
    return tuple(ast.literal_eval("(" + kind[len("Literal["):-1] + ",)"))


def coerce(value: Any, kind: str) -> Any:
    """``value`` checked against a TrainConfig annotation (a string); ints become floats for
    float fields. Raises ValueError with what was expected."""
    if kind.startswith("Optional["):
        return None if value is None else coerce(value, kind[len("Optional["):-1])
    ok = True
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value)
        value = float(value) if ok else value
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind.startswith("Literal["):
        ok = isinstance(value, str) and value in _literal_choices(kind)
    elif kind == "list":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif kind == "dict":
        ok = isinstance(value, dict)
    if not ok:
        raise ValueError(f"expected {describe(kind)}, got {json.dumps(value)}")
    return value


def check_keys(obj: dict, known, where: str) -> None:
    unknown = [k for k in obj if k != COMMENT and k not in known]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}"
                         + (f" (and {unknown[1:]})" if len(unknown) > 1 else "")
                         + f"; known keys: {', '.join(known)} (and \"{COMMENT}\")")
    comment = obj.get(COMMENT)
    if comment is not None and not (isinstance(comment, str) or (
            isinstance(comment, list) and all(isinstance(c, str) for c in comment))):
        raise ValueError(f"{where}: \"{COMMENT}\" must be a string or a list of strings")


def field_value(value: Any, field: str, where: str) -> Any:
    try:
        return coerce(value, FIELD_TYPES[field])
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def without_comment(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k != COMMENT}
