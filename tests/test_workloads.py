"""Built-in workloads, user JSONL workloads (errors name file:line) and prompt encoding for sweeps."""

from __future__ import annotations

import itertools
import json
import sys

import pytest

from workbench.core.errors import SpecError
from workbench.core.resources import resource_path
from workbench.core.strategy import Prompt
from workbench.run.runner import encode_prompt
from workbench.spec.workloads import (
    Item,
    Workload,
    as_chat,
    builtin_names,
    builtin_workload,
    load_jsonl,
    with_max_new_tokens,
)
from workbench.testing import FakeConfig, FakeSession

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTINS = [
    "chat",
    "summarise",
    "summarise-short",
    "code",
    "rag",
    "abstractive",
    "copy-edit",
    "conversation",
    "sweep-input",
    "sweep-output",
]


@pytest.fixture(scope="module")
def index():
    with open(resource_path("workloads", "index.toml"), "rb") as f:
        return tomllib.load(f)


# -- built-ins ------------------------------------------------------------------------------------


def test_builtin_names_match_the_index(index):
    assert builtin_names() == list(index) == BUILTINS


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_loads(name, index):
    workload = builtin_workload(name)
    assert workload.name == name
    assert workload.source == "built-in"
    assert workload.description == index[name]["description"]
    assert workload.items, "a workload has prompts"
    ids = workload.prompt_ids
    assert len(ids) == len(set(ids)), "prompt ids are unique"
    assert all(isinstance(i, str) and i for i in ids)
    for item in workload.items:
        p = item.prompt
        assert (p.prompt is None) != (p.messages is None), "exactly one of prompt/messages"
        assert item.max_new_tokens >= 1
        if p.messages is not None:
            assert all(set(m) == {"role", "content"} and m["content"] for m in p.messages)
            assert p.messages[-1]["role"] == "user"


@pytest.mark.parametrize("name", ["chat", "summarise", "code", "rag", "abstractive", "copy-edit"])
def test_builtin_budgets_come_from_the_index(name, index):
    assert {i.max_new_tokens for i in builtin_workload(name).items} == {index[name]["max_new_tokens"]}


def test_chat_has_growing_histories():
    chat = builtin_workload("chat")
    assert len(chat.items) >= 2
    histories = [item.prompt.messages for item in chat.items]
    assert all(h is not None for h in histories)
    for before, after in itertools.pairwise(histories):
        assert len(after) > len(before)
        assert after[: len(before)] == before, "each turn resends the previous history"
        assert [m["role"] for m in after[len(before) :]] == ["assistant", "user"]
    for history in histories:
        assert history[-1]["role"] == "user"


@pytest.mark.parametrize("name", ["summarise", "code", "abstractive", "copy-edit"])
def test_summarise_and_code_are_wrapped_as_chat(name, index):
    assert index[name].get("as_chat") is True
    workload = builtin_workload(name)
    for item in workload.items:
        assert item.prompt.prompt is None
        assert item.prompt.messages is not None
        assert item.prompt.messages[-1]["role"] == "user"
    # the raw file holds plain prompts: as_chat turned each into one user message
    raw = load_jsonl(resource_path("workloads", index[name]["file"]), default_max_new_tokens=1)
    for raw_item, item in zip(raw, workload.items, strict=True):
        if raw_item.prompt.prompt is not None:
            assert item.prompt.messages == ({"role": "user", "content": raw_item.prompt.prompt},)


def test_the_trade_off_workloads_hold_what_their_names_promise():
    abstractive = builtin_workload("abstractive")
    ids = set(abstractive.prompt_ids)
    assert {"history-summary", "chat-3turn", "code-stub"} <= ids  # the three kinds of unseen prompt
    chat = next(i for i in abstractive.items if i.prompt.id == "chat-3turn").prompt.messages
    assert chat is not None and [m["role"] for m in chat].count("user") == 3
    history = next(i for i in abstractive.items if i.prompt.id == "history-summary").prompt.messages
    assert history is not None and len(history[-1]["content"].split()) >= 400  # a ~500-token text
    copy_edit = builtin_workload("copy-edit")
    assert {"type-hints", "typo", "table"} <= set(copy_edit.prompt_ids)
    # an edit returns its input changed a little: each prompt carries the text to edit after its
    # one-paragraph instruction, longer than it, so the answer is mostly copied
    for item in copy_edit.items:
        assert item.prompt.messages is not None
        instruction, _, text = item.prompt.messages[-1]["content"].partition("\n\n")
        assert len(text) > len(instruction), item.prompt.id


