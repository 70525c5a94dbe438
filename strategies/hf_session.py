"""What the strategies that run a transformers model in-process share (``baseline``, ``quantized``,
``context-trim``, ``prefix-cache``, ``prompt-lookup``, ``hf-assisted``, ``speculative``): the
``available()`` check, the session over a loaded model and the token-by-token decode after a prefill.

Imports neither torch nor transformers: the strategy modules import this at import time (the registry
lists them where torch is not installed); :mod:`._hf` (which imports torch) loads inside the methods.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from workbench.core.shapes import kv_bytes_per_token
from workbench.strategy import Probe, Prompt, Request, Session, TokenScores

__all__ = [
    "HFSession",
    "decode_loop",
    "score_tokens",
    "score_tokens_passes",
    "score_tokens_shaped",
    "torch_unavailable_reason",
]


def torch_unavailable_reason() -> str | None:
    """Shared ``available()`` check for strategies that run a transformers model in-process."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"needs {' and '.join(missing)} (pip install 'llm-workbench[engine]'; "
            "for NVIDIA GPUs install the CUDA build of torch first)"
        )
    return None


class HFSession(Session):
    """A loaded transformers model; subclasses override :meth:`generate`."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf
        self.context_length = hf.context_length
        self.weights_mb = hf.weights_mb
        self.dtype = str(hf.dtype).removeprefix("torch.")
        self.model_shape = hf.model_shape
        self.kv_bytes_per_token = kv_bytes_per_token(hf.model_shape)

    def encode(self, prompt: Prompt) -> list[int]:
        return self.hf.encode(prompt)

    def decode(self, token_ids: Any) -> str:
        return self.hf.decode(token_ids)

    def score(self, token_ids: Any, start: int) -> TokenScores:
        """One forward pass over the sequence, no cache; the logits of the positions that predict
        ``token_ids[start:]`` only (``logits_to_keep``), as float32 log-probabilities."""
        return score_tokens(self.hf, token_ids, start)

    def score_shaped(self, token_ids: Any, start: int, *, chunk: int, prefix: int) -> TokenScores:
        """The scores through a generation's forward passes (:func:`score_tokens_shaped`)."""
        return score_tokens_shaped(self.hf, token_ids, start, chunk=chunk, prefix=prefix)

    def score_passes(self, token_ids: Any, start: int, passes: Any, produced_by: Any) -> TokenScores:
        """The scores through another session's recorded passes (:func:`score_tokens_passes`)."""
        return score_tokens_passes(self.hf, token_ids, start, passes, produced_by)

    def close(self) -> None:
        del self.hf


def score_tokens(hf: Any, token_ids: Any, start: int) -> TokenScores:
    """:meth:`Session.score` for a transformers model (``hf``: the loaded model of :mod:`._hf`)."""
    import torch

    ids = list(token_ids)
    if not 1 <= start < len(ids):
        raise ValueError(f"start {start} outside 1..{len(ids) - 1}")
    scored = len(ids) - start
    with torch.inference_mode():
        input_ids = torch.tensor([ids], dtype=torch.long, device=hf.torch_device)
        logits = hf.model(input_ids=input_ids, use_cache=False, logits_to_keep=scored + 1).logits
        rows = logits[0, :scored].float().cpu().numpy()
    return TokenScores.from_logits(rows)


def score_tokens_shaped(hf: Any, token_ids: Any, start: int, *, chunk: int, prefix: int) -> TokenScores:
    """:meth:`Session.score_shaped` for a transformers model: the passes a generation makes, through
    a KV cache — ``token_ids[:prefix]`` (when ``0 < prefix < start``), then the rest of the prompt
    ``token_ids[:start]`` (its last logits predict ``token_ids[start]``), then the scored tokens
    ``chunk`` per pass, as plain decoding (1) or a verify of ``chunk - 1`` drafts does."""
    import torch
    from transformers import DynamicCache

    from ._hf import kv_cache

    ids = list(token_ids)
    if not 1 <= start < len(ids):
        raise ValueError(f"start {start} outside 1..{len(ids) - 1}")
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}")
    device = hf.torch_device

    def forward(part: list[int], cache: Any, keep: int) -> Any:
        input_ids = torch.tensor([part], dtype=torch.long, device=device)
        return hf.model(input_ids=input_ids, **kv_cache(cache), use_cache=True, logits_to_keep=keep).logits

    with torch.inference_mode():
        cache = DynamicCache(config=hf.model.config)
        done = 0
        if 0 < prefix < start:
            forward(ids[:prefix], cache, 1)
            done = prefix
        rows = [forward(ids[done:start], cache, 1)[0, -1:].float().cpu()]
        i = start
        while i < len(ids) - 1:  # the last token predicts nothing that is scored
            j = min(i + chunk, len(ids) - 1)
            rows.append(forward(ids[i:j], cache, 0)[0].float().cpu())
            i = j
        logits = torch.cat(rows).numpy()
    return TokenScores.from_logits(logits)


