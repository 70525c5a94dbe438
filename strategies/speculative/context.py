"""What part of the prompt a draft reads, and whether reading it pays: the ``draft_context`` /
``draft_sinks`` keys (a bounded draft context) and the ``catch-up`` draft prefill's decision.

**A bounded draft context** (:class:`PromptView`): with ``draft_context = N`` a draft that prefills the
prompt itself reads only its first ``draft_sinks`` tokens (the *attention sinks*: the positions that
soak up attention mass whatever the text, so attention stays well-behaved without the middle) and the
most recent ``N - draft_sinks`` ones, then everything generated after them (StreamingLLM, Xiao et
al. 2023; TriForce and MagicDec draft from such a cache for long contexts). The draft's positions are
those of its own sequence (the sinks, then the window right after them), as StreamingLLM assigns
them in its cache. The prefill then costs the same whatever the prompt's length; the draft sees
less of a long document, which costs acceptance where the output copies from the middle of it. The
target verifies every token with the whole prompt, so the output is the same (greedy) or distributed
the same (sampling).

**Whether a catch-up prefill pays** (:func:`catch_up_pays`): with ``draft_prefill = "catch-up"`` the
draft reads its prompt in chunks between the target's first (plain) steps, so the first token comes as
early as the baseline's. After each chunk the loop knows what the draft's prefill costs per token
and what a target step costs, and gives the draft up (plain decoding to the end of the request) when
the rest of its prefill costs more than drafting can save in the tokens left once it is ready.

Imports neither torch nor numpy (``tests/test_speculative_schedule.py`` runs without torch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .drafter import Drafter
from .schedule import Adaptive

__all__ = ["CatchUp", "PromptView", "catch_up_pays", "prior_speedup"]


class PromptView:
    """The tokens a draft reads for a sequence that starts with ``prompt``: all of them, or with
    ``context > 0`` and a prompt longer than that, the first ``sinks`` and the last ``context -
    sinks`` of the prompt, then the rest of the sequence (the generated tokens)."""

    def __init__(self, prompt: Sequence[int], context: int = 0, sinks: int = 0) -> None:
        n = len(prompt)
        self.start, self.end = (sinks, n - (context - sinks)) if 0 < context < n else (0, 0)
        self.prompt = self(list(prompt))

    @property
    def skipped(self) -> int:
        """Prompt tokens the draft does not read."""
        return self.end - self.start

    def __call__(self, tokens: list[int]) -> list[int]:
        """The draft's sequence for ``tokens`` (the prompt + generated tokens)."""
        if not self.skipped:
            return tokens
        return tokens[: self.start] + tokens[self.end :]


class CatchUp(Drafter):
    """A drafter with a catch-up reading (:meth:`Drafter.pending`, :meth:`Drafter.catch_up`): one with a
    ``view`` (:class:`PromptView`), the tokens it has ``cached`` and a ``_read(tokens)`` that feeds it
    more."""

    view: PromptView
    cached: list[int]
    #: feeds ``tokens`` to the draft (each drafter defines it)
    _read: Callable[[list[int]], object]

    def pending(self) -> int:
        """Prompt tokens the draft has still to read (catch-up); 0 once it can draft."""
        return max(len(self.view.prompt) - len(self.cached), 0)

    def catch_up(self, max_tokens: int) -> int:
        """Read up to ``max_tokens`` more of the prompt (catch-up); returns how many it read."""
        chunk = self.view.prompt[len(self.cached) : len(self.cached) + max_tokens]
        if chunk:
            self._read(chunk)
        return len(chunk)


def prior_speedup(cap: int, prior: float | None = None) -> float:
    """The speed-up drafting is expected to give before anything is measured: the adaptive schedule's
    priors (acceptance ``prior`` per position, default ``Adaptive.PRIOR_ACCEPTANCE``;
    ``Adaptive.PRIOR_COST`` of a target step per draft token) at its best draft length up to ``cap``:
    1.31x for the defaults, 2.09x at a self-draft's 0.9 with a cap of 6."""
    return Adaptive(cap, prior=prior).best(cap)[1]


def catch_up_pays(
    prompt_left: int,
    ms_per_prompt_token: float,
    t1_ms: float,
    tokens_left: int,
    chunk: int,
    speedup: float,
) -> bool:
    """Whether the draft should go on reading its prompt: the ``prompt_left`` tokens it still has to
    read, at ``ms_per_prompt_token`` (measured on its last chunk), cost less than drafting saves on
    the tokens left once it has read them. ``tokens_left``: the request's budget left; each chunk
    of ``chunk`` tokens rides on a plain target step of ``t1_ms``, which yields one token;
    ``speedup``: what drafting is expected to give (:func:`prior_speedup`)."""
    if prompt_left <= 0:
        return True
    chunks = -(-prompt_left // chunk)
    after = tokens_left - chunks
    saved = after * t1_ms * (1.0 - 1.0 / speedup) if speedup > 1.0 else 0.0
    return saved > prompt_left * ms_per_prompt_token
