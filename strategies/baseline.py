"""``baseline``: plain autoregressive decoding with the KV cache, written out step by step.

One forward pass over the whole prompt (prefill) fills the cache and yields the first token; then one
forward pass per token (decode). Under greedy decoding the output is token-identical to
``model.generate()`` (tested); sampling is seeded per trial, so every variant sees the same stream.
With ``ignore_eos`` the loop carries on past an EOS token (vLLM's semantics) rather than masking EOS
out of the logits as ``generate(min_new_tokens=...)`` does, so the two differ after a first EOS.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.roofline import kv_bytes_per_token
from workbench.strategy import Output, Probe, Prompt, Request, Session, Strategy

if TYPE_CHECKING:
    from workbench.spec import Variant
    from workbench.timing import Device


@dataclass
class BaselineConfig:
    """The baseline has no parameters of its own: model, dtype and device are common variant keys."""


def torch_unavailable_reason() -> str | None:
    """Shared ``available()`` check for strategies that run a transformers model in-process."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"needs {' and '.join(missing)} (pip install 'llm-workbench[engine]'; "
            "for NVIDIA GPUs install the CUDA build of torch first)"
        )
    return None


class HFSession(Session):
    """A loaded transformers model; subclasses override :meth:`generate`."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf
        self.context_length = hf.context_length
        self.weights_mb = hf.weights_mb
        self.dtype = str(hf.dtype).removeprefix("torch.")
        self.model_shape = hf.model_shape
        self.kv_bytes_per_token = kv_bytes_per_token(hf.model_shape)

    def encode(self, prompt: Prompt) -> list[int]:
        return self.hf.encode(prompt)

    def decode(self, token_ids: Any) -> str:
        return self.hf.decode(token_ids)

    def close(self) -> None:
        del self.hf


class BaselineSession(HFSession):
    def generate(self, request: Request, probe: Probe) -> Output:
        import torch
        from transformers import DynamicCache

        hf = self.hf
        with torch.inference_mode():
            cache = DynamicCache(config=hf.model.config)
            input_ids = torch.tensor([request.input_ids], dtype=torch.long, device=hf.torch_device)
            logits = hf.model(input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=1).logits
            tokens, reason = decode_loop(hf, request, probe, cache, logits)
        return Output(token_ids=tokens, text=hf.decode(tokens), finish_reason=reason)  # type: ignore[arg-type]


def decode_loop(hf: Any, request: Request, probe: Probe, cache: Any, logits: Any) -> tuple[list[int], str]:
    """Token-by-token decode after a prefill: ``cache`` holds the prompt, ``logits`` are the prefill's
    scores for the last prompt position. Returns the tokens and the finish reason. Call it under
    ``torch.inference_mode()``."""
    from ._hf import Sampler, Stopper

    sampler = Sampler(request, hf.torch_device)
    stopper = Stopper(request, hf.eos_ids, hf.decode)
    tokens: list[int] = []
    while True:
        next_token = sampler(logits[:, -1, :])
        token = int(next_token.item())  # the token is on the host now
        tokens.append(token)
        probe.step((token,))
        reason = stopper(tokens)
        if reason is not None:
            return tokens, reason
        logits = hf.model(input_ids=next_token.view(1, 1), cache=cache, use_cache=True).logits


class BaselineStrategy(Strategy):
    name = "baseline"
    description = "Plain prefill + token-by-token decode with the KV cache (the reference)"
    Config = BaselineConfig

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant, device: Device) -> Session:
        from ._hf import load_hf_model

        return BaselineSession(load_hf_model(variant, device))
