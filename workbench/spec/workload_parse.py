"""A spec's ``[[workloads]]`` tables, validated into :class:`~workbench.spec.workloads.Workload`\\ s,
with the same one-line errors as the rest of the spec (:mod:`.parse` calls it for each table).

A table takes its prompts from one source — inline ``prompts``, a JSONL ``file`` (of prompts, or of
conversations with ``kind = "conversation"``), or a built-in by its name (a sweep's lengths may be
changed) — then its limit, its history (conversations), its generation settings and its targets, in
that order. Which variants run each workload (its ``variants`` key) is resolved once every variant
is known: :func:`who_runs`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from workbench.core.errors import SpecError
from workbench.core.literals import History, WorkloadKind
from workbench.spec.tables import check_keys, get_typed
from workbench.spec.targets import parse_targets
from workbench.spec.workloads import (
    HISTORIES,
    KINDS,
    Workload,
    as_chat,
    builtin_names,
    builtin_workload,
    conversation_items,
    inline_items,
    load_conversations,
    load_jsonl,
    sweep_input_items,
    sweep_output_items,
    with_max_new_tokens,
)

__all__ = ["WORKLOAD_KEYS", "parse_workload", "who_runs"]

#: the keys a ``[[workloads]]`` table may hold (docs/spec.md, "Workloads")
WORKLOAD_KEYS = {
    "name",
    "kind",
    "history",
    "file",
    "description",
    "max_new_tokens",
    "ignore_eos",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "limit",
    "as_chat",
    "input_tokens",
    "output_tokens",
    "prompts",
    "targets",
    "variants",
}


def parse_workload(data: Any, index: int, base_dir: Path, defaults: Mapping[str, Any]) -> Workload:
    """The ``index``-th ``[[workloads]]`` table; ``defaults``: the spec's ``temperature``, ``top_p``
    and ``top_k``, which a workload's own keys override. Its ``variants`` are left for :func:`who_runs`."""
    if not isinstance(data, dict):
        raise SpecError(f"spec: workloads[{index}] must be a table")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"spec: workloads[{index}] needs a 'name' (a built-in: {', '.join(builtin_names())})")
    where = f"workload '{name}'"
    check_keys(data, WORKLOAD_KEYS, where)
    file = get_typed(data, "file", str, where, default=None)
    max_new_tokens = get_typed(data, "max_new_tokens", int, where, default=None)
    if max_new_tokens is not None and max_new_tokens < 1:
        raise SpecError(f"{where}: 'max_new_tokens' must be at least 1")
    kind = _kind(data, where, file)
    workload = _prompts(data, name, where, kind, file, max_new_tokens, base_dir)
    workload = _limited(workload, data, where)
    history = _history(data, where, workload)
    if get_typed(data, "as_chat", bool, where, default=False):
        workload = as_chat(workload)
    return _settings(workload, data, where, defaults, history)


def _kind(data: dict[str, Any], where: str, file: str | None) -> WorkloadKind | None:
    """The table's ``kind`` (None: not given), checked against where its prompts come from."""
    kind = get_typed(data, "kind", str, where, default=None)
    if kind is not None and kind not in KINDS:
        raise SpecError(f'{where}: \'kind\' must be "prompts" or "conversation", got {kind!r}')
    if kind == "conversation" and (file is None or "prompts" in data):
        raise SpecError(f"{where}: kind = \"conversation\" needs a 'file' of conversations (JSONL)")
    if kind == "prompts" and file is None and "prompts" not in data:
        raise SpecError(f"{where}: kind = \"prompts\" needs a 'file' or 'prompts'")
    return cast("WorkloadKind | None", kind)


def _prompts(
    data: dict[str, Any],
    name: str,
    where: str,
    kind: WorkloadKind | None,
    file: str | None,
    max_new_tokens: int | None,
    base_dir: Path,
) -> Workload:
    """The workload with its prompts from their one source: inline ``prompts``, a ``file`` (of
    conversations when ``kind = "conversation"``), or the built-in ``name``."""
    budget = max_new_tokens or 128
    if "prompts" in data:
        if file is not None:
            raise SpecError(f"{where}: give either 'file' or 'prompts', not both")
        items = inline_items(data["prompts"], where, default_max_new_tokens=budget)
        return Workload(name=name, items=items, source="inline")
    if file is not None and kind == "conversation":
        conversations = load_conversations(base_dir / file, default_max_new_tokens=budget)
        return Workload(
            name=name,
            items=conversation_items(conversations),
            kind="conversation",
            conversations=conversations,
            source=str(base_dir / file),
        )
    if file is not None:
        items = load_jsonl(base_dir / file, default_max_new_tokens=budget)
        return Workload(name=name, items=items, source=str(base_dir / file))
    if name in builtin_names():
        return _builtin(data, name, where, max_new_tokens)
    raise SpecError(
        f"{where}: not a built-in workload and no 'file' or 'prompts' given; built-ins: {', '.join(builtin_names())}"
    )


def _builtin(data: dict[str, Any], name: str, where: str, max_new_tokens: int | None) -> Workload:
    """The built-in ``name``, its sweep lengths and output budget changed as the table asks."""
    workload = _sweep_overrides(builtin_workload(name), data, where)
    if max_new_tokens is None:
        return workload
    if workload.sweep == "output":
        raise SpecError(f"{where}: sweep-output sets its lengths with 'output_tokens', not 'max_new_tokens'")
    return with_max_new_tokens(workload, max_new_tokens)


