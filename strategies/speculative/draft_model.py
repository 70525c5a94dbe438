"""A transformers draft model for ``speculative``: the drafter that runs it, the session pairing it
with the target, and the checks that refuse a draft the loop cannot use.

Imported only inside ``Strategy.load`` (its methods import torch and transformers).
"""

from __future__ import annotations

from typing import Any

from workbench.core.shapes import kv_bytes_per_token
from workbench.formatting import fixed
from workbench.strategy import Output, Probe, Request, StrategyError

from .._text import TOKENIZER_PROBE as _PROBE_TEXT
from ..hf_session import HFSession
from .config import SpeculativeConfig
from .context import CatchUp, PromptView
from .drafter import Draft

__all__ = ["DraftModelDrafter", "SpeculativeSession", "check_compatible", "check_same_architecture"]


class DraftModelDrafter(CatchUp):
    """Runs the draft model autoregressively; keeps its KV cache in step with the accepted sequence."""

    def __init__(self, hf: Any, config: SpeculativeConfig, vocab_limit: int, mode: str) -> None:
        self.hf = hf
        self.config = config
        self.mode = mode  # own / catch-up / from-target (SpeculativeConfig.prefill_mode)
        self.reuse_target = mode == "from-target"  # take the prompt's keys/values from the target's cache
        self.prefills_prompt = mode == "own"  # its own prefill: prefill work, in the TTFT
        self.catches_up = mode == "catch-up"  # reads the prompt in chunks after the first token
        self.chunk = config.draft_prefill_chunk
        self.view = PromptView(())  # the part of the prompt it reads (draft_context)
        self.vocab_limit = vocab_limit  # the target's logit width: never draft a token it cannot score
        self.cache: Any = None
        self.kv_dtype: Any = None  # storage dtype of the draft's cache (None: the draft's dtype)
        import torch

        wanted = config.draft_kv_dtype == "float32" or (
            config.draft_kv_dtype == "auto" and hf.device.type == "cpu"
        )
        if wanted and hf.dtype in (torch.bfloat16, torch.float16):
            from .._cpu import use_workbench_attention

            if use_workbench_attention(hf.model):  # it casts queries to the cache's dtype
                self.kv_dtype = torch.float32
        self.cached: list[int] = []  # the tokens whose keys/values the draft cache holds
        self.sampler: Any = None
        # draft_vocab: the output layer restricted to frequent ids (+ each prompt's ids, per request)
        self.frequent: Any = None
        self.subset_ids: Any = None  # ids the draft can propose (None: the full vocabulary)
        self.subset_weight: Any = None
        if 0 < config.draft_vocab < vocab_limit:
            self.frequent = torch.arange(config.draft_vocab, device=hf.torch_device)

    def _new_cache(self) -> Any:
        """A cache that grows in place (in ``kv_dtype``), or transformers' own for layouts it cannot hold."""
        from .._cpu import GrowingCache
        from .._kv import new_cache

        try:
            return GrowingCache(self.hf.model.config, dtype=self.kv_dtype or self.hf.dtype)
        except ValueError:  # sliding-window layers: transformers' own, cut back as the loop's (.._kv)
            return new_cache(self.hf.model, rollback=True)

    def kv_caches(self) -> tuple[Any, ...]:
        """The draft model's cache (its storage, capacity included, is what it holds)."""
        return (self.cache,) if self.cache is not None else ()

    def start(self, request: Request, sampler: Any, target_cache: Any) -> None:
        from .._cpu import GrowingCache

        self.sampler = sampler
        self.cache = self._new_cache()
        self.cached = []
        self.view = PromptView(request.input_ids, self.config.draft_context, self.config.draft_sinks)
        if self.frequent is not None:
            self._restrict_head(request.input_ids)
        if self.reuse_target:
            # Same model, other precision: the target's keys/values for the prompt are what the draft
            # would compute (more exactly, even). Copies, so the target's cache is never touched.
            if isinstance(self.cache, GrowingCache):  # copies into its own buffers, in its dtype
                for idx, layer in enumerate(target_cache.layers):
                    self.cache.update(layer.keys, layer.values, idx)
            else:
                from .._kv import follow_lengths

                dtype = self.hf.model.dtype
                for idx, layer in enumerate(target_cache.layers):
                    self.cache.update(
                        layer.keys.to(dtype=dtype, copy=True), layer.values.to(dtype=dtype, copy=True), idx
                    )
                follow_lengths(self.cache, target_cache)
            self.cached = list(request.input_ids)
            return
        # Prefill the draft on the prompt now (before the first token is reported: prefill work, in
        # the TTFT), rather than inside the first step's draft_ms; catch-up: chunk by chunk, later.
        if self.mode == "own":
            self._forward(self.view.prompt)

    def _read(self, tokens: list[int]) -> object:  # CatchUp's
        return self._forward(tokens)

    def _restrict_head(self, prompt_ids: Any) -> None:
        """The draft's output layer for this request: the frequent ids plus the prompt's own ids (a
        summary copies names and numbers from its document), so the draft can propose those too."""
        import torch

        prompt = torch.tensor(sorted(set(prompt_ids)), dtype=torch.long, device=self.frequent.device)
        prompt = prompt[(prompt >= len(self.frequent)) & (prompt < self.vocab_limit)]
        self.subset_ids = torch.cat([self.frequent, prompt])
        weight = self.hf.model.get_output_embeddings().weight
        self.subset_weight = weight.index_select(0, self.subset_ids)

    def _forward(self, new_tokens: list[int]) -> Any:
        """The draft's scores for the next token: over the full vocabulary, or over ``subset_ids``."""
        import torch

        from .._hf import kv_cache

        ids = torch.tensor([new_tokens], dtype=torch.long, device=self.hf.torch_device)
        self.cached.extend(new_tokens)
        if self.subset_ids is None:
            logits = self.hf.model(
                input_ids=ids, **kv_cache(self.cache), use_cache=True, logits_to_keep=1
            ).logits
            return logits[0, -1, : self.vocab_limit]
        decoder = self.hf.model.get_decoder()
        hidden = decoder(input_ids=ids, **kv_cache(self.cache), use_cache=True).last_hidden_state[0, -1]
        return hidden @ self.subset_weight.T

    def _token(self, index: int) -> int:
        return index if self.subset_ids is None else int(self.subset_ids[index])

    def _sync(self, tokens: list[int]) -> int:
        """Crop the cache to its longest prefix shared with ``tokens``; return that length."""
        from .._kv import crop_cache

        common = 0
        limit = min(len(self.cached), len(tokens) - 1)  # always feed at least one token
        while common < limit and self.cached[common] == tokens[common]:
            common += 1
        if common < len(self.cached):
            crop_cache(self.cache, common)
            del self.cached[common:]
        return common

    def propose(self, tokens: list[int], max_tokens: int) -> Draft:
        import torch

        k = max_tokens  # the loop's schedule chose it
        tokens = self.view(tokens)
        common = self._sync(tokens)
        logits = self._forward(tokens[common:])
        draft: list[int] = []
        probs: list[torch.Tensor] = []
        sampler = self.sampler
        while True:
            if sampler.greedy:
                token = self._token(int(torch.argmax(logits).item()))
            else:
                q = sampler.probs(logits[None, :])[0]
                token = self._token(int(torch.multinomial(q, 1, generator=sampler.generator).item()))
                if self.subset_ids is not None:  # q over the full vocabulary: 0 outside the subset
                    q = torch.zeros(self.vocab_limit, dtype=q.dtype, device=q.device).index_copy_(
                        0, self.subset_ids, q
                    )
                probs.append(q)
            draft.append(token)
            if len(draft) == k:
                break
            logits = self._forward([token])
        return Draft(draft, torch.stack(probs) if probs else None)

    def accepted(self, tokens: list[int], proposed: int, accepted: int) -> None:
        self._sync(self.view(tokens))


