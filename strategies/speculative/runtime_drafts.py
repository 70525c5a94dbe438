"""Draft models run by another runtime for ``speculative``: llama.cpp (a GGUF, e.g. the demo's own Q4_1)
or ONNX Runtime GenAI (a model its builder made, e.g. int4 / int8), next to a transformers target.

The target's own weights, quantized, agree with it on most greedy tokens and a quantized runtime runs
them several times faster than the target, so a draft step costs a fraction of a target step. The
drafters implement :class:`.drafter.Drafter` on the runtime's own KV cache:

- **llama.cpp** (llama-cpp-python's ``Llama``): ``eval`` feeds tokens into its cache, the next-token
  logits are ``llama_get_logits_ith(ctx, -1)``; after a rejection the rejected positions are dropped
  (``Llama.n_tokens`` set back, so the next ``eval`` removes them with ``llama_memory_seq_rm``).
- **ONNX Runtime GenAI**: one ``Generator`` per request; ``append_tokens`` runs the model and
  ``get_logits`` gives the next-token scores; after a rejection ``Generator.rewind_to`` cuts the cache
  back to the accepted sequence.

The drafter chooses its tokens itself from the runtime's logits (the runtime's own sampler is not
used): greedy is the argmax; at temperature > 0 the token is drawn from ``q`` = the logits through
the request's temperature / top-k / top-p (the target's :class:`Sampler`, its random stream), and
``q`` goes to the verify rule, so sampling stays exact. With ``draft_prefill = "own"`` the draft
prefills the prompt itself in ``start``, which the loop calls before it reports the first token: the
draft's prefill is prefill work and is in the TTFT; ``catch-up`` reads it after the first token, in
chunks (``pending`` / ``catch_up``); ``draft_context`` bounds what it reads (:mod:`.context`). For an
ONNX Runtime GenAI draft, ``from-target`` (:class:`OrtSharedCacheDrafter`) runs the builder's model in
ONNX Runtime itself, on a cache filled from the target's prefill cache: no draft prefill at all. Token ids are exchanged directly, so the draft's vocabulary and
tokenization must be the target's (:func:`check_same_tokens`, one clear line otherwise).

Imported only inside ``Strategy.load`` (it imports torch and numpy at module level).
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from workbench.strategy import Device, Output, Probe, Request, Strategy, StrategyError, Variant

from .._text import TOKENIZER_PROBE as _PROBE_TEXT
from ..hf_session import HFSession
from .config import SpeculativeConfig
from .context import CatchUp, PromptView
from .drafter import Draft
from .loop import generate_speculative
from .schedule import Schedule

__all__ = [
    "LlamaCppDrafter",
    "OrtGenAIDrafter",
    "OrtSharedCacheDrafter",
    "RuntimeDraftSession",
    "check_same_tokens",
    "device_delta_mb",
    "load_runtime_draft",
]


class _RuntimeDrafter(CatchUp):
    """What the runtime drafters share: the list of tokens in the runtime's cache, the part of the
    prompt the draft reads (:class:`.context.PromptView`, ``draft_context``), when it reads it
    (``draft_prefill``: ``own`` before the first token, ``catch-up`` in chunks after it, see
    :meth:`pending`) and turning logits into a draft token. How many to draft is the loop's choice
    (its ``schedule``, passed as ``max_tokens``), as for the transformers draft."""

    #: own prefill (the default): it prefills the prompt in its own runtime, prefill work started
    #: before the first token (TTFT); catch-up / from-target: after it (an instance attribute)
    prefills_prompt = True

    def __init__(self, config: Any, vocab_limit: int, mode: str = "own") -> None:
        self.config = config
        self.mode = mode  # own / catch-up / from-target (SpeculativeConfig.prefill_mode)
        self.prefills_prompt = mode == "own"
        self.catches_up = mode == "catch-up"  # the loop calls pending / catch_up between plain steps
        self.chunk = int(config.draft_prefill_chunk)
        self.vocab_limit = vocab_limit  # the target's logit width: never draft a token it cannot score
        self.sampler: Any = None
        self.cached: list[int] = []  # the tokens whose keys/values the runtime's cache holds
        self.view = PromptView(())

    def _reset(self, request: Request, sampler: Any) -> None:
        self.sampler = sampler
        self.cached = []
        self.view = PromptView(request.input_ids, self.config.draft_context, self.config.draft_sinks)

    def _prefill(self) -> None:
        """``start``'s end: an own prefill reads the (viewed) prompt now; a catch-up one waits for
        :meth:`catch_up`."""
        if self.mode == "own":
            self._feed(self.view.prompt)  # the draft's own prefill (before the first token: TTFT)

    def _read(self, tokens: list[int]) -> object:  # CatchUp's
        return self._feed(tokens)

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
        tokens = self.view(tokens)
        common = self._common(tokens)
        if common < len(self.cached):
            self._crop(common)
        first = self._feed(tokens[common:])
        return self._draft(first, lambda token: self._feed([token]), max_tokens)

    def accepted(self, tokens: list[int], proposed: int, accepted: int) -> None:
        """After a verify: the runtime's cache cropped back to the accepted sequence."""
        tokens = self.view(tokens)
        common = self._common(tokens)
        if common < len(self.cached):
            self._crop(common)

    def _choose(self, logits: np.ndarray, probs: list[torch.Tensor]) -> int:
        """The draft token for the next-token ``logits`` (a numpy row over the draft's vocabulary)."""
        row = logits[: self.vocab_limit]
        sampler = self.sampler
        if sampler.greedy:
            return int(row.argmax())
        # on the generator's device (the target's: CUDA on a GPU), where the verify compares q with
        # the target's probabilities, and where torch.multinomial needs it with that generator
        where = sampler.generator.device if sampler.generator is not None else "cpu"
        q = sampler.probs(torch.from_numpy(np.array(row, dtype=np.float32)).to(where)[None, :])[0]
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

    def __init__(self, llm: Any, config: Any, vocab_limit: int, mode: str = "own") -> None:
        super().__init__(config, vocab_limit, mode)
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
        self._reset(request, sampler)
        self.llm.reset()
        self._prefill()


