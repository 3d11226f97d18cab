"""The settings as the command line sees them: ``--set NAME=VALUE`` parsed by the type of the
field's default, and each setting's one-line meaning (``--print-config``, docs/reference.md)."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import fields
from typing import Any, Sequence

from .train_config import SECTIONS, did_you_mean, setting_fields


def coerce_override(name: str, value: str) -> Any:
    """Parse a command-line ``name=value`` for TrainConfig field ``name`` by its default's type."""
    by_name = setting_fields()
    if name not in by_name:
        raise ValueError(f"unknown setting {name!r}{did_you_mean(name, by_name)}")
    kind = str(by_name[name].type)  # a string: this module uses postponed annotations
    if kind.startswith("Optional[") and value.lower() in ("none", "null"):
        return None
    kind = kind.removeprefix("Optional[").removesuffix("]") if kind.startswith("Optional[") else kind
    if kind == "bool":
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name}: expected a boolean, got {value!r}")
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected {'an integer' if kind == 'int' else 'a number'}"
                         ) from None
    if kind in ("dict", "list", "object"):  # task_config, lora_target_modules, curriculum
        try:
            return json.loads(value)
        except ValueError:
            if kind == "object":
                return value  # curriculum="default"
            raise ValueError(f"{name}: expected JSON, got {value!r}") from None
    return value  # str and Literal[...] fields (validate() checks the Literal choices)


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` items as TrainConfig overrides, each coerced by ``coerce_override``
    (ValueError for an item without ``=`` or a bad setting)."""
    overrides = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set expects NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        overrides[name.strip()] = coerce_override(name.strip(), value)
    return overrides


def setting_descriptions() -> dict[str, str]:
    """Every setting's flat name -> one line on what it is: the comment beside its field in
    its section's source (or the comment lines just above it), so ``--print-config`` says
    what the code says and cannot drift from it. "" where the source has none."""
    out: dict[str, str] = {}
    for cls in SECTIONS.values():
        above: list[str] = []
        for line in inspect.getsource(cls).splitlines():
            stripped = line.strip()
            field = re.match(r"(\w+): [^=]+=.*?(?:#\s*(.*))?$", stripped)
            if stripped.startswith("#"):
                above.append(stripped.lstrip("# "))
            elif field and field.group(1) in {f.name for f in fields(cls)}:
                text = field.group(2) or " ".join(above)
                out[field.group(1)] = re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip(".")
                above = []
            else:
                above = []
    return {name: out.get(name, "") for name in setting_fields()}
