"""The ``quantized`` strategy on the tiny random llama: every method that can run here loads,
generates under the runner and shrinks the weights; the others fail with one line saying why."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

from workbench_strategies import quantized  # noqa: E402
from workbench_strategies.quantized import (  # noqa: E402
    AUTO_ORDER,
    METHODS,
    QuantizedStrategy,
    method_unavailable_reason,
    quantized_weights_mb,
)

from workbench.core.device import Device  # noqa: E402
from workbench.core.errors import SpecError, StrategyError  # noqa: E402
from workbench.core.strategy import Prompt  # noqa: E402
from workbench.run.runner import TrialRunner  # noqa: E402
from workbench.spec.parse import parse_spec  # noqa: E402
from workbench.testing.helpers import tiny_prompt, trial_plan  # noqa: E402

CPU = Device("cpu")
PACKAGE = {
    "int8-weight-only": "torchao",
    "int8-dynamic": "torchao",
    "int4-weight-only": "torchao",
    "bnb-int8": "bitsandbytes",
    "bnb-nf4": "bitsandbytes",
}


def variant(model_dir, **params):
    keys = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in params.items())
    spec = parse_spec(
        f'[[variants]]\nname = "q"\nmodel = "{model_dir}"\nstrategy = "workbench_strategies.quantized:QuantizedStrategy"\n'
        f'dtype = "float32"\ndevice = "cpu"\n{keys}[[workloads]]\nname = "code"\n'
    )
    return spec.variants[0]


def run(session, prompt, temperature=0.0, max_new_tokens=7):
    plan = trial_plan(prompt, max_new_tokens, temperature=temperature, top_p=0.9, seed=5, ignore_eos=True)
    return TrialRunner(session, CPU).run(plan)


@pytest.mark.parametrize("method", list(PACKAGE))
def test_method_loads_generates_and_shrinks_the_weights(method, tiny_model_dir, float32_mb):
    pytest.importorskip(PACKAGE[method], reason=f"{method} needs {PACKAGE[method]}")
    # hidden size 32: int4 groups of 32 fit every layer of the tiny model
    session = QuantizedStrategy().load(variant(tiny_model_dir, method=method, group_size=32), CPU)
    assert session.method == method
    assert session.quantized_layers == 14  # 2 layers x (q, k, v, o, gate, up, down); lm_head stays float
    for prompt, temperature in [
        (Prompt(id="raw", prompt=tiny_prompt(10)), 0.0),
        (Prompt(id="chat", messages=({"role": "user", "content": tiny_prompt(6)},)), 0.8),
    ]:
        result = run(session, prompt, temperature)
        assert result.status == "ok", result.record.error
        assert result.record.output_tokens == 7  # ignore_eos: exactly the budget
        assert sum(s["n_tokens"] for s in result.steps) == 7
    assert 0 < session.weights_mb < float32_mb
    assert session.weights_mb == pytest.approx(quantized_weights_mb(session.hf.model))
    session.close()


def test_torchao_footprint_counts_the_packed_data_not_the_logical_shape(tiny_model_dir):
    pytest.importorskip("torchao")
    session = QuantizedStrategy().load(variant(tiny_model_dir, method="int4-weight-only", group_size=32), CPU)
    weight = session.hf.model.model.layers[0].mlp.down_proj.weight  # [32, 64]
    # numel() * element_size() of a torchao tensor subclass reports the unquantized float32 size ...
    assert weight.numel() * weight.element_size() == 32 * 64 * 4
    # ... the packed inner tensors hold 4 bits per weight plus one scale and zero per group
    packed = sum(t.numel() * t.element_size() for t in quantized.tensor_bytes(weight))
    assert packed < 32 * 64 * 4 / 4
    session.close()


def test_auto_picks_an_available_method(tiny_model_dir):
    if all(method_unavailable_reason(m, "cpu") for m in AUTO_ORDER):
        pytest.skip("no quantization package installed (pip install torchao)")
    session = QuantizedStrategy().load(variant(tiny_model_dir, group_size=32), CPU)
    assert session.method in AUTO_ORDER
    assert method_unavailable_reason(session.method, "cpu") is None
    earlier = AUTO_ORDER[: AUTO_ORDER.index(session.method)]
    assert all(method_unavailable_reason(m, "cpu") for m in earlier)  # the first available one
    assert run(session, Prompt(id="raw", prompt=tiny_prompt(10))).status == "ok"
    session.close()


@pytest.fixture
def no_quant_packages(monkeypatch):
    """Pretend neither torchao nor bitsandbytes nor gptqmodel is installed."""
    real = importlib.util.find_spec
    hidden = {"torchao", "bitsandbytes", "gptqmodel"}
    monkeypatch.setattr(
        quantized.importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a)
    )


@pytest.mark.parametrize(
    ("method", "install"),
    [("bnb-nf4", "pip install 'bitsandbytes>=0.45'"), ("int4-weight-only", "pip install torchao")],
)
def test_an_unavailable_method_fails_in_one_line_naming_what_to_install(
    method, install, tiny_model_dir, no_quant_packages
):
    with pytest.raises(StrategyError) as info:
        QuantizedStrategy().load(variant(tiny_model_dir, method=method), CPU)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"method '{method}' is not available here: ")
    assert install in message


def test_nothing_installed_makes_the_strategy_unavailable(tiny_model_dir, no_quant_packages):
    reason = QuantizedStrategy().available()
    assert reason and "torchao" in reason and "bitsandbytes" in reason
    with pytest.raises(StrategyError, match="method 'auto': no quantization method is available here"):
        QuantizedStrategy().load(variant(tiny_model_dir), CPU)


def test_available_when_one_method_is():
    if all(method_unavailable_reason(m) for m in METHODS):
        assert QuantizedStrategy().available()
    else:
        assert QuantizedStrategy().available() is None


def test_group_size_that_fits_no_layer_is_an_error(tiny_model_dir):
    pytest.importorskip("torchao")
    # the tiny model's inputs are 32 and 64 wide: groups of 128 fit no layer
    with pytest.raises(StrategyError, match=r"quantized no layer.*group_size = 128"):
        QuantizedStrategy().load(variant(tiny_model_dir, method="int4-weight-only", group_size=128), CPU)


def test_spec_rejects_an_unknown_method_naming_the_choices(tiny_model_dir):
    with pytest.raises(SpecError) as info:
        variant(tiny_model_dir, method="int3")
    message = str(info.value)
    assert "'method'" in message and "'int3'" in message
    for choice in ("auto", *METHODS):
        assert repr(choice) in message


def test_spec_rejects_an_unknown_group_size(tiny_model_dir):
    with pytest.raises(SpecError, match="group_size"):
        variant(tiny_model_dir, group_size=48)
