"""Workloads: named prompts plus generation settings. Built-ins live in ``resources/workloads``.

A user workload is a JSONL file, one object per line: ``{"id": "...", "prompt": "..."}`` (raw text)
or ``{"id": "...", "messages": [{"role": "user", "content": "..."}]}`` (the model's chat template is
applied), optionally with ``"max_new_tokens"``. Instead of ``"prompt"`` a line may name its parts,
``"instruction"``, ``"context"``, ``"question"`` (as LLMLingua does; the context required): they are
joined by blank lines into the raw prompt, and the prompt keeps them (``Prompt.parts``) for prompt
compression, which drops only the context's tokens. Errors name ``file:line``.

A conversation workload (``kind = "conversation"``) is a JSONL file of conversations, one per line:
``{"id": "...", "system": "...", "turns": ["first user message", "second", ...]}`` (``system`` optional,
no assistant text: the answers are generated). Each turn is one prompt, id ``<conversation>/t<k>``;
its history is filled in before the measured trials (:func:`anchored`): ``history =
"baseline-anchored"`` gives every variant's turn k the system prompt, the user messages and the
baseline's own greedy answers of turns 1..k-1, then user message k, so the prompts are identical across
variants.

The two sweeps are generated from one long text: ``sweep-input`` cuts it to exact token counts
(64…2048, capped by the model's context), ``sweep-output`` asks for exact output lengths.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, get_args

from workbench.core.errors import SpecError
from workbench.core.literals import History, WorkloadKind, WorkloadSweep
from workbench.core.resources import resource_path
from workbench.core.strategy import Prompt
from workbench.formatting import count
from workbench.spec.targets import Targets, parse_targets

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the largest whole number a spec or workload file may hold: SQLite's INTEGER is a signed 64-bit one
MAX_INTEGER = 2**63 - 1

__all__ = [
    "HISTORIES",
    "KINDS",
    "MAX_INTEGER",
    "Conversation",
    "Item",
    "Workload",
    "anchored",
    "builtin_names",
    "builtin_targets",
    "builtin_workload",
    "conversation_items",
    "inline_items",
    "load_conversations",
    "load_jsonl",
    "turn_id",
    "turn_messages",
]


#: how a conversation's history is built; "own" (each variant fed its own answers) is not built yet
HISTORIES: tuple[History, ...] = get_args(History)
#: a workload's kinds: prompts, or conversations (the spec's ``kind``)
KINDS: tuple[WorkloadKind, ...] = get_args(WorkloadKind)


@dataclass(frozen=True)
class Item:
    """One prompt of a workload with its own output budget; ``turn``: its 1-based turn in a
    conversation (None outside conversation workloads)."""

    prompt: Prompt
    max_new_tokens: int
    turn: int | None = None


@dataclass(frozen=True)
class Conversation:
    """One conversation of a conversation workload: a system prompt (may be empty) and the user's
    messages, in order; the assistant's answers are generated."""

    id: str
    system: str
    users: tuple[str, ...]
    max_new_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "system": self.system,
            "users": list(self.users),
            "max_new_tokens": self.max_new_tokens,
        }


@dataclass(frozen=True)
class Workload:
    name: str
    items: tuple[Item, ...]
    description: str = ""
    source: str = ""  # "built-in" or the JSONL path
    ignore_eos: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    sweep: WorkloadSweep | None = None  # a built-in sweep's; None for every other workload
    #: ``conversation``: its items are the turns of :attr:`conversations` (:attr:`is_conversation`)
    kind: WorkloadKind = "prompts"
    #: a conversation workload's conversations (its items are their turns); () for other workloads
    conversations: tuple[Conversation, ...] = ()
    history: History = "baseline-anchored"  # conversation workloads: how a turn's history is built
    targets: Targets | None = None  # what the feature needs (workbench.spec.targets); None: no targets
    settings: dict[str, Any] = field(default_factory=dict, compare=False)
    #: the spec's ``variants`` key: the names of the variants that run this workload (a sweep's name
    #: as written stands for all its variants); None: every variant
    variants: tuple[str, ...] | None = None

    @property
    def is_conversation(self) -> bool:
        """A conversation workload: its items are turns, each with the earlier turns as history."""
        return self.kind == "conversation"

    @property
    def prompt_ids(self) -> list[str]:
        return [item.prompt.id for item in self.items]

    def runs(self, variant: str) -> bool:
        """Whether the variant named ``variant`` runs this workload."""
        return self.variants is None or variant in self.variants


