"""Compiled decoding (a variant's ``compile``): a static KV cache sized to the run and a
``torch.compile``'d decode step, as transformers' own static-cache generation and gpt-fast do.
Imported only inside a session (it imports torch).

- :meth:`CompiledDecoder.prepare` (the worker calls it after loading, before any trial; its time is
  the variant's ``compile_ms``) allocates one ``StaticCache`` for the longest prompt + output of the
  run and compiles the decode step by running a short generation: every later step has the same
  shapes (one token, the whole static cache), so no trial compiles. The worker counts the graphs
  compiled during each trial all the same (``trials.recompiles``): a recompile inside a measured
  trial marks it disturbed.
- The prefill stays eager: its length changes with every prompt, and transformers' ``StaticCache``
  says prefill should not be compiled. A compiled variant's TTFT is the eager prefill's (into a
  static cache) and its decode is the compiled step's.
- ``reduce-overhead`` replays CUDA graphs on a GPU; on a CPU it is the default mode.

Greedy output is token-identical to the eager baseline's in float32 (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from workbench.strategy import Probe, Request, StrategyError

from ._hf import HFModel, kv_cache

__all__ = ["CompiledDecoder", "compiled_graphs"]


def compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far (dynamo's own counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class CompiledDecoder:
    """A static cache and a compiled decode step for one loaded model."""

    def __init__(self, hf: HFModel, mode: str) -> None:
        self.hf = hf
        self.mode = mode
        options: dict[str, Any] = {} if mode == "default" else {"mode": mode}
        self.step = torch.compile(hf.model.forward, dynamic=False, **options)
        self.cache: Any = None
        self.capacity = 0

    def prepare(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> None:
        """Size the static cache to the run and compile the decode step (a warm-up generation)."""
        from transformers import StaticCache

        longest = max(prompt_lengths, default=1)
        self.capacity = longest + max_new_tokens + 1
        self.cache = StaticCache(config=self.hf.model.config, max_cache_len=self.capacity)
        warm = [int(next(iter(self.hf.eos_ids), 0))] * max(min(prompt_lengths, default=1), 1)
        with torch.inference_mode():
            logits = self.prefill(warm)
            token = torch.argmax(logits[:, -1, :], dim=-1)
            for _ in range(3):  # the first step compiles; the next ones must not
                logits = self.decode(token)
                token = torch.argmax(logits[:, -1, :], dim=-1)
            self.cache.reset()  # its tensors are inference tensors: reset in inference mode

    def prefill(self, input_ids: Sequence[int]) -> Any:
        """The prompt into the (reset) static cache, eagerly; the last position's logits."""
        if self.cache is None:
            raise StrategyError("a compiled session decodes only after prepare() (the worker calls it)")
        if len(input_ids) + 1 > self.capacity:
            raise StrategyError(
                f"the prompt ({len(input_ids)} tokens) does not fit the static KV cache of "
                f"{self.capacity} tokens sized before the run"
            )
        self.cache.reset()
        ids = torch.tensor([list(input_ids)], dtype=torch.long, device=self.hf.torch_device)
        return self.hf.model(input_ids=ids, **kv_cache(self.cache), use_cache=True, logits_to_keep=1).logits

    def decode(self, token: Any) -> Any:
        """One compiled decode step: ``token`` ([1]) in, its logits out."""
        return self.step(input_ids=token.view(1, 1), **kv_cache(self.cache), use_cache=True).logits

    def generate(self, request: Request, probe: Probe) -> tuple[list[int], str]:
        """Greedy or sampled decoding through the static cache; the tokens and the finish reason."""
        from ._hf import Sampler, Stopper

        if len(request.input_ids) + request.max_new_tokens > self.capacity:
            raise StrategyError(
                f"prompt + max_new_tokens ({len(request.input_ids)} + {request.max_new_tokens}) exceed the "
                f"static KV cache of {self.capacity} tokens sized before the run"
            )
        sampler = Sampler(request, self.hf.torch_device)
        stopper = Stopper(request, self.hf.eos_ids, self.hf.decode)
        tokens: list[int] = []
        trace = getattr(probe, "trace", None)  # the quality pass's replay through the compiled step
        with torch.inference_mode():
            logits = self.prefill(request.input_ids)
            if trace is not None:
                trace.forward(0, request.input_ids, keep=1)
            while True:
                next_token = sampler(logits[:, -1, :])
                token = int(next_token.item())
                tokens.append(token)
                probe.step((token,))
                if trace is not None:
                    trace.emitted(logits[0, -1:], (token,))
                reason = stopper(tokens)
                if reason is not None:
                    return tokens, reason
                if trace is not None:
                    trace.forward(len(request.input_ids) + len(tokens) - 1, (token,))
                logits = self.decode(next_token)
