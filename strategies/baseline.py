"""``baseline``: plain autoregressive decoding with the KV cache, written out step by step.

One forward pass over the whole prompt (prefill) fills the cache and yields the first token; then one
forward pass per token (decode). Under greedy decoding the output is token-identical to
``model.generate()`` (tested); sampling is seeded per trial, so every variant sees the same stream.
With ``ignore_eos`` the loop carries on past an EOS token (vLLM's semantics) rather than masking EOS
out of the logits as ``generate(min_new_tokens=...)`` does, so the two differ after a first EOS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.strategy import Output, Probe, Request, Session, Strategy

from .hf_session import HFSession, decode_loop, torch_unavailable_reason

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

__all__ = ["BaselineConfig", "BaselineSession", "BaselineStrategy"]


@dataclass
class BaselineConfig:
    """The baseline has no parameters of its own: model, dtype and device are common variant keys."""


class BaselineSession(HFSession):
    def __init__(self, hf: Any, compile_mode: str | None = None) -> None:
        super().__init__(hf)
        self.compiled: Any = None  # a variant's ``compile``: the static cache and compiled step
        if compile_mode is not None:
            from ._compiled import CompiledDecoder

            self.compiled = CompiledDecoder(hf, compile_mode)

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:
        if self.compiled is not None:
            self.compiled.prepare(prompt_lengths, max_new_tokens)

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch
        from transformers import DynamicCache

        from ._hf import kv_cache
        from ._kv import output_holding

        hf = self.hf
        if self.compiled is not None:
            tokens, reason = self.compiled.generate(request, probe)
            return Output(token_ids=tokens, text=hf.decode(tokens), finish_reason=reason)
        with torch.inference_mode():
            cache = DynamicCache(config=hf.model.config)
            input_ids = torch.tensor([request.input_ids], dtype=torch.long, device=hf.torch_device)
            logits = hf.model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
            trace = getattr(probe, "trace", None)  # the quality pass's replay (Probe.trace)
            if trace is not None:
                trace.forward(0, request.input_ids, keep=1)
            tokens, reason = decode_loop(hf, request, probe, cache, logits)
        return output_holding(hf, tokens, reason, [cache])

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


class BaselineStrategy(Strategy[BaselineConfig]):
    name = "baseline"
    lever = "precision/settings"
    phase = "both"
    description = "Plain prefill + token-by-token decode with the KV cache (the reference)"
    Config = BaselineConfig
    supports_batching = True
    compile_refusal = None  # compile = true: a static KV cache and a compiled decode step (._compiled)

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant[BaselineConfig], device: Device) -> Session:
        from ._hf import load_hf_model

        return BaselineSession(load_hf_model(variant, device), variant.compile)