def _resource_dir() -> Path:
    return resource_path("workloads")


@cache
def _index() -> dict[str, dict[str, Any]]:
    with open(_resource_dir() / "index.toml", "rb") as f:
        return tomllib.load(f)


def builtin_names() -> list[str]:
    return list(_index())


def builtin_workload(name: str) -> Workload:
    """The built-in workload ``name`` with its default settings."""
    index = _index()
    if name not in index:
        raise SpecError(f"unknown built-in workload '{name}'; built-ins: {', '.join(index)}")
    entry = index[name]
    path = _resource_dir() / entry["file"]
    settings = {
        k: v for k, v in entry.items() if k not in ("file", "description", "sweep", "targets", "kind")
    }
    common = dict(
        name=name,
        description=entry.get("description", ""),
        source="built-in",
        ignore_eos=bool(entry.get("ignore_eos", False)),
        settings=settings,
        targets=builtin_targets(name),
    )
    sweep = entry.get("sweep")
    if sweep == "input":
        items = sweep_input_items(
            path.read_text(encoding="utf-8"), entry["input_tokens"], entry["max_new_tokens"]
        )
        return Workload(items=items, sweep="input", **common)
    if sweep == "output":
        items = sweep_output_items(
            path.read_text(encoding="utf-8"), entry["input_tokens"], entry["output_tokens"]
        )
        return Workload(items=items, sweep="output", **common)
    if entry.get("kind") == "conversation":
        conversations = load_conversations(path, default_max_new_tokens=entry["max_new_tokens"])
        return Workload(
            items=conversation_items(conversations),
            kind="conversation",
            conversations=conversations,
            **common,
        )
    items = load_jsonl(path, default_max_new_tokens=entry["max_new_tokens"])
    workload = Workload(items=items, **common)
    return as_chat(workload) if entry.get("as_chat") else workload


def builtin_targets(name: str) -> Targets | None:
    """The default targets of built-in workload ``name`` (None: it has none, or is not a built-in)."""
    entry = _index().get(name)
    if entry is None or "targets" not in entry:
        return None
    return parse_targets(entry["targets"], f"built-in workload '{name}'", source="built-in")


def sweep_input_items(text: str, lengths: list[int], max_new_tokens: int) -> tuple[Item, ...]:
    return tuple(
        Item(Prompt(id=f"in-{n:04d}", prompt=text, input_tokens=n), max_new_tokens) for n in sorted(lengths)
    )


def sweep_output_items(text: str, input_tokens: int, lengths: list[int]) -> tuple[Item, ...]:
    return tuple(
        Item(Prompt(id=f"out-{n:04d}", prompt=text, input_tokens=input_tokens), n) for n in sorted(lengths)
    )


def _json_lines(path: Path, what: str) -> Iterator[tuple[str, Any]]:
    """Each non-blank line of a JSONL file, parsed, with its ``file:line`` for messages; every
    problem reading it is one :class:`SpecError` (``what``: "workload", "conversation")."""
    try:
        raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # tolerate a BOM
        lines = raw.decode("utf-8").splitlines()
    except FileNotFoundError:
        raise SpecError(f"{what} file not found: {path}") from None
    except UnicodeDecodeError as exc:
        # the text before the bad byte is valid: its lines, counted as the lines below are
        before = (raw[: exc.start].decode("utf-8") + "x").splitlines()
        raise SpecError(
            f"{path}:{len(before)}: not UTF-8 text ({exc.reason}: byte 0x{raw[exc.start]:02x} at column "
            f"{len(before[-1])}); save the file as UTF-8"
        ) from None
    except OSError as exc:
        raise SpecError(f"cannot read {what} file {path}: {exc.strerror}") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def load_jsonl(path: str | Path, *, default_max_new_tokens: int) -> tuple[Item, ...]:
    """Read a workload JSONL file; every problem is reported as ``file:line: what``."""
    path = Path(path)
    items: list[Item] = []
    seen: set[str] = set()
    for where, data in _json_lines(path, "workload"):
        items.append(_item(data, where, default_max_new_tokens))
        if items[-1].prompt.id in seen:
            raise SpecError(f"{where}: duplicate id {items[-1].prompt.id!r}")
        seen.add(items[-1].prompt.id)
    if not items:
        raise SpecError(f"{path}: no prompts (expected one JSON object per line)")
    return tuple(items)