def _sweep_overrides(workload: Workload, data: dict[str, Any], where: str) -> Workload:
    """Let a spec change the lengths of a built-in sweep."""
    if "input_tokens" not in data and "output_tokens" not in data:
        return workload
    if workload.sweep is None:
        raise SpecError(f"{where}: 'input_tokens'/'output_tokens' only apply to the sweep workloads")
    text = workload.items[0].prompt.prompt or ""
    settings = workload.settings
    if workload.sweep == "input":
        if "output_tokens" in data:
            raise SpecError(f"{where}: 'output_tokens' applies to sweep-output; use 'max_new_tokens' here")
        lengths = _int_list(data["input_tokens"], f"{where}: 'input_tokens'")
        max_new = data.get("max_new_tokens", settings["max_new_tokens"])
        return dataclasses.replace(workload, items=sweep_input_items(text, lengths, max_new))
    input_tokens = data.get("input_tokens", settings["input_tokens"])
    if isinstance(input_tokens, bool) or not isinstance(input_tokens, int) or input_tokens < 1:
        raise SpecError(f"{where}: 'input_tokens' must be one positive integer for sweep-output")
    lengths = _int_list(data.get("output_tokens", settings["output_tokens"]), f"{where}: 'output_tokens'")
    return dataclasses.replace(workload, items=sweep_output_items(text, input_tokens, lengths))


def _int_list(value: Any, where: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise SpecError(f"{where} must be a non-empty list of positive integers")
    return value


def _limited(workload: Workload, data: dict[str, Any], where: str) -> Workload:
    """The first ``limit`` prompts (of a conversation workload: whole conversations, since a turn
    needs the turns before it)."""
    limit = get_typed(data, "limit", int, where, default=None)
    if limit is None:
        return workload
    if limit < 1:
        raise SpecError(f"{where}: 'limit' must be at least 1")
    if workload.is_conversation:
        kept = workload.conversations[:limit]
        return dataclasses.replace(workload, conversations=kept, items=conversation_items(kept))
    return dataclasses.replace(workload, items=workload.items[:limit])


def _history(data: dict[str, Any], where: str, workload: Workload) -> History:
    """``history``: how a conversation's turns get their history (only "baseline-anchored" is built)."""
    history = get_typed(data, "history", str, where, default="baseline-anchored")
    if "history" in data and not workload.is_conversation:
        raise SpecError(f"{where}: 'history' applies to conversation workloads only")
    if history == "own":
        raise SpecError(
            f'{where}: history = "own" (each variant fed its own answers) is not supported yet; '
            'use "baseline-anchored" (every variant gets the baseline\'s answers as history)'
        )
    if history not in HISTORIES:
        raise SpecError(f"{where}: 'history' must be \"baseline-anchored\", got {history!r}")
    return cast(History, history)


def _settings(
    workload: Workload, data: dict[str, Any], where: str, defaults: Mapping[str, Any], history: History
) -> Workload:
    """The generation settings (``stop``, sampling, ``ignore_eos``), ``description`` and ``targets``."""
    stop = data.get("stop", list(workload.stop))
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise SpecError(f"{where}: 'stop' must be a string or a list of non-empty strings")
    temperature = get_typed(data, "temperature", float, where, default=defaults["temperature"])
    if temperature < 0:
        raise SpecError(f"{where}: 'temperature' must be 0 (greedy) or more")
    top_p = get_typed(data, "top_p", float, where, default=defaults["top_p"])
    if not 0 < top_p <= 1:
        raise SpecError(f"{where}: 'top_p' must be in (0, 1]")
    targets = parse_targets(data["targets"], where) if "targets" in data else workload.targets
    return dataclasses.replace(
        workload,
        targets=targets or None,
        description=get_typed(data, "description", str, where, default=workload.description),
        ignore_eos=get_typed(data, "ignore_eos", bool, where, default=workload.ignore_eos),
        temperature=temperature,
        top_p=top_p,
        top_k=get_typed(data, "top_k", int, where, default=defaults["top_k"]),
        stop=tuple(stop),
        history=history,
    )


def who_runs(
    workloads: Sequence[Workload],
    raw: Sequence[Any],
    variants: Sequence[str],
    answers_to: Mapping[str, Sequence[str]],
    baseline: str,
) -> tuple[Workload, ...]:
    """Each workload's ``variants`` key (``raw``: the tables as written) checked against the spec's
    ``variants`` (their names, in order) and resolved to their names. ``answers_to``: every name a
    table may list → the variants it stands for (a variant's own name, and a sweep's name as written
    for every variant it expands to). The baseline runs every workload (speed-ups and the quality
    pass pair every variant with it, and a conversation's history is its answers), and every variant
    runs at least one."""
    resolved = []
    for workload, data in zip(workloads, raw, strict=True):
        listed = data.get("variants")
        if listed is None:
            resolved.append(workload)
            continue
        where = f"workload '{workload.name}'"
        if isinstance(listed, str):
            listed = [listed]
        if not isinstance(listed, list) or not listed or not all(isinstance(n, str) for n in listed):
            raise SpecError(f"{where}: 'variants' must be a non-empty list of variant names")
        names: list[str] = []
        for name in listed:
            if name not in answers_to:
                close = difflib.get_close_matches(name, sorted(answers_to), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f"; variants: {', '.join(variants)}"
                raise SpecError(f"{where}: 'variants' lists {name!r}, which is not a variant{hint}")
            names += [n for n in answers_to[name] if n not in names]
        if baseline not in names:
            raise SpecError(
                f"{where}: 'variants' must list the baseline ({baseline!r}): every variant is compared "
                "with it on the same prompts"
            )
        resolved.append(dataclasses.replace(workload, variants=tuple(names)))
    idle = [v for v in variants if not any(w.runs(v) for w in resolved)]
    if idle:
        raise SpecError(f"variant {idle[0]!r} runs no workload: add it to a workload's 'variants'")
    return tuple(resolved)
