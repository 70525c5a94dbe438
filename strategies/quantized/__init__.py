"""``quantized``: the baseline's model, quantized after (or while) loading, decoded by the baseline loop.

Methods (the ``method`` key):

=====================  =============================================================  ==========
method                 what it does                                                   runs on
=====================  =============================================================  ==========
``int8-weight-only``   torchao ``Int8WeightOnlyConfig``: int8 weights, per channel     cpu, cuda
``int8-dynamic``       torchao ``Int8DynamicActivationInt8WeightConfig``: int8         cpu, cuda
                       weights + activations quantized per token at run time
``int4-weight-only``   torchao int4 groupwise weights (``group_size``). CPU: the       cpu, cuda
                       prototype ``PrototypeInt4WeightOnlyConfig`` (Int4OpaqueTensor,
                       ATen's ``_weight_int4pack_mm_for_cpu``); CUDA: the stable
                       ``Int4WeightOnlyConfig`` with the ``tile_packed_to_4d`` (tinygemm)
                       format, which needs ``dtype = "bfloat16"``
``bnb-int8``           bitsandbytes LLM.int8() via transformers' ``BitsAndBytesConfig``  cpu, cuda
``bnb-nf4``            bitsandbytes 4-bit NormalFloat, same route                      cpu, cuda
``gptq``               GPTQModel: loads a GPTQ checkpoint as it is, or quantizes a     cpu, cuda
                       float model on load (``bits``, ``group_size``) with a calibration
                       set from the built-in workload texts and caches the result
                       (``strategies/_gptq.py``)
=====================  =============================================================  ==========

``auto`` takes the first method available on the device, in the order of :data:`AUTO_ORDER` on a
CPU (the fastest decode measured on an x86 CPU first; measurements in ``docs/quantized.md``) and of
:data:`AUTO_ORDER_CUDA` on CUDA (from what the methods' own documentation says is fast there, eager
mode, one sequence); never ``gptq``, whose first load of a model spends minutes calibrating.

The output embedding (``lm_head``) is never quantized, for every method: transformers does the same
for bitsandbytes, it keeps tied input/output embeddings tied (quantizing a tied ``lm_head`` would
*add* a copy), and the logits keep full precision.

``session.weights_mb`` is the real footprint after quantization: parameters and buffers, counting the
packed inner tensors of torchao's tensor subclasses (``numel() * element_size()`` of such a parameter
reports the *unquantized* size) and the scale/statistics tensors bitsandbytes keeps beside its
packed weights.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Literal

from workbench.strategy import Session, Strategy, StrategyError, field_help

from ..baseline import BaselineSession
from ..hf_session import torch_unavailable_reason
from .gptq import gptq_unavailable_reason

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

#: ``auto`` picks the first of these that is available on the device. Order from decode tok/s
#: measured on SmolLM2-135M, float32, x86 CPU (see docs/quantized.md). ``gptq`` is never chosen:
#: quantizing a model with it takes minutes of calibration on its first load.
AUTO_ORDER = ("int8-weight-only", "bnb-int8", "int4-weight-only", "bnb-nf4", "int8-dynamic")
#: ``auto`` on CUDA, decode of one sequence in eager mode (no ``torch.compile``), from the methods' own
#: documentation: torchao's int4 weight-only runs a fused int4 matmul kernel (tinygemm), the fastest
#: of its configs for batch-1 decode (needs bfloat16, so it is skipped for another dtype);
#: bitsandbytes' 4-bit has dedicated batch-1 inference kernels; torchao's int8 weight-only is a
#: dequantize + matmul in eager mode (its speed-ups are quoted with ``torch.compile``); int8 dynamic
#: quantizes activations at every step, worth it when compute-bound (large batches), not for decode;
#: bitsandbytes' LLM.int8() is documented as slower than 16-bit inference (it saves memory). Not
#: measured yet: the GPU check's optional step scripts/gpu_auto_order.py measures it on a GPU
#: (docs/quantized.md).
AUTO_ORDER_CUDA = ("int4-weight-only", "bnb-nf4", "int8-weight-only", "int8-dynamic", "bnb-int8")

TORCHAO_METHODS = ("int8-weight-only", "int8-dynamic", "int4-weight-only")
BNB_METHODS = ("bnb-int8", "bnb-nf4")
METHODS = (*TORCHAO_METHODS, *BNB_METHODS, "gptq")

_INSTALL = {
    "torchao": "pip install torchao",
    "bitsandbytes": "pip install 'bitsandbytes>=0.45'",
}


@dataclass
class QuantizedConfig:
    method: Literal[
        "auto", "int8-weight-only", "int8-dynamic", "int4-weight-only", "bnb-int8", "bnb-nf4", "gptq"
    ] = field_help(
        "quantization method; auto = the fastest available here (tried in this order on a cpu: "
        "int8-weight-only, bnb-int8, int4-weight-only, bnb-nf4, int8-dynamic; on cuda: int4-weight-only "
        "(bfloat16), bnb-nf4, int8-weight-only, int8-dynamic, bnb-int8)",
        default="auto",
    )
    group_size: Literal[32, 64, 128, 256] = field_help(
        "int4-weight-only and gptq: weights per scale/zero group; int4-weight-only leaves layers whose "
        "input size is not a multiple unquantized (64 fits SmolLM2's 576-wide layers; 128 would not)",
        default=64,
    )
    bits: Literal[4, 8] = field_help(
        "gptq: bits per weight when quantizing on load (a GPTQ checkpoint brings its own)", default=4
    )
    calibration_samples: int = field_help(
        "gptq: calibration sequences (up to 512 tokens each) cut from the built-in workloads chat, code, "
        "rag and summarise (36 at most); more is slower to quantize, once",
        default=32,
    )

    def __post_init__(self) -> None:
        if self.calibration_samples < 1:
            raise ValueError(f"calibration_samples must be at least 1, got {self.calibration_samples}")


def _version(dist: str) -> tuple[int, ...]:
    try:
        text = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ()
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def auto_order(device_type: str | None) -> tuple[str, ...]:
    """The order ``auto`` tries the methods in on ``device_type``."""
    return AUTO_ORDER_CUDA if device_type == "cuda" else AUTO_ORDER


def method_unavailable_reason(
    method: str, device_type: str | None = None, dtype: str | None = None
) -> str | None:
    """``None`` when ``method`` can run here (on ``device_type`` with weights of ``dtype`` — a torch
    dtype's name — when given), else why not.

    Cheap: looks for packages with ``find_spec`` and imports nothing heavy.
    """
    reason = torch_unavailable_reason()
    if reason is not None:
        return reason
    if method in TORCHAO_METHODS:
        if importlib.util.find_spec("torchao") is None:
            return f"torchao is not installed ({_INSTALL['torchao']})"
        if device_type is not None and device_type not in ("cpu", "cuda"):
            return f"torchao {method} runs on cpu and cuda here, not on {device_type}"
        if method == "int4-weight-only" and device_type == "cuda" and dtype not in (None, "bfloat16"):
            return (
                f'int4-weight-only on cuda needs dtype = "bfloat16" (torchao\'s tinygemm kernel), not {dtype}'
            )
        return None
    if method in BNB_METHODS:
        if importlib.util.find_spec("bitsandbytes") is None:
            return f"bitsandbytes is not installed ({_INSTALL['bitsandbytes']})"
        if device_type == "cpu" and _version("bitsandbytes") < (0, 45):
            return f"bitsandbytes {metadata.version('bitsandbytes')} has no CPU backend ({_INSTALL['bitsandbytes']})"
        if device_type is not None and device_type not in ("cpu", "cuda"):
            return f"bitsandbytes runs on cpu and cuda here, not on {device_type}"
        return None
    if method == "gptq":
        return gptq_unavailable_reason()
    raise StrategyError(f"unknown quantization method {method!r}; choose one of {', '.join(METHODS)}")


def resolve_method(method: str, device_type: str | None = None, dtype: str | None = None) -> str:
    """The concrete method for ``method`` (``auto`` -> first available of :func:`auto_order` for the
    device, with weights of ``dtype``); raises a one-line :class:`StrategyError` when it cannot run here."""
    if method == "auto":
        order = auto_order(device_type)
        for candidate in order:
            if method_unavailable_reason(candidate, device_type, dtype) is None:
                return candidate
        reasons = "; ".join(f"{m}: {method_unavailable_reason(m, device_type, dtype)}" for m in order)
        raise StrategyError(f"method 'auto': no quantization method is available here ({reasons})")
    reason = method_unavailable_reason(method, device_type)
    if reason is not None:
        raise StrategyError(f"method {method!r} is not available here: {reason}")
    return method


# --- footprint --------------------------------------------------------------------------------------


def tensor_bytes(tensor: Any) -> list[Any]:
    """The plain tensors that hold ``tensor``'s data: itself, or the inner tensors of a wrapper
    subclass (torchao's quantized tensors), recursively."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if is_traceable_wrapper_subclass(tensor):
        names, _ = tensor.__tensor_flatten__()
        inner = []
        for name in names:
            inner.extend(tensor_bytes(getattr(tensor, name)))
        return inner
    return [tensor]


def quantized_weights_mb(model: Any) -> float:
    """Bytes actually held by the model's parameters, buffers and quantization side tensors, in MB.

    Every storage is counted once (tied embeddings, bitsandbytes' shared code books)."""
    import torch

    tensors: list[Any] = []
    for t in [*model.parameters(), *model.buffers()]:
        tensors.extend(tensor_bytes(t))
    for module in model.modules():  # bitsandbytes keeps scales/statistics beside the packed weight
        weight = getattr(module, "weight", None)
        state = getattr(weight, "quant_state", None)
        while state is not None:  # 4-bit: absmax + code book, nested (double-quant) state2
            tensors.extend(v for v in (state.absmax, state.code, state.offset) if isinstance(v, torch.Tensor))
            state = state.state2 if getattr(state, "nested", False) else None
        for holder in (weight, getattr(module, "state", None)):  # 8-bit: per-row scales SCB
            scb = getattr(holder, "SCB", None)
            if isinstance(scb, torch.Tensor):
                tensors.append(scb)
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tensors:
        size = t.numel() * t.element_size()
        key = (t.data_ptr(), size)
        if size and key in seen:
            continue
        seen.add(key)
        total += size
    return total / 2**20


# --- loading ----------------------------------------------------------------------------------------


def _bnb_config(method: str, dtype: Any) -> Any:
    from transformers import BitsAndBytesConfig

    if method == "bnb-int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype)


def _torchao_config(method: str, config: QuantizedConfig, device: Device, dtype: Any) -> Any:
    import torch
    from torchao.quantization import (
        Int4WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
    )

    # set_inductor_config=False on every config: torchao's default would switch the whole process's
    # float32 matmuls (attention, the head: all that is not quantized) to TF32 and turn on
    # coordinate-descent autotuning, mixing a precision change into the speed-up and ballooning
    # compile times
    if method == "int8-weight-only":
        return Int8WeightOnlyConfig(set_inductor_config=False)
    if method == "int8-dynamic":
        return Int8DynamicActivationInt8WeightConfig(set_inductor_config=False)
    if device.type == "cpu":
        try:
            from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig
        except ImportError:
            raise StrategyError(
                "method 'int4-weight-only' is not available here: this torchao has no CPU int4 "
                "weight-only config (PrototypeInt4WeightOnlyConfig; tested with torchao 0.18)"
            ) from None
        return PrototypeInt4WeightOnlyConfig(group_size=config.group_size, set_inductor_config=False)
    if dtype != torch.bfloat16:
        raise StrategyError(
            "method 'int4-weight-only' on cuda needs dtype = \"bfloat16\" (torchao's tinygemm int4 kernel)"
        )
    return Int4WeightOnlyConfig(
        group_size=config.group_size, int4_packing_format="tile_packed_to_4d", set_inductor_config=False
    )


def _quantize_torchao(hf: Any, method: str, config: QuantizedConfig, device: Device) -> int:
    """Quantize every ``nn.Linear`` but the output embedding in place; returns how many were."""
    import torch
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    from torchao.quantization import quantize_

    model = hf.model
    ao_config = _torchao_config(method, config, device, hf.dtype)
    head = model.get_output_embeddings()

    def keep(module: Any, fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and module is not head

    quantize_(model, ao_config, filter_fn=keep)
    # a layer torchao skipped (input size not a multiple of group_size) keeps a plain tensor
    return sum(1 for m in model.modules() if keep(m, "") and is_traceable_wrapper_subclass(m.weight))


def _conv1d_note(model: Any) -> str:
    """Why a torchao method found nothing to quantize in a model built of transformers' ``Conv1D``
    layers (GPT-2 and its kin: a transposed linear layer that is not an ``nn.Linear``)."""
    if any(type(m).__name__ == "Conv1D" for m in model.modules()):
        return ": its layers are transformers' Conv1D (GPT-2's transposed linear layers), which torchao does not take"
    return ""


class QuantizedSession(BaselineSession):
    """The baseline's decoding loop (inherited unchanged) over a quantized model."""

    #: the concrete method (``auto`` resolved)
    method: str = ""
    #: how many linear layers were quantized
    quantized_layers: int = 0
    #: gptq: GPTQModel's kernel class(es), the checkpoint loaded, seconds spent quantizing in this load
    #: (``None`` when a cached or pre-quantized checkpoint was loaded)
    kernels: tuple[str, ...] = ()
    checkpoint: str | None = None
    quantize_s: float | None = None


def _pack_for_cpu_now(model: Any) -> None:
    """On a CPU with AVX512-BF16, bitsandbytes (0.49-0.50) repacks each 4-bit weight for its fused
    kernel at the first forward, which changes the weights' footprint and would land in the first
    trial. Two fixes here: a layer narrower than one block (64 inputs; only toy models have one) keeps
    the generic 4-bit path (the repacking reshapes its scales to ``in_features // 64`` = 0 columns and
    fails), and one token goes through the model now, so the repacking happens at load and
    ``weights_mb`` measures the layout the trials use."""
    import torch

    packs = False
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if getattr(module, "support_avx512bf16_for_cpu", False) and state is not None:
            if module.in_features < state.blocksize:
                module.support_avx512bf16_for_cpu = False
            else:
                packs = True
    if packs:
        with torch.no_grad():
            model(input_ids=torch.zeros((1, 1), dtype=torch.long))


def _quiet_bnb_int8() -> None:
    """bitsandbytes' int8 matmul logs a warning on *every* call with float32 inputs ("inputs will be
    cast to float16"): once per layer per token. Drop that one message."""
    import logging

    logger = logging.getLogger("bitsandbytes.autograd._functions")
    if not any(getattr(f, "_workbench", False) for f in logger.filters):

        class _Drop(logging.Filter):
            _workbench = True

            def filter(self, record: logging.LogRecord) -> bool:
                return not str(record.msg).startswith("MatMul8bitLt: inputs will be cast")

        logger.addFilter(_Drop())


class QuantizedStrategy(Strategy[QuantizedConfig]):
    name = "quantized"
    lever = "weight quantization"
    phase = "decode"
    description = "The baseline on a quantized model (torchao int8/int4, bitsandbytes int8/nf4, GPTQ)"
    Config = QuantizedConfig
    supports_batching = True  # the baseline loop, batched (BaselineSession.generate_batch)
    compile_refusal = None  # the baseline's compiled decoding (torchao's kernels rely on it on CUDA)

    def available(self) -> str | None:
        reasons = {m: method_unavailable_reason(m) for m in METHODS}
        if any(r is None for r in reasons.values()):
            return None
        if torch_unavailable_reason() is not None:
            return torch_unavailable_reason()
        return "no quantization method is available: " + "; ".join(f"{m}: {r}" for m, r in reasons.items())

    def preflight(self, variant: Variant[QuantizedConfig]) -> None:
        """The variant's own method must be installed, not just some method: `workbench run` refuses
        a spec naming one that is not (exit 2) before anything runs. (The device is not resolved
        yet; ``load`` checks the method against it.)"""
        config = variant.config
        if config.method != "auto":
            reason = method_unavailable_reason(config.method)
            if reason is not None:
                raise StrategyError(f"method {config.method!r} is not available here: {reason}")

    def load(self, variant: Variant[QuantizedConfig], device: Device) -> Session:
        config = variant.config
        from .._hf import load_hf_model, resolve_dtype

        method = resolve_method(
            config.method, device.type, str(resolve_dtype(variant.dtype, device)).removeprefix("torch.")
        )
        if method == "gptq":
            return self._load_gptq(variant, device, config)
        if method in BNB_METHODS:
            quant = _bnb_config(method, resolve_dtype(variant.dtype, device))
            if method == "bnb-int8":
                _quiet_bnb_int8()
            hf = load_hf_model(variant, device, model_kwargs={"quantization_config": quant})
            layers = sum(1 for m in hf.model.modules() if type(m).__name__ in ("Linear8bitLt", "Linear4bit"))
            if method == "bnb-nf4" and device.type == "cpu":
                _pack_for_cpu_now(hf.model)
        else:
            hf = load_hf_model(variant, device)
            layers = _quantize_torchao(hf, method, config, device)
        if layers == 0:
            raise StrategyError(
                f"method {method!r} quantized no layer of {variant.model!r}"
                + (
                    f": no linear layer's input size is a multiple of group_size = {config.group_size}"
                    if method == "int4-weight-only"
                    else _conv1d_note(hf.model)
                )
            )
        hf.weights_mb = quantized_weights_mb(hf.model)
        session = QuantizedSession(hf, variant.compile)
        session.method = method
        session.quantized_layers = layers
        return session

    def _load_gptq(
        self, variant: Variant[QuantizedConfig], device: Device, config: QuantizedConfig
    ) -> QuantizedSession:
        from .gptq import load_gptq

        loaded = load_gptq(
            variant,
            device,
            bits=config.bits,
            group_size=config.group_size,
            calibration_samples=config.calibration_samples,
        )
        if loaded.layers == 0:
            raise StrategyError(f"method 'gptq': GPTQModel loaded {variant.model!r} with no quantized layer")
        loaded.hf.weights_mb = quantized_weights_mb(loaded.hf.model)
        session = QuantizedSession(loaded.hf, variant.compile)
        session.method = "gptq"
        session.quantized_layers = loaded.layers
        session.kernels = loaded.kernels
        session.checkpoint = str(loaded.checkpoint)
        session.quantize_s = loaded.quantize_s
        return session
