"""The draft → verify loop shared by ``speculative`` (a draft model) and ``prompt-lookup`` (n-gram drafts).

One sequence (batch size 1). The target model prefills the prompt and yields the first token exactly as
the baseline does: the same forward pass (``logits_to_keep = 1``, a ``DynamicCache``), the same draw, and
nothing else before the token is reported, so the TTFT is the baseline's (``tests/test_speculative.py``
compares the torch operations up to the first token, op for op). Only then does the drafter start on
the request (a copy of the target's cache, or nothing for a model-free draft): that time lies between the first and the second token, and a draft model reports
it in the next step's ``draft_ms`` (the break-even view prices it there). The exception is a
draft that reads the prompt itself (``Drafter.prefills_prompt``: a draft model with its own prefill,
a draft in another runtime): that is prefill work, so it runs before the first token is reported and
is in the TTFT. A *catch-up* drafter (``Drafter.catches_up``) reads its prompt after the first token
instead, a chunk after each plain step (each chunk in its step's ``draft_ms``), drafting once it has
read it, or is given up for plain decoding when the rest of its prefill costs more than drafting can
save in the tokens left (:func:`.context.catch_up_pays`). Then every step

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

The draft length of each step is the :class:`~.schedule.Schedule`'s choice (:mod:`.schedule`).

Imported only inside ``Strategy.load`` (it imports torch at module level).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from workbench.strategy import Output, Probe, Request

from .._hf import HFModel, Sampler, Stopper, kv_cache
from .._kv import crop_cache, new_cache, output_holding
from .context import catch_up_pays, prior_speedup
from .drafter import Draft, Drafter
from .schedule import Adaptive, Plan, Schedule

__all__ = ["Draft", "Drafter", "crop_cache", "generate_speculative"]


class _Timer:
    """``perf_counter`` reads for the draft/verify sub-splits, after a device sync on CUDA so the time
    of queued kernels is attributed to the phase that launched them. The variant's device is the one
    synchronised (``cuda:1`` waits for ``cuda:1``, not for the current device)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


def generate_speculative(
    hf: HFModel, drafter: Drafter, request: Request, probe: Probe, schedule: Schedule | None = None
) -> Output:
    """Generate for ``request`` with draft → verify steps; reports every step through ``probe``.
    ``schedule`` chooses each step's draft length; ``None``: as many as the budget allows (the drafter
    proposes up to its own length)."""
    device = hf.torch_device
    sampler = Sampler(request, device)
    stopper = Stopper(request, hf.eos_ids, hf.decode)
    timer = _Timer(device)
    seq = list(request.input_ids)  # prompt + accepted tokens; the target cache holds all but the last
    out: list[int] = []
    trace = getattr(probe, "trace", None)  # the quality pass's replay (Probe.trace); None when timed
    with torch.inference_mode():
        cache, reason, setup_ms = _first_token(
            hf, drafter, request, probe, sampler, stopper, timer, seq, out, trace
        )
        prior = drafter.prior_acceptance
        plan = schedule.start(free_drafts=drafter.free_drafts, prior=prior) if schedule is not None else None
        shadows = plan if isinstance(plan, Adaptive) and plan.free_drafts else None
        # A catch-up drafter reads its prompt in chunks between plain steps, then drafts; it is given
        # up (plain decoding to the end) when the rest of its prefill cannot pay back (.context).
        plain_only = False
        plain_ms: list[float] = []
        while reason is None:
            # Never draft past the budget: a step yields at most k + 1 tokens, and the verify pass
            # never runs beyond prompt + max_new_tokens positions (the context the runner checked).
            room = request.max_new_tokens - len(out) - 1
            reading = drafter.catches_up and not plain_only and drafter.pending() > 0
            if reading or plain_only:  # a plain step (the draft reads a chunk after it, or is given up)
                draft, draft_ms = Draft([]), setup_ms
            else:
                draft, draft_ms = _propose(drafter, seq, room, plan, shadows, timer, setup_ms)
            setup_ms = None
            k = len(draft.tokens)
            t0 = timer.now()
            new, accepted, logits = _verify(hf.model, device, cache, seq, draft, sampler)  # host values
            verify_ms = (timer.now() - t0) * 1e3
            if trace is not None:  # untimed replay: the verify pass, drafts rejected or not
                trace.forward(len(seq) - 1, [seq[-1], *draft.tokens])
            emitted, reason = _emit(new, out, stopper)
            if trace is not None:
                trace.emitted(logits[: len(emitted)], emitted)
            seq.extend(emitted)
            crop_cache(cache, len(seq) - 1)
            if k == 0:
                plain_ms.append(verify_ms)
            if reading and reason is None:
                cap = schedule.max_tokens if schedule is not None else 1
                read_ms, plain_only = _read_chunk(
                    drafter, timer, plain_ms, request.max_new_tokens - len(out), cap
                )
                draft_ms = (draft_ms or 0.0) + read_ms
            if not plain_only:
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
    drafts = drafter.kv_caches()  # None: a runtime's draft model cannot tell what it holds
    return output_holding(hf, out, reason, [cache, *drafts] if drafts is not None else None)


