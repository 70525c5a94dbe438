"""Shared helpers for strategies built on transformers causal LMs: loading, tokenizing, sampling,
stopping. Imported only inside ``Strategy.load`` (it imports torch at module level)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from workbench.core.errors import first_line
from workbench.sources import materialize, parse_source
from workbench.strategy import Device, ModelSourceError, Prompt, Request, Variant, error_context

from ._text import Stopper, encode_prompt

__all__ = ["HFModel", "Sampler", "Stopper", "kv_cache", "load_hf_model", "resolve_dtype", "wrap_hf_model"]


def _cache_keyword() -> str:
    """The keyword a model's forward takes its KV cache under in the installed transformers: ``cache``
    from 5.24 on (``past_key_values`` stays a deprecated alias there, until 5.40), ``past_key_values``
    before. An older release takes an unknown ``cache=`` silently into its ``**kwargs`` and decodes
    each token without the prompt, so the name follows the version: a variant's ``python`` may run
    an older transformers (docs/runtimes.md)."""
    import transformers

    found = re.match(r"(\d+)\.(\d+)", transformers.__version__)
    version = (int(found[1]), int(found[2])) if found else (0, 0)
    return "cache" if version >= (5, 24) else "past_key_values"


_CACHE_KEYWORD = _cache_keyword()


def kv_cache(cache: Any) -> dict[str, Any]:
    """``model(..., **kv_cache(cache))``: the KV cache under the keyword this transformers takes."""
    return {_CACHE_KEYWORD: cache}


_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_dtype(name: str, device: Device) -> torch.dtype:
    """``auto``: bfloat16 on CUDA GPUs that support it (else float16), float16 on MPS, float32 on CPU.

    On CPU float32 is the safe default: bfloat16 decodes faster there (half the bytes to read per
    token) but float16 prefill is several times slower than float32 on CPUs without native fp16
    matmuls — choose explicitly to compare.
    """
    if name != "auto":
        return _DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.float32


@dataclass
class HFModel:
    model: Any
    tokenizer: Any
    device: Device
    dtype: torch.dtype
    eos_ids: frozenset[int]
    context_length: int | None
    weights_mb: float
    model_shape: dict[str, int] | None = None  # layers, kv_heads, head_dim, bytes_per_element

    @property
    def torch_device(self) -> torch.device:
        return torch.device(str(self.device))

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_hf_model(
    variant: Variant,
    device: Device,
    *,
    log: Callable[[str], None] = _log,
    model_kwargs: dict[str, Any] | None = None,
) -> HFModel:
    """Load tokenizer and causal LM for a variant. ``trust_remote_code`` is always passed explicitly:
    left unset, transformers may ask on stdin, which would hang a worker whose parent is a GUI.
    ``model_kwargs`` go to ``from_pretrained`` (e.g. a bitsandbytes ``quantization_config``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = parse_source(variant.model)
    where = materialize(source, log=log)
    dtype = resolve_dtype(variant.dtype, device)
    common = {"trust_remote_code": variant.trust_remote_code, "local_files_only": where.local_files_only}
    with error_context(
        f"cannot load model {variant.model!r}", ModelSourceError, catch=OSError, detail=first_line
    ):
        tokenizer = AutoTokenizer.from_pretrained(where.location, **common)
        model = AutoModelForCausalLM.from_pretrained(
            where.location,
            dtype=dtype,
            weights_only=True,  # pickled .bin weights never run code
            device_map=str(device) if device.type != "cpu" else None,
            **common,
            **(model_kwargs or {}),
        )
    return wrap_hf_model(model, tokenizer, device, dtype)


def wrap_hf_model(model: Any, tokenizer: Any, device: Device, dtype: torch.dtype) -> HFModel:
    """An :class:`HFModel` around an already loaded causal LM and its tokenizer (EOS ids, context
    length, float footprint); used by :func:`load_hf_model` and by loaders of other libraries."""
    model.eval()
    if device.type == "cpu":  # attention and output-layer kernels for CPUs (see strategies._cpu)
        from ._cpu import use_cpu_kernels

        use_cpu_kernels(model)
    generation_config = getattr(model, "generation_config", None)
    eos: set[int] = set()
    for value in (getattr(generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            eos.add(value)
        elif isinstance(value, list | tuple):
            eos.update(int(v) for v in value)
    context = getattr(model.config, "max_position_embeddings", None)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    weights += sum(b.numel() * b.element_size() for b in model.buffers())
    return HFModel(
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        eos_ids=frozenset(eos),
        context_length=int(context) if context else None,
        weights_mb=weights / 2**20,
        model_shape=model_shape(model.config, dtype),
    )


def model_shape(config: Any, dtype: torch.dtype) -> dict[str, int] | None:
    """What the KV cache's size per token depends on (for the decode roofline), from the model config;
    ``None`` for architectures that do not say."""
    text = getattr(config, "get_text_config", lambda: config)()
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_attention_heads", None)
    if not layers or not heads:
        return None
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or getattr(text, "hidden_size", 0) // heads
    if not head_dim:
        return None
    element = torch.empty((), dtype=dtype).element_size()
    return {
        "layers": int(layers),
        "kv_heads": int(kv_heads),
        "head_dim": int(head_dim),
        "bytes_per_element": element,
    }


class Sampler:
    """Greedy (temperature 0) or seeded sampling with temperature, top-k and top-p."""

    def __init__(self, request: Request, device: torch.device) -> None:
        self.greedy = request.temperature <= 0
        self.temperature = request.temperature
        self.top_k = request.top_k
        self.top_p = request.top_p
        self.generator: torch.Generator | None = None
        if not self.greedy:
            self.generator = torch.Generator(device=device).manual_seed(request.seed)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The sampling distribution for ``logits`` ([batch, vocab]) after temperature, top-k, top-p."""
        logits = logits.float() / self.temperature
        if self.top_k > 0:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1]), dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
            cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
            drop = cumulative > self.top_p
            drop[..., 1:] = drop[..., :-1].clone()  # keep the token that crosses the threshold
            drop[..., 0] = False
            logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
        return torch.softmax(logits, dim=-1)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """Next token ids, shape [batch]."""
        if self.greedy:
            return torch.argmax(logits, dim=-1)
        return torch.multinomial(self.probs(logits), 1, generator=self.generator).squeeze(-1)
