"""``baseline``: plain autoregressive decoding with the KV cache, written out step by step.

One forward pass over the whole prompt (prefill) fills the cache and yields the first token; then one
forward pass per token (decode). Under greedy decoding the output is token-identical to
``model.generate()`` (tested); sampling is seeded per trial, so every variant sees the same stream.
With ``ignore_eos`` the loop carries on past an EOS token (vLLM's semantics) rather than masking EOS
out of the logits as ``generate(min_new_tokens=...)`` does, so the two differ after a first EOS.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.core.shapes import kv_bytes_per_token
from workbench.core.strategy import Output, Probe, Prompt, Request, Session, Strategy

if TYPE_CHECKING:
    from workbench.core.device import Device
    from workbench.core.variant import Variant


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

        from ._hf import kv_cache

        hf = self.hf
        with torch.inference_mode():
            cache = DynamicCache(config=hf.model.config)
            input_ids = torch.tensor([request.input_ids], dtype=torch.long, device=hf.torch_device)
            logits = hf.model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
            tokens, reason = decode_loop(hf, request, probe, cache, logits)
        return Output(token_ids=tokens, text=hf.decode(tokens), finish_reason=reason)  # type: ignore[arg-type]

    def generate_batch(self, requests: Sequence[Request], probes: Sequence[Probe]) -> list[Output]:
        """Static batching: the prompts left-padded into one batch (attention mask, position ids), one
        prefill pass, then one decode pass per step for the whole batch until every request has
        stopped; a request that stopped early rides along on padding (no continuous batching)."""
        import torch
        from transformers import DynamicCache

        from ._hf import Sampler, Stopper, kv_cache

        hf = self.hf
        device = hf.torch_device
        n = len(requests)
        longest = max(len(r.input_ids) for r in requests)
        pad = hf.tokenizer.pad_token_id
        if pad is None:
            pad = next(iter(hf.eos_ids), 0)
        ids = torch.full((n, longest), pad, dtype=torch.long)
        mask = torch.zeros((n, longest), dtype=torch.long)
        for i, r in enumerate(requests):
            ids[i, longest - len(r.input_ids) :] = torch.tensor(r.input_ids, dtype=torch.long)
            mask[i, longest - len(r.input_ids) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        samplers = [Sampler(r, device) for r in requests]
        stoppers = [Stopper(r, hf.eos_ids, hf.decode) for r in requests]
        tokens: list[list[int]] = [[] for _ in requests]
        reasons: list[str | None] = [None] * n
        with torch.inference_mode():
            cache = DynamicCache(config=hf.model.config)
            logits = hf.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                **kv_cache(cache),
                use_cache=True,
                logits_to_keep=1,
            ).logits
            while True:
                step = []
                for i in range(n):
                    if reasons[i] is not None:
                        step.append(pad)
                        continue
                    token = int(samplers[i](logits[i : i + 1, -1, :]).item())
                    step.append(token)
                    tokens[i].append(token)
                    probes[i].step((token,))
                    reasons[i] = stoppers[i](tokens[i])
                if all(reason is not None for reason in reasons):
                    break
                mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=1)
                positions = positions[:, -1:] + 1
                logits = hf.model(
                    input_ids=torch.tensor(step, dtype=torch.long, device=device).view(n, 1),
                    attention_mask=mask,
                    position_ids=positions,
                    **kv_cache(cache),
                    use_cache=True,
                ).logits
        return [
            Output(token_ids=t, text=hf.decode(t), finish_reason=reason)  # type: ignore[arg-type]
            for t, reason in zip(tokens, reasons, strict=True)
        ]


def decode_loop(hf: Any, request: Request, probe: Probe, cache: Any, logits: Any) -> tuple[list[int], str]:
    """Token-by-token decode after a prefill: ``cache`` holds the prompt, ``logits`` are the prefill's
    scores for the last prompt position. Returns the tokens and the finish reason. Call it under
    ``torch.inference_mode()``."""
    from ._hf import Sampler, Stopper, kv_cache

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
        logits = hf.model(input_ids=next_token.view(1, 1), **kv_cache(cache), use_cache=True).logits


class BaselineStrategy(Strategy):
    name = "baseline"
    description = "Plain prefill + token-by-token decode with the KV cache (the reference)"
    Config = BaselineConfig
    supports_batching = True

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant, device: Device) -> Session:
        from ._hf import load_hf_model

        return BaselineSession(load_hf_model(variant, device))
