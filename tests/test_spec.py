"""Spec parsing: TOML in, validated dataclasses out, one clear error per problem."""

from __future__ import annotations

import json
import textwrap

import pytest

from workbench.core.errors import ModelSourceError, SpecError, StrategyError, WorkbenchError
from workbench.spec.parse import Spec, load_spec, parse_spec, variant_from_dict
from workbench.spec.workloads import builtin_workload
from workbench.testing import FakeConfig

FAKE = '[[variants]]\nname = "a"\nstrategy = "fake"\n'
CODE = '[[workloads]]\nname = "code"\n'


def write_spec(tmp_path, text: str, name: str = "spec.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def spec_error(text: str, *, base_dir=".", kind: type[Exception] = WorkbenchError) -> str:
    with pytest.raises(kind) as info:
        parse_spec(text, base_dir=base_dir)
    message = str(info.value)
    assert "\n" not in message.strip(), "errors are one line"
    return message


# -- a valid spec ---------------------------------------------------------------------------------


@pytest.fixture
def full_spec(tmp_path):
    (tmp_path / "mine.jsonl").write_text(
        '{"id": "p1", "prompt": "hello there"}\n'
        '{"id": "p2", "messages": [{"role": "user", "content": "hi"}], "max_new_tokens": 5}\n',
        encoding="utf-8",
    )
    return load_spec(
        write_spec(
            tmp_path,
            """
            name = "levers"
            description = "two fakes"

            [[variants]]
            name = "slow"
            strategy = "fake"
            prefill_ms = 20
            decode_ms_per_token = 4.5
            tokens_per_step = 1

            [[variants]]
            name = "fast"
            strategy = "fake"
            prefill_ms = 2
            tokens_per_step = 3
            fail_on_prompt = "p1"

            [[workloads]]
            name = "code"

            [[workloads]]
            name = "mine"
            file = "mine.jsonl"
            max_new_tokens = 7
            """,
        )
    )


def test_valid_spec_round_trips(full_spec: Spec, tmp_path):
    spec = full_spec
    assert spec.name == "levers"
    assert spec.description == "two fakes"
    assert [v.name for v in spec.variants] == ["slow", "fast"]
    slow, fast = spec.variants
    assert slow.strategy == fast.strategy == "fake"
    assert slow.dtype == "auto" and slow.device == "auto"
    # parameters sit beside the common keys and become the strategy's Config
    assert slow.params == {"prefill_ms": 20, "decode_ms_per_token": 4.5, "tokens_per_step": 1}
    assert isinstance(slow.config, FakeConfig)
    assert slow.config.prefill_ms == 20.0 and isinstance(slow.config.prefill_ms, float)
    assert slow.config.decode_ms_per_token == 4.5
    assert fast.config == FakeConfig(prefill_ms=2.0, tokens_per_step=3, fail_on_prompt="p1")
    # workloads: a built-in and a JSONL file (relative to the spec file)
    assert [w.name for w in spec.workloads] == ["code", "mine"]
    code, mine = spec.workloads
    assert code.source == "built-in"
    assert code.items == builtin_workload("code").items
    assert mine.prompt_ids == ["p1", "p2"]
    assert mine.source == str(tmp_path / "mine.jsonl")
    assert mine.items[0].prompt.prompt == "hello there"
    # the workload's max_new_tokens is the default; a line's own wins
    assert [i.max_new_tokens for i in mine.items] == [7, 5]
    # defaults
    assert spec.repetitions == 3
    assert spec.warmup == 1
    assert spec.seed == 0
    assert spec.baseline is None
    assert spec.baseline_variant == "slow"  # no "baseline" set, none named so: the first
    assert spec.path == tmp_path / "spec.toml"
    assert "prefill_ms = 20" in spec.text  # the text as written, stored with the run


def test_variant_to_dict_round_trips_through_the_worker_path(full_spec: Spec):
    for variant in full_spec.variants:
        data = json.loads(json.dumps(variant.to_dict()))  # what the worker receives
        again = variant_from_dict(data)
        assert again.name == variant.name
        assert again.strategy == variant.strategy
        assert again.config == variant.config
        assert again.params == variant.params


def test_repetitions_warmup_seed_and_sampling_settings():
    spec = parse_spec(
        "repetitions = 5\nwarmup = 0\nseed = 7\ntemperature = 1\ntop_p = 0.9\ntop_k = 40\n" + FAKE + CODE
    )
    assert (spec.repetitions, spec.warmup, spec.seed) == (5, 0, 7)
    (workload,) = spec.workloads
    assert workload.temperature == 1.0 and isinstance(workload.temperature, float)
    assert workload.top_p == 0.9 and workload.top_k == 40


def test_plan_warms_every_workload_first_and_caps_warmup_tokens():
    from workbench.run.plan import plan_run

    text = "repetitions = 2\nwarmup = 1\nwarmup_max_new_tokens = 4\n" + FAKE
    text += '[[workloads]]\nname = "code"\nlimit = 2\nmax_new_tokens = 24\n'
    text += '[[workloads]]\nname = "chat"\nlimit = 1\nmax_new_tokens = 2\n'
    (variant_plan,) = plan_run(parse_spec(text))
    trials = variant_plan.trials
    warmups = [t for t in trials if t.warmup]
    assert [t.workload for t in warmups] == ["code", "chat"]
    assert [t.max_new_tokens for t in warmups] == [4, 2]  # capped, never raised
    measured = [t for t in trials if not t.warmup]
    assert list(trials[: len(warmups)]) == warmups
    assert [t.max_new_tokens for t in measured] == [24, 24, 2] * 2
    assert [t.repetition for t in measured] == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("repetitions = 0\n", "'repetitions' must be at least 1"),
        ("warmup = -1\n", "'warmup' must be 0 or more"),
        ("warmup_max_new_tokens = 0\n", "'warmup_max_new_tokens' must be at least 1"),
        ('repetitions = "3"\n', "'repetitions' must be a whole number or \"auto\""),
        ("repetitions = true\n", "'repetitions' must be a whole number or \"auto\""),
    ],
)
def test_bad_counts(text, problem):
    assert problem in spec_error(text + FAKE + CODE, kind=SpecError)