class SpeculativeSession(HFSession):
    def __init__(self, hf: Any, draft_hf: Any, config: SpeculativeConfig, mode: str = "own") -> None:
        super().__init__(hf)
        self.draft_hf = draft_hf
        self.weights_mb = hf.weights_mb + draft_hf.weights_mb  # both models are resident
        self.kv_bytes_per_token = (self.kv_bytes_per_token or 0) + (
            kv_bytes_per_token(draft_hf.model_shape) or 0
        ) or None
        if draft_hf.context_length and (
            self.context_length is None or draft_hf.context_length < self.context_length
        ):
            self.context_length = draft_hf.context_length
        vocab_limit = hf.model.get_output_embeddings().weight.shape[0]
        self.drafter = DraftModelDrafter(draft_hf, config, vocab_limit, mode)

    def generate(self, request: Request, probe: Probe) -> Output:
        from .loop import generate_speculative
        from .schedule import Schedule

        c = self.drafter.config
        schedule = Schedule(c.draft_schedule, c.num_draft_tokens)
        return generate_speculative(self.hf, self.drafter, request, probe, schedule)

    def close(self) -> None:
        del self.draft_hf, self.drafter
        super().close()


def check_compatible(target: Any, draft: Any, draft_name: str) -> None:
    """Refuse draft models speculative decoding cannot use (one-line :class:`StrategyError`)."""
    t_tok, d_tok = target.tokenizer, draft.tokenizer
    if len(t_tok) != len(d_tok) or t_tok.get_vocab() != d_tok.get_vocab():
        raise StrategyError(
            f"draft {draft_name!r} has a different vocabulary from the target's ({len(d_tok)} vs "
            f"{len(t_tok)} tokens): different tokenizers are not supported; choose a draft of the same model family"
        )
    if t_tok(_PROBE_TEXT)["input_ids"] != d_tok(_PROBE_TEXT)["input_ids"]:
        raise StrategyError(
            f"draft {draft_name!r} tokenizes text differently from the target: different tokenizers are "
            "not supported; choose a draft of the same model family"
        )
    t_params = sum(p.numel() for p in target.model.parameters())
    d_params = sum(p.numel() for p in draft.model.parameters())
    if d_params > t_params:
        raise StrategyError(
            f"draft {draft_name!r} has {fixed(d_params / 1e6, 1)}M parameters, the target {fixed(t_params / 1e6, 1)}M: "
            "draft larger than the target (swap them?)"
        )


_CACHE_SHAPE = (
    "model_type",
    "num_hidden_layers",
    "num_key_value_heads",
    "num_attention_heads",
    "hidden_size",
)


def check_same_architecture(target: Any, draft: Any, draft_name: str) -> None:
    """``draft_prefill = "from-target"`` needs caches of the same shape (one-line :class:`StrategyError`)."""
    t_cfg, d_cfg = target.model.config, draft.model.config
    for key in (*_CACHE_SHAPE, "head_dim"):
        t_val, d_val = getattr(t_cfg, key, None), getattr(d_cfg, key, None)
        if t_val != d_val:
            raise StrategyError(
                f"draft_prefill = 'from-target' needs the draft to be the target's model: draft "
                f"{draft_name!r} has {key} = {d_val}, the target {t_val}; use draft_prefill = 'own'"
            )