def inline_items(prompts: Any, where: str, *, default_max_new_tokens: int) -> tuple[Item, ...]:
    """A spec's inline ``prompts``: a list of strings (ids ``p1``, ``p2``...) or of tables shaped like
    JSONL lines. Lets a workload typed into the GUI travel inside the spec (and the run's record)."""
    if not isinstance(prompts, list) or not prompts:
        raise SpecError(f"{where}: 'prompts' must be a non-empty list of strings or tables")
    items: list[Item] = []
    seen: set[str] = set()
    for i, entry in enumerate(prompts):
        at = f"{where}: prompts[{i}]"
        if isinstance(entry, str):
            entry = {"id": f"p{i + 1}", "prompt": entry}
        items.append(_item(entry, at, default_max_new_tokens))
        if items[-1].prompt.id in seen:
            raise SpecError(f"{at}: duplicate id {items[-1].prompt.id!r}")
        seen.add(items[-1].prompt.id)
    return tuple(items)


#: a line may name its parts instead of "prompt" (as LLMLingua's compress_prompt takes them): joined by
#: blank lines, in this order, into the raw prompt; prompt compression drops only the context's tokens
FIELD_PARTS = ("instruction", "context", "question")
_ITEM_KEYS = {"id", "prompt", "messages", "max_new_tokens", *FIELD_PARTS}


def _item(data: Any, where: str, default_max_new_tokens: int) -> Item:
    if not isinstance(data, dict):
        raise SpecError(f'{where}: expected a JSON object with "id" and "prompt" or "messages"')
    unknown = set(data) - _ITEM_KEYS
    if unknown:
        raise SpecError(
            f"{where}: unknown key {sorted(unknown)[0]!r}; valid keys: {', '.join(sorted(_ITEM_KEYS))}"
        )
    if "id" not in data or not isinstance(data["id"], str | int) or str(data["id"]) == "":
        raise SpecError(f'{where}: missing "id" (a non-empty string)')
    has_prompt, has_messages = "prompt" in data, "messages" in data
    named = [k for k in FIELD_PARTS if k in data]
    if named and (has_prompt or has_messages):
        raise SpecError(
            f'{where}: "{named[0]}" names a part of the prompt; give the parts '
            f'("instruction", "context", "question") or "prompt" or "messages", not both'
        )
    parts = None
    if named:
        for k in named:
            if not isinstance(data[k], str):
                raise SpecError(f'{where}: "{k}" must be a string')
        if not data.get("context"):
            raise SpecError(f'{where}: the parts need a non-empty "context" (the text to compress)')
        parts = tuple((k, data[k]) for k in FIELD_PARTS if data.get(k))
        data = {**data, "prompt": "\n\n".join(text for _, text in parts)}
        has_prompt = True
    if has_prompt == has_messages:
        raise SpecError(f'{where}: needs exactly one of "prompt" or "messages"')
    if has_prompt and (not isinstance(data["prompt"], str) or not data["prompt"]):
        raise SpecError(f'{where}: "prompt" must be a non-empty string')
    messages = None
    if has_messages:
        messages = data["messages"]
        if not isinstance(messages, list) or not messages:
            raise SpecError(f'{where}: "messages" must be a non-empty list')
        for i, message in enumerate(messages):
            if (
                not isinstance(message, dict)
                or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)
            ):
                raise SpecError(f'{where}: messages[{i}] must be {{"role": str, "content": str}}')
        messages = tuple({"role": m["role"], "content": m["content"]} for m in messages)
    max_new_tokens = data.get("max_new_tokens", default_max_new_tokens)
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or not 1 <= max_new_tokens <= MAX_INTEGER
    ):
        raise SpecError(
            f'{where}: "max_new_tokens" must be a positive integer of at most {count(MAX_INTEGER, grouped=True)}, got {max_new_tokens!r}'
        )
    prompt = Prompt(id=str(data["id"]), prompt=data.get("prompt"), messages=messages, parts=parts)
    return Item(prompt, max_new_tokens)


def with_max_new_tokens(workload: Workload, max_new_tokens: int) -> Workload:
    """Override every item's output budget (a spec's workload-level ``max_new_tokens``)."""
    return replace(
        workload,
        items=tuple(replace(i, max_new_tokens=max_new_tokens) for i in workload.items),
        conversations=tuple(replace(c, max_new_tokens=max_new_tokens) for c in workload.conversations),
    )