def test_baseline_rules():
    two = FAKE + '[[variants]]\nname = "b"\nstrategy = "fake"\n'
    assert parse_spec(two + CODE).baseline_variant == "a"  # the first
    named = FAKE + '[[variants]]\nname = "baseline"\nstrategy = "fake"\n'
    assert parse_spec(named + CODE).baseline_variant == "baseline"  # one named "baseline"
    explicit = parse_spec('baseline = "b"\n' + two + CODE)
    assert explicit.baseline == "b" and explicit.baseline_variant == "b"  # explicit wins
    assert parse_spec('baseline = "a"\n' + named + CODE).baseline_variant == "a"


def test_baseline_must_name_a_variant():
    message = spec_error('baseline = "zz"\n' + FAKE + CODE, kind=SpecError)
    assert "'zz'" in message and "is not a variant" in message and "a" in message


# -- workload options -----------------------------------------------------------------------------


def test_limit_and_max_new_tokens_override():
    spec = parse_spec(FAKE + '[[workloads]]\nname = "code"\nlimit = 3\nmax_new_tokens = 9\n')
    (code,) = spec.workloads
    assert code.prompt_ids == ["code-1", "code-2", "code-3"]
    assert {i.max_new_tokens for i in code.items} == {9}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("limit = 0", "'limit' must be at least 1"),
        ("max_new_tokens = 0", "'max_new_tokens' must be at least 1"),
        ('limit = "2"', "'limit' must be an integer"),
        ("temperature = -1", "'temperature' must be 0"),
        ("top_p = 0", "'top_p' must be in (0, 1]"),
        ("stop = 3", "'stop' must be a string or a list"),
        ("input_tokens = [8]", "only apply to the sweep workloads"),
        ("lmit = 2", "did you mean 'limit'"),
    ],
)
def test_bad_workload_options(line, problem):
    message = spec_error(FAKE + CODE + line + "\n", kind=SpecError)
    assert "workload 'code'" in message and problem in message


