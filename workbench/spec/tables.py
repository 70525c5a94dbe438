"""Reading a spec's TOML tables, for the spec's own keys (:mod:`.parse`) and its workloads'
(:mod:`.workload_parse`) alike: a key of a given type, unknown keys (with a did-you-mean), every
number finite and within SQLite's INTEGER range, and a time span ("5m"). Each problem is one
:class:`~workbench.core.errors.SpecError` naming its place.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from workbench.core.errors import SpecError
from workbench.formatting import count
from workbench.spec.workloads import MAX_INTEGER

__all__ = ["INT_RANGE", "check_keys", "check_numbers", "duration_s", "get_typed"]

#: the whole numbers a spec may hold: SQLite's INTEGER (a signed 64-bit integer), where they are stored
INT_RANGE = (-MAX_INTEGER - 1, MAX_INTEGER)

_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def get_typed(data: dict[str, Any], key: str, kind: type, where: str, *, default: Any) -> Any:
    """``data[key]`` when it is a ``kind`` (an integer is a number; true is not an integer), else
    ``default`` when the key is absent; one line naming ``where`` and the key otherwise."""
    if key not in data:
        return default
    value = data[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise SpecError(f"{where}: '{key}' must be {_TYPE_WORDS[kind]}, got {value!r}")
    return value


def check_keys(data: dict[str, Any], known: set[str], where: str) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; valid keys: {', '.join(sorted(known))}"
            raise SpecError(f"{where}: unknown key '{key}'{hint}")


def check_numbers(data: dict[str, Any]) -> None:
    """Every number anywhere in the spec (its own keys, each variant's and strategy parameters, each
    workload's, targets, inline prompts, sweep lists) is finite (TOML has ``nan`` and ``inf``) and a
    whole number is in SQLite's INTEGER range: one line naming the key and the value otherwise."""

    def table_name(kind: str, table: Any, index: int) -> str:
        name = table.get("name") if isinstance(table, dict) else None
        return f"{kind} {name!r}" if isinstance(name, str) and name else f"spec: {kind}s[{index}]"

    for key, value in data.items():
        if key in ("variants", "workloads") and isinstance(value, list):
            for i, table in enumerate(value):
                _check_value(table, table_name(key[:-1], table, i), "")
        else:
            _check_value(value, "spec", key)


def _check_value(value: Any, where: str, key: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _check_value(v, where, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_value(v, where, f"{key}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{where}: '{key}' must be a finite number, got {value}")
    elif isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise SpecError(
            f"{where}: '{key}' = {value} is out of range (whole numbers are stored as 64-bit integers: "
            f"at most {count(INT_RANGE[1], grouped=True)})"
        )


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)s)?")


def duration_s(value: Any, where: str) -> float:
    """A time span: a number of seconds, or a string of hours, minutes and seconds ("5m", "90s",
    "1h30m", "2.5m"). At least one second."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch("".join(value.split()).lower()) if isinstance(value, str) else None
        if match is None or not any(match.groups()):
            raise SpecError(f'{where} must be a time such as "5m", "90s" or "1h30m", got {value!r}')
        hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not 1 <= seconds < float("inf"):
        raise SpecError(f"{where} must be at least one second, got {value!r}")
    return seconds