def score_tokens_passes(hf: Any, token_ids: Any, start: int, passes: Any, produced_by: Any) -> TokenScores:
    """:meth:`Session.score_passes` for a transformers model: the forward passes a traced replay
    recorded (:class:`~workbench.strategy.Trace`), run again through a KV cache cropped to each pass's
    start, each over its own input tokens (a verify pass's rejected drafts included) and computing its
    ``keep`` last rows; a pass after a reused prefix first computes that prefix through the passes that
    built it when it was cached (``built``; one pass when unknown). The row
    of scored token ``i`` (``token_ids[start + i]``) is the one of pass ``produced_by[i]`` that read
    the position before it."""
    import torch

    from ._hf import kv_cache
    from ._kv import crop_cache, new_cache

    ids = list(token_ids)
    n = len(ids) - start
    if len(produced_by) != n:
        raise ValueError(f"{len(produced_by)} tokens attributed to passes, {n} scored")
    device = hf.torch_device
    wanted: dict[int, list[int]] = {}
    for i, q in enumerate(produced_by):
        wanted.setdefault(int(q), []).append(i)
    rows: list[Any] = [None] * n
    with torch.inference_mode():
        cache = new_cache(hf.model, rollback=True)
        for q, step in enumerate(passes):
            begin, part, keep = int(step["start"]), list(step["ids"]), int(step.get("keep") or 0)
            cached = int(step.get("cached") or 0)
            have = cache.get_seq_length()
            if cached > have:  # a reused prefix: computed as its passes computed it when it was cached
                starts = [b for b in step.get("built") or () if have < b < cached]
                for a, b in zip([have, *starts], [*starts, cached], strict=True):
                    prefix = torch.tensor([ids[a:b]], dtype=torch.long, device=device)
                    hf.model(input_ids=prefix, **kv_cache(cache), use_cache=True, logits_to_keep=1)
            crop_cache(cache, begin)
            if cache.get_seq_length() != begin:
                raise ValueError(f"pass {q} starts at {begin}, the cache holds {cache.get_seq_length()}")
            x = torch.tensor([part], dtype=torch.long, device=device)
            logits = hf.model(input_ids=x, **kv_cache(cache), use_cache=True, logits_to_keep=keep).logits[0]
            first = len(part) - keep if keep else 0  # the input index of logits row 0
            for i in wanted.get(q, []):
                rows[i] = logits[start + i - 1 - begin - first].float().cpu()
    if any(r is None for r in rows):
        raise ValueError("a scored token's pass was not replayed")
    return TokenScores.from_logits(torch.stack(rows).numpy())


def decode_loop(hf: Any, request: Request, probe: Probe, cache: Any, logits: Any) -> tuple[list[int], str]:
    """Token-by-token decode after a prefill: ``cache`` holds the prompt, ``logits`` are the prefill's
    scores for the last prompt position. Returns the tokens and the finish reason. Call it under
    ``torch.inference_mode()``. A traced replay (``probe.trace``): the caller reported the prefill's
    pass; each token's logits row and each decode pass are reported here."""
    from ._hf import Sampler, Stopper, kv_cache

    sampler = Sampler(request, hf.torch_device)
    stopper = Stopper(request, hf.eos_ids, hf.decode)
    trace = getattr(probe, "trace", None)  # None in timed trials: one check per step
    tokens: list[int] = []
    while True:
        next_token = sampler(logits[:, -1, :])
        token = int(next_token.item())  # the token is on the host now
        tokens.append(token)
        probe.step((token,))
        if trace is not None:
            trace.emitted(logits[0, -1:], (token,))
        reason = stopper(tokens)
        if reason is not None:
            return tokens, reason
        if trace is not None:
            trace.forward(len(request.input_ids) + len(tokens) - 1, (token,))
        logits = hf.model(input_ids=next_token.view(1, 1), **kv_cache(cache), use_cache=True).logits
