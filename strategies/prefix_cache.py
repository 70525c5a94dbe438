"""``prefix-cache``: KV-cache reuse. A prompt that starts like an earlier one prefills only its new suffix.

Chat resends the whole history every turn; RAG and summarising resend the same system prompt or
document. A serving engine with a prefix cache (vLLM's automatic prefix caching, SGLang's radix cache)
keeps the keys/values of prompts it has seen and, for a new prompt, reuses those of the longest prefix
it shares with one of them: only the rest is prefilled, so the TTFT follows the *new* tokens, not the
whole prompt. This strategy does the same in-process, then decodes exactly like the baseline.

- After a request, its cache is cut back to the prompt and kept (the generated tokens are not part of
  the next prompt in the built-in workloads: their assistant turns are fixed text).
- A later request looks for the entry sharing the longest token prefix with its prompt, copies that
  entry's keys/values up to the shared length (copied: decoding appends to the cache, and a shared
  entry must stay intact for the next request) and prefills only the remainder. At least the last
  prompt token is always prefilled: its logits give the first new token.
- ``reset = "on-repeat"`` (default) clears the cache when a prompt comes again, i.e. when the next
  repetition starts, so every repetition measures the same growing-history situation; ``"never"`` keeps
  everything, like a long-running server, and repeated prompts are then served (almost) entirely from
  the cache.
- Entries are evicted least-recently-used beyond ``max_cached_tokens``.
- Sliding-window layers (Gemma 2/3, Mistral with a window) are stored whole, like full-attention ones
  (they record their past instead of dropping what falls out of the window), so any shared prefix can
  be reused and the reused cache holds what the window needs (``strategies/_kv.py``). Models whose
  layers keep a running state instead of keys/values (linear attention, state-space layers) are
  refused at load, in one line.

The copy and the suffix prefill are inside the timed TTFT; ``cached_tokens`` is recorded per trial,
and so is the KV the session holds when the answer is done (``kv_held_tokens`` / ``kv_held_bytes``):
this request's cache plus every kept prompt's — what reuse costs in memory.
Greedy output is token-identical to the baseline (tested): only the float rounding of the prefill
differs, as in every prefix-caching server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from workbench.strategy import Output, Probe, Request, ScoreShape, Session, Strategy, field_help

from .hf_session import HFSession, decode_loop, torch_unavailable_reason

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant


@dataclass
class PrefixCacheConfig:
    max_cached_tokens: int = field_help(
        "prompt tokens kept in the cache over all entries (least recently used evicted first)", default=16384
    )
    min_prefix_tokens: int = field_help(
        "reuse a cached prefix only when at least this many tokens are shared", default=16
    )
    reset: Literal["on-repeat", "never"] = field_help(
        "on-repeat = clear the cache when a prompt comes again (each repetition measures the same growing "
        "history); never = keep everything, like a long-running server",
        default="on-repeat",
    )

    def __post_init__(self) -> None:
        if self.max_cached_tokens < 1:
            raise ValueError(f"max_cached_tokens must be at least 1, got {self.max_cached_tokens}")
        if self.min_prefix_tokens < 1:
            raise ValueError(f"min_prefix_tokens must be at least 1, got {self.min_prefix_tokens}")


class _Entry:
    __slots__ = ("built", "cache", "prompt_id", "tokens")

    def __init__(self, prompt_id: str, tokens: tuple[int, ...], cache: Any, built: tuple[int, ...]) -> None:
        self.prompt_id = prompt_id
        self.tokens = tokens
        self.cache = cache
        #: where the passes that computed its keys/values began (a reused prefix, then a suffix, turn
        #: after turn): the equivalence check computes a reused prefix the same way (Trace.forward)
        self.built = built


def shared_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCacheSession(HFSession):
    def __init__(self, hf: Any, config: PrefixCacheConfig) -> None:
        super().__init__(hf)
        self.config = config
        self.entries: list[_Entry] = []  # most recently used last
        self.seen: set[str] = set()

    def generate(self, request: Request, probe: Probe) -> Output:
        import torch

        from ._hf import kv_cache
        from ._kv import output_holding

        hf = self.hf
        prompt = tuple(request.input_ids)
        if self.config.reset == "on-repeat":
            if request.prompt.id in self.seen:
                self.entries.clear()
                self.seen.clear()
            self.seen.add(request.prompt.id)
        with torch.inference_mode():
            entry, reused = self._lookup(prompt)
            cache = self._copy(entry.cache, reused) if entry is not None else self._empty()
            suffix = torch.tensor([prompt[reused:]], dtype=torch.long, device=hf.torch_device)
            logits = hf.model(input_ids=suffix, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
            # the passes that computed this prompt's keys/values: the reused prefix's, then the suffix's
            built = (*(b for b in entry.built if b < reused), reused) if entry is not None else (0,)
            trace = getattr(probe, "trace", None)  # the quality pass's replay (Probe.trace)
            if trace is not None:  # the suffix's pass after the reused prefix (and how it was built)
                trace.forward(reused, prompt[reused:], cached=reused, keep=1, built=built[:-1])
            tokens, reason = decode_loop(hf, request, probe, cache, logits)
            # what the session holds when the answer is done: this request's cache and every earlier
            # prompt's kept copy (the one this prefix was copied from included)
            caches = [cache, *(e.cache for e in self.entries)]
            output = output_holding(hf, tokens, reason, caches, cached_tokens=reused)
            self._keep(request.prompt.id, prompt, cache, built)
        return output

    def _lookup(self, prompt: tuple[int, ...]) -> tuple[_Entry | None, int]:
        from ._kv import reusable_length

        best, best_len = None, 0
        for entry in self.entries:
            n = min(shared_prefix(entry.tokens, prompt), len(prompt) - 1)  # prefill >= 1 token
            n = reusable_length(entry.cache, n)  # what every layer still holds (._kv)
            if n > best_len:
                best, best_len = entry, n
        if best is None or best_len < self.config.min_prefix_tokens:
            return None, 0
        self.entries.remove(best)
        self.entries.append(best)  # most recently used
        return best, best_len

    def _empty(self) -> Any:
        from ._kv import new_cache

        # Sliding-window layers record their past: never cropped while decoding, they keep every
        # position, so any prefix of the stored entry can be reused (._kv).
        return new_cache(self.hf.model, rollback=True)

    def _copy(self, source: Any, length: int) -> Any:
        """A private cache holding the first ``length`` positions of ``source`` (copied tensors)."""
        from ._kv import copy_prefix

        return copy_prefix(self.hf.model, source, length)

    def _keep(self, prompt_id: str, prompt: tuple[int, ...], cache: Any, built: tuple[int, ...]) -> None:
        from ._kv import cut_to

        cut_to(cache, len(prompt))  # the prompt's keys/values; this cache is ours, no copy needed
        self.entries.append(_Entry(prompt_id, prompt, cache, built))
        total = sum(len(e.tokens) for e in self.entries)
        while total > self.config.max_cached_tokens and self.entries:
            total -= len(self.entries.pop(0).tokens)

    def close(self) -> None:
        self.entries.clear()
        super().close()


class PrefixCacheStrategy(Strategy[PrefixCacheConfig]):
    name = "prefix-cache"
    lever = "KV-cache reuse"
    phase = "prefill"
    description = "KV-cache reuse: a prompt sharing a prefix with an earlier one prefills only the rest"
    lossless = True  # greedy output = its model's own, up to the rounding of its shapes (quality pass)
    Config = PrefixCacheConfig
    compile_refusal = "it keeps and copies a dynamic KV cache per prompt prefix; a static cache is one buffer"

    def score_shape(self, variant: Variant[PrefixCacheConfig]) -> ScoreShape:
        """The prompt's suffix prefilled after its cached prefix, then plain decoding."""
        return ScoreShape(cached_prefix=True)

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant[PrefixCacheConfig], device: Device) -> Session:
        from workbench.strategy import StrategyError

        from ._hf import load_hf_model
        from ._kv import unsupported_layers

        hf = load_hf_model(variant, device)
        kinds = unsupported_layers(hf.model)
        if kinds:
            raise StrategyError(
                f"prefix-cache cannot reuse a prefix on {variant.model!r}: its {', '.join(kinds)} layers keep a "
                "running state, not per-position keys/values, and a state cannot be cut back to a shared prefix"
            )
        return PrefixCacheSession(hf, variant.config)