def test_stop_accepts_a_string_or_a_list():
    one = parse_spec(FAKE + CODE + 'stop = "END"\n').workloads[0]
    assert one.stop == ("END",)
    two = parse_spec(FAKE + CODE + 'stop = ["a", "b"]\n').workloads[0]
    assert two.stop == ("a", "b")


def test_as_chat_wraps_raw_prompts(tmp_path):
    (tmp_path / "raw.jsonl").write_text(
        '{"id": "r1", "prompt": "tell me"}\n'
        '{"id": "r2", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}\n',
        encoding="utf-8",
    )
    plain = parse_spec(FAKE + '[[workloads]]\nname = "raw"\nfile = "raw.jsonl"\n', base_dir=tmp_path)
    assert plain.workloads[0].items[0].prompt.prompt == "tell me"
    assert plain.workloads[0].items[0].prompt.messages is None
    chat = parse_spec(
        FAKE + '[[workloads]]\nname = "raw"\nfile = "raw.jsonl"\nas_chat = true\n', base_dir=tmp_path
    )
    first, second = chat.workloads[0].items
    assert first.prompt.prompt is None
    assert first.prompt.messages == ({"role": "user", "content": "tell me"},)
    assert second.prompt.messages == (
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
    )  # already chat: unchanged


def test_workload_file_is_relative_to_the_spec_file(tmp_path):
    sub = tmp_path / "specs"
    sub.mkdir()
    (sub / "w.jsonl").write_text('{"id": "x", "prompt": "y"}\n', encoding="utf-8")
    path = write_spec(sub, FAKE + '[[workloads]]\nname = "w"\nfile = "w.jsonl"\n')
    assert load_spec(path).workloads[0].prompt_ids == ["x"]


def test_sweep_input_override():
    spec = parse_spec(
        FAKE + '[[workloads]]\nname = "sweep-input"\ninput_tokens = [256, 16, 64]\nmax_new_tokens = 4\n'
    )
    (sweep,) = spec.workloads
    assert sweep.sweep == "input"
    assert [i.prompt.input_tokens for i in sweep.items] == [16, 64, 256]
    assert [i.prompt.id for i in sweep.items] == ["in-0016", "in-0064", "in-0256"]
    assert {i.max_new_tokens for i in sweep.items} == {4}
    assert sweep.ignore_eos is True


def test_sweep_input_max_new_tokens_alone():
    (sweep,) = parse_spec(FAKE + '[[workloads]]\nname = "sweep-input"\nmax_new_tokens = 4\n').workloads
    assert [i.prompt.input_tokens for i in sweep.items] == [64, 128, 256, 512, 1024, 2048]
    assert {i.max_new_tokens for i in sweep.items} == {4}


def test_sweep_output_override():
    spec = parse_spec(
        FAKE + '[[workloads]]\nname = "sweep-output"\ninput_tokens = 40\noutput_tokens = [8, 2]\n'
    )
    (sweep,) = spec.workloads
    assert sweep.sweep == "output"
    assert [i.max_new_tokens for i in sweep.items] == [2, 8]
    assert {i.prompt.input_tokens for i in sweep.items} == {40}
    assert [i.prompt.id for i in sweep.items] == ["out-0002", "out-0008"]