def _first_token(
    hf: HFModel,
    drafter: Drafter,
    request: Request,
    probe: Probe,
    sampler: Sampler,
    stopper: Stopper,
    timer: _Timer,
    seq: list[int],
    out: list[int],
    trace: Any = None,
) -> tuple[Any, str | None, float | None]:
    """The target's prefill and first token, exactly as the baseline's, reported; the drafter started
    before the report (``prefills_prompt``) or after it. Appends the token to ``seq`` and ``out``;
    returns the target's cache, the finish reason (``None``: go on) and the drafter's start time
    after the first token (ms; ``None`` for none, or a free drafter's), charged to the next step."""
    model = hf.model
    cache = new_cache(model, rollback=True)  # sliding-window layers too can be cut back (.._kv)
    input_ids = torch.tensor([seq], dtype=torch.long, device=hf.torch_device)
    logits = model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=1).logits
    first = int(sampler(logits[:, -1, :]).item())  # same draw as the baseline's first token
    if trace is not None:  # the quality pass's replay (Probe.trace), untimed
        trace.forward(0, seq, keep=1)
        trace.emitted(logits[0, -1:], (first,))
    seq.append(first)
    out.append(first)
    # A draft that reads the prompt itself does prefill work: it is in the TTFT (as in serving
    # engines, which prefill draft and target before the first token). Any other drafter starts
    # after the token, so up to it there is nothing but the baseline's own work.
    if drafter.prefills_prompt:
        drafter.start(request, sampler, cache)
    probe.step((first,))
    reason = stopper(out)
    setup_ms = None  # a draft model's start after the first token (a cache copy): in the next
    if reason is None and not drafter.prefills_prompt:  # step's draft_ms, where the break-even view prices it
        t0 = timer.now()
        drafter.start(request, sampler, cache)
        setup_ms = None if drafter.free_drafts else (timer.now() - t0) * 1e3
    return cache, reason, setup_ms


def _propose(
    drafter: Drafter,
    seq: list[int],
    room: int,
    plan: Plan | None,
    shadows: Adaptive | None,
    timer: _Timer,
    draft_ms: float | None,
) -> tuple[Draft, float | None]:
    """This step's draft (empty: a plain step) and its ``draft_ms``: ``draft_ms`` is what is already
    charged to the step (the drafter's start), the proposal's time is added to it. ``room``: the most
    draft tokens the budget allows; ``plan``: the schedule's plan for this request (``None``: draft
    ``room`` tokens); ``shadows``: the plan, when it scores a free drafter's shadow drafts."""
    if shadows is not None and room >= 1:
        # A free drafter proposes first: the length is chosen knowing the proposal (its kind, its
        # length); not drafted, it is a shadow draft, scored on the tokens that follow.
        shadows.follow(seq)
        t0 = timer.now()
        proposal = drafter.propose(seq, shadows.cap)
        lookup_ms = (timer.now() - t0) * 1e3
        want = shadows.next_k(room, kind=proposal.kind, available=len(proposal.tokens))
        if want <= 0:
            shadows.open_shadow(len(seq), proposal.tokens, proposal.kind)
            return Draft([]), draft_ms
        shadows.drop_shadows()
        proposal.tokens = proposal.tokens[:want]
        return proposal, lookup_ms
    want = room if plan is None or room < 1 else plan.next_k(room)
    if want <= 0:
        return Draft([]), draft_ms
    t0 = timer.now()
    draft = drafter.propose(seq, want)
    draft_ms = (timer.now() - t0) * 1e3 + (draft_ms or 0.0)
    draft.tokens = draft.tokens[:want]
    return draft, draft_ms


def _verify(
    model: Any, device: torch.device, cache: Any, seq: list[int], draft: Draft, sampler: Sampler
) -> tuple[list[int], int, torch.Tensor]:
    """The target's one pass over ``[last token] + draft`` (appending to ``cache``), and what it
    yields: the tokens (accepted draft prefix + one of the target's), how many were accepted, and
    the pass's logits (``[k + 1, vocab]``: row ``i`` chose token ``i``)."""
    verify_in = torch.tensor([[seq[-1], *draft.tokens]], dtype=torch.long, device=device)
    logits = model(input_ids=verify_in, **kv_cache(cache), use_cache=True).logits[0]  # [k + 1, vocab]
    return (*_accept(logits, draft, sampler), logits)


def _emit(new: list[int], out: list[int], stopper: Stopper) -> tuple[list[int], str | None]:
    """The tokens of ``new`` that are output (appended to ``out``): all of them, or up to the first
    EOS / stop string / end of the budget inside the accepted run; and the finish reason, if any."""
    emitted: list[int] = []
    reason = None
    for token in new:
        emitted.append(token)
        out.append(token)
        reason = stopper(out)
        if reason is not None:
            break
    return emitted, reason


def _read_chunk(
    drafter: Drafter, timer: _Timer, plain_ms: list[float], tokens_left: int, cap: int
) -> tuple[float, bool]:
    """A catch-up drafter reads its next chunk of the prompt after a plain step. Returns the time it
    took (ms, in the step's ``draft_ms``) and whether to give the draft up: its prefill's rest costs
    more than drafting could save in the ``tokens_left`` (:func:`.context.catch_up_pays`, at the
    speed-up the schedule's priors give at draft length ``cap``)."""
    t0 = timer.now()
    read = drafter.catch_up(drafter.chunk)
    read_ms = (timer.now() - t0) * 1e3
    left = drafter.pending()
    give_up = bool(left) and not catch_up_pays(
        left,
        read_ms / max(read, 1),
        statistics.median(plain_ms),
        tokens_left,
        drafter.chunk,
        prior_speedup(cap, drafter.prior_acceptance),
    )
    return read_ms, give_up


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
