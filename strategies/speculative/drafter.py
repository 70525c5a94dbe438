"""What the draft → verify loop (:mod:`.loop`) asks of a drafter: :class:`Drafter`, the base class every
drafter inherits (its capabilities declared with their defaults), and :class:`Draft`, what it proposes.

Imports neither torch nor numpy at run time (``prompt-lookup`` defines its drafter at import).
"""

from __future__ import annotations

import abc
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from workbench.strategy import Request

    from .._hf import Sampler

__all__ = ["Draft", "Drafter"]


class Draft:
    """Proposed tokens and, for a sampled draft, the distributions they were drawn from.

    ``probs`` is ``None`` for a deterministic draft (greedy draft model, n-gram lookup): then ``q`` is a
    point mass on each token. Otherwise it has shape ``[len(tokens), vocab]``. ``kind`` (optional, any
    hashable): what the drafter knows of this draft's chances, for a free drafter (prompt lookup: the
    length of the n-gram it matched); the adaptive schedule keeps the acceptance of each kind apart.
    """

    __slots__ = ("kind", "probs", "tokens")

    def __init__(self, tokens: list[int], probs: torch.Tensor | None = None, kind: Hashable = None) -> None:
        self.tokens = tokens
        self.probs = probs
        self.kind = kind


class Drafter(abc.ABC):
    """Proposes draft tokens for one sequence at a time: :meth:`start`, :meth:`propose` and
    :meth:`accepted`. What the loop does with it beyond that depends on the capabilities below; a
    drafter overrides the ones that differ from the defaults (as a class or an instance attribute)."""

    #: its ``start`` prefills the prompt in a model of its own: the loop starts it before the first
    #: token is reported (prefill work, in the TTFT), else after it
    prefills_prompt: bool = False
    #: its ``propose`` costs next to nothing and changes no state (an n-gram lookup): the adaptive
    #: schedule asks it on plain steps too and scores that *shadow* draft against the tokens the target
    #: yields, instead of paying for probe drafts
    free_drafts: bool = False
    #: it reads its prompt after the first token, a chunk at a time (``draft_prefill = "catch-up"``):
    #: while :meth:`pending` is above 0, every step is a plain one followed by :meth:`catch_up` of
    #: ``chunk`` tokens (in that step's ``draft_ms``)
    catches_up: bool = False
    #: prompt tokens :meth:`catch_up` reads per step (``catches_up``)
    chunk: int = 1
    #: the adaptive schedule's first guess at its acceptance; ``None``: the schedule's own
    #: (``Adaptive.SELF_DRAFT_PRIOR`` for a draft that is the target's own weights)
    prior_acceptance: float | None = None

    @abc.abstractmethod
    def start(self, request: Request, sampler: Sampler, target_cache: Any) -> None:
        """A new request: reset per-request state (caches); may prefill on
        ``request.input_ids`` or reuse ``target_cache``, the target's cache holding the prompt (read it,
        never change it). Called once the first token (the target's) has been reported: its time is
        decode time, between the first token and the second (before it with ``prefills_prompt``)."""

    @abc.abstractmethod
    def propose(self, tokens: list[int], max_tokens: int) -> Draft:
        """Up to ``max_tokens`` (>= 1) tokens continuing ``tokens`` (prompt + generated so far). The loop's
        :class:`~.schedule.Schedule` chooses ``max_tokens`` per step: propose that many where possible."""

    @abc.abstractmethod
    def accepted(self, tokens: list[int], proposed: int, accepted: int) -> None:
        """After a verify: ``tokens`` is the accepted sequence now (drafter caches are cropped to it)."""

    def pending(self) -> int:
        """Prompt tokens it has still to read (``catches_up``); 0 once it can draft. Default: none."""
        return 0

    def kv_caches(self) -> tuple[Any, ...] | None:
        """The KV caches it holds now (``strategies/_kv.py`` caches: the loop adds them to the target's
        in ``Output.kv_held_*``); ``()``: it holds none; None (the default): it cannot tell (a runtime's
        own draft model), and the trial then reports no KV figure."""
        return None

    def catch_up(self, max_tokens: int) -> int:
        """Read up to ``max_tokens`` more of the prompt (``catches_up``); returns how many it read.
        Default: nothing to read."""
        return 0
