"""Write a spec back to TOML: the GUI's experiment builder saves what the CLI runs.

The spec is held as plain data (the dict ``tomllib`` reads: top-level keys, ``variants`` and
``workloads`` lists of tables); :func:`spec_to_toml` writes it in the layout of ``docs/spec.md`` —
top-level keys first, then one ``[[variants]]`` and one ``[[workloads]]`` table each — so that a
saved file reads like a hand-written one and loads back to the same data.

A spec that came from a file is saved with :func:`update_toml` instead: the file's own text, edited in
place (tomlkit) to hold the new data, so the user's comments, blank lines and key order survive; only
the values that changed are rewritten.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["spec_to_toml", "toml_value", "update_toml"]

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


_SECTIONS = ("variants", "workloads")


def update_toml(text: str, data: Mapping[str, Any]) -> str:
    """``text`` (a spec file as the user wrote it) edited to hold ``data``, keeping its comments and
    layout: keys whose value is unchanged are left as written, changed ones are rewritten, removed ones
    deleted, new ones appended to their table. ``[[variants]]`` and ``[[workloads]]`` tables are matched
    to the old ones by ``name`` (else by position), so a renamed or reordered table keeps its comments.
    ``tomllib.loads`` of the result gives ``data`` back."""
    import tomlkit
    from tomlkit.items import AoT, Table

    doc = tomlkit.parse(text)
    scalars = {k: v for k, v in data.items() if k not in _SECTIONS and v is not None}
    old_sections = {key: doc[key] for key in _SECTIONS if key in doc}
    for key in list(doc):
        if key in _SECTIONS:
            del doc[key]
    _update_table(doc, scalars, top_level=True)
    for section in _SECTIONS:
        old = old_sections.get(section)
        old_tables = list(old) if isinstance(old, AoT) else []
        new_tables = [{k: v for k, v in t.items() if v is not None} for t in data.get(section) or ()]
        if not new_tables:
            continue
        # by name first; a table whose name is gone (renamed) is reused by the next unmatched new one
        tables = [t for t in old_tables if isinstance(t, Table)]
        by_name = {str(t["name"]): t for t in tables if "name" in t}
        names = {str(v.get("name")) for v in new_tables}
        spare = [t for t in tables if str(t.get("name")) not in names]
        # the parsed array is reused: a fresh one would add a blank line before every table
        aot = old if isinstance(old, AoT) else tomlkit.aot()
        del aot[:]
        for values in new_tables:
            table = by_name.get(str(values.get("name"))) or (spare.pop(0) if spare else None)
            if table is None:
                table = tomlkit.table()
                for key in _ordered(values, _TABLE_ORDER):
                    table[key] = _item(values[key])
            else:
                _update_table(table, values)
            aot.append(table)
        doc[section] = aot
    # a blank line between tables, as a hand-written file has (a moved or new table may lack one)
    tables = [t for key in _SECTIONS if isinstance(doc.get(key), AoT) for t in doc[key]]
    for table in tables[:-1]:
        if not table.as_string().endswith("\n\n"):
            table.add(tomlkit.nl())
    return tomlkit.dumps(doc)


def _update_table(table: Any, values: Mapping[str, Any], *, top_level: bool = False) -> None:
    for key in [k for k in table if k not in values]:
        del table[key]
    for key, value in values.items():
        current = table.get(key)
        unwrapped = current.unwrap() if hasattr(current, "unwrap") else current
        if key in table and unwrapped == value and type(unwrapped) is type(value):
            continue
        if key not in table and top_level and hasattr(table, "_insert_at"):
            # after the last top-level key, not after the comments that open the first [[table]]
            body = table.body
            last = max((i for i, (k, _) in enumerate(body) if k is not None), default=-1)
            table._insert_at(last + 1, key, _item(value))
        else:
            table[key] = _item(value)


def _item(value: Any) -> Any:
    """A tomlkit value written as :func:`spec_to_toml` would: tables inline, text with line breaks as
    a multi-line string."""
    import tomlkit

    if isinstance(value, Mapping):
        inline = tomlkit.inline_table()
        for k, v in value.items():
            inline[k] = _item(v)
        return inline
    if isinstance(value, list | tuple):
        array = tomlkit.array()
        for v in value:
            array.append(_item(v))
        return array
    if isinstance(value, str) and "\n" in value:
        return tomlkit.string(value, multiline=True)
    return tomlkit.item(value)
