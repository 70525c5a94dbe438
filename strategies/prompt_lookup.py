"""``prompt-lookup``: speculative decoding with model-free drafts copied from the text itself.

The draft is found by n-gram lookup (Saxena 2023, "prompt lookup decoding"; transformers'
``prompt_lookup_num_tokens``; vLLM's ``ngram`` proposer): take the longest suffix of the sequence
(prompt + generated, ``max_ngram_size`` down to ``min_ngram_size`` tokens) that also occurs earlier, and
propose the ``num_tokens`` tokens that followed its most recent earlier occurrence. The target verifies
them in one forward pass (:mod:`.speculative.loop`). Pays off when the output copies from the
input (summaries, RAG answers, code edits).

When the answer does not copy (an abstractive summary, a chat answer in its own words) a match is
still found almost every step (a single common token is a 1-gram match), but its continuation is rarely
what the model says next, and each verify pass of ``num_tokens + 1`` tokens costs more than a plain
step (docs/strategies.md has what it measured). ``schedule = "adaptive"`` (the default) measures both per
request and drafts only as many tokens as pay, none at all when plain decoding is faster, probing
again every few steps; ``num_tokens`` is the cap. ``fixed``: always ``num_tokens`` (what prompt lookup
was before); ``heuristic``: +2 / -1 per step from ``num_tokens`` (between 1 and twice it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from workbench.strategy import Output, Probe, Request, ScoreShape, Session, Strategy, field_help

from .hf_session import HFSession, torch_unavailable_reason
from .speculative.drafter import Draft, Drafter

if TYPE_CHECKING:
    from workbench.strategy import Device, Variant


@dataclass
class PromptLookupConfig:
    max_ngram_size: int = field_help("longest suffix n-gram (tokens) searched for in the text", default=3)
    num_tokens: int = field_help(
        "draft tokens proposed per step, copied after the match (the most, under the adaptive schedule)",
        default=10,
    )
    min_ngram_size: int = field_help("shortest suffix n-gram tried before giving up on a draft", default=1)
    schedule: Literal["adaptive", "fixed", "heuristic"] = field_help(
        "draft tokens per step: adaptive = as many as the measured acceptance and verify cost say pay, "
        "0 when plain decoding is faster (num_tokens at most); fixed = always num_tokens; heuristic = "
        "+2 after a fully accepted draft, -1 otherwise (1 to 2 x num_tokens)",
        default="adaptive",
    )

    def __post_init__(self) -> None:
        if self.min_ngram_size < 1:
            raise ValueError(f"min_ngram_size must be at least 1, got {self.min_ngram_size}")
        if self.max_ngram_size < self.min_ngram_size:
            raise ValueError(
                f"max_ngram_size ({self.max_ngram_size}) must be at least min_ngram_size ({self.min_ngram_size})"
            )
        if self.num_tokens < 1:
            raise ValueError(f"num_tokens must be at least 1, got {self.num_tokens}")


def find_draft(tokens: Any, max_ngram: int, min_ngram: int, num_tokens: int) -> tuple[list[int], int]:
    """The tokens that followed the most recent earlier occurrence of the longest suffix n-gram of
    ``tokens`` (a list, or an int64 array: used as it is), ``max_ngram`` down to ``min_ngram``, and
    that n; ``([], 0)`` when no suffix recurs."""
    import numpy as np

    length = len(tokens)
    if length < 2:
        return [], 0
    seq = np.asarray(tokens, dtype=np.int64)
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        # candidate starts i in [0, length - n - 1]: the window seq[i:i+n] ends before the suffix's
        # last token, so at least one token follows it
        starts = length - n
        match = np.ones(starts, dtype=bool)
        for j in range(n):
            match &= seq[j : j + starts] == seq[length - n + j]
        hits = np.flatnonzero(match)
        if hits.size:
            begin = int(hits[-1]) + n
            return seq[begin : begin + num_tokens].tolist(), n
    return [], 0


class PromptLookupDrafter(Drafter):
    free_drafts = True  # a lookup costs next to nothing and changes nothing: the schedule shadows it

    def __init__(self, config: PromptLookupConfig) -> None:
        self.config = config
        self._seq: Any = None  # the request's sequence as an int64 array, grown as tokens arrive ...
        self._n = 0  # ... of which the first _n are filled

    def kv_caches(self) -> tuple[Any, ...]:
        """An n-gram lookup in the tokens: no KV cache of its own."""
        return ()

    def start(self, request: Request, sampler: Any, target_cache: Any) -> None:
        self._n = 0

    def _array(self, tokens: list[int]) -> Any:
        """``tokens`` as an int64 array, converting only what came since the last call: within a
        request the loop's sequence only grows, and the lookup runs every step (free_drafts). A
        session serves one request at a time (no ``supports_concurrency``)."""
        import numpy as np

        if len(tokens) < self._n:  # not the sequence of this request's last call: start over
            self._n = 0
        if self._seq is None or len(tokens) > len(self._seq):
            grown = np.empty(max(2 * len(tokens), 1024), dtype=np.int64)
            if self._seq is not None:
                grown[: self._n] = self._seq[: self._n]
            self._seq = grown
        self._seq[self._n : len(tokens)] = tokens[self._n :]
        self._n = len(tokens)
        return self._seq[: self._n]

    def propose(self, tokens: list[int], max_tokens: int) -> Draft:
        c = self.config
        seq = self._array(tokens)
        draft, n = find_draft(seq, c.max_ngram_size, c.min_ngram_size, min(c.num_tokens, max_tokens))
        return Draft(draft, kind=n)  # a longer match is far likelier to be continued (Adaptive.acceptance)

    def accepted(self, tokens: list[int], proposed: int, accepted: int) -> None:
        pass


class PromptLookupSession(HFSession):
    def __init__(self, hf: Any, config: PromptLookupConfig) -> None:
        super().__init__(hf)
        self.drafter = PromptLookupDrafter(config)

    def generate(self, request: Request, probe: Probe) -> Output:
        from .speculative.loop import generate_speculative
        from .speculative.schedule import Schedule

        c = self.drafter.config
        return generate_speculative(self.hf, self.drafter, request, probe, Schedule(c.schedule, c.num_tokens))


class PromptLookupStrategy(Strategy[PromptLookupConfig]):
    name = "prompt-lookup"
    lever = "speculative decoding with prompt lookup"
    phase = "decode"
    description = "Speculative decoding with n-gram drafts copied from the prompt (no draft model)"
    lossless = True  # greedy output = its model's own, up to the rounding of its shapes (quality pass)
    Config = PromptLookupConfig

    compile_refusal = (
        "its verify pass of k + 1 tokens crops the KV cache after a rejection, which a static cache "
        "does not (a gpt-fast style static verify is not built)"
    )

    def score_shape(self, variant: Variant[PromptLookupConfig]) -> ScoreShape:
        """Verify passes of ``num_tokens`` + 1 tokens (every draft accepted)."""
        return ScoreShape(chunk=variant.config.num_tokens + 1)

    def available(self) -> str | None:
        return torch_unavailable_reason()

    def load(self, variant: Variant[PromptLookupConfig], device: Device) -> Session:
        from ._hf import load_hf_model

        config = variant.config
        return PromptLookupSession(load_hf_model(variant, device), config)