class OrtGenAIDrafter(_RuntimeDrafter):
    """An ONNX Runtime GenAI model as the draft: one ``Generator`` per request."""

    def __init__(self, model: Any, config: Any, vocab_limit: int, mode: str = "own") -> None:
        super().__init__(config, vocab_limit, mode)
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

        self._reset(request, sampler)
        self.generator = None  # the last request's cache goes before the next one is allocated
        params = og.GeneratorParams(self.model)
        # the draft never runs past the verify pass: (its view of) the prompt + max_new_tokens positions
        params.set_search_options(
            max_length=len(self.view.prompt) + request.max_new_tokens, batch_size=1, do_sample=False
        )
        self.generator = og.Generator(self.model, params)
        self._prefill()


class OrtSharedCacheDrafter(_RuntimeDrafter):
    """``draft_prefill = "from-target"`` for an ONNX Runtime GenAI draft: the model its builder made
    (``model.onnx``), run by ONNX Runtime itself (the engine under ONNX Runtime GenAI) so that its KV
    cache can be given the target's. One buffer per layer and per keys/values, ``[1, kv heads,
    prompt + max_new_tokens, head size]``, bound as both the ``past_key_values`` input and the
    ``present`` output (the builder's ``GroupQueryAttention`` updates it in place, as ONNX Runtime
    GenAI's ``past_present_share_buffer`` does; the ``attention_mask``'s length says how many
    positions are valid, so a rollback is a shorter mask). After the target's first token its prefill
    cache is copied in (cast to the graph's KV type): the draft prefills nothing."""

    def __init__(
        self, folder: Any, genai: dict[str, Any], threads: int, config: Any, vocab_limit: int
    ) -> None:
        import onnxruntime as ort

        super().__init__(config, vocab_limit, "from-target")
        decoder = genai["model"]["decoder"]
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(folder / decoder["filename"]), options, providers=["CPUExecutionProvider"]
        )
        names = decoder["inputs"]
        outputs = decoder["outputs"]
        graph = {i.name: i for i in self.session.get_inputs()}
        self.layers = int(decoder["num_hidden_layers"])
        self.kv_heads = int(decoder["num_key_value_heads"])
        self.head_dim = int(decoder["head_size"])
        self.ids_name, self.mask_name = names["input_ids"], names["attention_mask"]
        self.positions_name = names.get("position_ids") if names.get("position_ids") in graph else None
        self.logits_name = outputs["logits"]
        pairs = []
        for i in range(self.layers):
            for past, present in (
                (names["past_key_names"], outputs["present_key_names"]),
                (names["past_value_names"], outputs["present_value_names"]),
            ):
                pairs.append((past % i, present % i))
        missing = [p for p, _ in pairs if p not in graph] + [
            n for n in (self.ids_name, self.mask_name) if n not in graph
        ]
        if missing:
            raise StrategyError(
                f"the ONNX model has no input {missing[0]!r}: draft_prefill = 'own' reads it as it is"
            )
        self.pairs = pairs
        kinds = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
        kv_type = graph[pairs[0][0]].type
        if kv_type not in kinds:
            raise StrategyError(f"draft_prefill = 'from-target' cannot fill a {kv_type} KV cache; use 'own'")
        self.kv_dtype = kinds[kv_type]
        self.int_dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}[graph[self.ids_name].type]
        self.mask_dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}[graph[self.mask_name].type]
        self.binding: Any = None
        self.buffers: list[np.ndarray] = []

    def start(self, request: Request, sampler: Any, target_cache: Any) -> None:
        import onnxruntime as ort

        self._reset(request, sampler)
        self.binding = None  # the last request's buffers go before the next ones are allocated
        self.buffers = []
        n = len(request.input_ids)
        size = n + request.max_new_tokens  # the verify pass never runs past it
        binding = self.session.io_binding()
        layers = target_cache.layers
        for j, (past, present) in enumerate(self.pairs):
            buffer = np.empty((1, self.kv_heads, size, self.head_dim), dtype=self.kv_dtype)
            layer = layers[j // 2]
            source = layer.keys if j % 2 == 0 else layer.values
            torch.from_numpy(buffer)[:, :, :n].copy_(source[:, :, :n])  # cast to the cache's dtype
            value = ort.OrtValue.ortvalue_from_numpy(buffer)  # shares the buffer's memory
            binding.bind_ortvalue_input(past, value)
            binding.bind_ortvalue_output(present, value)
            self.buffers.append(buffer)
        self.binding = binding
        self.cached = list(request.input_ids)

    def _feed(self, tokens: list[int]) -> np.ndarray:
        binding = self.binding
        total = len(self.cached) + len(tokens)
        binding.bind_cpu_input(self.ids_name, np.asarray([tokens], dtype=self.int_dtype))
        binding.bind_cpu_input(self.mask_name, np.ones((1, total), dtype=self.mask_dtype))
        if self.positions_name:
            positions = np.arange(len(self.cached), total, dtype=self.int_dtype)[None, :]
            binding.bind_cpu_input(self.positions_name, positions)
        binding.bind_output(self.logits_name)
        self.session.run_with_iobinding(binding)
        self.cached.extend(tokens)
        return binding.get_outputs()[-1].numpy()[0, -1]

    def _crop(self, length: int) -> None:
        del self.cached[length:]  # the mask's length is the cache's: the positions after it are rewritten

    def close(self) -> None:
        self.binding = None
        self.buffers = []
        del self.session


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
        #: the draft runtime's device memory at its load, for the variant's peak (the worker's tracker)
        self.outside_torch_mb: float | None = getattr(draft, "outside_torch_mb", None)

    def generate(self, request: Request, probe: Probe) -> Output:
        c = self.drafter.config
        return generate_speculative(
            self.hf, self.drafter, request, probe, Schedule(c.draft_schedule, c.num_draft_tokens)
        )

    def close(self) -> None:
        if hasattr(self.drafter, "close"):
            self.drafter.close()
        self.drafter = None
        self.draft.close()
        super().close()


def device_delta_mb(device: Device, load: Callable[[], Any]) -> tuple[Any, float | None]:
    """``load()``'s result and the device memory it took (MB, from ``cudaMemGetInfo`` before and
    after: device-wide, so read while nothing else loads); ``None`` off CUDA."""
    if not device.is_cuda:
        return load(), None
    index = device.index or 0
    torch.cuda.synchronize(index)
    before = torch.cuda.mem_get_info(index)[0]
    loaded = load()
    torch.cuda.synchronize(index)
    return loaded, max(0.0, (before - torch.cuda.mem_get_info(index)[0]) / 2**20)


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
    session: Any
    # torch's allocator never sees the draft's buffers: their device memory, taken at its load
    # (the target already resident, the context made), joins the variant's peak
    session, outside_torch_mb = device_delta_mb(device, lambda: runtime.load(draft, device))
    session.outside_torch_mb = outside_torch_mb
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
        mode = config.prefill_mode(config.draft == variant.model, can_copy=False)
        return RuntimeDraftSession(target, session, LlamaCppDrafter(llm, config, vocab_limit, mode))

    d_tok = session.tokenizer
    same_model = config.draft == variant.model
    mode = config.prefill_mode(same_model, can_copy=device.type == "cpu")
    try:
        if mode == "from-target":
            check_same_cache(target, session.model_shape, config.draft, device.type)
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
    if mode != "from-target":
        return RuntimeDraftSession(target, session, OrtGenAIDrafter(session.model, config, vocab_limit, mode))
    # the draft runs in ONNX Runtime itself: ONNX Runtime GenAI's copy of the weights goes
    genai = json.loads((session.folder / "genai_config.json").read_text())
    threads = int(draft.threads or 0)
    del session.model
    session.model = None
    try:
        drafter = OrtSharedCacheDrafter(session.folder, genai, threads, config, vocab_limit)
    except StrategyError:
        session.close()
        raise
    return RuntimeDraftSession(target, session, drafter)


def check_same_cache(target: Any, shape: dict[str, int] | None, draft_name: str, device: str) -> None:
    """``draft_prefill = "from-target"`` with an ONNX Runtime GenAI draft: a cpu (the target's cache is
    copied on the host) and a cache of the target's shape (one-line :class:`StrategyError`)."""
    if device != "cpu":
        raise StrategyError(
            f"draft_prefill = 'from-target' with an onnxruntime-genai draft runs on a cpu, not on {device}; "
            "use draft_prefill = 'own' or 'catch-up'"
        )
    cfg = target.model.config
    heads = int(cfg.num_attention_heads)
    mine = {
        "layers": int(cfg.num_hidden_layers),
        "kv_heads": int(getattr(cfg, "num_key_value_heads", None) or heads),
        "head_dim": int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads),
    }
    for key, value in mine.items():
        theirs = (shape or {}).get(key)
        if theirs != value:
            raise StrategyError(
                f"draft_prefill = 'from-target' needs the draft to be the target's model: draft {draft_name!r} "
                f"has {key} = {theirs}, the target {value}; use draft_prefill = 'own'"
            )