def test_sweep_input_lengths(index):
    entry = index["sweep-input"]
    sweep = builtin_workload("sweep-input")
    assert sweep.sweep == "input"
    assert sweep.ignore_eos is True
    assert [i.prompt.input_tokens for i in sweep.items] == entry["input_tokens"]
    assert [i.prompt.input_tokens for i in sweep.items] == [64, 128, 256, 512, 1024, 2048]
    assert {i.max_new_tokens for i in sweep.items} == {entry["max_new_tokens"]}
    text = resource_path("workloads", entry["file"]).read_text(encoding="utf-8")
    assert all(i.prompt.prompt == text for i in sweep.items)


def test_sweep_output_lengths(index):
    entry = index["sweep-output"]
    sweep = builtin_workload("sweep-output")
    assert sweep.sweep == "output"
    assert sweep.ignore_eos is True
    assert [i.max_new_tokens for i in sweep.items] == entry["output_tokens"]
    assert [i.max_new_tokens for i in sweep.items] == [16, 32, 64, 128, 256, 512]
    assert {i.prompt.input_tokens for i in sweep.items} == {entry["input_tokens"]} == {128}


def test_unknown_builtin():
    with pytest.raises(SpecError, match="unknown built-in workload 'nope'; built-ins: chat"):
        builtin_workload("nope")


def test_with_max_new_tokens_and_as_chat_helpers():
    code = with_max_new_tokens(builtin_workload("code"), 3)
    assert {i.max_new_tokens for i in code.items} == {3}
    sweep = as_chat(builtin_workload("sweep-input"))
    assert all(i.prompt.prompt is not None for i in sweep.items), "sweeps stay raw text"


# -- user JSONL -----------------------------------------------------------------------------------


def write_jsonl(tmp_path, *lines: str, name: str = "w.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_prompt_and_messages_lines(tmp_path):
    path = write_jsonl(
        tmp_path,
        json.dumps({"id": "p", "prompt": "raw text"}),
        "",  # blank lines are skipped
        json.dumps(
            {
                "id": "m",
                "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                "max_new_tokens": 11,
            }
        ),
        json.dumps({"id": 7, "prompt": "numeric id"}),
    )
    items = load_jsonl(path, default_max_new_tokens=64)
    assert [i.prompt.id for i in items] == ["p", "m", "7"]
    assert items[0].prompt == Prompt(id="p", prompt="raw text")
    assert items[1].prompt.prompt is None
    assert items[1].prompt.messages == ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})
    assert [i.max_new_tokens for i in items] == [64, 11, 64]


def test_lines_that_name_their_parts(tmp_path):
    """As LLMLingua takes them: instruction, context, question joined by blank lines into the raw
    prompt; the prompt keeps them for prompt compression; as_chat keeps them in the user message."""
    path = write_jsonl(
        tmp_path,
        json.dumps({"id": "f", "instruction": "Answer briefly.", "context": "Doc text.", "question": "Why?"}),
        json.dumps({"id": "g", "context": "Only a document."}),
    )
    f, g = (i.prompt for i in load_jsonl(path, default_max_new_tokens=8))
    assert f.prompt == "Answer briefly.\n\nDoc text.\n\nWhy?"
    assert f.parts == (("instruction", "Answer briefly."), ("context", "Doc text."), ("question", "Why?"))
    assert g.prompt == "Only a document." and g.parts == (("context", "Only a document."),)
    assert Prompt.from_dict(f.to_dict()) == f  # what the worker receives
    (chat,) = as_chat(Workload(name="w", items=(Item(f, 8),))).items
    assert chat.prompt.messages == ({"role": "user", "content": f.prompt},) and chat.prompt.parts == f.parts


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            '{"id": "b", "prompt": "x", "context": "y"}',
            'give the parts ("instruction", "context", "question")',
        ),
        ('{"id": "b", "instruction": "x", "question": "y"}', 'need a non-empty "context"'),
        ('{"id": "b", "context": 3}', '"context" must be a string'),
    ],
)
def test_bad_parts(tmp_path, bad, problem):
    assert problem in jsonl_error(tmp_path, bad)


