"""``speculative``: a small draft model proposes tokens, the target verifies them in one pass.

The draft model decodes ``num_draft_tokens`` tokens autoregressively with its own KV cache (greedy at
temperature 0, sampled from its own distribution otherwise); the target scores them all in one forward
pass and keeps the longest acceptable prefix plus one token of its own (:mod:`.loop`).
Output is token-identical to the baseline under greedy decoding and distributed like it under sampling.

``schedule`` chooses the draft length per step (:mod:`.schedule` has the details):
``adaptive`` (the default) drafts as many tokens (``num_draft_tokens`` at most) as this request's
measured acceptance by position and step costs say pay, down to none (plain decoding) when the draft
agrees too rarely to pay for its steps, probing again now and then; ``fixed`` always drafts
``num_draft_tokens``; ``heuristic`` is transformers' schedule (+2 after a fully accepted draft, -1
otherwise, between 1 and twice ``num_draft_tokens``; what ``adaptive = true`` meant before there was a
``schedule`` key). ``adaptive = false`` is ``schedule = "fixed"``. Every schedule restarts for every
request, so trials do not depend on the ones before them.

The draft needs the prompt in its KV cache before it can draft. When the draft is the target's own model
at another precision (the demo's fp16 draft), the target's prefill cache already holds what it needs:
``draft_prefill = "from-target"`` (the default for that case) copies the target's keys/values into the
draft's cache (cast to the cache's dtype: ``draft_kv_dtype``) instead of running a second prefill.
The copy happens once the target's first token is out, so the TTFT is the baseline's. A different
draft model prefills the prompt itself (``own``): that is prefill work, done before the first token is
reported, and it is in the TTFT (as in serving engines).

Draft and target must share a tokenizer (token ids are exchanged directly); a draft larger than the
target is refused as a configuration mistake.

**A draft from another runtime** (``draft_runtime``): the target's own weights, quantized, run by
llama.cpp (``llama-cpp``: a GGUF, e.g. the demo's own Q4_1) or by ONNX
Runtime GenAI (``onnxruntime-genai``: a model its builder makes once at ``draft_precision``), loaded
through those strategies (same conversion, quantization and caches; ``draft_gguf_type`` re-quantizes
the GGUF). The draft keeps its own KV cache, prefills the prompt itself (llama.cpp; ONNX Runtime GenAI
with ``own`` / ``catch-up``) or, ONNX Runtime GenAI on a cpu with ``from-target``, runs the builder's
model in ONNX Runtime itself on a cache filled from the target's, and is rolled
back after a rejection (llama.cpp drops the rejected positions, ONNX Runtime GenAI ``rewind_to``);
the drafter picks tokens from the runtime's logits (argmax, or a draw from their distribution after
the request's temperature / top-k / top-p, which the verify rule needs), so greedy output stays
token-identical and sampling exact (``strategies/speculative/runtime_drafts.py``). Its vocabulary, tokenization
of a probe text and special-token ids must be the target's, or it is refused in one line.
``draft_threads`` sets the draft runtime's threads (0: the variant's ``threads``; llama.cpp's prefill
keeps the variant's threads: one draft thread does not spin against the target's, a prefill batch
wants every core).

The parts: :mod:`.config` (the parameters), :mod:`.schedule` (the draft length per step; no torch),
:mod:`.drafter` (what the loop asks of a drafter, its capabilities with their defaults; no torch),
:mod:`.loop` (the draft → verify loop, shared with ``prompt-lookup``), :mod:`.context` (the part of
the prompt a draft reads, whether a catch-up prefill pays; no torch), :mod:`.draft_model` (a
transformers draft), :mod:`.runtime_drafts` (a llama.cpp / ONNX Runtime GenAI draft). This module
imports none of torch, transformers or the runtimes: they load inside :meth:`SpeculativeStrategy.load`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

from workbench.strategy import ScoreShape, Session, Strategy, StrategyError

from ..hf_session import torch_unavailable_reason
from .config import SpeculativeConfig

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant

__all__ = ["SpeculativeConfig", "SpeculativeStrategy", "runtime_draft"]


class SpeculativeStrategy(Strategy[SpeculativeConfig]):
    name = "speculative"
    lever = "speculative decoding"
    phase = "decode"
    description = "Speculative decoding: a small draft model proposes tokens, the target verifies them"
    lossless = True  # greedy output = its model's own, up to the rounding of its shapes (quality pass)
    Config = SpeculativeConfig
    compile_refusal = (
        "its verify pass of k + 1 tokens crops the KV cache after a rejection, which a static cache "
        "does not (a gpt-fast style static verify is not built)"
    )

    def score_shape(self, variant: Variant[SpeculativeConfig]) -> ScoreShape:
        """Verify passes of the draft length's cap + 1 tokens (every draft accepted)."""
        return ScoreShape(chunk=variant.config.num_draft_tokens + 1)

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def preflight(self, variant: Variant[SpeculativeConfig]) -> None:
        """A llama-cpp / onnxruntime-genai draft: that runtime installed, and its own checks on the draft."""
        config = variant.config
        if config.runtime == "transformers":
            return
        runtime, draft = runtime_draft(variant)
        reason = runtime.available()
        if reason:
            raise StrategyError(f"variant {variant.name!r}: a {config.runtime} draft {reason}")
        runtime.preflight(draft)

    def load(self, variant: Variant[SpeculativeConfig], device: Device) -> Session:
        from .._hf import load_hf_model

        config = variant.config
        if config.runtime != "transformers":
            self.preflight(variant)
            from .runtime_drafts import load_runtime_draft

            target = load_hf_model(variant, device)
            return _self_draft_prior(
                load_runtime_draft(target, variant, device, *runtime_draft(variant)), variant
            )
        from .draft_model import SpeculativeSession, check_compatible, check_same_architecture

        target = load_hf_model(variant, device)
        draft_dtype: str = config.draft_dtype
        if draft_dtype == "auto":
            draft_dtype = str(target.dtype).removeprefix("torch.")
        draft = load_hf_model(dataclasses.replace(variant, model=config.draft, dtype=draft_dtype), device)
        check_compatible(target, draft, config.draft)
        mode = config.prefill_mode(config.draft == variant.model)
        if mode == "from-target":
            check_same_architecture(target, draft, config.draft)
        return _self_draft_prior(SpeculativeSession(target, draft, config, mode=mode), variant)


