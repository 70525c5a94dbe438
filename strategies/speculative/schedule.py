"""How many tokens each step of the draft → verify loop (:mod:`.loop`) drafts: the ``schedule`` key
of ``speculative`` and ``prompt-lookup``.

**How many tokens to draft** (:class:`Schedule`, the strategies' ``schedule`` key), per step:

* ``adaptive`` (the default): per request, the loop estimates the draft's acceptance rate at each
  draft position (the chance that position ``i`` is accepted when all before it were; counts that fade
  by ``DECAY`` per observed draft, so the estimate follows the text from copied spans to free prose)
  and the cost of a step with ``k`` draft tokens relative to a plain one-token step, both from its own
  timer (``draft_ms + verify_ms``; a plain step is a ``k = 0`` step, one token through the target):
  the median of the recent plain steps is the unit ``T1``; a length that steps drafted is priced at the
  median of their last costs (with two more samples on the line below), any other at ``1 + r k``, ``r``
  the median extra time per draft token of the recent draft steps (with two prior ones at
  ``PRIOR_COST``, so that one step slowed by the OS early on cannot stop the drafting). A verify's cost
  is not a straight line in its length (the matrix kernels change with the row count: the figures are
  in docs/strategies.md). It drafts the ``k``
  (0 up to the cap) that maximises the expected tokens per unit time, ``(1 + a1 + a1 a2 + ...) /
  c(k)``; ``k = 0`` (plain decoding) when no length is predicted to beat a plain step by ``MARGIN``.
  The first decode step is a plain one (it measures ``T1``), and a plain step refreshes ``T1`` after
  4, 8, then every 16 draft steps without one. Before any evidence each position's acceptance is
  the prior ``PRIOR_ACCEPTANCE`` (0.6: the first draft is 2 tokens long), or ``SELF_DRAFT_PRIOR``
  (0.9: the first draft is the cap) for a draft that is the target's own weights at another
  precision (``Drafter.prior_acceptance``: docs/strategies.md has their measured 85–100 %): on a
  16-token answer the one or two short drafts the default prior starts with are a fifth of its steps.

  While plain decoding wins, a drafter that costs something (a draft model) probes with a one-token
  draft now and then, as often as keeps the probes' expected loss (``c(1) - 1 - a1`` plain steps
  each) near ``PROBE_BUDGET`` of the time. A *free* drafter
  (``Drafter.free_drafts``: prompt lookup, whose lookup costs next to nothing) never probes. It proposes first, every
  step, and the length is chosen knowing the proposal: its length caps ``k``, and its
  ``Draft.kind`` (the n-gram length prompt lookup matched) picks the acceptance counts kept for that
  kind (leaning on the pooled ones): a long n-gram match is continued far more often than a short one
  (docs/strategies.md has the rates), so prompt lookup drafts on its long matches only. A
  proposal not drafted is a *shadow* draft, scored against the tokens the target then yields,
  position by position as they arrive (up to ``cap`` open at once, one per plain step), into the
  same counts: a greedy draft token would be accepted exactly when it is the target's token; under
  sampling a point-mass draft ``x`` is accepted with probability ``p(x)``, the chance that the target
  samples ``x``, so the match rate estimates the same thing. On text it cannot copy, prompt lookup
  costs a lookup per step and nothing else; on a span it can copy, the shadows see it within a step
  or two. Timing-driven, so under sampling a seed reproduces the output only with the same schedule
  choices (``fixed`` is bit-reproducible).
* ``fixed``: always the cap (``num_draft_tokens`` / ``num_tokens``), where the drafter has that many.
* ``heuristic``: transformers' schedule for assistant models: start at the cap, +2 after a step whose
  whole draft was accepted, -1 otherwise, between 1 and twice the cap.

Each restarts for every request, so trials do not depend on the ones before them. A step never drafts
past the token budget. A ``k = 0`` step reports ``draft_proposed = 0`` and ``draft_ms = None``, unless the
draft did prefill work on it (a copy of the target's cache, a catch-up chunk: :mod:`.loop`).

Imports neither torch nor numpy: the schedules are pure bookkeeping over the step times and counts the
loop hands them (``tests/test_speculative_schedule.py`` runs without torch).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["SCHEDULES", "Adaptive", "Plan", "Schedule", "ScheduleKind"]


SCHEDULES = ("adaptive", "fixed", "heuristic")
ScheduleKind = Literal["adaptive", "fixed", "heuristic"]


@dataclass(frozen=True)
class Schedule:
    """How many draft tokens each step asks the drafter for: ``kind`` (one of :data:`SCHEDULES`) and
    ``max_tokens``, the cap (``num_draft_tokens`` / ``num_tokens``). :meth:`start` gives the per-request
    state."""

    kind: ScheduleKind = "adaptive"
    max_tokens: int = 5

    def start(self, *, free_drafts: bool = False, prior: float | None = None) -> Plan:
        """``free_drafts``: the drafter's proposals cost next to nothing (``Drafter.free_drafts``); the
        adaptive schedule then scores shadow drafts on its plain steps instead of probing. ``prior``:
        the adaptive schedule's first guess at each position's acceptance (``Drafter.prior_acceptance``;
        None: ``Adaptive.PRIOR_ACCEPTANCE``)."""
        if self.kind == "fixed":
            return _Fixed(self.max_tokens)
        if self.kind == "heuristic":
            return _Heuristic(self.max_tokens)
        if self.kind == "adaptive":
            return Adaptive(self.max_tokens, free_drafts=free_drafts, prior=prior)
        raise ValueError(f"unknown draft schedule {self.kind!r}; one of {', '.join(SCHEDULES)}")


class Plan(Protocol):
    """A request's draft lengths, as :meth:`Schedule.start` gives them."""

    def next_k(self, room: int) -> int:
        """Draft tokens to ask for in the next step (0: a plain step); ``room`` (>= 1) is the most the
        budget allows."""
        ...

    def update(
        self, proposed: int, accepted: int, draft_ms: float | None, verify_ms: float, kind: Hashable = None
    ) -> None:
        """After a verify: the drafter proposed ``proposed`` tokens (of ``Draft.kind`` ``kind``),
        ``accepted`` of them were accepted."""
        ...


