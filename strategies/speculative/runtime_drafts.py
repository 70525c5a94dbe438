"""Draft models run by another runtime for ``speculative``: llama.cpp (a GGUF, e.g. the demo's own Q4_1)
or ONNX Runtime GenAI (a model its builder made, e.g. int4 / int8), next to a transformers target.

The target's own weights, quantized, agree with it on most greedy tokens and a quantized runtime runs
them several times faster than the target, so a draft step costs a fraction of a target step. The
drafters implement :class:`.loop.Drafter` on the runtime's own KV cache:

- **llama.cpp** (llama-cpp-python's ``Llama``): ``eval`` feeds tokens into its cache, the next-token
  logits are ``llama_get_logits_ith(ctx, -1)``; after a rejection the rejected positions are dropped
  (``Llama.n_tokens`` set back, so the next ``eval`` removes them with ``llama_memory_seq_rm``).
- **ONNX Runtime GenAI**: one ``Generator`` per request; ``append_tokens`` runs the model and
  ``get_logits`` gives the next-token scores; after a rejection ``Generator.rewind_to`` cuts the cache
  back to the accepted sequence.

The drafter chooses its tokens itself from the runtime's logits (the runtime's own sampler is not
used): greedy is the argmax; at temperature > 0 the token is drawn from ``q`` = the logits through
the request's temperature / top-k / top-p (the target's :class:`Sampler`, its random stream), and
``q`` goes to the verify rule, so sampling stays exact. The draft prefills the prompt itself in
``start``, which the loop calls before it reports the first token: the draft's prefill is prefill
work and is in the TTFT. Token ids are exchanged directly, so the draft's vocabulary and
tokenization must be the target's (:func:`check_same_tokens`, one clear line otherwise).

Imported only inside ``Strategy.load`` (it imports torch and numpy at module level).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from workbench.strategy import Device, Output, Probe, Request, Strategy, StrategyError, Variant

from .._text import TOKENIZER_PROBE as _PROBE_TEXT
from ..hf_session import HFSession
from .config import SpeculativeConfig
from .loop import Draft, generate_speculative
from .schedule import Schedule

__all__ = [
    "LlamaCppDrafter",
    "OrtGenAIDrafter",
    "RuntimeDraftSession",
    "check_same_tokens",
    "load_runtime_draft",
]


class _RuntimeDrafter(abc.ABC):
    """What both runtime drafters share: the list of tokens in the runtime's cache and turning logits
    into a draft token. How many to draft is the loop's choice (its ``schedule``, passed as
    ``max_tokens``), as for the transformers draft."""

    #: it prefills the prompt in its own runtime: prefill work, started before the first token (TTFT)
    prefills_prompt = True

    def __init__(self, config: Any, vocab_limit: int) -> None:
        self.config = config
        self.vocab_limit = vocab_limit  # the target's logit width: never draft a token it cannot score
        self.sampler: Any = None
        self.cached: list[int] = []  # the tokens whose keys/values the runtime's cache holds

    def _reset(self, sampler: Any) -> None:
        self.sampler = sampler
        self.cached = []

    def _common(self, tokens: list[int]) -> int:
        """Length of the longest prefix of ``tokens`` already in the cache (at least one token left to feed)."""
        common = 0
        limit = min(len(self.cached), len(tokens) - 1)
        while common < limit and self.cached[common] == tokens[common]:
            common += 1
        return common

    @abc.abstractmethod
    def _crop(self, length: int) -> None:
        """Drop the runtime cache's positions from ``length`` on (each runtime's own call)."""

    @abc.abstractmethod
    def _feed(self, tokens: list[int]) -> np.ndarray:
        """Run ``tokens`` through the runtime (appending them to its cache and to ``cached``); the
        next-token logits after the last one."""

    def propose(self, tokens: list[int], max_tokens: int) -> Draft:
        common = self._common(tokens)
        if common < len(self.cached):
            self._crop(common)
        first = self._feed(tokens[common:])
        return self._draft(first, lambda token: self._feed([token]), max_tokens)

    def accepted(self, tokens: list[int], proposed: int, accepted: int) -> None:
        """After a verify: the runtime's cache cropped back to the accepted sequence."""
        common = self._common(tokens)
        if common < len(self.cached):
            self._crop(common)

    def _choose(self, logits: np.ndarray, probs: list[torch.Tensor]) -> int:
        """The draft token for the next-token ``logits`` (a numpy row over the draft's vocabulary)."""
        row = logits[: self.vocab_limit]
        sampler = self.sampler
        if sampler.greedy:
            return int(row.argmax())
        q = sampler.probs(torch.from_numpy(np.array(row, dtype=np.float32))[None, :])[0]
        probs.append(q)
        return int(torch.multinomial(q, 1, generator=sampler.generator).item())

    def _draft(self, first: np.ndarray, forward: Callable[[int], np.ndarray], k: int) -> Draft:
        draft: list[int] = []
        probs: list[torch.Tensor] = []
        logits = first
        while True:
            draft.append(self._choose(logits, probs))
            if len(draft) == k:
                break
            logits = forward(draft[-1])
        return Draft(draft, torch.stack(probs) if probs else None)