def as_chat(workload: Workload) -> Workload:
    """Wrap raw prompts as a single user message, so instruct models get their chat template."""
    items = []
    for item in workload.items:
        p = item.prompt
        if p.prompt is not None and p.input_tokens is None:
            p = Prompt(id=p.id, messages=({"role": "user", "content": p.prompt},), parts=p.parts)
        items.append(replace(item, prompt=p))
    return replace(workload, items=tuple(items))


# -- conversations ---------------------------------------------------------------------------------

_CONVERSATION_KEYS = {"id", "system", "turns", "max_new_tokens"}


def load_conversations(path: str | Path, *, default_max_new_tokens: int) -> tuple[Conversation, ...]:
    """Read a conversations JSONL file (one conversation per line); problems as ``file:line: what``."""
    path = Path(path)
    conversations: list[Conversation] = []
    for where, data in _json_lines(path, "conversation"):
        conversation = _conversation(data, where, default_max_new_tokens)
        if any(c.id == conversation.id for c in conversations):
            raise SpecError(f"{where}: duplicate id {conversation.id!r}")
        conversations.append(conversation)
    if not conversations:
        raise SpecError(
            f'{path}: no conversations (expected one {{"id", "system", "turns"}} object per line)'
        )
    return tuple(conversations)


def _conversation(data: Any, where: str, default_max_new_tokens: int) -> Conversation:
    if not isinstance(data, dict):
        raise SpecError(f'{where}: expected a JSON object with "id" and "turns"')
    unknown = set(data) - _CONVERSATION_KEYS
    if unknown:
        raise SpecError(
            f"{where}: unknown key {sorted(unknown)[0]!r}; valid keys: {', '.join(sorted(_CONVERSATION_KEYS))}"
            " (a conversation holds the user's messages only: the answers are generated)"
        )
    if not isinstance(data.get("id"), str) or not data["id"] or "/" in data["id"]:
        raise SpecError(f'{where}: missing "id" (a non-empty string without "/")')
    system = data.get("system", "")
    if not isinstance(system, str):
        raise SpecError(f'{where}: "system" must be a string')
    turns = data.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise SpecError(f'{where}: "turns" must be a non-empty list of user messages (non-empty strings)')
    max_new_tokens = data.get("max_new_tokens", default_max_new_tokens)
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or not 1 <= max_new_tokens <= MAX_INTEGER
    ):
        raise SpecError(f'{where}: "max_new_tokens" must be a positive integer, got {max_new_tokens!r}')
    return Conversation(data["id"], system, tuple(turns), max_new_tokens)


def turn_id(conversation: str, turn: int) -> str:
    """The prompt id of a conversation's turn (1-based)."""
    return f"{conversation}/t{turn:02d}"


def turn_messages(
    conversation: Conversation, turn: int, answers: Sequence[str]
) -> tuple[dict[str, str], ...]:
    """The messages of ``turn`` (1-based): the system prompt, each earlier user message with its answer
    from ``answers`` (the answers of at least the turns before it), then this turn's user message."""
    messages = [{"role": "system", "content": conversation.system}] if conversation.system else []
    for user, answer in zip(conversation.users[: turn - 1], answers[: turn - 1], strict=True):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": conversation.users[turn - 1]})
    return tuple(messages)


def conversation_items(
    conversations: Sequence[Conversation], answers: dict[str, Sequence[str]] | None = None
) -> tuple[Item, ...]:
    """Every turn of every conversation as an item, conversation by conversation. Without ``answers``
    (conversation id → the answers of its turns) the history is not known yet: each turn holds only
    its own user message until :func:`anchored` fills it in."""
    items = []
    for c in conversations:
        for k in range(1, len(c.users) + 1):
            if answers is None:
                messages = turn_messages(
                    Conversation(c.id, c.system, (c.users[k - 1],), c.max_new_tokens), 1, ()
                )
            else:
                messages = turn_messages(c, k, answers[c.id])
            items.append(Item(Prompt(id=turn_id(c.id, k), messages=messages), c.max_new_tokens, turn=k))
    return tuple(items)


def anchored(workload: Workload, answers: dict[str, Sequence[str]]) -> Workload:
    """The conversation workload with each turn's history filled in from ``answers`` (conversation id →
    the baseline's answers, in turn order)."""
    return replace(workload, items=conversation_items(workload.conversations, answers))
