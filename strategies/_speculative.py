"""The draft → verify loop shared by ``speculative`` (a draft model) and ``prompt-lookup`` (n-gram drafts).

One sequence (batch size 1). The target model prefills the prompt and yields the first token exactly as
the baseline does; then every step

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

Imported only inside ``Strategy.load`` (it imports torch at module level).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch
from transformers import DynamicCache

from workbench.core.strategy import Output, Probe, Request

from ._hf import HFModel, Sampler, Stopper, kv_cache

__all__ = ["Draft", "Drafter", "crop_cache", "generate_speculative"]


class Draft:
    """Proposed tokens and, for a sampled draft, the distributions they were drawn from.

    ``probs`` is ``None`` for a deterministic draft (greedy draft model, n-gram lookup): then ``q`` is a
    point mass on each token. Otherwise it has shape ``[len(tokens), vocab]``.
    """

    __slots__ = ("probs", "tokens")

    def __init__(self, tokens: list[int], probs: torch.Tensor | None = None) -> None:
        self.tokens = tokens
        self.probs = probs


class Drafter(Protocol):
    """Proposes draft tokens for one sequence at a time."""

    def start(self, request: Request, sampler: Sampler, target_cache: Any) -> None:
        """A new request: reset per-request state (caches, adaptive draft length); may prefill on
        ``request.input_ids`` (timed as part of the prefill: it happens before the first token) or
        reuse ``target_cache``, the target's cache holding the prompt (read it, never change it)."""
        ...

    def propose(self, tokens: list[int], max_tokens: int) -> Draft:
        """Up to ``max_tokens`` (>= 1) tokens continuing ``tokens`` (prompt + generated so far)."""
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


def generate_speculative(hf: HFModel, drafter: Drafter, request: Request, probe: Probe) -> Output:
    """Generate for ``request`` with draft → verify steps; reports every step through ``probe``."""
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
        drafter.start(request, sampler, cache)
        seq.append(first)
        out.append(first)
        probe.step((first,))
        reason = stopper(out)
        while reason is None:
            # Never draft past the budget: a step yields at most k + 1 tokens, and the verify pass
            # never runs beyond prompt + max_new_tokens positions (the context the runner checked).
            room = request.max_new_tokens - len(out) - 1
            draft_ms = None
            draft = Draft([])
            if room > 0:
                t0 = timer.now()
                draft = drafter.propose(seq, room)
                draft_ms = (timer.now() - t0) * 1e3
                draft.tokens = draft.tokens[:room]
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