class LlamaCppDrafter(_RuntimeDrafter):
    """A llama.cpp model (llama-cpp-python ``Llama``) as the draft."""

    def __init__(self, llm: Any, config: Any, vocab_limit: int) -> None:
        super().__init__(config, vocab_limit)
        self.llm = llm
        self.n_vocab = int(llm.n_vocab())

    def _logits(self) -> np.ndarray:
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))  # a view: read before the next eval

    def _feed(self, tokens: list[int]) -> np.ndarray:
        self.llm.eval(tokens)
        self.cached.extend(tokens)
        return self._logits()

    def _crop(self, length: int) -> None:
        # Llama.eval removes every position from n_tokens on (llama_memory_seq_rm) before it decodes.
        self.llm.n_tokens = length
        del self.cached[length:]

    def start(self, request: Request, sampler: Any, target_cache: Any) -> None:
        self._reset(sampler)
        self.llm.reset()
        self._feed(list(request.input_ids))  # the draft's own prefill (before the first token: TTFT)


class OrtGenAIDrafter(_RuntimeDrafter):
    """An ONNX Runtime GenAI model as the draft: one ``Generator`` per request."""

    def __init__(self, model: Any, config: Any, vocab_limit: int) -> None:
        super().__init__(config, vocab_limit)
        self.model = model
        self.generator: Any = None

    def _feed(self, tokens: list[int]) -> np.ndarray:
        self.generator.append_tokens(np.asarray(tokens, dtype=np.int32))
        self.cached.extend(tokens)
        return self.generator.get_logits()[0, -1]

    def _crop(self, length: int) -> None:
        self.generator.rewind_to(length)
        del self.cached[length:]

    def start(self, request: Request, sampler: Any, target_cache: Any) -> None:
        import onnxruntime_genai as og

        self._reset(sampler)
        self.generator = None  # the last request's cache goes before the next one is allocated
        params = og.GeneratorParams(self.model)
        # the draft never runs past the verify pass: prompt + max_new_tokens positions at most
        params.set_search_options(
            max_length=len(request.input_ids) + request.max_new_tokens, batch_size=1, do_sample=False
        )
        self.generator = og.Generator(self.model, params)
        self._feed(list(request.input_ids))  # the draft's own prefill (before the first token: TTFT)