class _Fixed:
    def __init__(self, k: int) -> None:
        self.k = k

    def next_k(self, room: int) -> int:
        return min(self.k, room)

    def update(
        self, proposed: int, accepted: int, draft_ms: float | None, verify_ms: float, kind: Hashable = None
    ) -> None:
        pass


class _Heuristic:
    """transformers' ``num_assistant_tokens_schedule = "heuristic"``: +2 after a fully accepted draft, -1
    otherwise (between 1 and twice the starting length)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.max_k = 2 * k

    def next_k(self, room: int) -> int:
        return min(self.k, room)

    def update(
        self, proposed: int, accepted: int, draft_ms: float | None, verify_ms: float, kind: Hashable = None
    ) -> None:
        if proposed:
            self.k = min(self.max_k, self.k + 2) if accepted == proposed else max(1, self.k - 1)


class Adaptive:
    """The ``adaptive`` schedule (module docstring): the draft length that maximises expected tokens
    per unit time, from this request's acceptance by draft position and its measured step costs.
    ``free_drafts``: the drafter's proposals cost next to nothing (prompt lookup), so plain steps
    score *shadow* drafts (:meth:`open_shadow` / :meth:`follow`) instead of paying for probes."""

    PRIOR_ACCEPTANCE = 0.6  # a first guess at each position's acceptance, worth PRIOR_WEIGHT steps
    SELF_DRAFT_PRIOR = 0.9  # ... for a draft that is the target's own weights at another precision
    PRIOR_WEIGHT = 0.5
    KIND_WEIGHT = 1.0  # a kind's counts lean on all drafts' estimate, worth this many drafts
    DECAY = 0.85  # per observed draft: the counts remember ~7 drafts
    PRIOR_COST = 0.25  # extra time per draft token (x T1), counted as PRIOR_SAMPLES measured steps
    PRIOR_SAMPLES = 2
    MARGIN = 0.03  # draft only when it is predicted to beat plain decoding by 3 %
    PROBE_BUDGET = 0.02  # share of the time the probes may cost while plain decoding wins
    WINDOW = 12  # recent steps the cost medians are taken over
    BY_LENGTH = 4  # recent steps per draft length that price that length
    REFRESH = 16  # a plain step at the latest after this many steps without one

    def __init__(self, cap: int, *, free_drafts: bool = False, prior: float | None = None) -> None:
        self.cap = cap
        self.free_drafts = free_drafts
        self.prior = self.PRIOR_ACCEPTANCE if prior is None else prior
        self.tried = [0.0] * cap  # faded counts: position i reached (all before it accepted) ...
        self.taken = [0.0] * cap  # ... and accepted, over all drafts
        self.kinds: dict[Hashable, tuple[list[float], list[float]]] = {}  # the same per Draft.kind
        self.plain: deque[float] = deque(maxlen=self.WINDOW)  # ms of recent k = 0 steps
        self.drafts: deque[tuple[int, float]] = deque(maxlen=self.WINDOW)  # (k, ms) of draft steps
        self.by_length: dict[int, deque[float]] = {}  # k -> ms of the last BY_LENGTH steps drafting k
        self.since_plain = 0  # steps since the last plain one
        self.refresh = 4  # ... and after how many the next plain step is due (doubles to REFRESH)
        self.idle = 0  # plain steps in a row chosen because drafting did not pay
        self.shadows: list[list[Any]] = []  # open shadow drafts: [start, tokens, matched so far, kind]
        self._estimates: tuple[float | None, float] | None = None  # (t1, cost_per_token) until update()

    # --- estimates ---------------------------------------------------------------------------------

    def acceptance(self, kind: Hashable = None) -> list[float]:
        """Per draft position, the estimated chance it is accepted given all before it were; a position
        with little evidence leans on the one before it (the first on the prior, ``PRIOR_ACCEPTANCE`` or the
        drafter's own). With a
        ``kind`` seen before, that kind's counts, each position leaning on the estimate over all drafts
        (worth ``KIND_WEIGHT`` drafts): prompt lookup's short n-gram matches are accepted far less often
        than its long ones (docs/strategies.md has the rates)."""
        rates = []
        prior = self.prior
        for tried, taken in zip(self.tried, self.taken, strict=True):
            prior = (taken + self.PRIOR_WEIGHT * prior) / (tried + self.PRIOR_WEIGHT)
            rates.append(prior)
        if kind is None or kind not in self.kinds:
            return rates
        w = self.KIND_WEIGHT
        tried_k, taken_k = self.kinds[kind]
        return [(a + w * r) / (n + w) for r, n, a in zip(rates, tried_k, taken_k, strict=True)]

    def t1(self) -> float | None:
        """A plain step's time (ms): the median of the recent ones."""
        return self._unit()[0]

    def cost_per_token(self) -> float:
        """Extra time per draft token, in units of a plain step: the median over the recent draft steps
        and ``PRIOR_SAMPLES`` of ``PRIOR_COST`` (so one step slowed by the OS early in a request, when
        there are few, cannot stop the drafting on its own)."""
        return self._unit()[1]

    def _unit(self) -> tuple[float | None, float]:
        """``(t1, cost_per_token)``, computed once per step (:meth:`update` clears them): each length
        that :meth:`best` prices needs both."""
        if self._estimates is None:
            t1 = statistics.median(self.plain) if self.plain else None
            if not self.drafts or not t1:
                slope = self.PRIOR_COST
            else:
                measured = [(ms - t1) / (k * t1) for k, ms in self.drafts]
                slope = max(0.0, statistics.median([*measured, *[self.PRIOR_COST] * self.PRIOR_SAMPLES]))
            self._estimates = (t1, slope)
        return self._estimates

    def step_cost(self, k: int) -> float:
        """A step with ``k`` draft tokens, in units of a plain step. Where steps drafted exactly ``k``:
        the median of the last ``BY_LENGTH`` of them, with ``PRIOR_SAMPLES`` more on the per-token line
        (so one slowed step cannot price a length out). A verify's cost is not a straight line in
        ``k`` (on a CPU a 2-token pass can cost more than a 5-token one, the matrix kernels changing
        with the row count), so a length is priced by what it cost. Other lengths: the line,
        ``1 + cost_per_token() * k``."""
        if k == 0:
            return 1.0
        line = 1.0 + self.cost_per_token() * k
        t1 = self.t1()
        same = [ms / t1 for ms in self.by_length.get(k, ())] if t1 else []
        return statistics.median([*same, *[line] * self.PRIOR_SAMPLES]) if same else line

    def best(self, limit: int, kind: Hashable = None) -> tuple[int, float]:
        """The draft length (0..limit) with the most expected tokens per unit time, and that rate (tokens
        per plain-step time; a plain step is 1)."""
        best_k, best_rate = 0, 1.0 + self.MARGIN
        expected = run = 1.0
        for k, a in enumerate(self.acceptance(kind)[:limit], start=1):
            run *= a
            expected += run
            rate = expected / self.step_cost(k)
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k, (best_rate if best_k else 1.0)

    # --- the schedule ------------------------------------------------------------------------------

    def next_k(self, room: int, *, kind: Hashable = None, available: int | None = None) -> int:
        """``kind`` / ``available``: a free drafter's proposal is made first, so its kind and length
        are known when the length is chosen (at most ``available``)."""
        limit = min(self.cap, room, self.cap if available is None else available)
        if limit < 1 or not self.plain or self.since_plain >= self.refresh:
            return 0  # measure (or refresh) the unit: a plain step
        k, _ = self.best(limit, kind)
        if k:
            self.idle = 0
            return k
        if self.free_drafts:
            return 0  # the shadow drafts are the probes, at no cost
        self.idle += 1
        # A one-token probe yields 1 + a1 tokens in the time of step_cost(1) plain steps; spread the
        # probes so that their expected loss is at most PROBE_BUDGET of the time.
        loss = max(self.step_cost(1) - 1.0 - self.acceptance()[0], 0.0)
        if self.idle > math.ceil(loss / self.PROBE_BUDGET):
            self.idle = 0
            return 1
        return 0

    def update(
        self, proposed: int, accepted: int, draft_ms: float | None, verify_ms: float, kind: Hashable = None
    ) -> None:
        self._estimates = None
        if proposed == 0:
            self.plain.append(verify_ms)
            self.since_plain = 0
            self.refresh = min(2 * self.refresh, self.REFRESH) if len(self.plain) > 1 else self.refresh
            return
        self.since_plain += 1
        ms = (draft_ms or 0.0) + verify_ms
        self.drafts.append((proposed, ms))
        self.by_length.setdefault(proposed, deque(maxlen=self.BY_LENGTH)).append(ms)
        self.observe(min(accepted + 1, proposed), accepted, kind)

    def observe(self, reached: int, accepted: int, kind: Hashable = None) -> None:
        """Evidence from one draft: its first ``reached`` positions were decided, the first ``accepted``
        of them accepted (``accepted == reached``: no rejection seen)."""
        self._fade(kind)
        for i in range(min(reached, self.cap)):
            self._count(i, i < accepted, kind)

    def _fade(self, kind: Hashable) -> None:
        """One more draft observed: the counts fade (all drafts', and its kind's)."""
        counts = [(self.tried, self.taken)]
        if kind is not None:
            counts.append(self.kinds.setdefault(kind, ([0.0] * self.cap, [0.0] * self.cap)))
        for tried, taken in counts:
            for i in range(self.cap):
                tried[i] *= self.DECAY
                taken[i] *= self.DECAY

    def _count(self, position: int, accepted: bool, kind: Hashable) -> None:
        self.tried[position] += 1.0
        self.taken[position] += accepted
        if kind is not None:
            tried, taken = self.kinds[kind]
            tried[position] += 1.0
            taken[position] += accepted

    # --- shadow drafts (free drafters) -------------------------------------------------------------

    def open_shadow(self, start: int, tokens: list[int], kind: Hashable = None) -> None:
        """What the drafter would have proposed at sequence length ``start`` (a plain step follows):
        :meth:`follow` scores it against the tokens the target then yields, as a draft would have
        been (a greedy draft token is accepted when it is the target's token; under sampling a
        point-mass draft ``x`` is accepted with probability ``p(x)``, the chance that the target
        samples ``x``, so the match rate is that chance too). One shadow per plain step, so up to
        ``cap`` are open at once, each at a different start: what drafting at each step would have
        got. Each counts as one observed draft (the counts fade when it opens)."""
        if tokens:
            self._fade(kind)
            self.shadows.append([start, tokens[: self.cap], 0, kind])

    def follow(self, seq: list[int]) -> None:
        """Score the open shadow drafts against ``seq`` (the sequence now), position by position as the
        tokens arrive; each closes at its first mismatch or its end."""
        still = []
        for shadow in self.shadows:
            start, tokens, seen, kind = shadow
            while seen < len(tokens) and start + seen < len(seq):
                hit = seq[start + seen] == tokens[seen]
                self._count(seen, hit, kind)
                if not hit:
                    break
                seen += 1
            else:
                if seen < len(tokens):
                    shadow[2] = seen
                    still.append(shadow)
        self.shadows = still

    def drop_shadows(self) -> None:
        """A real draft follows: its own verify decides the next tokens (the shadows' decided positions
        are counted; the rest are not counted twice)."""
        self.shadows = []