@pytest.mark.parametrize(
    ("workload", "problem"),
    [
        ('name = "sweep-input"\ninput_tokens = []', "'input_tokens' must be a non-empty list"),
        ('name = "sweep-input"\ninput_tokens = [0]', "'input_tokens' must be a non-empty list"),
        ('name = "sweep-input"\ninput_tokens = 64', "'input_tokens' must be a non-empty list"),
        ('name = "sweep-input"\noutput_tokens = [8]', "'output_tokens' applies to sweep-output"),
        ('name = "sweep-output"\ninput_tokens = [8]', "'input_tokens' must be one positive integer"),
        ('name = "sweep-output"\noutput_tokens = [true]', "'output_tokens' must be a non-empty list"),
        ('name = "sweep-output"\nmax_new_tokens = 8', "not 'max_new_tokens'"),
    ],
)
def test_bad_sweep_overrides(workload, problem):
    assert problem in spec_error(FAKE + "[[workloads]]\n" + workload + "\n", kind=SpecError)


# -- errors ---------------------------------------------------------------------------------------


def test_malformed_toml_names_line_and_column(tmp_path):
    path = write_spec(tmp_path, 'name = "x"\nrepetitions = \n' + FAKE + CODE)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert "invalid TOML" in message
    assert "line 2" in message and "column" in message
    assert str(path) in message


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.toml")


def test_unknown_top_level_key():
    message = spec_error('nmae = "x"\n' + FAKE + CODE, kind=SpecError)
    assert "unknown key 'nmae'" in message and "did you mean 'name'" in message
    message = spec_error("zzzzzz = 1\n" + FAKE + CODE, kind=SpecError)
    assert "'zzzzzz'" in message and "valid keys" in message


def test_mistyped_variant_key_suggests_the_right_one():
    message = spec_error(FAKE + 'dtpye = "float32"\n' + CODE, kind=SpecError)
    assert "variant 'a'" in message and "'dtpye'" in message and "did you mean 'dtype'" in message
    # a misspelt strategy parameter gets a suggestion too
    message = spec_error(FAKE + "prefil_ms = 3\n" + CODE, kind=SpecError)
    assert "'prefil_ms'" in message and "'prefill_ms'" in message


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('prefill_ms = "x"', "key 'prefill_ms' must be a number, got 'x'"),
        ("prefill_ms = true", "key 'prefill_ms' must be a number"),
        ("tokens_per_step = 1.5", "key 'tokens_per_step' must be an integer"),
        ("fail_on_prompt = 3", "key 'fail_on_prompt' must be a string"),
        ("tokens_per_step = 0", "tokens_per_step must be at least 1"),  # the Config's own check
        ("dtype = 16", "'dtype' must be a string"),
        ('trust_remote_code = "yes"', "'trust_remote_code' must be true or false"),
    ],
)
def test_wrong_param_type(line, problem):
    message = spec_error(FAKE + line + "\n" + CODE, kind=SpecError)
    assert "variant 'a'" in message and problem in message


def test_unknown_strategy_lists_the_available_ones():
    message = spec_error('[[variants]]\nname = "a"\nstrategy = "nope"\n' + CODE, kind=StrategyError)
    assert "unknown strategy 'nope'" in message
    assert "variant 'a'" in message
    assert "baseline" in message and "fake" in message


def test_import_path_strategy():
    spec = parse_spec('[[variants]]\nname = "a"\nstrategy = "workbench.testing:FakeStrategy"\n' + CODE)
    assert spec.variants[0].strategy == "fake"
    assert isinstance(spec.variants[0].config, FakeConfig)


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("nope.mod:X", "cannot import module 'nope.mod'"),
        ("workbench.testing:Nope", "module 'workbench.testing' has no 'Nope'"),
        ("workbench.testing:FakeConfig", "is not a workbench.strategy.Strategy subclass"),
    ],
)
def test_bad_import_path_strategy(target, problem):
    message = spec_error(f'[[variants]]\nname = "a"\nstrategy = "{target}"\n' + CODE, kind=StrategyError)
    assert target in message and problem in message