def _self_draft_prior(session: Any, variant: Variant[SpeculativeConfig]) -> Session:
    """A draft that is the target's own model source (its weights at another precision) agrees with
    it on most tokens: the adaptive schedule starts from ``Adaptive.SELF_DRAFT_PRIOR`` for it."""
    if variant.config.draft == variant.model:
        from .schedule import Adaptive

        session.drafter.prior_acceptance = Adaptive.SELF_DRAFT_PRIOR
    return cast("Session", session)


def runtime_draft(variant: Variant[SpeculativeConfig]) -> tuple[Strategy[Any], Variant[Any]]:
    """For a llama-cpp / onnxruntime-genai draft: that runtime's strategy, and the draft as a variant
    of it (its own parameters), so that its checks, loading and caches are the runtime's own."""
    config = variant.config
    strategy: Strategy[Any]
    draft_config: Any
    if config.runtime == "llama-cpp":
        from ..llama_cpp import LlamaCppConfig, LlamaCppStrategy

        # n_ctx = 0: the model's training context (the runner checks prompt + budget against it)
        strategy, draft_config = LlamaCppStrategy(), LlamaCppConfig(gguf_type=config.draft_gguf_type, n_ctx=0)
    else:
        from ..ort_genai import OrtGenAIConfig, OrtGenAIStrategy

        strategy, draft_config = OrtGenAIStrategy(), OrtGenAIConfig(precision=config.draft_precision)
    draft = dataclasses.replace(
        cast("Variant[Any]", variant),  # the same variant with another strategy's config
        strategy=strategy.name,
        model=config.draft,
        dtype="auto",
        threads=config.draft_threads or variant.threads,
        params={},
        config=draft_config,
    )
    return strategy, draft
