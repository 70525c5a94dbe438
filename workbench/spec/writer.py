"""Write a spec back to TOML: the GUI's experiment builder saves what the CLI runs.

The spec is held as plain data (the dict ``tomllib`` reads: top-level keys, ``variants`` and
``workloads`` lists of tables); :func:`spec_to_toml` writes it in the layout of ``docs/spec.md`` —
top-level keys first, then one ``[[variants]]`` and one ``[[workloads]]`` table each — so that a
saved file reads like a hand-written one and loads back to the same data.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["spec_to_toml", "toml_value"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TOP_ORDER = ("name", "description", "repetitions", "warmup", "seed", "baseline")
_TABLE_ORDER = ("name", "model", "strategy", "dtype", "device", "file")


def spec_to_toml(data: Mapping[str, Any]) -> str:
    """TOML text for a spec held as data; ``tomllib.loads`` of the result gives ``data`` back."""
    lines: list[str] = []
    tables = {k: v for k, v in data.items() if k in ("variants", "workloads")}
    scalars = {k: v for k, v in data.items() if k not in tables and v is not None}
    for key in _ordered(scalars, _TOP_ORDER):
        lines.append(f"{_key(key)} = {toml_value(scalars[key])}")
    for section in ("variants", "workloads"):
        for table in tables.get(section) or ():
            lines.append("")
            lines.append(f"[[{section}]]")
            values = {k: v for k, v in table.items() if v is not None}
            for key in _ordered(values, _TABLE_ORDER):
                lines.append(f"{_key(key)} = {toml_value(values[key], multiline=True)}")
    return "\n".join(lines).lstrip("\n") + "\n"


def _ordered(values: Mapping[str, Any], first: tuple[str, ...]) -> list[str]:
    return [k for k in first if k in values] + [k for k in values if k not in first]


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def toml_value(value: Any, *, multiline: bool = False) -> str:
    """One TOML value: strings, booleans, integers, floats, lists and tables (inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"cannot write {value!r} to a spec")
        return repr(value)
    if isinstance(value, str):
        return _string(value, multiline=multiline)
    if isinstance(value, list | tuple):
        items = [toml_value(v, multiline=multiline) for v in value]
        if (multiline and any("\n" in i for i in items)) or sum(len(i) for i in items) > 80:
            return "[\n" + "".join(f"    {i},\n" for i in items) + "]"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        # inline tables must stay on one line (TOML 1.0): no multi-line strings inside
        return (
            "{" + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None) + "}"
        )
    raise ValueError(f"cannot write a {type(value).__name__} to a spec")


def _string(text: str, *, multiline: bool = False) -> str:
    # A multi-line literal string keeps prompts readable (TOML drops the newline right after the
    # opening quotes); it cannot hold ''' or control characters but tab and newline: JSON escaping then.
    if (
        multiline
        and "\n" in text
        and "'''" not in text
        and "\r" not in text
        and not text.endswith("'")
        and not any(ord(c) < 32 and c not in "\n\t" for c in text)
    ):
        return "'''\n" + text + "'''"
    # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
    return json.dumps(text, ensure_ascii=False)