def check_same_tokens(
    target_tokenizer: Any,
    draft_vocab: int,
    encode: Callable[[str], list[int]],
    encode_special: Callable[[str], list[int]],
    draft_name: str,
    runtime: str,
    target_vocab: int,
    draft_tokens: dict[str, int] | None = None,
) -> None:
    """Refuse a draft whose token ids mean something else than the target's (one-line :class:`StrategyError`):
    a vocabulary of another size (the tokenizer's, or the target's output width), a probe text
    tokenized differently, or a special token (EOS, BOS...) with another id. ``draft_tokens``: the
    draft's token → id table where it has one (a transformers tokenizer), compared whole."""
    sizes = {len(target_tokenizer), target_vocab}
    if draft_vocab not in sizes or (
        draft_tokens is not None and draft_tokens != target_tokenizer.get_vocab()
    ):
        raise StrategyError(
            f"draft {draft_name!r} ({runtime}) has a different vocabulary from the target's ({draft_vocab} vs "
            f"{len(target_tokenizer)} tokens): different tokenizers are not supported; use the target's own "
            "model (quantized) or one of the same family as the draft"
        )
    if encode(_PROBE_TEXT) != list(target_tokenizer(_PROBE_TEXT, add_special_tokens=False)["input_ids"]):
        raise StrategyError(
            f"draft {draft_name!r} ({runtime}) tokenizes text differently from the target: different "
            "tokenizers are not supported; use the target's own model (quantized) or one of the same family"
        )
    for text in target_tokenizer.all_special_tokens:
        ids = target_tokenizer.convert_tokens_to_ids([text])
        if encode_special(text) != ids:
            raise StrategyError(
                f"draft {draft_name!r} ({runtime}) gives the special token {text!r} another id than the "
                f"target ({ids[0]}): different tokenizers are not supported"
            )


class RuntimeDraftSession(HFSession):
    """A transformers target verifying the drafts of a llama.cpp or ONNX Runtime GenAI model."""

    def __init__(self, hf: Any, draft: Any, drafter: Any) -> None:
        super().__init__(hf)
        self.draft = draft  # the runtime's own session (LlamaCppSession / OrtGenAISession)
        self.drafter = drafter
        self.weights_mb = hf.weights_mb + draft.weights_mb  # both models are resident
        self.kv_bytes_per_token = (self.kv_bytes_per_token or 0) + (draft.kv_bytes_per_token or 0) or None
        if draft.context_length and (
            self.context_length is None or draft.context_length < self.context_length
        ):
            self.context_length = draft.context_length

    def generate(self, request: Request, probe: Probe) -> Output:
        c = self.drafter.config
        return generate_speculative(
            self.hf, self.drafter, request, probe, Schedule(c.draft_schedule, c.num_draft_tokens)
        )

    def close(self) -> None:
        self.drafter = None
        self.draft.close()
        super().close()


def load_runtime_draft(
    target: Any,
    variant: Variant[SpeculativeConfig],
    device: Device,
    runtime: Strategy[Any],
    draft: Variant[Any],
) -> Any:
    """Load the ``draft`` variant with ``runtime``, its strategy (:func:`..runtime_draft`: the same
    conversion, quantization and caches as that strategy's own variants) and pair it with the loaded
    transformers ``target``."""
    config = variant.config
    vocab_limit = int(target.model.get_output_embeddings().weight.shape[0])
    tok = target.tokenizer
    session: Any = runtime.load(draft, device)
    if runtime.name == "llama-cpp":
        llm = session.llm
        # draft_threads is for the one-token draft steps; the prompt's prefill (a batch)
        # keeps the variant's threads, all cores by default, as the target's prefill does
        import llama_cpp

        llama_cpp.llama_set_n_threads(
            llm.ctx, int(llm.n_threads), int(variant.threads or os.cpu_count() or 1)
        )
        try:
            check_same_tokens(
                tok,
                int(llm.n_vocab()),
                lambda text: list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)),
                lambda text: list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)),
                config.draft,
                "llama-cpp",
                vocab_limit,
            )
        except StrategyError:
            session.close()
            raise
        return RuntimeDraftSession(target, session, LlamaCppDrafter(llm, config, vocab_limit))

    d_tok = session.tokenizer
    try:
        check_same_tokens(
            tok,
            int(session.vocab_size),
            lambda text: list(d_tok(text, add_special_tokens=False)["input_ids"]),
            lambda text: list(d_tok.convert_tokens_to_ids([text])),
            config.draft,
            "onnxruntime-genai",
            vocab_limit,
            draft_tokens=d_tok.get_vocab(),
        )
    except StrategyError:
        session.close()
        raise
    return RuntimeDraftSession(target, session, OrtGenAIDrafter(session.model, config, vocab_limit))
