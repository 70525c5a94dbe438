"""One contract test, parametrised over every strategy registered in the entry-point group."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.core import registry
from workbench.core.config import config_fields
from workbench.core.device import Device
from workbench.core.strategy import Prompt, Session, Strategy
from workbench.core.variant import Variant
from workbench.run.runner import TrialRunner
from workbench.testing.helpers import tiny_prompt, trial_plan

NAMES = registry.names()


def example_config(cls, model: str, **overrides):
    """Defaults, with the model-source parameters (e.g. a speculative draft) set to ``model``."""
    values = {f.name: model for f in dataclasses.fields(cls.Config) if f.metadata.get("model_source")}
    return cls.Config(**{**values, **overrides})


def server_overrides(name: str, request) -> dict:
    """Strategies that talk to a server get a real local one (the stdlib OpenAI-compatible fake)."""
    if name == "endpoint":
        return {"base_url": request.getfixturevalue("openai_server").base_url}
    return {}


def model_for(name: str, request) -> tuple[str, str]:
    """(model, dtype) of the contract run. Runtimes with formats and kernels of their own get a model
    they read: llama.cpp the demo's GGUF (the tiny llama's word-level tokenizer has no GGUF
    conversion), ONNX Runtime GenAI a tiny llama with heads of 16 (its attention kernel's minimum),
    built into a private cache; both take their precision from their own parameters (dtype auto)."""
    if name == "llama-cpp":
        return "demo:smollm2-135m", "auto"
    if name == "onnxruntime-genai":
        request.getfixturevalue("monkeypatch").setenv(
            "WORKBENCH_CACHE", str(request.getfixturevalue("tmp_path"))
        )
        return str(request.getfixturevalue("tiny_model_dir_64")), "auto"
    return str(request.getfixturevalue("tiny_model_dir")), "float32"


def test_builtins_are_registered_through_the_entry_point_group():
    assert {"baseline", "fake"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_strategy_class_shape(name):
    cls = registry.get(name)
    assert issubclass(cls, Strategy)
    assert cls.name == name  # entry-point name = spec value = DB value
    assert cls.description
    assert dataclasses.is_dataclass(cls.Config)
    example_config(cls, "demo:smollm2-135m")  # every other parameter has a default
    for f in config_fields(cls.Config):
        assert f.help or not f.name, f"{name}.{f.name} has no help text (the GUI form shows it)"
    reason = cls().available()
    assert reason is None or (isinstance(reason, str) and reason)


@pytest.mark.parametrize("name", NAMES)
def test_strategy_generates_under_the_runner(name, request):
    cls = registry.get(name)
    if cls().available() is not None:
        pytest.skip(f"{name} not available here: {cls().available()}")
    model, dtype = model_for(name, request)
    config = example_config(cls, model, **server_overrides(name, request))
    variant = Variant(
        name="v",
        strategy=name,
        model=model if cls.requires_model else "",
        dtype=dtype,
        device="cpu",
        config=config,
    )
    session = cls().load(variant, Device("cpu"))
    assert isinstance(session, Session)
    ids = session.encode(Prompt(id="x", prompt=tiny_prompt(10)))
    assert ids and all(isinstance(i, int) for i in ids)
    runner = TrialRunner(session, Device("cpu"))
    for prompt, temperature in [
        (Prompt(id="raw", prompt=tiny_prompt(10)), 0.0),
        (Prompt(id="chat", messages=({"role": "user", "content": tiny_prompt(6)},)), 0.8),
    ]:
        plan = trial_plan(prompt, 7, temperature=temperature, top_p=0.9, seed=5, ignore_eos=True)
        result = runner.run(plan)
        assert result.status == "ok", result.record.error
        assert result.record.output_tokens == 7  # ignore_eos: exactly the budget
        assert result.record.finish_reason == "length"
        assert result.record.ttft_ms > 0 and result.record.e2e_ms >= result.record.ttft_ms
        assert sum(s["n_tokens"] for s in result.steps) == 7
    session.close()


# --- Strategy[Config]: the typed contract, and plain subclasses ------------------------------------


def test_a_type_parameter_sets_the_config_and_a_plain_subclass_still_works():
    from workbench import Strategy as PublicStrategy
    from workbench.core.strategy import NoConfig
    from workbench.spec.parse import parse_spec
    from workbench.strategy import Strategy as ContractStrategy

    assert PublicStrategy is ContractStrategy is Strategy  # one object, whichever path imports it

    @dataclasses.dataclass
    class Params:
        window: int = 4

    class Typed(Strategy[Params]):
        name = "typed"
        description = "typed"

        def load(self, variant, device):
            raise NotImplementedError

    class Plain(Strategy):  # third-party style: no type parameter
        name = "plain"
        description = "plain"
        Config = Params

        def load(self, variant, device):
            raise NotImplementedError

    class Bare(Strategy):  # no parameters at all
        name = "bare"
        description = "bare"

        def load(self, variant, device):
            raise NotImplementedError

    assert Typed.Config is Params and Plain.Config is Params and Bare.Config is NoConfig
    with pytest.raises(TypeError, match="is not the Params of Strategy"):

        class Mismatched(Strategy[Params]):
            name = "mismatched"
            Config = NoConfig

            def load(self, variant, device):
                raise NotImplementedError

    # the spec parser (what the worker uses too) always hands a built config, even with no keys
    spec = parse_spec('[[variants]]\nname = "v"\nstrategy = "fake"\n[[workloads]]\nname = "code"\n')
    assert type(spec.variants[0].config).__name__ == "FakeConfig"


def test_a_variant_cannot_be_made_without_its_config():
    with pytest.raises(TypeError, match="config"):
        Variant(name="v", strategy="fake")  # type: ignore[call-arg]
