"""Specs written back to TOML (the GUI's save) and inline prompts (the GUI's prompt editor)."""

from __future__ import annotations

import sys

import pytest

from workbench.core.errors import SpecError
from workbench.core.resources import resource_path
from workbench.spec.parse import load_spec, parse_spec
from workbench.spec.writer import spec_to_toml, update_toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_round_trip_of_the_demo_spec():
    text = resource_path("specs", "demo.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    written = spec_to_toml(data)
    assert tomllib.loads(written) == data
    assert written.index("[[variants]]") < written.index("[[workloads]]")
    assert written.startswith('name = "demo: the levers on SmolLM2-135M"\n')
    spec = parse_spec(written)
    assert [v.name for v in spec.variants] == [
        v.name for v in load_spec(resource_path("specs", "demo.toml")).variants
    ]


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "two\nlines\twith a tab",
        "\nstarts with a newline",
        "ends with a quote'",
        "has ''' triple quotes\nand lines",
        'double "quotes" and \\ backslash',
        "control \x01 char\nhere",
        "crlf\r\nline",
        "ünïcödé — 漢字 🙂",
        "",
    ],
)
def test_strings_survive(value):
    data = {
        "name": value,
        "variants": [{"name": "v", "strategy": "fake", "note": value}],
        "workloads": [{"name": "w", "prompts": [value, {"id": "x", "prompt": value}]}],
    }
    assert tomllib.loads(spec_to_toml(data)) == data


def test_numbers_lists_and_keys():
    data = {
        "repetitions": 3,
        "temperature": 0.7,
        "flag": True,
        "weird key": 1,
        "variants": [{"name": "v", "lengths": [1, 2, 3], "ratio": 1e-5}],
        "workloads": [{"name": "sweep-input", "input_tokens": list(range(64, 64 * 40, 64))}],
    }
    text = spec_to_toml(data)
    assert tomllib.loads(text) == data
    assert '"weird key" = 1' in text


def test_none_values_are_left_out():
    text = spec_to_toml({"name": "n", "baseline": None, "variants": [{"name": "v", "draft": None}]})
    assert "baseline" not in text and "draft" not in text


def test_inline_prompts_make_a_workload():
    spec = parse_spec(
        """
        [[variants]]
        name = "v"
        strategy = "fake"
        [[workloads]]
        name = "mine"
        max_new_tokens = 12
        prompts = ["first prompt", {id = "q", messages = [{role = "user", content = "hi"}], max_new_tokens = 4}]
        """
    )
    (workload,) = spec.workloads
    assert workload.source == "inline"
    assert [i.prompt.id for i in workload.items] == ["p1", "q"]
    assert workload.items[0].prompt.prompt == "first prompt" and workload.items[0].max_new_tokens == 12
    assert workload.items[1].prompt.messages == ({"role": "user", "content": "hi"},)
    assert workload.items[1].max_new_tokens == 4


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ("prompts = []", "'prompts' must be a non-empty list"),
        ('prompts = "one"', "'prompts' must be a non-empty list"),
        ('prompts = [""]', 'prompts[0]: "prompt" must be a non-empty string'),
        ('prompts = [{id = "a", prompt = "x"}, {id = "a", prompt = "y"}]', "prompts[1]: duplicate id 'a'"),
        ('prompts = ["x"]\nfile = "p.jsonl"', "either 'file' or 'prompts'"),
    ],
)
def test_bad_inline_prompts_are_one_clear_error(workload, message):
    text = f'[[variants]]\nname = "v"\nstrategy = "fake"\n[[workloads]]\nname = "mine"\n{workload}\n'
    with pytest.raises(SpecError, match="workload 'mine'") as err:
        parse_spec(text)
    assert message in str(err.value)


COMMENTED = """# levers on my laptop
name = "levers"   # the run's name
repetitions = 3

[[variants]]
# the reference every speed-up is against
name = "baseline"
model = "demo:smollm2-135m"  # the 135M demo model
strategy = "baseline"

[[variants]]
name = "int8"
model = "demo:smollm2-135m"
strategy = "quantized"
method = "int8-weight-only"

[[workloads]]
name = "chat"   # growing history
"""


def test_update_toml_keeps_comments_and_layout_and_writes_the_new_data():
    data = tomllib.loads(COMMENTED)
    data["repetitions"] = 5
    data["warmup"] = 2
    data["variants"][1]["method"] = "bnb-int8"
    del data["variants"][1]["model"]
    data["variants"].insert(0, {"name": "pld", "model": "m", "strategy": "prompt-lookup", "extra": {"a": 1}})
    data["workloads"].append({"name": "mine", "prompts": ["line one\nline two"]})
    text = update_toml(COMMENTED, data)
    assert tomllib.loads(text) == data
    for comment in (
        "# levers on my laptop",
        "# the run's name",
        "# the reference every speed-up",
        "# growing history",
    ):
        assert comment in text
    # the commented table stays with its variant, although a new one came first
    assert text.index("# the reference every speed-up") > text.index('name = "pld"')
    assert text.index("# the 135M demo model") < text.index('name = "int8"')
    assert text.index("warmup = 2") < text.index("[[variants]]")  # a new top-level key among the others


def test_update_toml_with_unchanged_data_gives_the_text_back():
    assert update_toml(COMMENTED, tomllib.loads(COMMENTED)) == COMMENTED


def test_update_toml_renamed_and_removed_tables():
    data = tomllib.loads(COMMENTED)
    data["variants"][0]["name"] = "fp32"  # renamed: keeps its table and comments
    data["workloads"] = [{"name": "code"}]
    text = update_toml(COMMENTED, data)
    assert tomllib.loads(text) == data
    assert text.index("# the reference every speed-up") < text.index('name = "fp32"')
    data["variants"].pop(0)
    text = update_toml(COMMENTED, data)
    assert tomllib.loads(text) == data and "# the reference" not in text


def test_a_spec_saved_from_the_builder_keeps_the_users_comments(tmp_path):
    from workbench.gui.draft import SpecDraft

    path = tmp_path / "levers.toml"
    path.write_text(COMMENTED, encoding="utf-8")
    draft = SpecDraft.load(path)
    draft.top["repetitions"] = 4
    draft.variants[1]["method"] = "int4-weight-only"
    draft.save(path)
    text = path.read_text(encoding="utf-8")
    assert "# the reference every speed-up is against" in text and "# growing history" in text
    assert tomllib.loads(text)["repetitions"] == 4
    draft.top["repetitions"] = 6  # saved twice: edits the text it wrote
    draft.save(path)
    assert "# levers on my laptop" in path.read_text(encoding="utf-8")
    assert SpecDraft.load(path).build().repetitions == 6
