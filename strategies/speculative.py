"""``speculative``: a small draft model proposes tokens, the target verifies them in one pass.

The draft model decodes ``num_draft_tokens`` tokens autoregressively with its own KV cache (greedy at
temperature 0, sampled from its own distribution otherwise); the target scores them all in one forward
pass and keeps the longest acceptable prefix plus one token of its own (:mod:`strategies._speculative`).
Output is token-identical to the baseline under greedy decoding and distributed like it under sampling.

``schedule`` chooses the draft length per step (:mod:`strategies._speculative` has the details):
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
the GGUF). The draft keeps its own KV cache, prefills the prompt itself (in the TTFT) and is rolled
back after a rejection (llama.cpp drops the rejected positions, ONNX Runtime GenAI ``rewind_to``);
the drafter picks tokens from the runtime's logits (argmax, or a draw from their distribution after
the request's temperature / top-k / top-p, which the verify rule needs), so greedy output stays
token-identical and sampling exact (``strategies/_runtime_drafts.py``). Its vocabulary, tokenization
of a probe text and special-token ids must be the target's, or it is refused in one line.
``draft_threads`` sets the draft runtime's threads (0: the variant's ``threads``; llama.cpp's prefill
keeps the variant's threads: one draft thread does not spin against the target's, a prefill batch
wants every core).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from workbench.core.config import field_help, model_field
from workbench.core.errors import StrategyError
from workbench.core.strategy import Output, Probe, Request, Session, Strategy

from ._text import TOKENIZER_PROBE as _PROBE_TEXT
from .baseline import HFSession, kv_bytes_per_token, torch_unavailable_reason
from .llama_cpp import GgufType

if TYPE_CHECKING:
    from workbench.core.device import Device
    from workbench.core.variant import Variant


@dataclass
class SpeculativeConfig:
    draft: str = model_field(
        "draft model source (demo:..., a Hugging Face id, a folder or a .gguf file); "
        "must use the target's tokenizer",
        default="",
    )
    draft_runtime: Literal["auto", "transformers", "llama-cpp", "onnxruntime-genai"] = field_help(
        "what runs the draft: transformers (in this process, like the target), llama-cpp (a GGUF: the "
        "file, the demo model's own Q4_1, or a model converted to GGUF) or onnxruntime-genai (a model its "
        "builder makes once at draft_precision); auto = transformers (a .gguf draft de-quantized, as "
        "before this key existed)",
        default="auto",
    )
    draft_dtype: Literal["auto", "float32", "float16", "bfloat16"] = field_help(
        "dtype of a transformers draft; auto = the target's", default="auto"
    )
    draft_gguf_type: GgufType = field_help(  # noqa: RUF009 (the llama-cpp strategy's gguf_type choices)
        "llama-cpp draft: its weights as llama.cpp stores them (as-is = the GGUF as given, the demo "
        "model's Q4_1; a type re-quantizes it once, cached; the llama-cpp strategy's gguf_type)",
        default="as-is",
    )
    draft_precision: Literal["int4", "int8", "fp16", "bf16", "fp32"] = field_help(
        "onnxruntime-genai draft: the weights its model builder writes (the onnxruntime-genai "
        "strategy's precision; int8 agrees with an fp32 target more often than int4)",
        default="int4",
    )
    draft_threads: int = field_help(
        "threads of a llama-cpp / onnxruntime-genai draft; 0 = the variant's threads (llama.cpp: of its "
        "draft steps; its prefill keeps the variant's threads, all cores by default)",
        default=0,
    )
    num_draft_tokens: int = field_help(
        "tokens the draft model proposes per step (the most, under the adaptive schedule)", default=5
    )
    draft_prefill: Literal["auto", "own", "from-target"] = field_help(
        "how the draft gets the prompt into its KV cache: own = it prefills the prompt itself (prefill "
        "work: before the first token, in the TTFT); from-target = the target's prefill cache cast to the "
        "draft's dtype (a copy after the first token, no second prefill: the TTFT is the baseline's; only "
        "for a draft that is the target's own model at another precision); auto = from-target when the "
        "draft is the same model source as the target",
        default="auto",
    )
    draft_vocab: int = field_help(
        "draft only from the N most frequent token ids (BPE ids are ranked by merge order) plus the "
        "prompt's tokens: a smaller output layer makes each draft step cheaper (FR-Spec); 0 = the full "
        "vocabulary. Lossless either way: the target verifies every token",
        default=0,
    )
    draft_kv_dtype: Literal["auto", "model", "float32"] = field_help(
        "dtype of the draft's KV cache and attention: model = the draft's own dtype; auto = float32 for a "
        "bfloat16/float16 draft on a CPU (CPUs without native half-precision arithmetic run attention ~4x "
        "slower in it, while half-precision weights halve the matmul time), else the draft's dtype",
        default="auto",
    )
    schedule: Literal["auto", "adaptive", "fixed", "heuristic"] = field_help(
        "draft tokens per step: adaptive = as many as the measured acceptance and step costs say pay, "
        "0 (plain decoding) when drafting does not (num_draft_tokens at most); fixed = always "
        "num_draft_tokens; heuristic = +2 after a fully accepted draft, -1 otherwise (1 to 2 x "
        "num_draft_tokens); auto = adaptive, or fixed with adaptive = false",
        default="auto",
    )
    adaptive: bool = field_help(
        "false: a fixed draft length (schedule = fixed); true: the schedule key decides", default=True
    )

    def __post_init__(self) -> None:
        if not self.draft:
            raise ValueError("needs a 'draft' model (a smaller model with the same tokenizer as the target)")
        if self.num_draft_tokens < 1:
            raise ValueError(f"num_draft_tokens must be at least 1, got {self.num_draft_tokens}")
        if self.draft_vocab < 0:
            raise ValueError(f"draft_vocab must be 0 (full vocabulary) or more, got {self.draft_vocab}")
        if not self.adaptive and self.schedule not in ("auto", "fixed"):
            raise ValueError(f"adaptive = false contradicts schedule = {self.schedule!r}; set one of them")
        if self.draft_threads < 0:
            raise ValueError(f"draft_threads must be 0 (the variant's) or more, got {self.draft_threads}")
        runtime = self.runtime
        if runtime == "transformers":
            for key, default in (
                ("draft_gguf_type", "as-is"),
                ("draft_precision", "int4"),
                ("draft_threads", 0),
            ):
                if getattr(self, key) != default:
                    raise ValueError(
                        f"{key} applies to a llama-cpp / onnxruntime-genai draft, not a transformers one"
                    )
            return
        for key, default in (("draft_dtype", "auto"), ("draft_vocab", 0), ("draft_kv_dtype", "auto")):
            if getattr(self, key) != default:
                raise ValueError(f"{key} applies to a transformers draft, not a {runtime} one")
        if self.draft_prefill == "from-target":
            raise ValueError(
                f"draft_prefill = 'from-target' needs a transformers draft; a {runtime} draft prefills itself"
            )
        if runtime == "llama-cpp" and self.draft_precision != "int4":
            raise ValueError(
                "draft_precision applies to an onnxruntime-genai draft; a llama-cpp one has draft_gguf_type"
            )
        if runtime == "onnxruntime-genai" and self.draft_gguf_type != "as-is":
            raise ValueError(
                "draft_gguf_type applies to a llama-cpp draft; an onnxruntime-genai one has draft_precision"
            )

    @property
    def draft_schedule(self) -> Literal["adaptive", "fixed", "heuristic"]:
        if self.schedule == "auto":
            return "adaptive" if self.adaptive else "fixed"
        return self.schedule

    @property
    def runtime(self) -> str:
        """``draft_runtime`` with ``auto`` resolved (transformers)."""
        return "transformers" if self.draft_runtime == "auto" else self.draft_runtime


class DraftModelDrafter:
    """Runs the draft model autoregressively; keeps its KV cache in step with the accepted sequence."""

    def __init__(self, hf: Any, config: SpeculativeConfig, vocab_limit: int, reuse_target: bool) -> None:
        self.hf = hf
        self.config = config
        self.reuse_target = reuse_target  # take the prompt's keys/values from the target's cache
        self.prefills_prompt = not reuse_target  # its own prefill: prefill work, in the TTFT
        self.vocab_limit = vocab_limit  # the target's logit width: never draft a token it cannot score
        self.cache: Any = None
        self.kv_dtype: Any = None  # storage dtype of the draft's cache (None: the draft's dtype)
        import torch

        wanted = config.draft_kv_dtype == "float32" or (
            config.draft_kv_dtype == "auto" and hf.device.type == "cpu"
        )
        if wanted and hf.dtype in (torch.bfloat16, torch.float16):
            from ._cpu import use_workbench_attention

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
        from transformers import DynamicCache

        from ._cpu import GrowingCache

        try:
            return GrowingCache(self.hf.model.config, dtype=self.kv_dtype or self.hf.dtype)
        except ValueError:
            return DynamicCache(config=self.hf.model.config)

    def start(self, request: Request, sampler: Any, target_cache: Any) -> None:
        from ._cpu import GrowingCache

        self.sampler = sampler
        self.cache = self._new_cache()
        self.cached = []
        if self.frequent is not None:
            self._restrict_head(request.input_ids)
        if self.reuse_target:
            # Same model, other precision: the target's keys/values for the prompt are what the draft
            # would compute (more exactly, even). Copies, so the target's cache is never touched.
            if isinstance(self.cache, GrowingCache):  # copies into its own buffers, in its dtype
                for idx, layer in enumerate(target_cache.layers):
                    self.cache.update(layer.keys, layer.values, idx)
            else:
                dtype = self.hf.model.dtype
                for idx, layer in enumerate(target_cache.layers):
                    self.cache.update(
                        layer.keys.to(dtype=dtype, copy=True), layer.values.to(dtype=dtype, copy=True), idx
                    )
            self.cached = list(request.input_ids)
            return
        # Prefill the draft on the prompt now (before the first token is reported: prefill work, in
        # the TTFT), rather than inside the first step's draft_ms.
        self._forward(list(request.input_ids))

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

        from ._hf import kv_cache

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
        from ._speculative import crop_cache

        common = 0
        limit = min(len(self.cached), len(tokens) - 1)  # always feed at least one token
        while common < limit and self.cached[common] == tokens[common]:
            common += 1
        if common < len(self.cached):
            crop_cache(self.cache, common)
            del self.cached[common:]
        return common

    def propose(self, tokens: list[int], max_tokens: int) -> Any:
        import torch

        from ._speculative import Draft

        k = max_tokens  # the loop's schedule chose it
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
        self._sync(tokens)


class SpeculativeSession(HFSession):
    def __init__(self, hf: Any, draft_hf: Any, config: SpeculativeConfig, reuse_target: bool = False) -> None:
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
        self.drafter = DraftModelDrafter(draft_hf, config, vocab_limit, reuse_target)

    def generate(self, request: Request, probe: Probe) -> Output:
        from ._speculative import Schedule, generate_speculative

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
            f"draft {draft_name!r} has {d_params / 1e6:.1f}M parameters, the target {t_params / 1e6:.1f}M: "
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


class SpeculativeStrategy(Strategy):
    name = "speculative"
    description = "Speculative decoding: a small draft model proposes tokens, the target verifies them"
    Config = SpeculativeConfig

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def preflight(self, variant: Variant) -> None:
        """A llama-cpp / onnxruntime-genai draft: that runtime installed, and its own checks on the draft."""
        config: SpeculativeConfig | None = variant.config
        if config is None or config.runtime == "transformers":
            return
        runtime = _runtime_strategy(config.runtime)
        reason = runtime.available()
        if reason:
            raise StrategyError(f"variant {variant.name!r}: a {config.runtime} draft {reason}")
        runtime.preflight(dataclasses.replace(variant, model=config.draft, dtype="auto"))

    def load(self, variant: Variant, device: Device) -> Session:
        from ._hf import load_hf_model

        config: SpeculativeConfig = variant.config
        if config is None:
            raise StrategyError(f"variant {variant.name!r}: speculative needs a 'draft' model")
        if config.runtime != "transformers":
            self.preflight(variant)
            from ._runtime_drafts import load_runtime_draft

            target = load_hf_model(variant, device)
            return load_runtime_draft(target, variant, device, config, config.runtime)
        target = load_hf_model(variant, device)
        draft_dtype: str = config.draft_dtype
        if draft_dtype == "auto":
            draft_dtype = str(target.dtype).removeprefix("torch.")
        draft = load_hf_model(dataclasses.replace(variant, model=config.draft, dtype=draft_dtype), device)
        check_compatible(target, draft, config.draft)
        reuse = config.draft_prefill == "from-target" or (
            config.draft_prefill == "auto" and config.draft == variant.model
        )
        if reuse:
            check_same_architecture(target, draft, config.draft)
        return SpeculativeSession(target, draft, config, reuse_target=reuse)


def _runtime_strategy(runtime: str) -> Strategy:
    if runtime == "llama-cpp":
        from .llama_cpp import LlamaCppStrategy

        return LlamaCppStrategy()
    from .ort_genai import OrtGenAIStrategy

    return OrtGenAIStrategy()
