"""The draft → verify loop shared by ``speculative`` (a draft model) and ``prompt-lookup`` (n-gram drafts).

One sequence (batch size 1). The target model prefills the prompt and yields the first token exactly as
the baseline does: the same forward pass (``logits_to_keep = 1``, a ``DynamicCache``), the same draw, and
nothing else before the token is reported, so the TTFT is the baseline's (``tests/test_speculative.py``
compares the torch operations up to the first token, op for op). Only then does the drafter start on
the request (a copy of the target's cache, or nothing for a model-free draft): that time lies between
the first and the second token, outside every step's ``draft_ms`` / ``verify_ms``. The exception is a
draft that reads the prompt itself (``Drafter.prefills_prompt``: a draft model with its own prefill,
a draft in another runtime): that is prefill work, so it runs before the first token is reported and
is in the TTFT. Then every step

1. the *drafter* proposes up to ``k`` tokens continuing the sequence (``draft_ms``),
2. the target scores ``[last token] + draft`` in **one** forward pass, giving ``k + 1`` next-token
   distributions (``verify_ms``, including the copy of the result to the host),
3. a prefix of the draft is accepted and one more token comes from the target (the correction after a
   rejection, or the *bonus* token when everything was accepted), so a step yields ``accepted + 1`` tokens,
4. the target's cache (and the drafter's) is cropped back to the accepted sequence.

Greedy (temperature 0): a draft token is accepted while it equals the target's argmax, so the output is
token-identical to plain greedy decoding. With temperature > 0 the standard speculative-sampling rule
(Leviathan et al. 2023; Chen et al. 2023) keeps the output distributed exactly as the target's: accept
draft token ``x`` with probability ``min(1, p(x) / q(x))``, on rejection sample from
``normalize(max(0, p - q))``; a model-free (deterministic) draft has ``q`` = a point mass on ``x``. ``p``
is the target's distribution after temperature / top-k / top-p (:meth:`Sampler.probs`), so it is the
distribution the baseline samples from.

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
  is not a straight line in its length: on this project's 2-core CPU a 2-token verify costs ~1.3
  plain steps, a 5-token one ~1.1 (the matrix kernels change with the row count). It drafts the ``k``
  (0 up to the cap) that maximises the expected tokens per unit time, ``(1 + a1 + a1 a2 + ...) /
  c(k)``; ``k = 0`` (plain decoding) when no length is predicted to beat a plain step by ``MARGIN``.
  The first decode step is a plain one (it measures ``T1``), and a plain step refreshes ``T1`` after
  4, 8, then every 16 draft steps without one.

  While plain decoding wins, a drafter that costs something (a draft model) probes with a one-token
  draft now and then, as often as keeps the probes' expected loss (``c(1) - 1 - a1`` plain steps
  each) near ``PROBE_BUDGET`` of the time (every ~15-30 steps). A *free* drafter
  (``Drafter.free_drafts``: prompt lookup, ~0.1 ms a lookup) never probes. It proposes first, every
  step, and the length is chosen knowing the proposal: its length caps ``k``, and its
  ``Draft.kind`` (the n-gram length prompt lookup matched) picks the acceptance counts kept for that
  kind (leaning on the pooled ones): on the built-in abstractive prompts a 1-gram match is continued
  ~12 % of the time, a 3-gram match ~80 %, so prompt lookup drafts on its long matches only. A
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
past the token budget. A ``k = 0`` step reports ``draft_proposed = 0`` and ``draft_ms = None``.

Imported only inside ``Strategy.load`` (it imports torch at module level).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from transformers import DynamicCache

from workbench.core.strategy import Output, Probe, Request

from ._hf import HFModel, Sampler, Stopper, kv_cache

__all__ = ["SCHEDULES", "Draft", "Drafter", "Schedule", "crop_cache", "generate_speculative"]


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


class Drafter(Protocol):
    """Proposes draft tokens for one sequence at a time. Two optional class attributes (default False):
    a drafter whose ``start`` prefills the prompt in a model of its own sets ``prefills_prompt = True``:
    the loop then starts it before the first token is reported (prefill work, in the TTFT), else after
    it. A drafter whose ``propose`` costs next to nothing and changes no state (an n-gram lookup) sets
    ``free_drafts = True``: the adaptive schedule then asks it on plain steps too and scores that
    *shadow* draft against the tokens the target yields, instead of paying for probe drafts."""

    def start(self, request: Request, sampler: Sampler, target_cache: Any) -> None:
        """A new request: reset per-request state (caches); may prefill on
        ``request.input_ids`` or reuse ``target_cache``, the target's cache holding the prompt (read it,
        never change it). Called once the first token (the target's) has been reported: its time is
        decode time, between the first token and the second."""
        ...

    def propose(self, tokens: list[int], max_tokens: int) -> Draft:
        """Up to ``max_tokens`` (>= 1) tokens continuing ``tokens`` (prompt + generated so far). The loop's
        :class:`Schedule` chooses ``max_tokens`` per step: propose that many where possible."""
        ...

    def accepted(self, tokens: list[int], proposed: int, accepted: int) -> None:
        """After a verify: ``tokens`` is the accepted sequence now (drafter caches are cropped to it)."""
        ...


def crop_cache(cache: Any, length: int) -> None:
    """Cut a ``DynamicCache`` back to its first ``length`` positions (transformers 5 ``crop`` takes the
    negative number of positions to remove)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


class _Timer:
    """``perf_counter`` reads for the draft/verify sub-splits, after a device sync on CUDA so the time
    of queued kernels is attributed to the phase that launched them."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()


SCHEDULES = ("adaptive", "fixed", "heuristic")
ScheduleKind = Literal["adaptive", "fixed", "heuristic"]


@dataclass(frozen=True)
class Schedule:
    """How many draft tokens each step asks the drafter for: ``kind`` (one of :data:`SCHEDULES`) and
    ``max_tokens``, the cap (``num_draft_tokens`` / ``num_tokens``). :meth:`start` gives the per-request
    state."""

    kind: ScheduleKind = "adaptive"
    max_tokens: int = 5

    def start(self, *, free_drafts: bool = False) -> _Plan:
        """``free_drafts``: the drafter's proposals cost next to nothing (``Drafter.free_drafts``); the
        adaptive schedule then scores shadow drafts on its plain steps instead of probing."""
        if self.kind == "fixed":
            return _Fixed(self.max_tokens)
        if self.kind == "heuristic":
            return _Heuristic(self.max_tokens)
        if self.kind == "adaptive":
            return Adaptive(self.max_tokens, free_drafts=free_drafts)
        raise ValueError(f"unknown draft schedule {self.kind!r}; one of {', '.join(SCHEDULES)}")


class _Plan(Protocol):
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

    def __init__(self, cap: int, *, free_drafts: bool = False) -> None:
        self.cap = cap
        self.free_drafts = free_drafts
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
        with little evidence leans on the one before it (the first on ``PRIOR_ACCEPTANCE``). With a
        ``kind`` seen before, that kind's counts, each position leaning on the estimate over all drafts
        (worth ``KIND_WEIGHT`` drafts): on abstractive text prompt lookup's 1-gram matches are accepted
        ~12 % of the time, its 3-gram matches ~80 % (the built-in ``abstractive`` prompts)."""
        rates = []
        prior = self.PRIOR_ACCEPTANCE
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


def generate_speculative(
    hf: HFModel, drafter: Drafter, request: Request, probe: Probe, schedule: Schedule | None = None
) -> Output:
    """Generate for ``request`` with draft → verify steps; reports every step through ``probe``.
    ``schedule`` chooses each step's draft length; ``None``: as many as the budget allows (the drafter
    proposes up to its own length)."""
    model = hf.model
    device = hf.torch_device
    sampler = Sampler(request, device)
    stopper = Stopper(request, hf.eos_ids, hf.decode)
    timer = _Timer(device)
    seq = list(request.input_ids)  # prompt + accepted tokens; the target cache holds all but the last
    out: list[int] = []
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        input_ids = torch.tensor([seq], dtype=torch.long, device=device)
        logits = model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
        first = int(sampler(logits[:, -1, :]).item())  # same draw as the baseline's first token
        seq.append(first)
        out.append(first)
        # A draft that reads the prompt itself does prefill work: it is in the TTFT (as in serving
        # engines, which prefill draft and target before the first token). Any other drafter starts
        # after the token, so up to it there is nothing but the baseline's own work.
        prefills = bool(getattr(drafter, "prefills_prompt", False))
        if prefills:
            drafter.start(request, sampler, cache)
        probe.step((first,))
        reason = stopper(out)
        if reason is None and not prefills:
            drafter.start(request, sampler, cache)
        free = bool(getattr(drafter, "free_drafts", False))
        plan = schedule.start(free_drafts=free) if schedule is not None else None
        shadows = plan if isinstance(plan, Adaptive) and plan.free_drafts else None
        while reason is None:
            # Never draft past the budget: a step yields at most k + 1 tokens, and the verify pass
            # never runs beyond prompt + max_new_tokens positions (the context the runner checked).
            room = request.max_new_tokens - len(out) - 1
            draft_ms = None
            draft = Draft([])
            if shadows is not None and room >= 1:
                # A free drafter proposes first: the length is chosen knowing the proposal (its kind,
                # its length); not drafted, it is a shadow draft, scored on the tokens that follow.
                shadows.follow(seq)
                t0 = timer.now()
                proposal = drafter.propose(seq, shadows.cap)
                lookup_ms = (timer.now() - t0) * 1e3
                want = shadows.next_k(room, kind=proposal.kind, available=len(proposal.tokens))
                if want > 0:
                    shadows.drop_shadows()
                    draft, draft_ms = proposal, lookup_ms
                    draft.tokens = draft.tokens[:want]
                else:
                    shadows.open_shadow(len(seq), proposal.tokens, proposal.kind)
            else:
                want = room if plan is None or room < 1 else plan.next_k(room)
                if want > 0:
                    t0 = timer.now()
                    draft = drafter.propose(seq, want)
                    draft_ms = (timer.now() - t0) * 1e3
                    draft.tokens = draft.tokens[:want]
            k = len(draft.tokens)
            t0 = timer.now()
            verify_in = torch.tensor([[seq[-1], *draft.tokens]], dtype=torch.long, device=device)
            logits = model(input_ids=verify_in, **kv_cache(cache), use_cache=True).logits[0]  # [k + 1, vocab]
            new, accepted = _accept(logits, draft, sampler)  # host values: the device is done
            verify_ms = (timer.now() - t0) * 1e3
            # Stop at the first EOS / stop string / budget inside the accepted run.
            emitted: list[int] = []
            for token in new:
                emitted.append(token)
                out.append(token)
                reason = stopper(out)
                if reason is not None:
                    break
            seq.extend(emitted)
            crop_cache(cache, len(seq) - 1)
            drafter.accepted(seq, k, accepted)
            if plan is not None:
                plan.update(k, accepted, draft_ms, verify_ms, draft.kind)
            probe.step(
                emitted,
                draft_proposed=k,
                draft_accepted=min(accepted, len(emitted)),
                draft_ms=draft_ms,
                verify_ms=verify_ms,
            )
    return Output(token_ids=out, text=hf.decode(out), finish_reason=reason)  # type: ignore[arg-type]


def _accept(logits: torch.Tensor, draft: Draft, sampler: Sampler) -> tuple[list[int], int]:
    """The tokens a verify step yields (accepted draft prefix + one target token) and how many draft
    tokens were accepted. ``logits``: the target's ``[k + 1, vocab]`` scores after ``[last] + draft``."""
    tokens = draft.tokens
    k = len(tokens)
    if sampler.greedy:
        target = logits.argmax(dim=-1).tolist()
        accepted = 0
        while accepted < k and tokens[accepted] == target[accepted]:
            accepted += 1
        return [*tokens[:accepted], target[accepted]], accepted

    p = sampler.probs(logits)  # [k + 1, vocab]
    q = draft.probs
    if q is not None:
        q = q.to(device=p.device, dtype=p.dtype)
        if q.shape[-1] < p.shape[-1]:  # a draft with fewer embedding rows (same tokenizer)
            q = torch.nn.functional.pad(q, (0, p.shape[-1] - q.shape[-1]))
    gen = sampler.generator
    idx = torch.tensor(tokens, dtype=torch.long, device=p.device)
    p_x = p[:k].gather(-1, idx[:, None]).squeeze(-1) if k else p.new_zeros(0)
    ratio = p_x if q is None else p_x / q[:k].gather(-1, idx[:, None]).squeeze(-1).clamp_min(1e-20)
    u = torch.rand(k, generator=gen, device=p.device, dtype=p.dtype)
    rejected = (u >= ratio).tolist()  # accept with probability min(1, ratio)
    accepted = rejected.index(True) if True in rejected else k
    if accepted == k:
        bonus = torch.multinomial(p[k], 1, generator=gen)
        return [*tokens, int(bonus.item())], k
    if q is None:  # point mass on x: max(0, p - q) is p without x
        residual = p[accepted].clone()
        residual[tokens[accepted]] = 0.0
    else:
        residual = (p[accepted] - q[accepted]).clamp_min(0.0)
    if float(residual.sum()) <= 0.0:  # p == q numerically: any draw from p is exact
        residual = p[accepted]
    correction = torch.multinomial(residual / residual.sum(), 1, generator=gen)
    return [*tokens[:accepted], int(correction.item())], accepted