def test_import_path_strategy_survives_the_worker_round_trip(tmp_path, monkeypatch):
    (tmp_path / "mytrick_mod.py").write_text(
        "from workbench.testing import FakeStrategy\n\nclass MyTrick(FakeStrategy):\n    name = 'my-trick'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = parse_spec('[[variants]]\nname = "a"\nstrategy = "mytrick_mod:MyTrick"\n' + CODE)
    again = variant_from_dict(json.loads(json.dumps(spec.variants[0].to_dict())))
    assert again.config == spec.variants[0].config


def test_strategy_must_be_a_string():
    assert "'strategy' must be a string" in spec_error('[[variants]]\nname = "a"\nstrategy = 1\n' + CODE)


def test_duplicate_variant_names():
    message = spec_error(FAKE + FAKE + CODE, kind=SpecError)
    assert "variant name 'a' is used twice" in message


def test_duplicate_workload_names():
    assert "workload name 'code' is used twice" in spec_error(FAKE + CODE + CODE, kind=SpecError)


def test_missing_tables_and_names():
    assert "at least one [[variants]]" in spec_error(CODE, kind=SpecError)
    assert "at least one [[workloads]]" in spec_error(FAKE, kind=SpecError)
    assert "variants[0] needs a 'name'" in spec_error('[[variants]]\nstrategy = "fake"\n' + CODE)
    assert "workloads[0] needs a 'name'" in spec_error(FAKE + "[[workloads]]\nlimit = 1\n")


def test_bad_dtype():
    message = spec_error(FAKE + 'dtype = "float8"\n' + CODE, kind=SpecError)
    assert "variant 'a'" in message and "dtype must be one of" in message and "'float8'" in message


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", "mps", "auto"])
def test_good_devices(device):
    assert parse_spec(FAKE + f'device = "{device}"\n' + CODE).variants[0].device == device


def test_bad_device():
    message = spec_error(FAKE + 'device = "gpu"\n' + CODE, kind=SpecError)
    assert "variant 'a'" in message and "device must be" in message and "'gpu'" in message


def test_missing_model_path(tmp_path):
    text = '[[variants]]\nname = "a"\nstrategy = "baseline"\nmodel = "./does/not/exist"\n' + CODE
    message = spec_error(text, base_dir=tmp_path, kind=ModelSourceError)
    assert "variant 'a'" in message and "./does/not/exist" in message and "not found" in message


def test_baseline_needs_a_model():
    message = spec_error('[[variants]]\nname = "a"\nstrategy = "baseline"\n' + CODE, kind=SpecError)
    assert "needs a 'model'" in message


def test_text_file_as_model(tmp_path):
    (tmp_path / "weights.txt").write_text("not a model", encoding="utf-8")
    text = '[[variants]]\nname = "a"\nstrategy = "baseline"\nmodel = "weights.txt"\n' + CODE
    message = spec_error(text, base_dir=tmp_path, kind=ModelSourceError)
    assert "weights.txt" in message and "not a .gguf" in message


def test_model_folder_without_config(tmp_path):
    (tmp_path / "m").mkdir()
    text = '[[variants]]\nname = "a"\nstrategy = "baseline"\nmodel = "m"\n' + CODE
    assert "no config.json" in spec_error(text, base_dir=tmp_path, kind=ModelSourceError)


def test_model_paths_become_absolute(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}", encoding="utf-8")
    path = write_spec(tmp_path, '[[variants]]\nname = "a"\nstrategy = "baseline"\nmodel = "m"\n' + CODE)
    assert load_spec(path).variants[0].model == str((tmp_path / "m").resolve())


def test_unknown_demo_model():
    text = '[[variants]]\nname = "a"\nstrategy = "baseline"\nmodel = "demo:nope"\n' + CODE
    assert "unknown demo model 'demo:nope'" in spec_error(text, kind=ModelSourceError)


def test_unknown_builtin_workload():
    message = spec_error(FAKE + '[[workloads]]\nname = "nope"\n', kind=SpecError)
    assert "workload 'nope'" in message and "not a built-in" in message
    for name in (
        "chat",
        "summarise",
        "code",
        "rag",
        "abstractive",
        "copy-edit",
        "sweep-input",
        "sweep-output",
    ):
        assert name in message


def test_missing_workload_file(tmp_path):
    message = spec_error(FAKE + '[[workloads]]\nname = "w"\nfile = "gone.jsonl"\n', base_dir=tmp_path)
    assert "workload file not found" in message and "gone.jsonl" in message


def test_model_source_parameters_follow_the_rules_of_model(tmp_path):
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text("{}")
    text = (
        '[[variants]]\nname = "s"\nmodel = "demo:smollm2-135m"\nstrategy = "speculative"\ndraft = "draft"\n'
        '[[workloads]]\nname = "code"\n'
    )
    (spec_path := tmp_path / "s.toml").write_text(text)
    variant = load_spec(spec_path).variants[0]
    assert variant.name == "s"
    assert variant.config.draft == str((tmp_path / "draft").resolve())  # relative to the spec file
    assert variant.to_dict()["draft"] == variant.config.draft  # what the worker receives
    missing = text.replace('draft = "draft"', 'draft = "./no-such-draft"')
    with pytest.raises(ModelSourceError, match="variant 's': 'draft': model path not found"):
        parse_spec(missing, base_dir=tmp_path)


def test_the_demo_spec_shows_every_kind_of_lever():
    from workbench.core.resources import resource_path

    spec = load_spec(resource_path("specs", "demo.toml"))
    assert {v.strategy for v in spec.variants} == {
        "baseline",
        "onnxruntime-genai",  # quantization in the runtime that pays on a CPU
        "prompt-lookup",
        "speculative",
        "prefix-cache",  # the prefill lever, on a conversation whose history grows
    }
    assert spec.baseline_variant == "baseline"
    assert {w.name for w in spec.workloads} == {"conversation", "summarise-short"}


def test_a_sweep_expands_into_one_variant_per_value():
    spec = parse_spec(
        '[[variants]]\nname = "base"\nstrategy = "fake"\n'
        '[[variants]]\nname = "k"\nstrategy = "fake"\nsweep = {tokens_per_step = [1, 2, 4]}\n' + CODE
    )
    names = [v.name for v in spec.variants]
    assert names == ["base", "k tokens_per_step=1", "k tokens_per_step=2", "k tokens_per_step=4"]
    swept = spec.variants[1:]
    assert [v.config.tokens_per_step for v in swept] == [1, 2, 4]
    assert [(v.sweep_param, v.sweep_value) for v in swept] == [("tokens_per_step", n) for n in (1, 2, 4)]
    assert spec.variants[0].sweep_param is None
    # a common key sweeps too
    (a, b) = parse_spec(
        '[[variants]]\nname = "d"\nstrategy = "fake"\nsweep = {dtype = ["float32", "bfloat16"]}\n' + CODE
    ).variants
    assert (a.dtype, b.dtype) == ("float32", "bfloat16")


@pytest.mark.parametrize(
    ("sweep", "problem"),
    [
        ("sweep = [1, 2]", "'sweep' must be a table with exactly one key"),
        ("sweep = {tokens_per_step = [1], prefill_ms = [1]}", "exactly one key"),
        ("sweep = {tokens_per_step = []}", "needs a non-empty list"),
        ("sweep = {tokens_per_step = 3}", "needs a non-empty list"),
        ("sweep = {tokens_per_step = [2, 2]}", "lists a value twice"),
        ("sweep = {name = ['a', 'b']}", "cannot sweep 'name'"),
        ("tokens_per_step = 2\nsweep = {tokens_per_step = [1, 2]}", "both set and swept"),
        ("sweep = {tokens_per_step = [1, 0]}", "variant 'k tokens_per_step=0'"),
    ],
)
def test_bad_sweeps(sweep, problem):
    assert problem in spec_error(f'[[variants]]\nname = "k"\nstrategy = "fake"\n{sweep}\n' + CODE)