def jsonl_error(tmp_path, *lines: str) -> str:
    path = write_jsonl(tmp_path, *lines)
    with pytest.raises(SpecError) as info:
        load_jsonl(path, default_max_new_tokens=8)
    return str(info.value)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ('{"id": "b", prompt}', "not valid JSON"),
        ('{"prompt": "no id"}', 'missing "id"'),
        ('{"id": "", "prompt": "empty id"}', 'missing "id"'),
        ('{"id": "b", "prompt": "x", "messages": [{"role": "user", "content": "y"}]}', "exactly one of"),
        ('{"id": "b"}', "exactly one of"),
        ('{"id": "b", "prompt": ""}', '"prompt" must be a non-empty string'),
        ('{"id": "b", "messages": []}', '"messages" must be a non-empty list'),
        ('{"id": "b", "messages": "hi"}', '"messages" must be a non-empty list'),
        ('{"id": "b", "messages": [{"role": "user"}]}', "messages[0] must be"),
        ('{"id": "b", "messages": [{"role": "user", "content": "a"}, "hi"]}', "messages[1] must be"),
        ('{"id": "b", "messages": [{"role": 1, "content": "a"}]}', "messages[0] must be"),
        ('{"id": "b", "prompt": "x", "max_new_tokens": 0}', '"max_new_tokens" must be a positive integer'),
        ('{"id": "b", "prompt": "x", "max_new_tokens": "5"}', '"max_new_tokens" must be a positive'),
        ('{"id": "b", "prompt": "x", "extra": 1}', "unknown key 'extra'"),
        ('["id", "prompt"]', "expected a JSON object"),
        ('{"id": "a", "prompt": "again"}', "duplicate id 'a'"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, bad, problem):
    message = jsonl_error(tmp_path, '{"id": "a", "prompt": "fine"}', "", bad)
    assert message.startswith(f"{tmp_path / 'w.jsonl'}:3: "), message
    assert problem in message


def test_invalid_json_names_the_column(tmp_path):
    message = jsonl_error(tmp_path, '{"id": "b", prompt}')
    assert ":1: not valid JSON" in message and "column 13" in message


def test_empty_file(tmp_path):
    message = jsonl_error(tmp_path, "", "   ")
    assert str(tmp_path / "w.jsonl") in message and "no prompts" in message


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_jsonl(tmp_path / "gone.jsonl", default_max_new_tokens=8)
    assert "workload file not found" in str(info.value) and "gone.jsonl" in str(info.value)


def test_not_utf8(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'{"id": "a", "prompt": "caf\xe9"}\n')
    with pytest.raises(SpecError, match="not UTF-8"):
        load_jsonl(path, default_max_new_tokens=8)


# -- encoding for the input sweep -----------------------------------------------------------------


@pytest.fixture
def session():
    return FakeSession(FakeConfig())


def test_encode_plain_prompt(session):
    assert encode_prompt(session, Prompt(id="a", prompt="one two three")) == session.encode(
        Prompt(id="a", prompt="one two three")
    )
    assert len(encode_prompt(session, Prompt(id="a", prompt="one two three"))) == 3


def test_encode_messages(session):
    prompt = Prompt(id="m", messages=({"role": "user", "content": "a b"}, {"role": "user", "content": "c"}))
    assert len(encode_prompt(session, prompt)) == 3


@pytest.mark.parametrize("want", [1, 5, 64, 128, 1000])
def test_input_tokens_cuts_exactly(session, want):
    text = resource_path("workloads", "sweep_base.txt").read_text(encoding="utf-8")
    ids = encode_prompt(session, Prompt(id="s", prompt=text, input_tokens=want))
    assert len(ids) == want
    full = session.encode(Prompt(id="s", prompt=text))
    if want <= len(full):
        assert ids == full[:want], "a cut is a prefix of the encoded text"


def test_short_text_is_repeated_to_reach_the_length(session):
    ids = encode_prompt(session, Prompt(id="s", prompt="alpha beta gamma", input_tokens=10))
    assert len(ids) == 10
    one = session.encode(Prompt(id="s", prompt="alpha beta gamma"))
    assert ids == (one * 4)[:10]


def test_builtin_sweep_input_encodes_to_its_lengths(session):
    for item in builtin_workload("sweep-input").items:
        assert len(encode_prompt(session, item.prompt)) == item.prompt.input_tokens


def test_a_byte_order_mark_is_tolerated(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "prompt": "hello"}\n')
    (item,) = load_jsonl(path, default_max_new_tokens=4)
    assert item.prompt.prompt == "hello"
